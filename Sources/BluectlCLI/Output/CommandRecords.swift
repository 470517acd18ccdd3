// The records of the commands' lines (besides DeviceRecord, EventRecord and
// ValueRecord): each line a command prints, described once (OutputRecord).

import BluectlCore

/// An adapter as `adapters` shows it: "hci0  AA:…  powered  idle  poweredOn  alias";
/// after `adapter`'s settings, what each did: "discoverable off->on  pairable on (already)".
struct AdapterRecord: OutputRecord {
    let adapter: AdapterInfo
    /// The settings `adapter` was asked for, each with its value before and after.
    var settings: [AdapterSetting] = []

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        let adapter = self.adapter
        sink.field("adapter", .string(adapter.name), text: .plain("adapter", adapter.name))
        sink.field("address", adapter.address.map { .string($0.description) }, text: .plain("address", adapter.address?.description ?? "-"))
        sink.json("address_type", adapter.addressType.map { .string($0.rawValue) })
        sink.json("name", adapter.systemName.map { .string($0) })  // the alias part shows it when there is no alias
        sink.field("powered", .bool(adapter.powered), text: .plain("powered", adapter.powered ? "powered" : "off"))
        sink.json("power_state", adapter.powerState.map { .string($0) })
        sink.field("discovering", .bool(adapter.discovering), text: .plain("discovering", adapter.discovering ? "discovering" : "idle"))
        sink.json("discoverable", .bool(adapter.discoverable))
        sink.json("pairable", .bool(adapter.pairable))
        sink.field("state", .string(adapter.centralState.rawValue), text: .plain("state", adapter.centralState.rawValue))
        sink.field("alias", adapter.alias.map { .string($0) },
                   text: .plain("alias", TextSafety.terminalSafe(adapter.alias ?? adapter.systemName ?? "")))
        sink.field("path", .string(adapter.path.rawValue), text: .detail("path", adapter.path.rawValue))
        sink.field("changed", settings.isEmpty ? nil : .strings(settings.filter(\.changed).map(\.name)),
                   text: settings.map { .plain($0.name, $0.summary) })
    }
}

/// What `info` shows: the device as a scan shows it, and what BlueZ knows of it besides.
struct InfoRecord: OutputRecord {
    let device: DeviceRecord
    let state: PeripheralState
    let mtu: Int?
    let services: [GattService]

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        device.describe(into: &sink)
        let info = device.device
        sink.field("bonded", .bool(info.bonded), text: .detail("bonded", info.bonded))
        sink.field("trusted", .bool(info.trusted), text: .detail("trusted", info.trusted))
        sink.field("blocked", .bool(info.blocked), text: .detail("blocked", info.blocked))
        sink.field("services_resolved", .bool(info.servicesResolved), text: .detail("resolved", info.servicesResolved))
        sink.field("mtu", mtu.map { .int($0) }, text: mtu.map { .detail("mtu", String($0)) })
        sink.field("icon", info.icon.map { .string($0) }, text: info.icon.map { .detail("icon", TextSafety.terminalSafe($0)) })
        sink.field("state", .string(state.rawValue), text: .detail("state", state.rawValue))
        // BlueZ lists a device's services only once it has resolved them.
        let services = info.servicesResolved ? self.services : nil
        sink.field("gatt_services", services.map { .strings($0.map(\.uuid.uuidString)) },
                   text: services.map { .detail("gatt", $0.map(\.uuid.label).joined(separator: ", ")) })
    }
}

/// What `connect` prints: "connected AA:… "name", 3 services, paired".
struct ConnectRecord: OutputRecord {
    let device: BluetoothAddress
    let name: String?
    /// False when the device was already connected.
    let madeConnection: Bool
    let paired: Bool
    let services: Int
    let mtu: Int?
    let path: String

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        let how = madeConnection ? "connected" : "already connected"
        let quotedName = name.map { " " + TextSafety.quoted($0) } ?? ""
        sink.field("device", .string(device.description), text: .plain("device", "\(how) \(device)\(quotedName)"))
        sink.json("name", name.map { .string($0) })  // in the device part
        sink.json("connected", .bool(true))  // the device part says how
        sink.json("already_connected", .bool(!madeConnection))
        sink.field("services", .int(services), text: .plain("services", "\(services) services"))
        sink.field("paired", .bool(paired), text: .flag("paired", paired))
        sink.field("mtu", mtu.map { .int($0) }, text: mtu.map { .detail("mtu", String($0)) })
        sink.field("path", .string(path), text: .detail("path", path))
    }
}

