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

/// An adapter as `adapters` shows it: "hci0  AA:…  powered  idle  poweredOn  alias".
struct AdapterRecord: OutputRecord {
    let adapter: AdapterInfo

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
    }
}
