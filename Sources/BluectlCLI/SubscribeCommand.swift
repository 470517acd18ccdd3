import ArgumentParser
import BluectlCore

/// `bluectl subscribe DEVICE CHARACTERISTIC...`
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Print every notification or indication of one or more characteristics as it arrives.",
        discussion: """
            One line per value, flushed (time, characteristic, value). Runs until --count values, \
            --duration, Ctrl-C or SIGTERM; StopNotify is called on every exit. Exits 74 with a \
            message if the device disconnects. --timeout bounds finding and connecting.
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address, D-Bus path, or name.")
    var device: String

    @Argument(help: "UUIDs, SIG names, D-Bus paths or handle:N.")
    var characteristics: [String]

    @Option(name: .customLong("service"), help: ArgumentHelp("Only within this service.", valueName: "UUID"))
    var serviceText: String?

    @Option(help: ArgumentHelp("Stop after this many values (all characteristics together).", valueName: "N"))
    var count: Int?

    @Option(name: .customLong("duration"), help: ArgumentHelp("Stop after this many seconds of notifications.", valueName: "SECONDS"))
    var durationText: String?

    @Option(help: ArgumentHelp("hex (hex + ASCII), utf8, raw, json or decoded.", valueName: "FORMAT"))
    var format: ValueFormat?

    @Flag(help: "One JSON object per value: time, device, characteristic, value (hex), decoded when known.")
    var json = false

    func validate() throws {
        if characteristics.isEmpty { throw ValidationError("give at least one CHARACTERISTIC") }
        for text in characteristics { _ = try parseSelector(text, kind: .characteristic, what: "CHARACTERISTIC") }
        if let serviceText { _ = try parseServiceUUID(serviceText, option: "--service") }
        if let count, count < 1 { throw ValidationError("invalid --count \"\(count)\": expected 1 or more") }
        if let durationText { _ = try parseSeconds(durationText, option: "--duration") }
    }

    func run() async throws {
        let selectors = try characteristics.map { try parseSelector($0, kind: .characteristic, what: "CHARACTERISTIC") }
        let service = try serviceText.map { try parseServiceUUID($0, option: "--service") }
        let duration = try durationText.map { try parseSeconds($0, option: "--duration") }
        let (device, options, count) = (self.device, self.options, self.count)
        let format = chosenFormat(self.format, json: json)
        // --timeout bounds the set-up; the notifications then run until count/duration/signal.
        var setupOptions = options
        setupOptions.timeoutText = nil
        let setupSeconds = options.timeout
        try await runDeviceCommand(adapterOptions: adapterOptions, options: setupOptions.withTimeout(31_536_000),
                                   what: "subscribe to \(characteristics.joined(separator: " ")) of \(device)") { session, _ in
            let deadline = Deadline(seconds: setupSeconds)
            let setup: (Peripheral, [NotificationSession]) = try await withSetupDeadline(deadline, what: "subscribe set-up") {
                let peripheral = try await session.find(device, deadline: deadline)
                await session.registerAgent(options.agent, for: peripheral)
                try await session.connect(peripheral, options: options, deadline: deadline)
                var chars: [GattCharacteristic] = []
                for selector in selectors {
                    let chr = try peripheral.characteristic(selector, service: service)
                    if !chars.contains(where: { $0.path == chr.path }) { chars.append(chr) }
                }
                var sessions: [NotificationSession] = []
                for chr in chars {
                    let s = try await peripheral.subscribe(to: chr)
                    session.keep(s)
                    sessions.append(s)
                }
                return (peripheral, sessions)
            }
            let (peripheral, sessions) = setup
            let outcome = await withTimeLimit(seconds: duration) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    let (merged, input) = AsyncThrowingStream<(GattCharacteristic, [UInt8]), any Error>.makeStream()
                    for s in sessions {
                        group.addTask {
                            do {
                                for try await value in s.values { input.yield((s.characteristic, value)) }
                                input.finish(throwing: CentralError.disconnected("notifications of \(ValueText.label(s.characteristic.uuid)) ended"))
                            } catch {
                                input.finish(throwing: error)
                            }
                        }
                    }
                    var received = 0
                    for try await (chr, value) in merged {
                        guard Self.print(value, chr: chr, device: peripheral.identifier, format: format) else { break }
                        received += 1
                        if let count, received >= count { break }
                    }
                    group.cancelAll()
                }
            }
            try outcome.get()
        }
    }

    static func print(_ value: [UInt8], chr: GattCharacteristic, device: String, format: ValueFormat?) -> Bool {
        switch format {
        case .json:
            var line = JSONLine()
            line.add("time", ValueText.timestamp())
            line.add("device", device)
            line.add("characteristic", chr.uuid.uuidString)
            ValueText.addValue(value, uuid: chr.uuid, to: &line)
            return Output.line(line.render())
        case .raw:
            return ValueText.writeRaw(value)
        default:
            return Output.line("\(ValueText.timestamp())  \(ValueText.label(chr.uuid))  \(ValueText.text(value, uuid: chr.uuid, format: format))")
        }
    }
}

extension DeviceCommandOptions {
    func withTimeout(_ seconds: Double) -> DeviceCommandOptions {
        var copy = self
        copy.timeoutText = String(seconds)
        return copy
    }
}

/// Runs `body` within `deadline`; throws `CentralError.timeout` when it passes first.
func withSetupDeadline<T: Sendable>(_ deadline: Deadline, what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try? await Task.sleep(until: deadline.end, clock: .continuous)
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        guard let value = first else { throw CentralError.timeout(what) }
        return value
    }
}
