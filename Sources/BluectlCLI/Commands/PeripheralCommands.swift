// The peripheral role: `bluectl serve SPEC.json` and `bluectl advertise`.

import ArgumentParser
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials   // not Foundation: it would link ICU's data into the binary (the .deb grows from 4 to 15 MB)
#else
import Foundation
#endif

/// `bluectl serve SPEC.json`: serve a GATT database until Ctrl-C.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a GATT database described by a JSON file (the peripheral role), until Ctrl-C.",
        discussion: """
            SPEC is a JSON file (docs/peripheral.md describes it in full), e.g.
              {"services": [{"uuid": "heart_rate", "primary": true,
                "characteristics": [{"uuid": "2a37", "flags": ["notify"],
                  "value": "0040", "descriptors": [{"uuid": "2901",
                    "flags": ["read"], "value": "6872"}]}]}]}
            UUIDs are hex or SIG names, values hex, flags as BlueZ names them: read, write, \
            write-without-response, notify, indicate, encrypt-read and the others BlueZ lists. A bad SPEC is refused with \
            its JSON path before anything is registered (exit 65).

            Reads are answered from the current value; each write replaces it and is printed, as are \
            reads, subscriptions and confirmed indications. Each line on stdin, \
            {"characteristic":"2a37","value":"0e5e"} (with "service" when the UUID is served twice), \
            sets a value and notifies or indicates the subscribed centrals. Everything is unregistered \
            on exit (Ctrl-C 130, SIGTERM 143, --timeout 0).

            Examples:
              bluectl serve heart-rate.json --advertise --name my-hr
              sensor-feed | bluectl serve heart-rate.json --advertise --json
              bluectl serve spec.json --adapter hci1 --timeout 60
            """)

    @OptionGroup var adapterOptions: AdapterOptions

    @Argument(help: ArgumentHelp("The GATT database, a JSON file.", valueName: "SPEC"), completion: .file(extensions: ["json"]))
    var spec: String

    @Flag(help: "Also advertise the primary services (and --name) until exit.")
    var advertise = false

    @Option(help: ArgumentHelp("The name to advertise with --advertise (default: the adapter's alias).", valueName: "NAME"))
    var name: String?

    @Option(name: .customLong("timeout"), parsing: .unconditional,
            help: ArgumentHelp("Stop serving after this many seconds (exit 0).", valueName: "SECONDS"))
    var timeoutText: String?

    @Option(parsing: .unconditional,
            help: ArgumentHelp("Fail a read or write nobody answered after this many seconds (default 10).", valueName: "SECONDS"))
    var requestDeadline: String?

    @Flag(help: "One JSON object per line.")
    var json = false

    func validate() throws {
        if let timeoutText { _ = try parseSeconds(timeoutText, option: "--timeout") }
        if let requestDeadline { _ = try parseSeconds(requestDeadline, option: "--request-deadline") }
        if name != nil, !advertise { throw ValidationError("--name needs --advertise") }
        if let name { try checkAdvertisedName(name) }
    }

    func run() async throws {
        let services = try Self.readSpec(spec)
        let (adapterOptions, advertise, name, json) = (self.adapterOptions, self.advertise, self.name, self.json)
        let timeout = try timeoutText.map { try parseSeconds($0, option: "--timeout") }
        let deadline = try requestDeadline.map { try parseSeconds($0, option: "--request-deadline") } ?? 10
        try await withPeripheralManager(adapterOptions, requestDeadline: deadline) { manager, output in
            try await serve(manager, services: services, advertise: advertise, name: name, json: json, timeout: timeout, output: output)
        }
    }

    /// The SPEC file's services; exit 64 when it cannot be read, 65 when it is not a valid SPEC.
    static func readSpec(_ path: String) throws -> [MutableService] {
        let bytes: [UInt8]
        switch WriteCommand.readFile(path) {   // strerror's words, as for write's --file
        case .success(let read): bytes = read
        case .failure(let reason):
            throw CLIFailure(.usage, "cannot read SPEC \(TextSafety.escapedForMessage(path)): \(reason.text)")
        }
        do {
            return try ServeSpec.parse(bytes)
        } catch {
            throw CLIFailure(.dataError, "invalid SPEC \(TextSafety.escapedForMessage(path)): \(error)")
        }
    }

    private func serve(_ manager: PeripheralManager, services definitions: [MutableService], advertise: Bool, name: String?,
                       json: Bool, timeout: Double?, output: OutputQueue) async throws {
        var served: [PublishedService] = []
        for definition in definitions { served.append(try await manager.add(definition)) }
        var advertised: AdvertisementData?
        if advertise {
            let data = AdvertisementData(localName: name ?? manager.adapter.alias,
                                         serviceUUIDs: definitions.filter(\.isPrimary).map(\.uuid))
            try await manager.startAdvertising(data)
            advertised = data
        }
        let ready = ServerEventRecord(event: "serving", adapter: manager.adapter, services: served, advertised: advertised)
        output.line(ready.line(json: json) ?? "")
        let all = served
        let feed = StandardInputFeed(central: manager.central, apply: { line, number in
            Self.apply(line, number: number, to: manager, served: all, output: output)
        }, waitForRoom: { await manager.waitUntilReadyToUpdate() })
        feed.start()
        defer { feed.stop() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Self.printEvents(manager, json: json, output: output) }
            if let timeout {
                group.addTask { try await Task.sleep(for: .seconds(timeout)) }
            }
            // The first to end: the timeout, or the event stream (bus lost).
            _ = try await group.next()
            group.cancelAll()
        }
    }

    /// One line per event, until cancelled.
    private static func printEvents(_ manager: PeripheralManager, json: Bool, output: OutputQueue) async throws {
        for await event in manager.events {
            guard let record = ServerEventRecord(event, adapter: manager.adapter) else { continue }
            output.line(record.line(json: json) ?? "")
        }
        if !Task.isCancelled { throw CLIFailure(.unavailable, "lost the system bus") }
    }

    /// Applies a value update read from stdin (on the loop); a bad line is
    /// reported on stderr and skipped. False: no room now (the bus is
    /// backed up), offered again once there is, so no update is dropped.
    private static func apply(_ line: String, number: Int, to manager: PeripheralManager, served: [PublishedService],
                              output: OutputQueue) -> Bool {
        if line.allSatisfy(\.isWhitespace) { return true }
        let update: ServeSpec.Update
        do {
            update = try ServeSpec.update(line, served: served)
        } catch {
            output.notice("stdin line \(number): \(error)")
            return true
        }
        return manager.updateValue(update.value, for: update.characteristic)
    }
}

