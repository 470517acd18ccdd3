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
            session.registerAgent(options.agent, for: peripheral)
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
        let quotedName = name.map { " \"\(TextSafety.terminalSafe($0))\"" } ?? ""
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