/// What `disconnect` prints: "disconnected AA:…" or "AA:… was not connected".
struct DisconnectRecord: OutputRecord {
    let device: BluetoothAddress
    let wasConnected: Bool

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.field("device", .string(device.description),
                   text: .plain("device", wasConnected ? "disconnected \(device)" : "\(device) was not connected"))
        sink.json("connected", .bool(false))  // the device part says it
        sink.json("was_connected", .bool(wasConnected))
    }
}

/// One attribute of `discover`'s tree: "service 180d (Heart Rate)  handle 0x0001",
/// "  characteristic 2a37 (Heart Rate Measurement)  [notify]  handle 0x0003", or its JSON object.
enum AttributeRecord: OutputRecord {
    case service(GattService)
    case characteristic(GattCharacteristic, service: GattService)
    case descriptor(GattDescriptor, characteristic: GattCharacteristic)

    /// The text's indentation: the tree's depth.
    var indent: String {
        switch self {
        case .service: ""
        case .characteristic: "  "
        case .descriptor: "    "
        }
    }

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        let (type, uuid, path, handle): (String, BluetoothUUID, String, Int?) = switch self {
        case .service(let s): ("service", s.uuid, s.path.rawValue, s.handle)
        case .characteristic(let c, _): ("characteristic", c.uuid, c.path.rawValue, c.handle)
        case .descriptor(let d, _): ("descriptor", d.uuid, d.path.rawValue, d.handle)
        }
        sink.field("type", .string(type), text: .labelled(type, uuid.label))
        sink.json("uuid", .string(uuid.uuidString))  // the type part shows it, labelled
        sink.json("name", uuid.name.map { .string($0) })  // likewise
        sink.field("path", .string(path), text: .detail("path", path))
        switch self {
        case .service(let service):
            sink.field("primary", .bool(service.isPrimary), text: service.isPrimary ? nil : .plain("primary", "(secondary)"))
            sink.field("includes", service.includes.isEmpty ? nil : .strings(service.includes.map(\.rawValue)),
                       text: service.includes.isEmpty ? nil : .detail("includes", service.includes.map(\.rawValue).joined(separator: ", ")))
        case .characteristic(let c, let service):
            sink.field("flags", .strings(c.flags), text: .plain("flags", "[\(c.flags.joined(separator: ", "))]"))
            sink.json("service", .string(service.uuid.uuidString))  // the tree shows it as the parent
            sink.field("mtu", c.mtu.map { .int($0) }, text: c.mtu.map { .detail("mtu", String($0)) })
        case .descriptor(let d, let characteristic):
            sink.field("flags", .strings(d.flags), text: .detail("flags", "[\(d.flags.joined(separator: ", "))]"))
            sink.json("characteristic", .string(characteristic.uuid.uuidString))  // the tree shows it as the parent
        }
        sink.field("handle", handle.map { .int($0) }, text: handle.map { .labelled("handle", DeviceRecord.hex16(UInt16(truncatingIfNeeded: $0))) })
    }
}

/// A device as `devices` shows it: "AA:…  random  -60 dBm  "name"  connected paired bonded trusted  services 180d,180f".
struct KnownDeviceRecord: OutputRecord {
    let device: DeviceInfo
    let adapter: String
    /// Whether the text names the adapter (`devices` over several adapters).
    var namesAdapter = false

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        let device = self.device
        DeviceRecord.describeIdentity(of: device, adapter: adapter, namesAdapter: namesAdapter, into: &sink)
        sink.field("connected", .bool(device.connected), text: .flag("connected", device.connected))
        sink.field("paired", .bool(device.paired), text: .flag("paired", device.paired))
        sink.field("bonded", .bool(device.bonded), text: .flag("bonded", device.bonded))
        sink.field("trusted", .bool(device.trusted), text: .flag("trusted", device.trusted))
        sink.field("blocked", .bool(device.blocked), text: .flag("blocked", device.blocked))
        sink.field("services_resolved", .bool(device.servicesResolved), text: .flag("resolved", device.servicesResolved))
        // absent when none, as in scan and info lines
        sink.field("service_uuids", device.serviceUUIDs.isEmpty ? nil : .strings(device.serviceUUIDs.map(\.uuidString)),
                   text: device.serviceUUIDs.isEmpty ? nil : .labelled("services", device.serviceUUIDs.map(\.label).joined(separator: ",")))
        sink.field("path", .string(device.path.rawValue), text: .detail("path", device.path.rawValue))
    }
}

