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
            _ = Output.line(json ? Self.json(adapter) : Self.text(adapter))
        }
    }

    static func json(_ adapter: AdapterInfo) -> String {
        var line = JSONLine()
        line.add("adapter", adapter.name)
        if let address = adapter.address { line.add("address", address) }
        if let type = adapter.addressType { line.add("address_type", type) }
        if let name = adapter.systemName { line.add("name", name) }
        if let alias = adapter.alias { line.add("alias", alias) }
        line.add("powered", adapter.powered)
        if let powerState = adapter.powerState { line.add("power_state", powerState) }
        line.add("discovering", adapter.discovering)
        line.add("discoverable", adapter.discoverable)
        line.add("pairable", adapter.pairable)
        line.add("state", adapter.centralState.rawValue)
        line.add("path", adapter.path.rawValue)
        return line.render()
    }

    static func text(_ adapter: AdapterInfo) -> String {
        [
            adapter.name,
            adapter.address?.description ?? "-",
            adapter.powered ? "powered" : "off",
            adapter.discovering ? "discovering" : "idle",
            adapter.centralState.rawValue,
            TextSafety.terminalSafe(adapter.alias ?? adapter.systemName ?? ""),
        ].joined(separator: "  ")
    }
}
