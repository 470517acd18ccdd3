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
                                         existing: database.services.map { DeviceOutput.uuidLabel($0.uuid) })
            }
            for service in services {
                guard Output.line(json ? Self.json(service) : Self.text(service)) else { return }
                for characteristic in database.characteristics(of: service) {
                    guard Output.line(json ? Self.json(characteristic, service: service) : Self.text(characteristic)) else { return }
                    for descriptor in database.descriptors(of: characteristic) {
                        guard Output.line(json ? Self.json(descriptor, characteristic: characteristic) : Self.text(descriptor)) else { return }
                    }
                }
            }
        }
    }

    static func handleText(_ handle: Int?) -> String {
        guard let handle else { return "" }
        let hex = String(handle, radix: 16)
        return "  handle 0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    static func text(_ service: GattService) -> String {
        "service \(DeviceOutput.uuidLabel(service.uuid))\(service.isPrimary ? "" : "  (secondary)")\(handleText(service.handle))"
    }

    static func text(_ c: GattCharacteristic) -> String {
        "  characteristic \(DeviceOutput.uuidLabel(c.uuid))  [\(c.flags.joined(separator: ", "))]\(handleText(c.handle))"
    }

    static func text(_ d: GattDescriptor) -> String {
        "    descriptor \(DeviceOutput.uuidLabel(d.uuid))\(handleText(d.handle))"
    }

    static func common(_ type: String, _ uuid: BluetoothUUID, _ path: ObjectPathText, _ handle: Int?) -> JSONLine {
        var line = JSONLine()
        line.add("type", type)
        line.add("uuid", uuid.uuidString)
        if let name = uuid.name { line.add("name", name) }
        line.add("path", path.text)
        if let handle { line.add("handle", handle) }
        return line
    }

    static func json(_ service: GattService) -> String {
        var line = common("service", service.uuid, .init(service.path.rawValue), service.handle)
        line.add("primary", service.isPrimary)
        if !service.includes.isEmpty { line.add("includes", strings: service.includes.map(\.rawValue)) }
        return line.render()
    }

    static func json(_ c: GattCharacteristic, service: GattService) -> String {
        var line = common("characteristic", c.uuid, .init(c.path.rawValue), c.handle)
        line.add("flags", strings: c.flags)
        line.add("service", service.uuid.uuidString)
        if let mtu = c.mtu { line.add("mtu", mtu) }
        return line.render()
    }

    static func json(_ d: GattDescriptor, characteristic: GattCharacteristic) -> String {
        var line = common("descriptor", d.uuid, .init(d.path.rawValue), d.handle)
        line.add("flags", strings: d.flags)
        line.add("characteristic", characteristic.uuid.uuidString)
        return line.render()
    }
}

struct ObjectPathText {
    var text: String
    init(_ text: String) { self.text = text }
}
