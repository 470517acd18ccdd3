import ArgumentParser
import BluectlCore

/// `bluectl connect DEVICE`: connect and wait for the services; the connection stays up.
struct ConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Connect to a device and wait until its services are resolved; the connection stays up.",
        discussion: """
            DEVICE is an address, a D-Bus path, or a name/alias BlueZ knows; an unknown device is \
            scanned for (bounded by --timeout). Retries le-connection-abort-by-local and InProgress.

            Examples:
              bluectl connect AA:BB:CC:DD:EE:FF
              bluectl connect AA:BB:CC:DD:EE:FF --pair --agent keyboard-display
              bluectl connect "My Sensor" --json --timeout 60
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address (AA:BB:CC:DD:EE:FF), D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Flag(help: "One JSON object.")
    var json = false

    @Flag(help: "Also pair (Device1.Pair, answered by bluectl's agent) unless paired already.")
    var pair = false

    func run() async throws {
        let (device, options, json, pair) = (self.device, self.options, self.json, self.pair)
        try await runDeviceCommand(adapterOptions: adapterOptions, options: options, what: "connect to \(device)",
                                   disconnectAfter: false) { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            session.registerAgent(for: peripheral)
            try await session.connect(peripheral, options: options, deadline: deadline)
            if pair, peripheral.info?.paired != true {
                try await peripheral.pair(timeout: deadline.remaining)
            }
            let record = ConnectRecord(device: peripheral.identifier, name: peripheral.name, madeConnection: await session.madeConnection,
                                       paired: peripheral.info?.paired ?? false, services: peripheral.services.count,
                                       mtu: peripheral.mtu, path: peripheral.path.rawValue)
            _ = record.line(json: json, separator: ", ").map(Output.line)
        }
    }
}

/// `bluectl disconnect DEVICE`
struct DisconnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disconnect",
        abstract: "Disconnect a device and wait until BlueZ shows it disconnected.",
        discussion: """
            Examples:
              bluectl disconnect AA:BB:CC:DD:EE:FF
              bluectl disconnect AA:BB:CC:DD:EE:FF --json
            """)

    @OptionGroup var arguments: OneDeviceArguments

    func run() async throws {
        let (device, json) = (arguments.device, arguments.json)
        try await arguments.run(what: "disconnect \(device)") { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            let wasConnected = await peripheral.isConnected()
            try await session.central.cancelPeripheralConnection(peripheral, timeout: deadline.remaining)
            let record = DisconnectRecord(device: peripheral.identifier, wasConnected: wasConnected)
            _ = record.line(json: json).map(Output.line)
        }
    }
}

/// `bluectl info DEVICE`
struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show what BlueZ knows about a device: connection, pairing, RSSI, MTU, services resolved, advertised data.",
        discussion: """
            Does not connect. Reads what BlueZ knows, so the adapter may be off, unless the device \
            must be scanned for (then --power-on powers it on).

            Examples:
              bluectl info AA:BB:CC:DD:EE:FF
              bluectl info AA:BB:CC:DD:EE:FF --json
            """)

    @OptionGroup var arguments: OneDeviceArguments

    func run() async throws {
        let (device, json) = (arguments.device, arguments.json)
        try await arguments.run(what: "info \(device)") { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            guard let info = peripheral.info else { throw BluetoothError.deviceNotFound(device) }
            let record = InfoRecord(device: DeviceRecord(device: info, adapter: await session.adapter.name),
                                    state: peripheral.state, mtu: peripheral.mtu, services: peripheral.services)
            if json {
                _ = Output.line(record.json())
            } else {
                for line in record.textParts.block() { guard Output.line(line) else { return } }
            }
        }
    }
}
