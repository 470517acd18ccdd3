import ArgumentParser
import BluectlCore

/// `bluectl scan`: discover advertising devices.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for advertising devices and print each one as it is found.",
        discussion: "Runs until --timeout, --count or Ctrl-C; stops the discovery it started.")

    @OptionGroup var adapterOptions: AdapterOptions

    @Option(name: .customLong("service"), help: ArgumentHelp("Only devices advertising this service (repeatable): 180d, heart_rate, or a 128-bit UUID.", valueName: "UUID"))
    var serviceTexts: [String] = []

    @Option(help: ArgumentHelp("Only devices whose name contains this (case-insensitive).", valueName: "SUBSTRING"))
    var name: String?

    /// Unconditional: "-70" is a value here, not an option.
    @Option(parsing: .unconditional, help: ArgumentHelp("Only devices at least this strong, in dBm (-127…20).", valueName: "MIN"))
    var rssi: Int?

    @Flag(help: "Report every advertisement, not only the first of each device.")
    var duplicates = false

    @Option(name: .customLong("timeout"), parsing: .unconditional, help: ArgumentHelp("Stop after this many seconds.", valueName: "SECONDS"))
    var timeoutText: String?

    @Option(help: ArgumentHelp("Stop after this many distinct devices.", valueName: "N"))
    var count: Int?

    @Option(help: ArgumentHelp("le (default), bredr or auto.", valueName: "TRANSPORT"))
    var transport: String = "le"

    @Flag(help: "One JSON object per line.")
    var json = false

    func validate() throws {
        _ = try services()
        if let rssi, !(-127...20).contains(rssi) {
            throw ValidationError("invalid --rssi \"\(rssi)\": expected -127 to 20 dBm")
        }
        if let timeoutText { _ = try parseSeconds(timeoutText, option: "--timeout") }
        if let count, count < 1 { throw ValidationError("invalid --count \"\(count)\": expected 1 or more") }
        if !["le", "bredr", "auto"].contains(transport) {
            throw ValidationError("invalid --transport \"\(TextSafety.escapedForMessage(transport))\": expected le, bredr or auto")
        }
    }

    func services() throws -> [BluetoothUUID] {
        try serviceTexts.map { text in
            do {
                return try BluetoothUUID(text, kind: .service)
            } catch {
                throw ValidationError("invalid --service: \(error)")
            }
        }
    }

    func run() async throws {
        var options = ScanOptions()
        options.services = try services()
        options.rssi = rssi
        options.duplicates = duplicates
        options.nameContains = name
        options.transport = transport
        let timeout = try timeoutText.map { try parseSeconds($0, option: "--timeout") }
        let (json, count, adapterOptions, scanOptions) = (self.json, self.count, self.adapterOptions, options)
        try await SignalScope.run {
            let (central, adapter) = try await adapterOptions.open()
            defer { central.close() }
            let session = try await central.startScan(adapter: adapter, options: scanOptions)
            // Lines wait in a bounded queue for a slow reader (dropped ones are counted and reported).
            let queue = OutputQueue(capacity: 100_000) { dropped in
                let text = "\(dropped) scan \(dropped == 1 ? "event" : "events") dropped: output too slow"
                if json { return Array("{\"event\":\"dropped\",\"count\":\(dropped)}\n".utf8) }
                return Array("-- \(text)\n".utf8)
            }
            let outcome: Result<Void, any Error> = await withTimeLimit(seconds: timeout) {
                var distinct = Set<String>()
                for try await discovery in session.discoveries {
                    let line = json
                        ? DeviceOutput.json(discovery.device, adapter: adapter.name, event: discovery.kind.rawValue).render()
                        : DeviceOutput.text(discovery.device, event: discovery.kind.rawValue)
                    guard queue.line(line) != .closed else { return }  // stdout closed: stop quietly
                    distinct.insert(discovery.device.address)
                    if let count, distinct.count >= count { return }
                }
            }
            _ = await uncancellable { try? await session.stop() }
            await queue.finished()
            if queue.readerGone { throw CLIFailure(.brokenPipe, "") }
            try outcome.get()
        }
    }
}

/// Runs `body` until it returns, throws, or `seconds` pass (then it is
/// cancelled and the result is success: the time limit is a normal end).
func withTimeLimit(seconds: Double?, _ body: @escaping @Sendable () async throws -> Void) async -> Result<Void, any Error> {
    let outcome: @Sendable () async -> Result<Void, any Error> = {
        do {
            try await body()
            return .success(())
        } catch {
            return .failure(error)
        }
    }
    guard let seconds else { return await outcome() }
    return await firstValue(within: .seconds(seconds), outcome) ?? .success(())
}