/// What a lifecycle command did to one device: a sentence in text
/// ("trusted AA:…", "AA:… already trusted"), the device and its new state in JSON.
struct DeviceChangeRecord: OutputRecord {
    let device: BluetoothAddress
    let sentence: String
    let fields: [(String, JSONValue)]

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.field("device", .string(device.description), text: .plain("device", sentence))
        for (key, value) in fields { sink.json(key, value) }
    }

    func print(json: Bool) {
        _ = line(json: json).map(Output.line)
    }
}

/// A line of `serve` or `advertise`: what is served or advertised, then each request and subscription.
struct ServerEventRecord: OutputRecord {
    var time = ValueText.timestamp()
    let event: String
    let adapter: String
    var address: String?
    var central: String?
    var service: BluetoothUUID?
    var characteristic: BluetoothUUID?
    var descriptor: BluetoothUUID?
    var value: [UInt8]?
    var offset: Int?
    var type: String?
    var services: [BluetoothUUID]?
    var advertised: AdvertisementData?
    /// What a BTHome frame advertised holds (`advertise --bthome`), as scan shows a sensor.
    var sensor: SensorReading?
    var detail: String?

    init(event: String, adapter: AdapterInfo, services: [PublishedService], advertised: AdvertisementData?) {
        self.event = event
        self.adapter = adapter.name
        address = adapter.address?.description
        self.services = services.isEmpty ? nil : services.map(\.uuid)
        self.advertised = advertised
    }

