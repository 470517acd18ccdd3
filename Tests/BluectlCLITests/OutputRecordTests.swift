import BluectlCore
import BluectlDBus
import Testing
@testable import BluectlCLI

/// Records what a description gives each field: its JSON member and its text parts.
private struct FieldsSink: RecordSink {
    var json: [String] = []
    var textOnly: [String] = []
    var jsonOnly: [String] = []

    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> [TextPart]) {
        let hasJSON = json() != nil
        let hasText = !text().isEmpty
        if hasJSON { self.json.append(key) }
        if hasJSON, !hasText { jsonOnly.append(key) }
        if hasText, !hasJSON { textOnly.append(key) }
    }
}

/// Counts how often a text part is built.
private final class Counter: @unchecked Sendable {
    var count = 0
    func part() -> TextPart {
        count += 1
        return .plain("x", "x")
    }
}

@Suite("Output records: one description, two forms")
struct OutputRecordTests {
    static func device(_ p: [String: DBusValue]) -> DeviceInfo {
        DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")!, properties: PropertyMap(p))
    }

    static let heartRate = device([
        "Address": .string("AA:BB:CC:DD:EE:FF"), "AddressType": .string("public"), "Name": .string("HeartRate"),
        "Alias": .string("HeartRate"), "RSSI": .int16(-52), "TxPower": .int16(4),
        "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]), "Connected": .boolean(true), "ServicesResolved": .boolean(true),
        "Icon": .string("heart"),
    ])

    @Test("line layout: plain text, 'label text', a flag's label only when true, details left out")
    func lineLayout() {
        let sink = TextSink(parts: [.plain("a", "A"), .labelled("tx", "4 dBm"), .flag("connected", true), .flag("paired", false),
                                    .detail("path", "/x")])
        #expect(sink.line() == "A  tx 4 dBm  connected")
        #expect(sink.line(separator: ", ", indent: "  ") == "  A, tx 4 dBm, connected")
        #expect(TextSink(parts: [.detail("path", "/x"), .flag("paired", false)]).line() == nil, "nothing to show on a line")
    }

    @Test("block layout: every part, labels in one column, flags as yes/no")
    func blockLayout() {
        let sink = TextSink(parts: [.plain("device", "AA"), .flag("paired", false), .detail("path", "/x"),
                                    .labelled("appearance!!", "1")])
        #expect(sink.block() == ["device      AA", "paired      no", "path        /x", "appearance!! 1"])
    }

    @Test("each sink builds only its own form (a JSON scan line builds no text)")
    func lazyForms() {
        let counter = Counter()
        var json = JSONSink()
        json.field("k", .int(1), text: counter.part())
        json.field("absent", nil, text: counter.part())
        #expect(counter.count == 0)
        #expect(json.line.render() == "{\"k\":1}", "a nil member is left out")
        var text = TextSink()
        text.field("k", .int(1), text: counter.part())
        #expect(counter.count == 1)
        #expect(text.line() == "x")
    }