/// `bluectl advertise`: advertise until Ctrl-C or --duration.
struct AdvertiseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise (the peripheral role): a name, services, manufacturer and service data, until Ctrl-C.",
        discussion: """
            bluetoothd puts --name in the scan response and the rest in the advertising data, which \
            must fit the adapter's limit (31 bytes without extended advertising, including 3 for the \
            flags); what does not fit is refused with the size of each part (exit 64).

            --bthome NAME=VALUE makes this machine a BTHome v2 sensor (service data of fcd2, \
            bthome.io): any object by its spec name (temperature, humidity, door, button, text and the rest; \
            docs/sensors.md lists them), repeatable; --bthome-key encrypts the frames. Each line on \
            stdin, {"temperature":21.7,"button":"press"}, changes values: the packet id (and the \
            counter, when encrypted) advances and bluetoothd refreshes the advertisement in place.

            Examples:
              bluectl advertise --name my-sensor --service heart_rate --tx-power
              bluectl advertise --broadcast --service-data feaa=10f8036578616d706c6507
              bluectl advertise --bthome temperature=21.5 --bthome humidity=40
            """)

    @OptionGroup var adapterOptions: AdapterOptions

    @Option(help: ArgumentHelp("The local name (in the scan response).", valueName: "NAME"))
    var name: String?

    @Option(name: .customLong("service"), help: ArgumentHelp("A service UUID to advertise (repeatable).", valueName: "UUID"))
    var services: [String] = []

    @Option(name: .customLong("manufacturer"), help: ArgumentHelp(
        "Manufacturer data: company id (hex) = data (hex), e.g. 0xffff=0102 (repeatable).", valueName: "ID=HEX"))
    var manufacturer: [String] = []

    @Option(name: .customLong("service-data"), help: ArgumentHelp("Service data: UUID = data (hex), e.g. feaa=10f8 (repeatable).",
                                                                  valueName: "UUID=HEX"))
    var serviceData: [String] = []

    @Option(parsing: .unconditional, help: ArgumentHelp("GAP appearance, e.g. 0x0341 (heart rate belt).", valueName: "N"))
    var appearance: String?

    @Option(name: .customLong("bthome"), help: ArgumentHelp(
        "A BTHome v2 value to advertise, e.g. temperature=21.5 (repeatable); stdin JSON lines change them.", valueName: "NAME=VALUE"))
    var bthome: [String] = []

    @Option(name: .customLong("bthome-key"), help: ArgumentHelp("Encrypt the BTHome frames with this key.", valueName: "32HEX"))
    var bthomeKey: String?

    @Flag(name: .customLong("tx-power"), help: "Include the TX power.")
    var txPower = false

    @Flag(help: "Not connectable (BlueZ's broadcast type).")
    var broadcast = false

    @Flag(name: .customLong("no-discoverable"), help: "Without the general discoverable flag.")
    var notDiscoverable = false

    @Option(name: .customLong("duration"), parsing: .unconditional,
            help: ArgumentHelp("Stop after this many seconds (exit 0).", valueName: "SECONDS"))
    var durationText: String?

    @Flag(help: "One JSON object per line.")
    var json = false

    func validate() throws {
        if let durationText { _ = try parseSeconds(durationText, option: "--duration") }
        _ = try data()
        // the values and the key, checked before anything is registered (the address comes later;
        // an encrypted frame needs libcrypto, which `run` looks for first: exit 69, not 64)
        if bthomeKey == nil || LibCrypto.unavailableReason == nil { _ = try bthomeEncoder(address: BluetoothAddress(uint64: 0)) }
    }

    /// The advertisement the options describe.
    func data() throws -> AdvertisementData {
        if let name { try checkAdvertisedName(name) }
        var data = AdvertisementData(localName: name, includesTxPower: txPower, isConnectable: !broadcast,
                                     isDiscoverable: !notDiscoverable)
        data.serviceUUIDs = try services.map { try parseServiceUUID($0, option: "--service") }
        for entry in manufacturer {
            let (key, bytes) = try Self.pair(entry, option: "--manufacturer")
            let digits = key.lowercased().hasPrefix("0x") ? String(key.dropFirst(2)) : key
            guard !digits.isEmpty, digits.count <= 4, let id = UInt16(digits, radix: 16) else {
                throw ValidationError("invalid --manufacturer \"\(TextSafety.escapedForMessage(entry))\": the company id is 16-bit hex, e.g. 0x004c")
            }
            guard data.manufacturerData[id] == nil else { throw ValidationError("--manufacturer \(key) given twice") }
            data.manufacturerData[id] = bytes
        }
        for entry in serviceData {
            let (key, bytes) = try Self.pair(entry, option: "--service-data")
            let uuid = try parseServiceUUID(key, option: "--service-data")
            guard data.serviceData[uuid] == nil else { throw ValidationError("--service-data \(key) given twice") }
            data.serviceData[uuid] = bytes
        }
        if let appearance {
            let digits = appearance.lowercased().hasPrefix("0x") ? (String(appearance.dropFirst(2)), 16) : (appearance, 10)
            guard let value = UInt16(digits.0, radix: digits.1) else {
                throw ValidationError("invalid --appearance \"\(TextSafety.escapedForMessage(appearance))\": expected 0 to 65535 (or hex 0x0341)")
            }
            data.appearance = value
        }
        return data
    }

    /// "KEY=HEX" → (KEY, bytes).
    static func pair(_ text: String, option: String) throws -> (String, [UInt8]) {
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty else {
            throw ValidationError("invalid \(option) \"\(TextSafety.escapedForMessage(text))\": expected KEY=HEX")
        }
        do {
            return (String(parts[0]), parts[1].isEmpty ? [] : try ByteFormats.parseHex(String(parts[1])))
        } catch {
            throw ValidationError("invalid \(option) \"\(TextSafety.escapedForMessage(text))\": \(error)")
        }
    }

    func run() async throws {
        if bthomeKey != nil, let reason = LibCrypto.unavailableReason { throw CLIFailure(.unavailable, reason + " (--bthome-key's encryption)") }
        let options = try self.data()
        let (adapterOptions, json) = (self.adapterOptions, self.json)
        let duration = try durationText.map { try parseSeconds($0, option: "--duration") }
        let command = self
        try await withPeripheralManager(adapterOptions) { manager, output in
            var data = options
            let encoder = try command.bthomeEncoder(address: manager.adapter.address)
            if let encoder { data.serviceData[BTHome.serviceUUID] = encoder.serviceData }
            let advertised = data
            let advertisement = try await manager.startAdvertising(data)
            var record = ServerEventRecord(event: "advertising", adapter: manager.adapter, services: [], advertised: data)
            record.sensor = encoder?.reading
            output.line(record.line(json: json) ?? "")
            try await Self.wait(manager, duration: duration, json: json, output: output) {
                guard let encoder else { return }
                try await Self.feedBTHome(manager, advertisement, data: advertised, encoder: encoder, json: json, output: output)
            }
        }
    }

    /// Until the duration passes or bluetoothd stops the advertisement (exit 1: it did not say
    /// why); `alongside` runs meanwhile (stdin's BTHome values).
    private static func wait(_ manager: PeripheralManager, duration: Double?, json: Bool, output: OutputQueue,
                             alongside: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in manager.events {
                    if let record = ServerEventRecord(event, adapter: manager.adapter) {
                        output.line(record.line(json: json) ?? "")
                    }
                    if case .advertisingStopped = event {
                        throw CLIFailure(.failure, "bluetoothd stopped the advertisement (the adapter was powered off or removed)")
                    }
                }
            }
            if let duration { group.addTask { try await Task.sleep(for: .seconds(duration)) } }
            group.addTask {
                try await alongside()
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }   // ending is for the others
            }
            _ = try await group.next()
            group.cancelAll()
        }
    }
}

