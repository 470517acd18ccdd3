// The devices BlueZ knows and their lifecycle: devices, pair, unpair (remove),
// trust/untrust, block/unblock.

import ArgumentParser
import BluectlCore

/// `bluectl devices`: what BlueZ knows, without scanning.
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the devices BlueZ knows (seen lately, connected or bonded), without scanning.",
        discussion: """
            One line per device, in address order, on every adapter unless --adapter is given. \
            The filters combine: a device must pass all of them (--service: any one of the UUIDs, \
            advertised or in its resolved services).

            Examples:
              bluectl devices
              bluectl devices --connected --json
              bluectl devices --service heart_rate --service 180f --adapter hci1
            """)

    @OptionGroup var adapterFilter: AdapterFilter

    @Flag(help: "Only connected devices.")
    var connected = false
    @Flag(help: "Only paired devices.")
    var paired = false
    @Flag(help: "Only bonded devices (pairing keys stored).")
    var bonded = false
    @Flag(help: "Only trusted devices.")
    var trusted = false

    @Option(name: .customLong("service"), help: ArgumentHelp(
        "Only devices advertising or offering this service (repeatable: any of them).", valueName: "UUID"))
    var serviceTexts: [String] = []

    @Flag(help: "One JSON object per line.")
    var json = false

    func validate() throws {
        for text in serviceTexts { _ = try parseServiceUUID(text, option: "--service") }
    }

    func run() async throws {
        var filter = DeviceFilter()
        filter.connected = connected
        filter.paired = paired
        filter.bonded = bonded
        filter.trusted = trusted
        filter.services = try serviceTexts.map { try parseServiceUUID($0, option: "--service") }
        let central = try await CentralManager.open()
        defer { central.close() }
        let adapter = try adapterFilter.adapter.map { try central.adapter(named: $0) }
        let names = Dictionary(central.adapters.map { ($0.path, $0.name) }, uniquingKeysWith: { a, _ in a })
        let devices = central.devices(on: adapter, matching: filter)
        if devices.isEmpty, !json {
            Output.error("no \(filter == DeviceFilter() ? "" : "matching ")devices known to BlueZ\(adapter.map { " on \($0.name)" } ?? "")")
        }
        // Over several adapters, each line starts with its adapter (the same device may be on two).
        let namesAdapter = adapter == nil && names.count > 1
        for device in devices {
            let record = KnownDeviceRecord(device: device, adapter: device.adapter.flatMap { names[$0] } ?? "-", namesAdapter: namesAdapter)
            guard let line = record.line(json: json), Output.line(line) else { return }
        }
    }
}

