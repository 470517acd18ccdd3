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
import Synchronization

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
        let selectors = try target.characteristics.map { try parseSelector($0, kind: .characteristic, what: "CHARACTERISTIC") }
        let service = try target.service.map { try parseServiceUUID($0, option: "--service") }
        let duration = try durationText.map { try parseSeconds($0, option: "--duration") }
        let format = chosenFormat(format, json: json)
        let several = target.devices.count > 1
        if several, format == .raw { throw rawTakesOneDevice }
        let queue = SubscribeOutput.queue(format: format, capacity: queueCapacity)
        let recorder = RestoreRecorder(store: store, target: target)
        let jobs = target.devices.map { device in
            SubscribeJob(device: device, target: target, selectors: selectors, service: service, options: options,
                         reconnect: reconnect, count: count,
                         output: SubscribeOutput(format: format, device: deviceLabel(device), queue: queue, namesDevice: several),
                         recorder: recorder, notifyVia: notifyVia, sequenceWidth: checkSequence?.width)
        }
        // A reader gone ends every device's stream, not only the one whose value found it gone.
        let family = Locked(jobs)
        for job in jobs { job.onReaderGone = { for job in family.withLock({ $0 }) { job.end(.readerGone) } } }
        defer { family.withLock { $0 = [] } }
        if let restored, let restoreID { jobs[0].reportRestored(restored, id: restoreID) }
        // --timeout bounds each set-up; the notifications then run until count/duration/signal.
        var streamOptions = options
        streamOptions.deadline.text = String(31_536_000)
        let drainedOnce = Locked(false)
        let drain: @Sendable () async -> Void = { await Self.drain(queue, jobs: jobs, namingDevices: several, once: drainedOnce) }
        do {
            try await runDevicesCommand(adapterOptions: adapterOptions, options: streamOptions,
                                        what: "subscribe to \(target.characteristics.joined(separator: " ")) of \(target.devices.joined(separator: ","))",
                                        count: jobs.count) { sessions, _ in
                // The watchdog pings once the first device is subscribed (after READY=1), until the end.
                let watchdog = Locked<Task<Void, Never>??>(nil)
                for job in jobs {
                    job.onSubscribed = {
                        watchdog.withLock { started in
                            if started == nil { started = .some(ServiceNotifier.startWatchdog(central: sessions[0].central)) }
                        }
                    }
                }
                defer { watchdog.withLock { $0??.cancel() } }
                // Output first, then the clean-up (StopNotify, Disconnect) after this returns.
                do {
                    try await forEachDevice(target.devices, sessions: sessions, json: format == .json, what: "notifications",
                                            report: { device, shown, failure in
                                                jobs.first { $0.output.device == device }?.reportFailure(failure, shown: shown)
                                            }) { device, session in
                        guard let job = jobs.first(where: { $0.device == device }) else { return }   // one job per device, by construction
                        try await job.run(session, duration: duration)
                    }
                } catch {
                    await drain()
                    throw error
                }
                await drain()
            }
        } catch {
            await drain()
            recorder.saveAll(state: .disconnected, running: false)
            throw error
        }
        await drain()
        recorder.saveAll(state: .disconnected, running: false)
        if queue.readerGone { throw CLIFailure(.brokenPipe, "") }
    }

    /// Writes what is queued (after a signal: for at most 0.3 s of the 2 s
    /// allowed, a stuck stdout must not keep the clean-up from running),
    /// then each device's sequence summary. Once; later calls return at once.
    static func drain(_ queue: OutputQueue, jobs: [SubscribeJob], namingDevices: Bool, once: Locked<Bool>) async {
        guard once.withLock({ done in defer { done = true }; return !done }) else { return }
        let limit: Duration = SignalScope.interrupted ? .milliseconds(300) : .seconds(31_536_000)
        _ = await uncancellable { await firstValue(within: limit) { await queue.finished() } }
        for job in jobs {
            for (uuid, tracker) in job.sequences.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
                Output.error("sequence check of \(uuid)\(namingDevices ? " on \(job.output.device)" : ""): \(tracker.summary)")
            }
        }
    }
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

/// The devices and characteristics to subscribe to: from the command line,
/// or from the saved state of a `--restore-id`.
struct SubscriptionTarget: Sendable {
    var devices: [String]
    var characteristics: [String]
    var service: String?
    var adapter: String?

