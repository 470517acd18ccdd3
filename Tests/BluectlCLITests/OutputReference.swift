// docs/output.md's field tables, generated from the output records' own
// descriptions (`describe(into:)`) and the event lines' factories
// (`EventLine`): which fields each command's JSON has, in order, and their
// JSON types come from the code; what each means is said once here, beside
// the record it belongs to. `Scripts/gen-output-docs` writes the tables into
// docs/output.md (between `<!-- generated:NAME -->` and `<!-- /generated -->`);
// OutputReferenceTests fails when they differ, when a field has no meaning,
// and when a meaning names a field no record has.

import BluectlCore
import BluectlDBus
@testable import BluectlCLI

/// Every key a description gives, in order, whether or not it has a value
/// (a key is never an autoclosure: `describe` names each field it can give),
/// with its JSON type from the first sample that has a value for it.
struct FieldListSink: RecordSink {
    var keys: [String] = []
    var types: [String: String] = [:]

    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> [TextPart]) {
        if !keys.contains(key) { keys.append(key) }
        if types[key] == nil, let value = json() { types[key] = Self.type(of: value) }
    }

    static func type(of value: JSONValue) -> String {
        switch value {
        case .string: "string"
        case .int: "int"
        case .double: "number"
        case .bool: "bool"
        case .strings: "[string]"
        case .ints: "[int]"
        case .object: "object"
        case .hex: "hex string"
        }
    }

    /// The fields of all `records`, in the order they first appear.
    static func fields(of records: [any OutputRecord]) -> FieldListSink {
        var sink = FieldListSink()
        for record in records { record.describe(into: &sink) }
        return sink
    }
}

/// One row of a generated table: what prints it, the records it prints, and
/// what fields mean where their name and type do not say it all.
struct ReferenceRow {
    var label: String
    /// Said before the fields ("one per adapter").
    var intro: String = ""
    var records: [any OutputRecord]
    var notes: [String: String] = [:]
    /// Fields left out of the list (said by the section: an event line's time, device and event).
    var omitted: Set<String> = []

    var fields: FieldListSink { FieldListSink.fields(of: records) }

    /// "`device` (string), `removed` (bool: false when BlueZ did not know the device)".
    func fieldList() -> String {
        let f = fields
        return f.keys.filter { !omitted.contains($0) }.map { key in
            let type = f.types[key] ?? "?"
            return "`\(key)` (" + type + (notes[key].map { ": " + $0 } ?? "") + ")"
        }.joined(separator: ", ")
    }

    /// Notes that name no field of the records: a field renamed or gone.
    var staleNotes: [String] { notes.keys.filter { !fields.keys.contains($0) }.sorted() }
    /// Fields without a JSON type: no sample gives them a value.
    var untyped: [String] { fields.keys.filter { !omitted.contains($0) && fields.types[$0] == nil } }
}

enum OutputReference {
    // MARK: - Samples (values only matter for their JSON type)

    static func map(_ p: [String: DBusValue]) -> PropertyMap { PropertyMap(p) }