/// `bluectl pair DEVICE`
struct PairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with a device (connecting first if needed); already paired is success.",
        discussion: """
            bluectl's agent answers BlueZ's questions (--agent). A connection made for the pairing \
            is closed afterwards; `bluectl connect --pair` pairs and stays connected. \
            Refusals: 77 when the device or an agent rejects or cancels the pairing, 1 for other \
            BlueZ failures (BlueZ's message is shown).

            Examples:
              bluectl pair AA:BB:CC:DD:EE:FF
              bluectl pair AA:BB:CC:DD:EE:FF --agent keyboard-display
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address (AA:BB:CC:DD:EE:FF), D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Flag(help: "One JSON object.")
    var json = false

    func run() async throws {
        let (device, options, json) = (self.device, self.options, self.json)
        try await runDeviceCommand(adapterOptions: adapterOptions, options: options, what: "pair with \(device)") { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            let already = peripheral.info?.paired == true
            if !already {
                session.registerAgent(for: peripheral)
                try await session.connect(peripheral, options: options, deadline: deadline)
                // bluetoothd may have paired by itself on connecting (a bond on the other side).
                if peripheral.info?.paired != true { try await peripheral.pair(timeout: deadline.remaining) }
            }
            let id = peripheral.identifier
            let bonded = peripheral.info?.bonded ?? false
            DeviceChangeRecord(device: id, sentence: already ? "\(id) already paired" : "paired \(id)\(bonded ? " (bonded)" : "")",
                               fields: [("paired", .bool(true)), ("already_paired", .bool(already)), ("bonded", .bool(bonded))])
                .print(json: json)
        }
    }
}

/// `bluectl unpair DEVICE` (alias `remove`)
struct UnpairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpair",
        abstract: "Remove a device from BlueZ: its bond and BlueZ's cached GATT database are deleted.",
        discussion: """
            Adapter1.RemoveDevice: BlueZ disconnects the device, deletes its pairing keys and the \
            services it cached, and forgets it (it is found again by scanning). Clears a stale GATT \
            cache after the device's firmware changed. Never scans: a device BlueZ does not know \
            is reported as not known, with exit status 0. `bluectl remove` is the same command.

            Examples:
              bluectl unpair AA:BB:CC:DD:EE:FF
              bluectl unpair AABBCCDDEEFF --adapter hci1 --json
            """)

    @OptionGroup var arguments: RemoveArguments

    func run() async throws { try await Self.remove(arguments) }

    /// What `unpair` and `remove` do.
    static func remove(_ arguments: RemoveArguments) async throws {
        let (device, json) = (arguments.device.device, arguments.device.json)
        try await arguments.run(what: "remove \(device)") { session, deadline in
            guard let peripheral = try await session.known(device) else {
                let shown = BluetoothAddress(device)?.description ?? TextSafety.escapedForMessage(device)
                let adapter = await session.adapter.name
                Output.error("\(shown) is not known to BlueZ on \(adapter): nothing to remove")
                if json { _ = Output.line(NotKnownRecord(device: shown, adapter: adapter).json()) }
                return
            }
            let id = peripheral.identifier
            let adapter = await session.adapter.name
            let removed = try await session.central.removeDevice(peripheral, timeout: deadline.remaining)
            DeviceChangeRecord(device: id,
                               sentence: removed ? "removed \(id) from \(adapter): its bond and cached GATT database are deleted"
                                   : "\(id) was already gone from \(adapter)",
                               fields: [("adapter", .string(adapter)), ("removed", .bool(removed))])
                .print(json: json)
        }
    }

    /// `unpair`'s JSON line for a device BlueZ does not know (the text says it on stderr).
    struct NotKnownRecord: OutputRecord {
        let device: String
        let adapter: String
        func describe<Sink: RecordSink>(into sink: inout Sink) {
            sink.json("device", .string(device))
            sink.json("adapter", .string(adapter))
            sink.json("removed", .bool(false))
        }
    }
}

/// `bluectl remove DEVICE`: `unpair` by the name of BlueZ's method. A
/// subcommand of its own rather than an alias, so that Tab completion, `help
/// remove` and its man page know it by this name.
struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "The same as unpair: remove a device from BlueZ, its bond and cached GATT database.",
        discussion: """
            Adapter1.RemoveDevice, as `bluectl unpair` calls it (see bluectl unpair --help).

            Examples:
              bluectl remove AA:BB:CC:DD:EE:FF
              bluectl remove AA:BB:CC:DD:EE:FF --adapter hci1 --json
            """)

    @OptionGroup var arguments: RemoveArguments

    func run() async throws { try await UnpairCommand.remove(arguments) }
}

/// A device flag a lifecycle command sets: `Device1.Trusted` or `Device1.Blocked`.
enum DeviceFlag: Sendable {
    case trusted, blocked

    var key: String { self == .trusted ? "trusted" : "blocked" }

    /// "trusted AA:…" / "AA:… already trusted"; "untrusted AA:…" / "AA:… was not trusted".
    func sentence(_ id: BluetoothAddress, on: Bool, changed: Bool) -> String {
        let verb = self == .trusted ? "trusted" : "blocked"
        switch (on, changed) {
        case (true, true): return "\(verb) \(id)"
        case (true, false): return "\(id) already \(verb)"
        case (false, true): return "un\(verb) \(id)"
        case (false, false): return "\(id) was not \(verb)"
        }
    }
}

/// DEVICE and --json of the commands that work on one device without connecting.
struct DeviceArgument: ParsableArguments {
    @Argument(help: "Address (AA:BB:CC:DD:EE:FF), D-Bus path, or name.", completion: deviceCompletion)
    var device: String

    @Flag(help: "One JSON object.")
    var json = false
}

/// What `unpair` and `remove` take: the device, --adapter, --timeout, --json.
/// No --power-on: RemoveDevice needs no radio, and they never scan.
struct RemoveArguments: ParsableArguments {
    @OptionGroup var adapterChoice: AdapterChoice
    @OptionGroup var deadline: OperationTimeout
    @OptionGroup var device: DeviceArgument

    /// `runDeviceCommand` with these options, on an adapter powered or not; never disconnects.
    func run(what: String, _ body: @escaping @Sendable (DeviceSession, Deadline) async throws -> Void) async throws {
        try await runDeviceCommand(adapterOptions: AdapterOptions(adapterChoice), options: DeviceCommandOptions(deadline),
                                   what: what, disconnectAfter: false, requirePowered: false, body)
    }
}

/// What the commands that work on one device without connecting take
/// (info, disconnect, trust, untrust, block, unblock): the device,
/// --adapter and --power-on, --timeout, --json. They read or change what
/// BlueZ keeps, so the adapter may be off; it must be on only when the
/// device has to be scanned for (then --power-on powers it).
struct OneDeviceArguments: ParsableArguments {
    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var deadline: OperationTimeout
    @OptionGroup var deviceArgument: DeviceArgument

    var device: String { deviceArgument.device }
    var json: Bool { deviceArgument.json }

    /// `runDeviceCommand` with these options, on an adapter powered or not; never disconnects.
    func run(what: String, _ body: @escaping @Sendable (DeviceSession, Deadline) async throws -> Void) async throws {
        try await runDeviceCommand(adapterOptions: adapterOptions, options: DeviceCommandOptions(deadline),
                                   what: what, disconnectAfter: false, requirePowered: false, body)
    }

    /// Sets `flag` to `on` (a device BlueZ does not know is scanned for, as by `info`).
    func set(_ flag: DeviceFlag, _ on: Bool) async throws {
        let (device, json) = (self.device, self.json)
        try await run(what: "set \(flag.key) of \(device)") { session, deadline in
            let peripheral = try await session.find(device, deadline: deadline)
            let changed = switch flag {
            case .trusted: try await peripheral.setTrusted(on, timeout: deadline.remaining)
            case .blocked: try await peripheral.setBlocked(on, timeout: deadline.remaining)
            }
            DeviceChangeRecord(device: peripheral.identifier, sentence: flag.sentence(peripheral.identifier, on: on, changed: changed),
                               fields: [(flag.key, .bool(on)), ("changed", .bool(changed))])
                .print(json: json)
        }
    }
}

/// `bluectl trust DEVICE`
struct TrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Trust a device: it may connect and use services without the agent being asked.",
        discussion: "Examples:\n  bluectl trust AA:BB:CC:DD:EE:FF\n  bluectl trust AA:BB:CC:DD:EE:FF --json")
    @OptionGroup var arguments: OneDeviceArguments
    func run() async throws { try await arguments.set(.trusted, true) }
}

/// `bluectl untrust DEVICE`
struct UntrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "untrust",
        abstract: "Stop trusting a device.",
        discussion: "Examples:\n  bluectl untrust AA:BB:CC:DD:EE:FF\n  bluectl untrust AA:BB:CC:DD:EE:FF --adapter hci1 --json")
    @OptionGroup var arguments: OneDeviceArguments
    func run() async throws { try await arguments.set(.trusted, false) }
}

/// `bluectl block DEVICE`
struct BlockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "block",
        abstract: "Block a device: BlueZ disconnects it and refuses its connections until unblocked.",
        discussion: "Examples:\n  bluectl block AA:BB:CC:DD:EE:FF\n  bluectl block AA:BB:CC:DD:EE:FF --json")
    @OptionGroup var arguments: OneDeviceArguments
    func run() async throws { try await arguments.set(.blocked, true) }
}

/// `bluectl unblock DEVICE`
struct UnblockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unblock",
        abstract: "Unblock a device.",
        discussion: "Examples:\n  bluectl unblock AA:BB:CC:DD:EE:FF\n  bluectl unblock AA:BB:CC:DD:EE:FF --adapter hci1 --json")
    @OptionGroup var arguments: OneDeviceArguments
    func run() async throws { try await arguments.set(.blocked, false) }
}
