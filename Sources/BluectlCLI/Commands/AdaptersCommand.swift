import ArgumentParser
import BluectlCore

/// `bluectl adapters`: every adapter with its address and state.
struct AdaptersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adapters",
        abstract: "List Bluetooth adapters: name, address, powered, discovering, state.",
        discussion: """
            Examples:
              bluectl adapters
              bluectl adapters --json
            """)

    @Flag(name: .long, help: "One JSON object per line.")
    var json = false

    func run() async throws {
        let central = try await CentralManager.open()
        defer { central.close() }
        let adapters = central.adapters
        if adapters.isEmpty, !json {
            _ = Output.line("no adapters")
        }
        for adapter in adapters {
            _ = AdapterRecord(adapter: adapter).line(json: json).map(Output.line)
        }
    }
}

/// One setting `adapter` was asked for: its name and its value before and after.
struct AdapterSetting: Sendable {
    let name: String
    let before: String
    let after: String

    var changed: Bool { before != after }
    /// "discoverable off->on", or "pairable on (already)".
    var summary: String { changed ? "\(name) \(before)->\(after)" : "\(name) \(after) (already)" }

    /// The settings asked for, read from `before` and `after`, in the order they are applied.
    static func asked(power: Switch?, alias: String?, discoverable: Switch?, pairable: Switch?,
                      before: AdapterInfo, after: AdapterInfo) -> [AdapterSetting] {
        func onOff(_ on: Bool) -> String { on ? "on" : "off" }
        func quoted(_ info: AdapterInfo) -> String { TextSafety.quoted(info.alias ?? info.systemName ?? "") }
        var settings: [AdapterSetting] = []
        let powerSetting = AdapterSetting(name: "power", before: onOff(before.powered), after: onOff(after.powered))
        if power == .on { settings.append(powerSetting) }   // on first, off last, as applied
        if alias != nil { settings.append(.init(name: "alias", before: quoted(before), after: quoted(after))) }
        if pairable != nil { settings.append(.init(name: "pairable", before: onOff(before.pairable), after: onOff(after.pairable))) }
        if discoverable != nil {
            settings.append(.init(name: "discoverable", before: onOff(before.discoverable), after: onOff(after.discoverable)))
        }
        if power == .off { settings.append(powerSetting) }
        return settings
    }
}

/// `on` or `off`, for the adapter's settings.
enum Switch: String, ExpressibleByArgument, Sendable, CaseIterable {
    case on, off
    var isOn: Bool { self == .on }
}

/// `bluectl adapter [hciN] [--power on|off] [--alias NAME] [--discoverable on|off] [--pairable on|off]`
struct AdapterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "adapter",
        abstract: "Show one adapter, or change its settings: power, alias, discoverable, pairable.",
        discussion: """
            Each setting is applied and waited for until BlueZ reports it, then the adapter is \
            shown as `adapters` shows it. Setting what is already so is success. Powering on comes \
            first and powering off last, so the other settings can be made on an adapter that is off. \
            BlueZ ends discoverable mode after its DiscoverableTimeout (180 s by default).

            Examples:
              bluectl adapter hci1 --power on
              bluectl adapter hci0 --alias "Gateway 3" --discoverable on --json
              bluectl adapter hci0 --pairable off --power off
            """)

    @Argument(help: ArgumentHelp("The adapter (default: the first powered one, else the first).", valueName: "hciN"),
              completion: adapterCompletion)
    var name: String?

    @Option(help: ArgumentHelp("Power the adapter on or off.", valueName: "on|off"))
    var power: Switch?

    @Option(help: ArgumentHelp("The name other devices see (empty: back to the system's name).", valueName: "NAME"))
    var alias: String?

    @Option(help: ArgumentHelp("Whether other devices can discover it.", valueName: "on|off"))
    var discoverable: Switch?

    @Option(help: ArgumentHelp("Whether it accepts pairing.", valueName: "on|off"))
    var pairable: Switch?

    @Flag(help: "One JSON object.")
    var json = false

    func validate() throws {
        try AdapterChoice.check(name)
        if let alias {
            if TextSafety.hasControlCharacters(alias) || alias.unicodeScalars.contains("\u{FFFD}") {
                throw ValidationError("invalid --alias \"\(TextSafety.escapedForMessage(alias))\": control characters or invalid UTF-8")
            }
            if alias.utf8.count > maxDeviceNameBytes {
                throw ValidationError("invalid --alias: \(alias.utf8.count) bytes, longer than a device name can be (\(maxDeviceNameBytes))")
            }
        }
    }

    func run() async throws {
        let (name, power, alias, discoverable, pairable, json) = (self.name, self.power, self.alias, self.discoverable, self.pairable, self.json)
        try await SignalScope.run {
            let central = try await CentralManager.open()
            defer { central.close() }
            let adapter = try central.adapter(named: name)
            let limit = Duration.seconds(10)
            if power == .on { try await central.setPowered(true, adapter: adapter, timeout: limit) }
            if let alias { try await central.setAlias(alias, adapter: adapter, timeout: limit) }
            if let pairable { try await central.setPairable(pairable.isOn, adapter: adapter, timeout: limit) }
            if let discoverable { try await central.setDiscoverable(discoverable.isOn, adapter: adapter, timeout: limit) }
            if power == .off { try await central.setPowered(false, adapter: adapter, timeout: limit) }
            let now = try central.adapter(named: adapter.name)
            let settings = AdapterSetting.asked(power: power, alias: alias, discoverable: discoverable, pairable: pairable,
                                                before: adapter, after: now)
            _ = AdapterRecord(adapter: now, settings: settings).line(json: json).map(Output.line)
        }
    }
}
