import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import BluectlCore

/// `bluectl scan`: discover advertising devices.
struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Scan for advertising devices and print each one as it is found.",
        discussion: """
            Runs until --timeout, --count or Ctrl-C; stops the discovery it started.

            Sensor advertisements are decoded (BTHome v2, Ruuvi, Xiaomi and others: docs/sensors.md): JSON's \
            "sensor" object, the text line's short summary (each value and its unit); a frame that gives no reading keeps \
            its hex and says why ("sensor_error"). Encrypted sensors' keys: --keys FILE, else \
            $XDG_CONFIG_HOME/bluectl/keys.json (~/.config/bluectl/keys.json), else /etc/bluectl/keys.json, a JSON \
            object {"A4:C1:38:44:55:66": "<32 hex digits>"} only its owner may read (exit 78 otherwise).

            Examples:
              bluectl scan --timeout 10
              bluectl scan --json --service heart_rate --rssi -80 --count 1
              bluectl scan --json --duplicates --sensors --keys ~/sensor-keys.json
            """)

    @OptionGroup var adapterOptions: AdapterOptions

    @Option(name: .customLong("service"), help: ArgumentHelp("Only devices advertising this service (repeatable): 180d, heart_rate, or a 128-bit UUID.", valueName: "UUID"))
    var serviceTexts: [String] = []

    @Option(help: ArgumentHelp("Only devices whose name contains this (case-insensitive).", valueName: "SUBSTRING"))
    var name: String?

    /// Unconditional: "-70" is a value here, not an option.
    @Option(parsing: .unconditional, help: ArgumentHelp("Only devices at least this strong, in dBm (-127 to 20).", valueName: "MIN"))
    var rssi: Int?

    @Flag(help: "Report every advertisement, not only the first of each device.")
    var duplicates = false

    @Option(name: .customLong("timeout"), parsing: .unconditional, help: ArgumentHelp("Stop after this many seconds.", valueName: "SECONDS"))
    var timeoutText: String?

    /// Unconditional: "--count -1" reaches validation and is refused by name.
    @Option(parsing: .unconditional, help: ArgumentHelp("Stop after this many distinct devices.", valueName: "N"))
    var count: Int?

    @Option(help: ArgumentHelp("le, bredr or auto.", valueName: "TRANSPORT"))
    var transport: String = "le"

    @Flag(help: "One JSON object per line.")
    var json = false

    @Flag(help: "Only devices advertising a sensor format: a reading, or why their frame gives none.")
    var sensors = false

    @Option(name: .customLong("keys"), help: ArgumentHelp(
        "The keys of encrypted sensors, a JSON file (default: $XDG_CONFIG_HOME/bluectl/keys.json, /etc/bluectl/keys.json).",
        valueName: "FILE"), completion: .file(extensions: ["json"]))
    var keysPath: String?

    @Flag(name: .customLong("no-decode"), help: "Leave sensor advertisements undecoded (hex only; no keys file is read).")
    var noDecode = false

    @Flag(inversion: .prefixedNo, help: """
        A table updated in place, strongest first (default on a terminal without --json); \
        --no-live prints a line per event as in a pipe.
        """)
    var live: Bool?

    @Option(name: .customLong("age-out"), parsing: .unconditional, help: ArgumentHelp(
        "In the live table, drop a device not heard for this many seconds.", valueName: "SECONDS"))
    var ageOut: Double = 30

    @Option(name: .customLong("restore-id"), help: ArgumentHelp("""
        Keep this scan's filter under $XDG_STATE_HOME/bluectl/NAME.json; a later scan with the same NAME \
        and no filter options first reports the saved filter, then scans with it.
        """, valueName: "NAME"))
    var restoreID: String?

    /// Whether any filter option was given (else a saved one may be restored).
    var hasFilterOptions: Bool { !serviceTexts.isEmpty || name != nil || rssi != nil || duplicates || transport != "le" }

    func validate() throws {
        _ = try services()
        if let rssi, !(-127...20).contains(rssi) {
            throw ValidationError("invalid --rssi \"\(rssi)\": expected -127 to 20 dBm")
        }
        if let timeoutText { _ = try parseSeconds(timeoutText, option: "--timeout") }
        if let count, count < 1 { throw ValidationError("invalid --count \"\(count)\": expected 1 or more") }
        if live == true, json { throw ValidationError("--live and --json cannot be used together") }
        if noDecode, sensors || keysPath != nil { throw ValidationError("--no-decode cannot be used with --sensors or --keys") }
        if live == true, isatty(1) == 0 { throw ValidationError("--live needs a terminal on stdout (without it, scan prints a line per event)") }
        if !(ageOut.isFinite && ageOut > 0) { throw ValidationError("invalid --age-out \"\(ageOut)\": expected a positive number of seconds") }
        if let restoreID {
            do { _ = try RestoreStore(identifier: restoreID) } catch { throw ValidationError("\(error)") }
        }
        _ = try scanTransport()
    }

    /// --transport as the library names it.
    func scanTransport() throws -> ScanTransport {
        guard let value = ScanTransport(rawValue: transport) else {
            throw ValidationError("invalid --transport \"\(TextSafety.escapedForMessage(transport))\": expected le, bredr or auto")
        }
        return value
    }

    static func state(_ options: ScanOptions, adapter: String?, running: Bool) -> CentralRestoreState {
        CentralRestoreState(
            command: "scan", adapter: adapter,
            scan: .init(services: options.services.map(\.uuidString), rssi: options.rssi, name: options.nameContains,
                        duplicates: options.duplicates, transport: options.transport.rawValue),
            running: running)
    }

    /// "restored NAME (saved …): filter …" as a text or JSON line.
    static func restoredLine(_ saved: CentralRestoreState, filter: CentralRestoreState.ScanFilter, id: String,
                             used: Bool, json: Bool) -> String {
        EventLine.scanRestored(saved, filter: filter, id: id, used: used).record().line(json: json) ?? ""
    }

    /// One discovery's line with its line break, JSON or text, as `run` queues
    /// it (measured by Benchmarks/).
    static func line(_ discovery: Discovery, adapter: String, json: Bool) -> [UInt8] {
        DeviceRecord(device: discovery.device, adapter: adapter, event: discovery.kind.rawValue, sensor: discovery.sensor)
            .lineBytes(json: json, capacity: 320)
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
        options.transport = try scanTransport()
        options.decodesSensors = !noDecode
        options.sensorsOnly = sensors
        if !noDecode { options.sensorKeys = try SensorKeysFile.load(keysPath, warn: { Output.error($0) }) }
        let store = try restoreID.map { try RestoreStore(identifier: $0) }
        var restoredLine: String?
        if let store, let restoreID {
            let saved: CentralRestoreState?
            do { saved = try store.load() } catch { throw CLIFailure(.dataError, "\(error)") }
            if let saved, let filter = saved.scan {
                guard saved.command == "scan" else {
                    throw CLIFailure(.usage, "--restore-id \(restoreID) holds the state of `bluectl \(saved.command)`, not of scan")
                }
                if !hasFilterOptions {
                    guard let transport = ScanTransport(rawValue: filter.transport) else {
                        throw CLIFailure(.dataError, "--restore-id \(restoreID): the saved transport \"\(TextSafety.escapedForMessage(filter.transport))\" is not le, bredr or auto")
                    }
                    options.transport = transport
                    options.services = try filter.services.map { text in
                        do { return try BluetoothUUID(text, kind: .service) } catch {
                            throw CLIFailure(.dataError, "--restore-id \(restoreID): the saved service is not a UUID: \(error)")
                        }
                    }
                    options.rssi = filter.rssi
                    options.nameContains = filter.name
                    options.duplicates = filter.duplicates
                }
                restoredLine = Self.restoredLine(saved, filter: filter, id: restoreID, used: !hasFilterOptions, json: json)
            }
            try store.save(Self.state(options, adapter: adapterOptions.adapter, running: true))
        }
        let timeout = try timeoutText.map { try parseSeconds($0, option: "--timeout") }
        let liveAgeOut: Double? = (live ?? (isatty(1) == 1)) && !json ? ageOut : nil
        // The live table's SEEN column and ageing need every change BlueZ reports, not only the
        // first sighting (BlueZ signals nothing for an advertisement that changed nothing).
        var withUpdates = options
        withUpdates.duplicates = options.duplicates || liveAgeOut != nil
        let sessionOptions = withUpdates
        let (json, count, adapterOptions, scanOptions) = (self.json, self.count, self.adapterOptions, options)
        let (restored, saveStore) = (restoredLine, store)
        try await SignalScope.run {
            let (central, adapter) = try await adapterOptions.open()
            defer { central.close() }
            // Lines wait in a bounded queue for a slow reader (dropped ones are counted and reported).
            let queue = OutputQueue(capacity: 100_000) { dropped in
                EventLine.dropped(dropped, of: "scan event").record().lineBytes(json: json)
            }
            if let restored { queue.line(restored) }
            // A line per event is rendered and queued where BlueZ's change is applied
            // (the central's loop), with no hand-over per event; the live table takes
            // the stream. The reader going away ends the scan (below).
            let adapterName = adapter.name
            let printLine: ScanSession.DiscoverySink = { discovery in
                queue.enqueue(Self.line(discovery, adapter: adapterName, json: json))
            }
            // The live loop keeps its own time and count; otherwise the scan ends by itself.
            let session = try await central.startScan(
                adapter: adapter, options: sessionOptions,
                duration: liveAgeOut == nil ? timeout.map { .seconds($0) } : nil,
                limit: liveAgeOut == nil ? count : nil, onDiscovery: liveAgeOut == nil ? printLine : nil)
            let outcome: Result<Void, any Error>
            if let liveAgeOut {
                // The live loop ends at --timeout itself: it must restore the terminal
                // before the process ends.
                await queue.finish()   // the restored line, above the table
                do {
                    try await LiveScanView.run(session.discoveries, adapter: adapter.name, count: count, ageOut: liveAgeOut,
                                               timeout: timeout)
                    outcome = .success(())
                } catch {
                    outcome = .failure(error)
                }
            } else {
                do {
                    // Only ends or fails (printLine has the events), or the reader goes away.
                    try await queue.endingWhenReaderGone { for try await _ in session.discoveries {} }
                    outcome = .success(())
                } catch {
                    outcome = .failure(error)
                }
            }
            _ = await Deadline.none.run(shielded: true) { try? await session.stop() }
            let readerGone = await queue.finish()
            if let saveStore { try? saveStore.save(Self.state(scanOptions, adapter: adapter.name, running: false)) }
            if readerGone { throw CLIFailure(.brokenPipe, "") }
            try outcome.get()
        }
    }
}
