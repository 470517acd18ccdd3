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
            let services = peripheral.services.count
            if json {
                var line = JSONLine()
                line.add("device", peripheral.identifier)
                if let name = peripheral.name { line.add("name", name) }
                line.add("connected", true)
                line.add("already_connected", !session.madeConnection)
                line.add("paired", peripheral.info?.paired ?? false)
                line.add("services", services)
                if let mtu = peripheral.mtu { line.add("mtu", mtu) }
                line.add("path", peripheral.path.rawValue)
                _ = Output.line(line.render())
            } else {
                let name = peripheral.name.map { " \"\(TextSafety.terminalSafe($0))\"" } ?? ""
                let how = session.madeConnection ? "connected" : "already connected"
                let paired = peripheral.info?.paired == true ? ", paired" : ""
                _ = Output.line("\(how) \(peripheral.identifier)\(name), \(services) services\(paired)")
            }
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

    @OptionGroup var adapterChoice: AdapterChoice
    @OptionGroup var deadline: OperationTimeout

    @Argument(help: "Address, D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let (device, json) = (self.device, self.json)
        try await runDeviceCommand(adapterOptions: AdapterOptions(adapterChoice), options: DeviceCommandOptions(deadline),
                                   what: "disconnect \(device)",
                                   disconnectAfter: false) { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            let wasConnected = await peripheral.isConnected()
            try await session.central.cancelPeripheralConnection(peripheral, timeout: deadline.remaining)
            if json {
                var line = JSONLine()
                line.add("device", peripheral.identifier)
                line.add("connected", false)
                line.add("was_connected", wasConnected)
                _ = Output.line(line.render())
            } else {
                _ = Output.line(wasConnected ? "disconnected \(peripheral.identifier)" : "\(peripheral.identifier) was not connected")
            }
        }
    }
}

/// `bluectl info DEVICE`
struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show what BlueZ knows about a device: connection, pairing, RSSI, MTU, services resolved, advertised data.",
        discussion: """
            Does not connect.

            Examples:
              bluectl info AA:BB:CC:DD:EE:FF
              bluectl info AA:BB:CC:DD:EE:FF --json
            """)

    @OptionGroup var adapterChoice: AdapterChoice
    @OptionGroup var deadline: OperationTimeout

    @Argument(help: "Address, D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let (device, json) = (self.device, self.json)
        try await runDeviceCommand(adapterOptions: AdapterOptions(adapterChoice), options: DeviceCommandOptions(deadline),
                                   what: "info \(device)",
                                   disconnectAfter: false) { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            guard let info = peripheral.info else { throw BluetoothError.deviceNotFound(device) }
            let mtu = peripheral.mtu
            let services = peripheral.services
            if json {
                var line = DeviceOutput.json(info, adapter: session.adapter.name)
                line.add("bonded", info.bonded)
                line.add("trusted", info.trusted)
                line.add("services_resolved", info.servicesResolved)
                if let mtu { line.add("mtu", mtu) }
                if let icon = info.icon { line.add("icon", icon) }
                line.add("state", peripheral.state.rawValue)
                if info.servicesResolved { line.add("gatt_services", strings: services.map(\.uuid.uuidString)) }
                _ = Output.line(line.render())
            } else {
                var lines: [String] = []
                lines.append("device      \(info.address) (\(info.addressType?.rawValue ?? "-"))")
                if let name = info.displayName { lines.append("name        \(TextSafety.terminalSafe(name))") }
                lines.append("adapter     \(session.adapter.name)")
                lines.append("connected   \(info.connected ? "yes" : "no")")
                lines.append("state       \(peripheral.state.rawValue)")
                lines.append("paired      \(info.paired ? "yes" : "no")   bonded \(info.bonded ? "yes" : "no")   trusted \(info.trusted ? "yes" : "no")")
                lines.append("resolved    \(info.servicesResolved ? "yes" : "no")")
                if let rssi = info.rssi { lines.append("rssi        \(rssi) dBm") }
                if let txPower = info.txPower { lines.append("tx power    \(txPower) dBm") }
                if let mtu { lines.append("mtu         \(mtu)") }
                if let icon = info.icon { lines.append("icon        \(TextSafety.terminalSafe(icon))") }
                if !info.serviceUUIDs.isEmpty {
                    lines.append("advertised  " + info.serviceUUIDs.map { DeviceOutput.uuidLabel($0) }.joined(separator: ", "))
                }
                for (company, bytes) in info.manufacturerData.sorted(by: { $0.key < $1.key }) {
                    lines.append("mfr data    \(DeviceOutput.companyLabel(company)) \(ByteFormats.hex(bytes))")
                }
                for (uuid, bytes) in info.serviceData.sorted(by: { $0.key < $1.key }) {
                    lines.append("svc data    \(uuid.shortString) \(ByteFormats.hex(bytes))")
                }
                for beacon in BeaconDecoding.beacons(in: info) { lines.append("beacon      \(beacon.summary)") }
                if info.servicesResolved {
                    lines.append("services    " + services.map { DeviceOutput.uuidLabel($0.uuid) }.joined(separator: ", "))
                }
                lines.append("path        \(info.path.rawValue)")
                for line in lines { guard Output.line(line) else { return } }
            }
        }
    }
}