    /// The line for a manager's event; nil for those that are not printed.
    init?(_ event: PeripheralEvent, adapter: AdapterInfo) {
        self.adapter = adapter.name
        func about(_ characteristic: PublishedCharacteristic, _ descriptor: PublishedDescriptor? = nil)
            -> (BluetoothUUID, BluetoothUUID, BluetoothUUID?) {
            (characteristic.serviceUUID, characteristic.uuid, descriptor?.uuid)
        }
        switch event {
        case .read(let request), .write(let request), .requestExpired(let request):
            if case .requestExpired = event { self.event = "expired" } else { self.event = request.kind == .read ? "read" : "write" }
            (service, characteristic, descriptor) = about(request.characteristic, request.descriptor)
            central = request.central?.description
            offset = request.offset
            if request.kind == .write {
                value = request.value
                type = request.writeType?.rawValue
            }
        case .subscribed(let c):
            self.event = "subscribed"
            (service, characteristic, descriptor) = about(c)
        case .unsubscribed(let c):
            self.event = "unsubscribed"
            (service, characteristic, descriptor) = about(c)
        case .confirmed(let c):
            self.event = "confirmed"
            (service, characteristic, descriptor) = about(c)
        case .advertisingStopped:
            self.event = "advertising_stopped"
        case .bluetoothdStopped:
            self.event = "bluetoothd_stopped"
            detail = "bluetoothd stopped; registering again when it is back"
        case .restored(let failures):
            self.event = "restored"
            detail = failures.isEmpty ? "registered again with bluetoothd" : "registered again, except: " + failures.joined(separator: "; ")
        case .readyToUpdateSubscribers:
            return nil
        }
    }

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.field("time", .string(time), text: .plain("time", time))
        sink.field("event", .string(event), text: .plain("event", event))
        sink.field("adapter", .string(adapter), text: characteristic == nil ? .plain("adapter", adapter) : nil)
        sink.field("address", address.map { .string($0) }, text: address.map { .plain("address", $0) })
        sink.field("central", central.map { .string($0) }, text: central.map { .labelled("by", $0) })
        sink.json("service", service.map { .string($0.uuidString) })
        sink.field("characteristic", characteristic.map { .string($0.uuidString) },
                   text: characteristic.map { .plain("characteristic", $0.label) })
        sink.field("descriptor", descriptor.map { .string($0.uuidString) }, text: descriptor.map { .labelled("descriptor", $0.label) })
        sink.field("value", value.map { .string(ByteFormats.hex($0)) }, text: value.map { .plain("value", ByteFormats.hexSpaced($0)) })
        sink.field("type", type.map { .string($0) }, text: type.map { .plain("type", $0) })
        sink.field("offset", offset.map { .int($0) }, text: offset.flatMap { $0 == 0 ? nil : .labelled("offset", String($0)) })
        sink.field("services", services.map { .strings($0.map(\.uuidString)) },
                   text: services.map { .labelled("services", $0.map(\.label).joined(separator: ",")) })
        if let advertised {
            sink.field("advertising", .bool(true), text: .flag("advertising", event != "advertising"))  // the event says it already
            sink.field("name", advertised.localName.map { .string($0) },
                       text: advertised.localName.map { .labelled("name", TextSafety.terminalSafe($0)) })
            if services == nil {
                sink.field("service_uuids", advertised.serviceUUIDs.isEmpty ? nil : .strings(advertised.serviceUUIDs.map(\.uuidString)),
                           text: advertised.serviceUUIDs.isEmpty ? nil : .labelled("services", advertised.serviceUUIDs.map(\.label).joined(separator: ",")))
            }
            // the JSON objects as scan's DeviceRecord writes them (hexObject, hex16), sorted once
            let manufacturer = advertised.manufacturerData.sorted { $0.key < $1.key }.map { (DeviceRecord.hex16($0.key), $0.value) }
            sink.field("manufacturer_data", manufacturer.isEmpty ? nil : .object(DeviceRecord.hexObject(manufacturer)),
                       text: manufacturer.isEmpty ? nil : .labelled("manufacturer", manufacturer.map { $0.0 + "=" + ByteFormats.hex($0.1) }.joined(separator: ",")))
            let serviceData = advertised.serviceData.sorted { $0.key < $1.key }
            sink.field("service_data", serviceData.isEmpty ? nil : .object(DeviceRecord.hexObject(serviceData.map { ($0.key.uuidString, $0.value) })),
                       text: serviceData.isEmpty ? nil : .labelled("service data", serviceData.map { "\($0.key.label)=" + ByteFormats.hex($0.value) }.joined(separator: ",")))
            sink.field("appearance", advertised.appearance.map { .int(Int($0)) },
                       text: advertised.appearance.map { .labelled("appearance", DeviceRecord.hex16($0)) })
            sink.field("tx_power", advertised.includesTxPower ? .bool(true) : nil, text: .flag("tx-power", advertised.includesTxPower))
            sink.json("connectable", .bool(advertised.isConnectable))
            sink.json("discoverable", .bool(advertised.isDiscoverable))
            sink.json("length", .int(advertised.advertisingDataLength))
        }
        sink.field("sensor", sensor.map { .object(DeviceRecord.sensorObject($0)) },
                   text: sensor.map { .labelled("sensor", TextSafety.terminalSafe(DeviceRecord.sensorSummary($0))) })
        sink.field("detail", detail.map { .string($0) }, text: detail.map { .plain("detail", $0) })
    }
}

/// What `write --json` prints. The text form is empty: a write that succeeds says
/// nothing (its exit status does), as `cp` does.
struct WriteRecord: OutputRecord {
    let device: String
    let characteristic: BluetoothUUID
    var descriptor: BluetoothUUID?
    /// How a characteristic was written (a descriptor write has no type).
    var type: WriteType?
    let bytes: [UInt8]
    /// `--stream`: what went (then there is no one value to show).
    var stream: StreamFacts?

    /// A stream's route ("acquire-write" or "write-value"), its bytes and writes, how long it took.
    struct StreamFacts {
        var via: String
        var bytes: Int
        var writes: Int
        var seconds: Double
    }

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.json("device", .string(device))
        sink.json("characteristic", .string(characteristic.uuidString))
        sink.json("descriptor", descriptor.map { .string($0.uuidString) })
        sink.json("type", type.map { .string($0.name) })
        sink.json("value", stream == nil ? .string(ByteFormats.hex(bytes)) : nil)
        sink.json("via", stream.map { .string($0.via) })
        sink.json("bytes", stream.map { .int($0.bytes) })
        sink.json("writes", stream.map { .int($0.writes) })
        sink.json("seconds", stream.map { .double(($0.seconds * 1000).rounded() / 1000) })
    }
}
