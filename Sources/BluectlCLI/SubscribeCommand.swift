import ArgumentParser
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `bluectl subscribe DEVICE CHARACTERISTIC...`
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Print every notification or indication of one or more characteristics as it arrives.",
        discussion: """
            One line per value (time, characteristic, value), written in arrival order. Runs until \
            --count values, --duration, Ctrl-C or SIGTERM; StopNotify is called on every exit. Exits 74 \
            with a message if the device disconnects, unless --reconnect. --timeout bounds finding, \
            connecting and subscribing (each attempt, with --reconnect). A reader that stops reading \
            (`| head -1`) ends bluectl quietly with status 141 after the same clean-up.

            DEVICE may be a comma-separated list: each device gets the same characteristics, its own \
            connection (connects are made one at a time per adapter: connect_queued event lines), its \
            own --count, reconnects and failures, reported by event lines naming it; every line names \
            its device. One device failing never stops the others; the exit status is then the first \
            failed device's.

            Examples:
              bluectl subscribe AA:BB:CC:DD:EE:FF heart_rate_measurement --count 10
              bluectl subscribe HR-1,HR-2 heart_rate_measurement --json | jq .decoded.bpm
              bluectl subscribe AA:BB:CC:DD:EE:FF 2a37 --reconnect --restore-id hr --json
            """)

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: "Address, D-Bus path, or name; or several, comma-separated (may be left out with a saved --restore-id).",
              completion: deviceCompletion)
    var device: String?

    @Argument(help: "UUIDs, SIG names, D-Bus paths or handle:N.")
    var characteristics: [String] = []

    @Option(name: .customLong("service"), help: ArgumentHelp("Only within this service.", valueName: "UUID"))
    var serviceText: String?

    /// Unconditional: "--count -5" reaches validation and is rejected by name.
    @Option(parsing: .unconditional, help: ArgumentHelp("Stop after this many values (all characteristics together; of each device).", valueName: "N"))
    var count: Int?

    @Option(name: .customLong("duration"), parsing: .unconditional, help: ArgumentHelp("Stop after this many seconds of notifications.", valueName: "SECONDS"))
    var durationText: String?

    @Option(help: ArgumentHelp("hex (hex + ASCII), utf8, raw, json or decoded.", valueName: "FORMAT"))
    var format: ValueFormat?

    @Flag(help: "One JSON object per value: time, device, characteristic, value (hex), decoded when known.")
    var json = false

    @Flag(help: """
        Survive the device going away, bluetoothd restarting and the adapter powering off: reconnect, \
        subscribe again, and report the gap as event lines (disconnected, reconnected).
        """)
    var reconnect = false

    @Option(name: .customLong("restore-id"), help: ArgumentHelp("""
        Keep what this subscription is doing under $XDG_STATE_HOME/bluectl/NAME.json; a later run with \
        the same NAME (DEVICE and CHARACTERISTIC may then be left out) first reports what it restored.
        """, valueName: "NAME"))
    var restoreID: String?

    @Option(name: .customLong("notify-via"), help: ArgumentHelp("""
        notify: StartNotify, a D-Bus signal per value (BlueZ never drops one). acquire: \
        AcquireNotify, values over a socket (cheaper; bluetoothd drops values silently when the socket \
        is full: see --check-sequence).
        """, valueName: "notify|acquire"))
    var notifyVia: NotifyVia = .notify

    @Option(name: .customLong("check-sequence"), help: ArgumentHelp("""
        Values start with a little-endian sequence number of this width: report gaps, late and \
        repeated values as event lines, and a summary on stderr.
        """, valueName: "u8|u16|u32"))
    var checkSequence: SequenceWidth?

    @Option(name: .customLong("queue"), parsing: .unconditional, help: ArgumentHelp(
        "Values waiting for a slow stdout at most; beyond that they are dropped and counted.",
        valueName: "N"))
    var queueCapacity: Int = 100_000

    func validate() throws {
        if device != nil, characteristics.isEmpty { throw ValidationError("give at least one CHARACTERISTIC") }
        if device == nil, restoreID == nil { throw ValidationError("give DEVICE and CHARACTERISTIC (or --restore-id NAME with saved state)") }

        for text in characteristics { _ = try parseSelector(text, kind: .characteristic, what: "CHARACTERISTIC") }
        if let serviceText { _ = try parseServiceUUID(serviceText, option: "--service") }
        if let count, count < 1 { throw ValidationError("invalid --count \"\(count)\": expected 1 or more") }
        if let durationText { _ = try parseSeconds(durationText, option: "--duration") }
        if !(1...10_000_000).contains(queueCapacity) {
            throw ValidationError("invalid --queue \"\(queueCapacity)\": expected 1 to 10000000")
        }
        if let restoreID {
            do { _ = try RestoreStore(identifier: restoreID) } catch { throw ValidationError("\(error)") }
        }
    }

    func run() async throws {
        let store = try restoreID.map { try RestoreStore(identifier: $0) }
        let restored: CentralRestoreState?
        do {
            restored = try store?.load()
        } catch {
            throw CLIFailure(.dataError, "\(error)")
        }
        let target = try SubscriptionTarget(device: device, characteristics: characteristics, service: serviceText,
                                            adapter: adapterOptions.adapter, restored: restored, restoreID: restoreID)
        var adapterOptions = self.adapterOptions
        if adapterOptions.adapter == nil { adapterOptions.choice.adapter = target.adapter }
        let format = chosenFormat(format, json: json)
        let several = target.devices.count > 1
        if several, format == .raw { throw rawTakesOneDevice }
        // --timeout bounds each set-up; the notifications then run until count/duration/signal.
        var streamOptions = options
        streamOptions.deadline.text = String(31_536_000)
        let settings = SubscribeJob.Settings(
            target: target, selectors: try target.characteristics.map { try parseSelector($0, kind: .characteristic, what: "CHARACTERISTIC") },
            service: try target.service.map { try parseServiceUUID($0, option: "--service") }, options: options,
            reconnect: reconnect, count: count, notifyVia: notifyVia, sequenceWidth: checkSequence?.width)
        let duration = try durationText.map { try parseSeconds($0, option: "--duration") }
        let queue = SubscribeOutput.queue(format: format, capacity: queueCapacity)
        let outputs = target.devices.map { SubscribeOutput(format: format, device: deviceLabel($0), queue: queue, namesDevice: several) }
        let recorder = RestoreRecorder(store: store, target: target)
        if let restored, let restoreID { outputs[0].reportRestored(restored, id: restoreID) }
        let summaries = SequenceSummaries()
        let outcome: Result<Void, any Error>
        do {
            try await runDevicesCommand(adapterOptions: adapterOptions, options: streamOptions,
                                        what: "subscribe to \(target.characteristics.joined(separator: " ")) of \(target.devices.joined(separator: ","))",
                                        devices: target.devices) { sessions, _ in
                let central = sessions[0].central
                let jobs = zip(target.devices, outputs).map { device, output in
                    SubscribeJob(device: device, settings: settings, output: output, recorder: recorder, central: central)
                }
                defer { queue.close() }   // the writer writes on while the clean-up (StopNotify, Disconnect) runs
                // However the streams end (a signal too), each device's sequence summary is kept.
                let streamed: Result<Void, any Error>
                do {
                    try await Self.stream(jobs, sessions: sessions, queue: queue, duration: duration)
                    streamed = .success(())
                } catch {
                    streamed = .failure(error)
                }
                for job in jobs {
                    for (uuid, summary) in await job.sequenceSummaries() {
                        await summaries.add("sequence check of \(uuid)\(several ? " on \(job.output.device)" : ""): \(summary)")
                    }
                }
                try streamed.get()
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        // What is queued is written (after a signal: for at most 0.3 s of the
        // 2 s allowed), then each device's sequence summary.
        let limit = SignalScope.interrupted ? Deadline(after: .milliseconds(300)) : .none
        let readerGone = await limit.run(shielded: true) { await queue.finish() } ?? false
        for line in await summaries.lines { Output.error(line) }
        await recorder.saveAll(state: .disconnected, running: false)
        try outcome.get()
        if readerGone { throw CLIFailure(.brokenPipe, "") }
    }

    /// Every device's job at once, until each ends; the reader going away
    /// ends them all, and the watchdog pings from the first subscription on.
    private static func stream(_ jobs: [SubscribeJob], sessions: [DeviceSession], queue: OutputQueue, duration: Double?) async throws {
        let (subscribed, firstSubscribed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let central = sessions[0].central
        try await withThrowingTaskGroup(of: Void.self) { helpers in
            // systemd's watchdog, once the first device is subscribed (after READY=1), until the end.
            helpers.addTask {
                for await _ in subscribed {
                    await ServiceNotifier.runWatchdog(central: central)
                    return
                }
            }
            // A reader gone ends every device's stream, not only the one whose value found it gone.
            helpers.addTask {
                if await queue.readerGone() { for job in jobs { job.end(.readerGone) } }
            }
            defer { helpers.cancelAll() }
            try await forEachDevice(jobs.map(\.device), sessions: sessions, json: jobs[0].output.format == .json, what: "notifications",
                                    report: { device, shown, failure in
                                        jobs.first { $0.output.device == device }?.reportFailure(failure, shown: shown)
                                    }) { device, session in
                guard let job = jobs.first(where: { $0.device == device }) else { return }   // one job per device, by construction
                try await job.run(session, duration: duration) { firstSubscribed.yield() }
            }
        }
    }
}

/// The `--check-sequence` summaries, kept until the output is written.
private actor SequenceSummaries {
    private(set) var lines: [String] = []
    func add(_ line: String) { lines.append(line) }
}

enum NotifyVia: String, ExpressibleByArgument, Sendable, CaseIterable {
    case notify, acquire
}

struct SequenceWidth: ExpressibleByArgument, Sendable {
    let width: SequenceTracker.Width
    init?(argument: String) {
        guard let width = SequenceTracker.Width(name: argument) else { return nil }
        self.width = width
    }
    static var allValueStrings: [String] { ["u8", "u16", "u32"] }
}