    init(device: String?, characteristics: [String], service: String?, adapter: String?,
         restored: CentralRestoreState?, restoreID: String?) throws {
        if let device {
            self.devices = try deviceList(device)
            self.characteristics = characteristics
            self.service = service
            self.adapter = adapter
            return
        }
        guard let restored, let first = restored.subscriptions.first else {
            throw CLIFailure(.notFound, "no saved subscription for --restore-id \(restoreID ?? ""): give DEVICE and CHARACTERISTIC")
        }
        guard restored.command == "subscribe" else {
            throw CLIFailure(.usage, "--restore-id \(restoreID ?? "") holds the state of `bluectl \(restored.command)`, not of subscribe")
        }
        var devices: [String] = []
        for entry in restored.subscriptions where !devices.contains(entry.device) { devices.append(entry.device) }
        self.devices = devices
        self.characteristics = restored.subscriptions.filter { $0.device == first.device }.map(\.characteristic)
        self.service = first.service
        self.adapter = adapter ?? restored.adapter
    }
}

/// What `--restore-id` keeps: every device's connection and notification
/// state, saved whole whenever one of them changes.
final class RestoreRecorder: Sendable {
    private let store: RestoreStore?
    private let target: SubscriptionTarget
    /// Per device (as given): its state, whether notifying, its address once known.
    private let entries: Locked<[String: (state: PeripheralState, notifying: Bool, address: String?)]>

    init(store: RestoreStore?, target: SubscriptionTarget) {
        self.store = store
        self.target = target
        entries = Locked([:])
    }

    /// Records `device`'s state and saves. A failure to save is reported, not
    /// fatal: the subscription goes on.
    func save(device: String, state: PeripheralState, notifying: Bool, address: String? = nil) {
        guard store != nil else { return }
        entries.withLock { $0[device] = (state, notifying, address ?? $0[device]?.address) }
        write(running: true)
    }

    /// Every device in `state`, not notifying; `running` false when the process ends.
    func saveAll(state: PeripheralState, running: Bool) {
        guard store != nil else { return }
        entries.withLock { all in
            for device in target.devices { all[device] = (state, false, all[device]?.address) }
        }
        write(running: running)
    }

    private func write(running: Bool) {
        guard let store else { return }
        let now = entries.withLock { $0 }
        let saved = CentralRestoreState(
            command: "subscribe", adapter: target.adapter,
            peripherals: target.devices.map { .init(device: $0, address: now[$0]?.address, state: (now[$0]?.state ?? .disconnected).rawValue) },
            subscriptions: target.devices.flatMap { device in
                target.characteristics.map {
                    .init(device: device, characteristic: $0, service: target.service, notifying: now[device]?.notifying ?? false)
                }
            },
            running: running)
        do {
            try store.save(saved)
        } catch {
            Output.error("\(error)")
        }
    }
}

/// One device's part of `subscribe`: set up (find, connect, StartNotify),
/// stream the values, and with `--reconnect` set up again after every loss.
final class SubscribeJob: Sendable {
    /// The device as given on the command line (or saved).
    let device: String
    let target: SubscriptionTarget
    let selectors: [AttributeSelector]
    let service: BluetoothUUID?
    let options: DeviceCommandOptions
    let reconnect: Bool
    let count: Int?
    let output: SubscribeOutput
    let recorder: RestoreRecorder
    let notifyVia: NotifyVia
    let sequenceWidth: SequenceTracker.Width?
    /// Per characteristic UUID, across reconnects (a gap over a reconnect is real).
    let sequences = Locked<[String: SequenceTracker]>([:])

    /// Values taken (all characteristics, across reconnects), and how the
    /// stream ended once it has: set where the values arrive (`take`), and
    /// passed to the `stream` waiting at the time.
    private struct Progress {
        var received = 0
        var end: StreamEnd?
        var waiting: AsyncStream<StreamEnd>.Continuation?
        /// When the link was lost, until the reconnect is reported: by the
        /// end of the set-up, or by the first value of the new sessions if
        /// that comes first (values flow as soon as StartNotify is answered,
        /// and a value must never come before the line saying it is back).
        var lostAt: ContinuousClock.Instant?
    }
    private let progress = Locked(Progress())
    private let readerGoneHandler = Locked<(@Sendable () -> Void)?>(nil)
    private let subscribedHandler = Locked<(@Sendable () -> Void)?>(nil)

    /// Runs once this job's device is first subscribed (after READY=1).
    var onSubscribed: (@Sendable () -> Void)? {
        get { subscribedHandler.withLock { $0 } }
        set { subscribedHandler.withLock { $0 = newValue } }
    }

    /// Runs when this job finds stdout's reader gone: ends the other devices' jobs too.
    var onReaderGone: (@Sendable () -> Void)? {
        get { readerGoneHandler.withLock { $0 } }
        set { readerGoneHandler.withLock { $0 = newValue } }
    }

