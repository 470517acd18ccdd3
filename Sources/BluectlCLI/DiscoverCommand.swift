import ArgumentParser
import BluectlCore

/// `bluectl discover DEVICE [--service UUID ...]`
struct DiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "List a device's services, characteristics (properties, handle) and descriptors, with SIG names.",
        discussion: """
            Connects when needed, and then disconnects afterwards (only a connection bluectl made).

            Examples:
              bluectl discover AA:BB:CC:DD:EE:FF
              bluectl discover AA:BB:CC:DD:EE:FF --service heart_rate
              bluectl discover AA:BB:CC:DD:EE:FF --json
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address, D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Option(name: .customLong("service"), help: ArgumentHelp("Only this service (repeatable).", valueName: "UUID"))
    var serviceTexts: [String] = []

    @Flag(help: "One JSON object per attribute.")
    var json = false

    func validate() throws {
        for text in serviceTexts { _ = try parseServiceUUID(text, option: "--service") }
    }

    func run() async throws {
        let uuids = try serviceTexts.map { try parseServiceUUID($0, option: "--service") }
        let (device, options, json) = (self.device, self.options, self.json)
        try await runDeviceCommand(adapterOptions: adapterOptions, options: options, what: "discover \(device)") { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            session.registerAgent(options.agent, for: peripheral)
            try await session.connect(peripheral, options: options, deadline: deadline)
            let services = try await peripheral.discoverServices(uuids, timeout: deadline.remaining)
            let database = peripheral.database
            if !uuids.isEmpty, services.isEmpty {
                throw BluetoothError.attributeNotFound(kind: "service", what: uuids.map(\.uuidString).joined(separator: ", "),
                                         existing: database.services.map { $0.uuid.label })
            }
            // Nothing to list is said, not left as an empty output that looks like a failure.
            if services.isEmpty { session.say("\(peripheral.identifier) has no GATT services (BlueZ resolved none)") }
            for service in services {
                guard Self.print(.service(service), json: json) else { return }
                for characteristic in database.characteristics(of: service) {
                    guard Self.print(.characteristic(characteristic, service: service), json: json) else { return }
                    for descriptor in database.descriptors(of: characteristic) {
                        guard Self.print(.descriptor(descriptor, characteristic: characteristic), json: json) else { return }
                    }
                }
            }
        }
    }

    /// False when stdout is gone.
    static func print(_ record: AttributeRecord, json: Bool) -> Bool {
        record.line(json: json, indent: record.indent).map(Output.line) ?? true
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
