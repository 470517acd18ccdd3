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
            session.registerAgent(for: peripheral)
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