    init(device: String, target: SubscriptionTarget, selectors: [AttributeSelector], service: BluetoothUUID?,
         options: DeviceCommandOptions, reconnect: Bool, count: Int?, output: SubscribeOutput, recorder: RestoreRecorder,
         notifyVia: NotifyVia, sequenceWidth: SequenceTracker.Width?) {
        self.device = device
        self.notifyVia = notifyVia
        self.sequenceWidth = sequenceWidth
        self.target = target
        self.selectors = selectors
        self.service = service
        self.options = options
        self.reconnect = reconnect
        self.count = count
        self.output = output
        self.recorder = recorder
    }

    /// Ends the stream (if it has not ended) with `end`.
    func end(_ end: StreamEnd) {
        progress.withLock { p in
            guard p.end == nil else { return }
            p.end = end
            p.waiting?.yield(end)
        }
    }

    /// This device failed (one of several): an event line naming it (`shown`:
    /// its address once found), and on stderr.
    func reportFailure(_ failure: CLIFailure, shown: String) {
        guard !SignalScope.interrupted else { return }
        output.event(.failed(failure, sentence: "failed: \(failure.message)"), device: shown)
        if output.format != .raw, ValueText.stdoutIsTerminal { Output.error("\(shown): \(TextSafety.oneLine(failure.message))") }
    }

    /// How a stretch of streaming ended.
    enum StreamEnd: Sendable {
        case countReached
        case readerGone
        case lost(any Error)
    }

    func run(_ session: DeviceSession, duration: Double?) async throws {
        save(state: .connecting, notifying: false)
        let established = try await setUp(session, first: true)
        save(state: .connected, notifying: true, address: established.0.identifier.description)
        ServiceNotifier.ready(status: "subscribed to \(target.characteristics.joined(separator: ", ")) of \(established.0.identifier)")
        onSubscribed?()
        let outcome = await withTimeLimit(seconds: duration) { [self] in
            var (peripheral, sessions) = established
            while true {
                switch await stream(sessions) {
                case .countReached, .readerGone:
                    return
                case .lost(let error):
                    guard reconnect, Self.policy.isRecoverable(error, afterSuccess: true) else { throw error }
                    let lostAt = ContinuousClock.now
                    let reason = cliFailure(error, what: "notifications").message
                    output.event(.disconnected(reason))
                    ServiceNotifier.status("reconnecting to \(peripheral.identifier): \(reason)")
                    save(state: .disconnected, notifying: false, address: peripheral.identifier.description)
                    for old in session.forgetSessions() { await old.stop() }
                    progress.withLock { $0.lostAt = lostAt }
                    (peripheral, sessions) = try await setUp(session, first: false)
                    progress.withLock { reportReconnected(&$0) }
                    ServiceNotifier.status("subscribed to \(target.characteristics.joined(separator: ", ")) of \(peripheral.identifier)")
                    save(state: .connected, notifying: true, address: peripheral.identifier.description)
                }
            }
        }
        try outcome.get()
    }

    /// Find, connect, StartNotify — each attempt within --timeout; with
    /// --reconnect, attempts go on (0.5 s, 1 s, 2 s … 5 s apart) while the
    /// failure is one that can pass (device away, adapter off, bluetoothd
    /// restarting).
    private func setUp(_ session: DeviceSession, first: Bool) async throws -> (Peripheral, [NotificationSession]) {
        var attempt = 1
        while true {
            do {
                return try await setUpOnce(session)
            } catch {
                guard reconnect, !Task.isCancelled, Self.policy.isRecoverable(error, afterSuccess: !first) else { throw error }
                let reason = cliFailure(error, what: "subscribe set-up").message
                attempt += 1
                let delay = Self.policy.delay(beforeAttempt: attempt)
                let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
                session.say("attempt \(attempt - 1) to \(first ? "set up" : "reconnect") failed: \(reason); next in \(seconds) s")
                try await Task.sleep(for: delay)
            }
        }
    }

    private func setUpOnce(_ session: DeviceSession) async throws -> (Peripheral, [NotificationSession]) {
        let deadline = Deadline(seconds: options.timeout)
        let (device, options, selectors, service, notifyVia, output) = (device, options, selectors, service, notifyVia, output)
        return try await withSetupDeadline(deadline, what: "subscribe set-up") {
            let peripheral = try await session.find(device, deadline: deadline)
            session.registerAgent(options.agent, for: peripheral)
            let adapter = session.adapter.name
            try await session.connect(peripheral, options: options, deadline: deadline) { ahead in
                output.event(.connectQueued(ahead: ahead, adapter: adapter))
            }
            var chars: [GattCharacteristic] = []
            for selector in selectors {
                let chr = try peripheral.characteristic(selector, service: service)
                if !chars.contains(where: { $0.path == chr.path }) { chars.append(chr) }
            }
            var sessions: [NotificationSession] = []
            for chr in chars {
                let take: NotificationSession.ValueSink = { [self] value in self.take(value, from: chr) }
                let s = notifyVia == .acquire
                    ? try await peripheral.acquireNotifications(for: chr, onValue: take)
                    : try await peripheral.subscribe(to: chr, onValue: take) { [self] sharing in self.report(sharing, of: chr) }
                if s.sharing == .joined { self.report(.joined, of: chr) }
                session.keep(s)
                sessions.append(s)
            }
            return (peripheral, sessions)
        }
    }