    @Test("scan: the line and the JSON of one device, from one description")
    func scanRecord() throws {
        let record = DeviceRecord(device: Self.heartRate, adapter: "hci0", event: "discovered")
        #expect(record.textParts.line()
                == "NEW  AA:BB:CC:DD:EE:FF  public  -52 dBm  \"HeartRate\"  tx 4 dBm  services 180d (Heart Rate)  connected")
        #expect(record.json() == """
            {"event":"discovered","adapter":"hci0","address":"AA:BB:CC:DD:EE:FF","address_type":"public","rssi":-52,\
            "name":"HeartRate","alias":"HeartRate","tx_power":4,\
            "service_uuids":["0000180d-0000-1000-8000-00805f9b34fb"],"connected":true,"paired":false,\
            "path":"/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"}
            """)
    }

    @Test("info: every JSON member is in the text block but those whose text another part gives")
    func infoHasNoJSONOnlyFields() {
        let record = InfoRecord(device: DeviceRecord(device: Self.heartRate, adapter: "hci0"), state: .connected, mtu: 247,
                                services: [])
        var fields = FieldsSink()
        record.describe(into: &fields)
        #expect(fields.jsonOnly == ["alias"], "the alias is shown as the name when there is no name")
        #expect(fields.textOnly == [])
        #expect(fields.json.contains("icon") && fields.json.contains("state"))
        let block = record.textParts.block()
        #expect(block.contains("state       connected"))
        #expect(block.contains("icon        heart"))
        #expect(block.contains("mtu         247"))
        #expect(block.contains("connected   yes"))
        #expect(block.contains("gatt        "), "resolved: the GATT services line (none here)")
    }

    @Test("connect and disconnect: one sentence; the JSON has what the sentence says")
    func connectionRecords() {
        let address = BluetoothAddress("AA:BB:CC:DD:EE:FF")!
        let connect = ConnectRecord(device: address, name: "HeartRate", madeConnection: false, paired: true, services: 3, mtu: 247,
                                    path: "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")
        #expect(connect.line(json: false, separator: ", ") == "already connected AA:BB:CC:DD:EE:FF \"HeartRate\", 3 services, paired")
        #expect(connect.json() == """
            {"device":"AA:BB:CC:DD:EE:FF","name":"HeartRate","connected":true,"already_connected":true,"services":3,\
            "paired":true,"mtu":247,"path":"/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"}
            """)
        #expect(DisconnectRecord(device: address, wasConnected: false).line(json: false) == "AA:BB:CC:DD:EE:FF was not connected")
        #expect(DisconnectRecord(device: address, wasConnected: true).json()
                == "{\"device\":\"AA:BB:CC:DD:EE:FF\",\"connected\":false,\"was_connected\":true}")
    }

    @Test("values: read shows the value alone, subscribe its time and characteristic; JSON adds decoded")
    func valueRecords() {
        let battery = BluetoothUUID(uint16: 0x2a19)
        let read = ValueRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: battery, bytes: [0x64], format: .hex)
        #expect(read.line(json: false) == "64  |d| (100 %)")
        #expect(read.json() == """
            {"device":"AA:BB:CC:DD:EE:FF","characteristic":"00002a19-0000-1000-8000-00805f9b34fb","value":"64",\
            "decoded":{"level_percent":100}}
            """)
        let notified = ValueRecord(time: "2026-11-25T10:00:00.000Z", device: "AA:BB:CC:DD:EE:FF", characteristic: battery,
                                   bytes: [0x64], format: .decoded, namesCharacteristic: true)
        #expect(notified.line(json: false) == "2026-11-25T10:00:00.000Z  2a19 (Battery Level)  100 %")
        let descriptor = ValueRecord(device: "AA:BB:CC:DD:EE:FF", characteristic: battery, descriptor: BluetoothUUID(uint16: 0x2902),
                                     bytes: [1, 0], format: .decoded)
        #expect(!descriptor.json().contains("decoded"), "a descriptor's value is not decoded as its characteristic's")
    }

    @Test("events: 'time  -- sentence' and the JSON fields the sentence describes; device text escaped")
    func eventRecords() {
        let event = EventRecord(time: "T", device: "AA", event: "gap", fields: [("missing", .int(2))], text: "gap \u{1B}[2J")
        #expect(event.line(json: false) == "T  -- gap \\x1b[2J")
        #expect(event.json() == "{\"time\":\"T\",\"device\":\"AA\",\"event\":\"gap\",\"missing\":2}")
        #expect(EventRecord(event: "dropped", fields: [("count", .int(3))], text: "3 dropped").line(json: false) == "-- 3 dropped")
    }

    @Test("one UUID label: named when the SIG named it, else the short form")
    func uuidLabel() throws {
        #expect(BluetoothUUID(uint16: 0x180d).label == "180d (Heart Rate)")
        #expect(BluetoothUUID(uint16: 0xfff0).label == "fff0")
        let custom = try BluetoothUUID("12345678-1234-5678-1234-56789abcdef0")
        #expect(custom.label == "12345678-1234-5678-1234-56789abcdef0")
    }
}