    static let device = DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")!, properties: map([
        "Address": .string("AA:BB:CC:DD:EE:FF"), "AddressType": .string("public"), "Name": .string("HeartRate"),
        "Alias": .string("HeartRate"), "RSSI": .int16(-52), "TxPower": .int16(4),
        "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]),
        "ManufacturerData": .dictionary(key: DBusSignature("q")!, value: .variant, [
            DBusDictEntry(.uint16(0x004C), .variant(.bytes(try! ByteFormats.parseHex("0215e2c56db5dffb48d2b060d0f5a71096e000010002c5")))),
        ]),
        "ServiceData": .dictionary(key: .string, value: .variant, [
            DBusDictEntry(.string("0000180f-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0x64]))),
        ]),
        "AdvertisingFlags": .bytes([0x06]), "Appearance": .uint16(0x0341), "Icon": .string("heart"),
        "Connected": .boolean(true), "Paired": .boolean(true), "Bonded": .boolean(true), "Trusted": .boolean(false),
        "Blocked": .boolean(false), "ServicesResolved": .boolean(true),
    ]))

    static let adapter = AdapterInfo(path: ObjectPath("/org/bluez/hci0")!, properties: map([
        "Address": .string("00:AA:01:00:00:23"), "AddressType": .string("public"), "Name": .string("host"),
        "Alias": .string("host"), "Powered": .boolean(true), "PowerState": .string("on"), "Discovering": .boolean(false),
        "Discoverable": .boolean(false), "Pairable": .boolean(true),
    ]))

    static let uuid = BluetoothUUID(uint16: 0x2a37)
    static let service = GattService(path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a")!, properties: map([
        "UUID": .string(BluetoothUUID(uint16: 0x180d).uuidString), "Primary": .boolean(true), "Handle": .uint16(10),
        "Includes": .array(element: DBusSignature("o")!, [.objectPath(ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service0020")!)]),
    ]))!
    static let characteristic = GattCharacteristic(
        path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a/char000b")!, properties: map([
            "UUID": .string(uuid.uuidString), "Flags": .stringArray(["notify"]), "Handle": .uint16(11), "MTU": .uint16(517),
        ]))!
    static let descriptor = GattDescriptor(
        path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service000a/char000b/desc000d")!, properties: map([
            "UUID": .string(BluetoothUUID(uint16: 0x2902).uuidString), "Flags": .stringArray(["read"]), "Handle": .uint16(13),
        ]))!

    static let failure = CLIFailure(.ioError, "disconnected: AA:BB:CC:DD:EE:FF disconnected")
    static let restoreState = CentralRestoreState(
        command: "subscribe", adapter: "hci0",
        peripherals: [.init(device: "HR", address: "AA:BB:CC:DD:EE:FF", state: "connected")],
        subscriptions: [.init(device: "HR", characteristic: "2a37", notifying: true)], saved: "2026-11-26T04:52:18.357Z")

    static var advertisement: AdvertisementData {
        var data = AdvertisementData(localName: "my-hr", includesTxPower: true, isConnectable: true, isDiscoverable: true)
        data.serviceUUIDs = [BluetoothUUID(uint16: 0x180d)]
        data.manufacturerData = [0xffff: [1, 2]]
        data.serviceData = [BluetoothUUID(uint16: 0xfeaa): [0x10]]
        data.appearance = 0x0341
        return data
    }

    static var serverEvent: ServerEventRecord {
        var record = ServerEventRecord(event: "write", adapter: adapter, services: [], advertised: nil)
        record.address = "00:AA:01:00:00:23"
        record.central = "AA:BB:CC:DD:EE:FF"
        record.service = BluetoothUUID(uint16: 0x180d)
        record.characteristic = uuid
        record.descriptor = BluetoothUUID(uint16: 0x2901)
        record.value = [1]
        record.offset = 0
        record.type = "request"
        record.detail = "registered again with bluetoothd"
        return record
    }

    /// `advertise --bthome`'s line after a stdin change.
    static var bthomeUpdate: ServerEventRecord {
        var record = ServerEventRecord(event: "updated", adapter: adapter, services: [], advertised: advertisement)
        record.sensor = SensorReading(format: .bthome, packetID: 1, measurements: [SensorMeasurement(.temperature, .number(21.7))])
        return record
    }

    // MARK: - Tables

    /// Scan's fields: | field | type | meaning | (every field has a meaning).
    static var scan: ReferenceRow { ReferenceRow(label: "scan", records: [
        DeviceRecord(device: device, adapter: "hci0", event: "discovered"),
        DeviceRecord(device: device, adapter: "hci0", event: "updated", sensor: .success(SensorReading(
            format: .bthome, measurements: [SensorMeasurement(.temperature, .number(21.5))]))),
        DeviceRecord(device: device, adapter: "hci0", event: "updated", sensor: .failure(SensorDecodingError(
            .bthome, .noKey, "encrypted, and no key for AA:BB:CC:DD:EE:FF (--keys)"))),
    ], notes: [
        "event": "`discovered` (first advertisement in this scan) or `updated` (with `--duplicates`)",
        "adapter": "`hci0`",
        "address": "`AA:BB:CC:DD:EE:FF`",
        "address_type": "`public` or `random`",
        "rssi": "dBm; absent when BlueZ has none and when it is 127, HCI's \"not available\"",
        "name": "advertised (or GAP) name",
        "alias": "BlueZ's alias (the name, or the address when there is none)",
        "tx_power": "dBm, as advertised",
        "service_uuids": "canonical 128-bit UUIDs advertised",
        "manufacturer_data": "company id (`\"0xffff\"`) → data (hex)",
        "service_data": "service UUID → data (hex)",
        "flags": "advertising flags (hex)",
        "appearance": "GAP appearance",
        "beacon": "the beacons decoded from `manufacturer_data` / `service_data` (which keep the raw hex), one member per format; see below",
        "sensor": "the sensor reading decoded from `service_data` / `manufacturer_data` (which keep the raw hex); see [Sensors](#sensors)",
        "sensor_error": "why a frame of a sensor format gives no reading, or why part of it was not decoded: `format`, `kind`, `reason`",
        "connected": "whether BlueZ has a connection to it",
        "paired": "whether it is paired",
        "path": "BlueZ's object path",
    ]) }

    static var deviceCommands: [ReferenceRow] { [
        ReferenceRow(label: "`adapters --json`", intro: "one per adapter", records: [AdapterRecord(adapter: adapter)], notes: [
            "adapter": "`hci0`", "name": "the system's name", "alias": "the name other devices see",
            "power_state": "BlueZ's PowerState, when bluetoothd gives it; 5.66 in the lab does not",
            "state": "`poweredOn`, `poweredOff`, `resetting`, `unauthorized`, `unsupported` or `unknown`",
        ], omitted: ["changed"]),
        ReferenceRow(label: "`adapter --json`", intro: "one object, as `adapters` has it, after the settings asked for, and",
                     records: [AdapterRecord(adapter: adapter, settings: [AdapterSetting(name: "discoverable", before: "off", after: "on")])],
                     notes: ["changed": "the settings asked for that changed: `power`, `alias`, `pairable`, `discoverable`"],
                     omitted: Set(FieldListSink.fields(of: [AdapterRecord(adapter: adapter)]).keys).subtracting(["changed"])),
        ReferenceRow(label: "`devices --json`", intro: "one per device BlueZ knows",
                     records: [KnownDeviceRecord(device: device, adapter: "hci0")], notes: [
            "rssi": "when known", "service_uuids": "advertised or resolved; absent when none",
            "services_resolved": "whether BlueZ has its GATT database",
        ]),
        ReferenceRow(label: "`info --json`", intro: "the scan fields (no `event`), then",
                     records: [InfoRecord(device: DeviceRecord(device: device, adapter: "hci0"), state: .connected, mtu: 517,
                                          services: [service])],
                     notes: ["mtu": "when connected", "icon": "BlueZ's icon name", "state": "`disconnected`, `connecting`, `connected` or `disconnecting`",
                             "gatt_services": "the services' UUIDs, once resolved"],
                     omitted: Set(FieldListSink.fields(of: [DeviceRecord(device: device, adapter: "hci0", event: "discovered")]).keys)),
        ReferenceRow(label: "`pair --json`", records: [DeviceChangeRecord(
            device: device.address, sentence: "",
            fields: [("paired", .bool(true)), ("already_paired", .bool(false)), ("bonded", .bool(true))])],
                     notes: ["device": "its address", "paired": "true"]),
        ReferenceRow(label: "`unpair --json`, `remove --json`", records: [
            DeviceChangeRecord(device: device.address, sentence: "", fields: [("adapter", .string("hci0")), ("removed", .bool(true))]),
            UnpairCommand.NotKnownRecord(device: "AA:BB:CC:DD:EE:FF", adapter: "hci0"),
        ], notes: ["removed": "false when BlueZ did not know the device (stderr says so)"]),
        ReferenceRow(label: "`trust --json`, `untrust --json`", records: [DeviceChangeRecord(
            device: device.address, sentence: "", fields: [("trusted", .bool(true)), ("changed", .bool(true))])],
                     notes: ["changed": "false when it was so already"]),
        ReferenceRow(label: "`block --json`, `unblock --json`", records: [DeviceChangeRecord(
            device: device.address, sentence: "", fields: [("blocked", .bool(true)), ("changed", .bool(true))])],
                     notes: ["changed": "false when it was so already"]),
        ReferenceRow(label: "`connect --json`", records: [ConnectRecord(
            device: device.address, name: "HR", madeConnection: true, paired: false, services: 3, mtu: 517, path: "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")],
                     notes: ["connected": "true", "services": "how many", "mtu": "when BlueZ has it"]),
        ReferenceRow(label: "`disconnect --json`", records: [DisconnectRecord(device: device.address, wasConnected: true)],
                     notes: ["connected": "false"]),
        ReferenceRow(label: "`read --json`", records: [
            ValueRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: BluetoothUUID(uint16: 0x2a19), descriptor: BluetoothUUID(uint16: 0x2901),
                        bytes: [0x64], format: .json),
            ValueRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: BluetoothUUID(uint16: 0x2a19), bytes: [0x64], format: .json),
        ], notes: ["device": "its address", "characteristic": "its UUID", "descriptor": "with `--descriptor`",
                   "value": "hex", "decoded": "when bluectl knows the characteristic"], omitted: ["time"]),
        ReferenceRow(label: "`write --json`", records: [
            WriteRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: uuid, descriptor: BluetoothUUID(uint16: 0x2902), bytes: [1]),
            WriteRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: uuid, type: .withResponse, bytes: [1]),
            WriteRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: uuid, type: .withoutResponse, bytes: [],
                        stream: .init(via: "acquire-write", bytes: 1000, writes: 5, seconds: 0.25)),
        ], notes: ["descriptor": "with `--descriptor`", "type": "`with-response` or `without-response` (not for a descriptor)",
                   "value": "hex, as written (not with `--stream`)",
                   "via": "`--stream`: `acquire-write` (bluetoothd's AcquireWrite socket) or `write-value` (WriteValue calls, AcquireWrite refused)",
                   "bytes": "`--stream`: the bytes bluetoothd took", "writes": "`--stream`: how many Write Commands",
                   "seconds": "`--stream`: from the writer's start to bluetoothd having taken the last byte"]),
        ReferenceRow(label: "`subscribe --json`", intro: "one per value (event lines: below)", records: [
            ValueRecord(time: "2026-11-26T04:52:18.357Z", device: "AA:BB:CC:DD:EE:FF", characteristic: uuid, bytes: [0x06, 0x60], format: .json),
        ], notes: ["time": "UTC, ms", "value": "hex", "decoded": "when bluectl knows the characteristic"], omitted: ["descriptor"]),
        ReferenceRow(label: "`discover --json`", intro: "one per attribute", records: [
            AttributeRecord.service(service), AttributeRecord.characteristic(characteristic, service: service),
            AttributeRecord.descriptor(descriptor, characteristic: characteristic),
        ], notes: ["type": "`service`, `characteristic` or `descriptor`", "name": "the SIG name, when assigned",
                   "primary": "services", "includes": "services that include others: their paths",
                   "flags": "characteristics and descriptors", "service": "a characteristic's service UUID",
                   "mtu": "characteristics, when BlueZ has it", "characteristic": "a descriptor's characteristic UUID"]),
        ReferenceRow(label: "`serve --json`", intro: "one per event ([peripheral.md](peripheral.md#output---json))", records: [
            ServerEventRecord(event: "serving", adapter: adapter, services: [], advertised: advertisement).with(services: [service.uuid]),
            serverEvent,
        ], notes: ["event": "`serving`, `read`, `write`, `expired`, `subscribed`, `unsubscribed`, `confirmed`, `bluetoothd_stopped`, `restored` or `advertising_stopped`",
                   "central": "who read or wrote, when BlueZ says", "value": "hex", "type": "a write's type (`request`, `command`, `reliable`)",
                   "services": "what is served (`serving`)", "advertising": "with `--advertise` (`serving`)",
                   "length": "the advertising data's length, bytes", "detail": "what happened, for `bluetoothd_stopped` and `restored`"],
                     omitted: ["sensor"]),
        ReferenceRow(label: "`advertise --json`", records: [
            ServerEventRecord(event: "advertising", adapter: adapter, services: [], advertised: advertisement).with(address: "00:AA:01:00:00:23"),
            bthomeUpdate,
        ], notes: ["event": "`advertising` (then `advertising_stopped` if bluetoothd ends it; `updated` for each stdin line of `--bthome`)",
                   "tx_power": "true, with `--tx-power`", "length": "the advertising data's length, bytes",
                   "sensor": "with `--bthome`: the frame's reading, as scan shows it"],
                     omitted: ["central", "service", "characteristic", "descriptor", "value", "type", "offset", "services", "detail"]),
    ] }

    /// The event lines: their own fields (every line also has `event`, and
    /// subscribe's `time` and `device`).
    static var events: [ReferenceRow] {
        let common: Set<String> = ["time", "device", "event"]
        func row(_ label: String, _ line: EventLine, _ notes: [String: String] = [:]) -> ReferenceRow {
            ReferenceRow(label: "`\(line.event)`", intro: label, records: [line.record(time: "t", device: "d")], notes: notes, omitted: common)
        }
        let finding: [SequenceTracker.Finding] = [.gap(expected: 5, got: 7, missing: 2), .late(3), .repeated(4), .short(length: 1)]
        return [
            row("`scan --restore-id`", .scanRestored(restoreState, filter: .init(), id: "hr", used: true),
                ["saved": "when it was saved (UTC)", "was_running": "true: the scan that saved it was killed or crashed",
                 "filter": "the saved filter, in words", "used": "false: filter options were given, so the saved filter is not used"]),
            row("`subscribe --restore-id`", .subscribeRestored(restoreState, id: "hr"),
                ["saved": "when it was saved (UTC)", "was_running": "true: the run that saved it was killed or crashed",
                 "pid": "that run's", "subscriptions": "\"CHARACTERISTIC of DEVICE\"", "peripherals": "\"ADDRESS STATE\""]),
            row("`scan`, `subscribe`: a slow reader", .dropped(2, of: "value"), ["count": "lines dropped"]),
            row("`read`, `write`, `subscribe` of several devices: one failed", .failed(failure),
                ["reason": "the error, as stderr says it", "exit_status": "the exit status it alone would have had"]),
            row("`subscribe`: the device waits for its turn to connect", .connectQueued(ahead: 1, adapter: "hci0"),
                ["ahead": "connects before it"]),
            row("`subscribe --reconnect`: the link went down", .disconnected("disconnected: AA:BB:CC:DD:EE:FF disconnected")),
            row("`subscribe --reconnect`: back", .reconnected(gap: 3.2), ["gap_seconds": "since the link went down, to 0.1 s"]),
            row("`subscribe --check-sequence`: numbers skipped", .sequence(finding[0], of: uuid),
                ["expected": "the next number", "got": "the number that came", "missing": "how many"]),
            row("`subscribe --check-sequence`: an old number", .sequence(finding[1], of: uuid), ["seq": "its number"]),
            row("`subscribe --check-sequence`: a number again", .sequence(finding[2], of: uuid), ["seq": "its number"]),
            row("`subscribe --check-sequence`: too short for a number", .sequence(finding[3], of: uuid), ["length": "bytes"]),
            row("`subscribe`: values from another client's notify session", .sharedSession(uuid)),
            row("`subscribe`: that session ended, bluectl's own started", .ownSession(uuid)),
            row("`l2cap listen` (on stderr): listening", .l2capListening(adapter: "hci0", psm: L2CAPPSM(rawValue: 0x80)!, security: .none),
                ["psm": "the PSM centrals open channels to (the kernel's pick when none was given)", "security": "none, encrypted or authenticated"]),
            row("`l2cap` (on stderr): a channel is open (`connected` for connect, `accepted` for listen)",
                .l2capOpened(accepted: false, peer: BluetoothAddress("AA:BB:CC:DD:EE:FF")!, addressType: .public, adapter: "hci0",
                             psm: L2CAPPSM(rawValue: 0x80)!, sendMTU: 672, receiveMTU: 672, security: .none, keySize: 0),
                ["send_mtu": "the largest SDU the peer takes", "receive_mtu": "the largest SDU this side takes",
                 "security": "the link's: none, encrypted or authenticated", "key_size": "the encryption key's bytes (0: none)"]),
            row("`l2cap` (on stderr): the channel ended", .l2capClosed(psm: L2CAPPSM(rawValue: 0x80)!, sent: 1024, received: 0, seconds: 1.5, by: "local"),
                ["sent": "bytes written to the channel", "received": "bytes read from it", "seconds": "since it opened",
                 "by": "local (stdin ended), peer, or the failure"]),
        ]
    }

    // MARK: - Rendering

    static func scanTable() -> String {
        let f = scan.fields
        var lines = ["| field | type | meaning |", "|---|---|---|"]
        for key in f.keys {
            lines.append("| `\(key)` | \(f.types[key] ?? "?") | \(scan.notes[key] ?? "") |")
        }
        return lines.joined(separator: "\n")
    }

    static func commandTable() -> String {
        var lines = ["| command | object |", "|---|---|"]
        for row in deviceCommands {
            lines.append("| \(row.label) | " + (row.intro.isEmpty ? "" : row.intro + ": ") + row.fieldList() + " |")
        }
        return lines.joined(separator: "\n")
    }

    static func eventTable() -> String {
        var lines = ["| event | printed by | its fields |", "|---|---|---|"]
        for row in events {
            let fields = row.fieldList()
            lines.append("| \(row.label) | \(row.intro) | \(fields.isEmpty ? "none" : fields) |")
        }
        return lines.joined(separator: "\n")
    }

    /// Every generated block, by the name its markers carry.
    static func blocks() -> [String: String] {
        ["scan-fields": scanTable(), "command-fields": commandTable(), "event-fields": eventTable()]
    }

    /// What is wrong with the descriptions themselves: a scan field with no
    /// meaning, a note for a field no record has, a field no sample types.
    static func problems() -> [String] {
        var problems: [String] = []
        for key in scan.fields.keys where scan.notes[key] == nil { problems.append("scan: no meaning for `\(key)`") }
        for row in [scan] + deviceCommands + events {
            for key in row.staleNotes { problems.append("\(row.label): a note for `\(key)`, which it does not print") }
            for key in row.untyped { problems.append("\(row.label): `\(key)` has no value in the samples, so no type") }
        }
        return problems
    }

    /// `markdown` with each generated block replaced by a fresh one; nil
    /// names a marker without its end, or a block the text lacks.
    static func updated(_ markdown: String) -> (text: String, missing: [String]) {
        var lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var missing: [String] = []
        for (name, block) in blocks().sorted(by: { $0.key < $1.key }) {
            guard let start = lines.firstIndex(of: "<!-- generated:\(name) -->"),
                  let end = lines[start...].firstIndex(of: "<!-- /generated -->") else {
                missing.append(name)
                continue
            }
            lines.replaceSubrange((start + 1)..<end, with: block.split(separator: "\n").map(String.init))
        }
        return (lines.joined(separator: "\n"), missing)
    }
}

extension ServerEventRecord {
    func with(services: [BluetoothUUID]? = nil, address: String? = nil) -> ServerEventRecord {
        var copy = self
        if let services { copy.services = services }
        if let address { copy.address = address }
        return copy
    }
}