    /// Whose notify session the values come from, when it is not our own:
    /// an event line, so that nobody wonders why bluectl sent no StartNotify
    /// or where values went missing.
    private func report(_ sharing: NotificationSession.Sharing, of chr: GattCharacteristic) {
        switch sharing {
        case .own: break
        case .joined: output.event(.sharedSession(chr.uuid))
        case .tookOver: output.event(.ownSession(chr.uuid))
        }
    }

    /// One value, where it arrives (the bus thread, or an AcquireNotify
    /// reader): checked, queued for output and counted — no hand-over to
    /// another thread per value. Values after the end are not shown.
    private func take(_ value: [UInt8], from chr: GattCharacteristic) {
        let readerGone = progress.withLock { p -> Bool in
            guard p.end == nil else { return false }
            reportReconnected(&p)
            if let sequenceWidth { checkSequence(value, characteristic: chr, width: sequenceWidth) }
            if output.value(value, characteristic: chr) == .closed {
                p.end = .readerGone
            } else {
                p.received += 1
                if let count, p.received >= count { p.end = .countReached }
            }
            if let end = p.end { p.waiting?.yield(end) }
            if case .readerGone? = p.end { return true }
            return false
        }
        if readerGone { onReaderGone?() }
    }

    /// The `reconnected` event line, once per loss (under `progress`'s lock,
    /// so that no value of the new sessions is queued before it).
    private func reportReconnected(_ p: inout Progress) {
        guard let lostAt = p.lostAt else { return }
        p.lostAt = nil
        let gap = (ContinuousClock.now - lostAt).components
        let seconds = ((Double(gap.seconds) + Double(gap.attoseconds) / 1e18) * 10).rounded() / 10
        output.event(.reconnected(gap: seconds))
    }

    /// Waits while the sessions stream (their values go through `take`):
    /// until the count is reached, the reader goes away, or a session fails
    /// (device disconnected, bluetoothd gone…).
    private func stream(_ sessions: [NotificationSession]) async -> StreamEnd {
        let (ends, waiting) = AsyncStream<StreamEnd>.makeStream(bufferingPolicy: .bufferingNewest(1))
        if let already = progress.withLock({ p -> StreamEnd? in
            p.waiting = waiting
            return p.end
        }) {
            return already
        }
        defer { progress.withLock { $0.waiting = nil } }
        return await withTaskGroup(of: StreamEnd.self) { group in
            group.addTask {
                for await end in ends { return end }
                return .lost(CancellationError())
            }
            for s in sessions {
                group.addTask {
                    do {
                        for try await _ in s.values {}
                        if Task.isCancelled { return .lost(CancellationError()) }
                        return .lost(BluetoothError.disconnected("notifications of \(s.characteristic.uuid.label) ended"))
                    } catch {
                        return .lost(error)
                    }
                }
            }
            let first = await group.next() ?? .lost(CancellationError())
            group.cancelAll()
            return first
        }
    }

    /// --reconnect's policy: which failures to wait out, and how long between attempts.
    static let policy = ReconnectPolicy()

    /// Reports what a value's sequence number shows (before the value itself).
    private func checkSequence(_ value: [UInt8], characteristic chr: GattCharacteristic, width: SequenceTracker.Width) {
        let key = chr.uuid.uuidString
        let finding = sequences.withLock { trackers in
            trackers[key, default: SequenceTracker(width: width)].observe(value)
        }
        if let finding { output.event(.sequence(finding, of: chr.uuid)) }
    }

    // MARK: - State restoration

    func reportRestored(_ state: CentralRestoreState, id: String) {
        output.event(.subscribeRestored(state, id: id))
    }

    /// Saves this device's state (when a --restore-id is given).
    func save(state: PeripheralState, notifying: Bool, address: String? = nil) {
        recorder.save(device: device, state: state, notifying: notifying, address: address)
    }
}

/// Runs `body` within `deadline`; throws `BluetoothError.timeout` when it passes first.
func withSetupDeadline<T: Sendable>(_ deadline: Deadline, what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try? await Task.sleep(until: deadline.end, clock: .continuous)
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        guard let value = first else { throw BluetoothError.timeout(what) }
        return value
    }
}