/// Runs `body` with a peripheral manager on the chosen adapter and stdout
/// behind an `OutputQueue`, under SignalScope; whatever ends it (a signal,
/// an error, stdout's reader going away: 141, the end), everything the
/// manager registered is unregistered before the process exits, and what is
/// queued is written (after a signal, for at most 0.3 s).
func withPeripheralManager(_ adapterOptions: AdapterOptions, requestDeadline: Double = 10,
                           _ body: @escaping @Sendable (PeripheralManager, OutputQueue) async throws -> Void) async throws {
    let output = OutputQueue()
    let outcome: Result<Void, any Error>
    do {
        try await SignalScope.run {
            let (central, adapter) = try await adapterOptions.open()
            let manager = PeripheralManager(central: central, adapter: adapter, requestDeadline: .seconds(requestDeadline))
            let outcome: Result<Void, any Error>
            do {
                try await output.endingWhenReaderGone { try await body(manager, output) }
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            _ = await Deadline.none.run(shielded: true) { await manager.stop() }
            central.close()
            try outcome.get()
        }
        outcome = .success(())
    } catch {
        outcome = .failure(error)
    }
    let limit = SignalScope.interrupted ? Deadline(after: .milliseconds(300)) : .none
    _ = await limit.run(shielded: true) { await output.finish() }
    try outcome.get()
}

/// Refuses a name no advertisement can carry: control characters, or longer than a scan response holds.
func checkAdvertisedName(_ name: String) throws {
    if name.isEmpty { throw ValidationError("invalid --name \"\": empty") }
    if TextSafety.hasControlCharacters(name) {
        throw ValidationError("invalid --name \"\(TextSafety.escapedForMessage(name))\": holds control characters")
    }
    if name.utf8.count > 29 {
        throw ValidationError("invalid --name \"\(TextSafety.escapedForMessage(name))\": \(name.utf8.count) bytes; a scan response holds 29")
    }
}
