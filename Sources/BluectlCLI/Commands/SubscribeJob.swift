// One device's part of `subscribe`.

import BluectlCore

/// One device's part of `subscribe`: set up (find, connect, StartNotify),
/// stream the values, and with `--reconnect` set up again after every loss.
///
/// Its task runs the set-up and waits; its values arrive on the central's
/// event loop and are checked, queued for output and counted there, where
/// the job's progress lives (a `LoopBound`: no lock). The task reads and
/// changes the progress by handing the loop a job (`central.onLoop`).
final class SubscribeJob: Sendable {
    /// What every device's job does alike: from the command line.
    struct Settings: Sendable {
        let target: SubscriptionTarget
        let selectors: [AttributeSelector]
        let service: BluetoothUUID?
        let options: DeviceCommandOptions
        let reconnect: Bool
        let count: Int?
        let notifyVia: NotifyVia
        let sequenceWidth: SequenceTracker.Width?
    }

    /// How a stretch of streaming ended.
    enum StreamEnd: Sendable {
        case countReached
        case readerGone
        case lost(any Error)
    }

    /// The device as given on the command line (or saved).
    let device: String
    let settings: Settings
    let output: SubscribeOutput
    let recorder: RestoreRecorder
    private let central: CentralManager

    /// Values taken (all characteristics, across reconnects), how the
    /// stream ended once it has, and the sequence checks: set where the
    /// values arrive (`take`), on the loop.
    private struct Progress {
        var received = 0
        var end: StreamEnd?
        /// The `stream` waiting now, told the end.
        var waiting: AsyncStream<StreamEnd>.Continuation?
        /// When the link was lost, until the reconnect is reported: by the
        /// end of the set-up, or by the first value of the new sessions if
        /// that comes first (values flow as soon as StartNotify is answered,
        /// and a value must never come before the line saying it is back).
        var lostAt: ContinuousClock.Instant?
        /// Per characteristic UUID, across reconnects (a gap over a reconnect is real).
        var sequences: [String: SequenceTracker] = [:]
    }
    private let progress: LoopBound<Progress>

    init(device: String, settings: Settings, output: SubscribeOutput, recorder: RestoreRecorder, central: CentralManager) {
        self.device = device
        self.settings = settings
        self.output = output
        self.recorder = recorder
        self.central = central
        progress = central.loopBound(Progress())
    }

    /// Ends the stream (if it has not ended) with `end`; from any thread.
    func end(_ end: StreamEnd) {
        central.onLoopSoon { [self] in finish(end) }
    }

    /// On the loop: the stream ends with `end`, unless it has already.
    private func finish(_ end: StreamEnd) {
        guard progress.value.end == nil else { return }
        progress.value.end = end
        progress.value.waiting?.yield(end)
    }

    /// This device failed (one of several): an event line naming it (`shown`:
    /// its address once found), and on stderr.
    func reportFailure(_ failure: CLIFailure, shown: String) {
        guard !SignalScope.interrupted else { return }
        output.event(.failed(failure, sentence: "failed: \(failure.message)"), device: shown)
        if output.format != .raw, ValueText.stdoutIsTerminal { Output.error("\(shown): \(TextSafety.oneLine(failure.message))") }
    }

    /// Each characteristic's sequence summary (`--check-sequence`), by UUID.
    func sequenceSummaries() async -> [(uuid: String, summary: String)] {
        await central.onLoop { [self] in
            progress.value.sequences.sorted { $0.key < $1.key }.map { ($0.key, $0.value.summary) }
        }
    }

    /// Sets up, then streams until the count, the reader going, `duration`
    /// or (without --reconnect) a loss; `onSubscribed` once subscribed.
    func run(_ session: DeviceSession, duration: Double?, onSubscribed: @Sendable () -> Void) async throws {
        await save(state: .connecting, notifying: false)
        let established = try await setUp(session, first: true)
        await save(state: .connected, notifying: true, address: established.0.identifier.description)
        let characteristics = settings.target.characteristics.joined(separator: ", ")
        ServiceNotifier.ready(status: "subscribed to \(characteristics) of \(established.0.identifier)")
        onSubscribed()
        let streaming: @Sendable () async -> Result<Void, any Error> = { [self] in
            var (peripheral, sessions) = established
            while true {
                switch await stream(sessions) {
                case .countReached, .readerGone:
                    return .success(())
                case .lost(let error):
                    guard settings.reconnect, Self.policy.isRecoverable(error, afterSuccess: true) else { return .failure(error) }
                    let lostAt = ContinuousClock.now
                    let reason = cliFailure(error, what: "notifications").message
                    output.event(.disconnected(reason))
                    ServiceNotifier.status("reconnecting to \(peripheral.identifier): \(reason)")
                    await save(state: .disconnected, notifying: false, address: peripheral.identifier.description)
                    for old in await session.forgetSessions() { await old.stop() }
                    await central.onLoop { [self] in progress.value.lostAt = lostAt }
                    do {
                        (peripheral, sessions) = try await setUp(session, first: false)
                    } catch {
                        return .failure(error)
                    }
                    await central.onLoop { [self] in reportReconnected() }
                    ServiceNotifier.status("subscribed to \(characteristics) of \(peripheral.identifier)")
                    await save(state: .connected, notifying: true, address: peripheral.identifier.description)
                }
            }
        }
        // --duration is a normal end, as is the caller's cancellation (a signal).
        guard let duration else { return try await streaming().get() }
        try await Deadline(seconds: duration).run(streaming)?.get()
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
                guard settings.reconnect, !Task.isCancelled, Self.policy.isRecoverable(error, afterSuccess: !first) else { throw error }
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
        let deadline = Deadline(seconds: settings.options.timeout)
        let (device, settings, output) = (device, settings, output)
        return try await deadline.run(orThrow: BluetoothError.timeout("subscribe set-up")) { [self] in
            let peripheral = try await session.find(device, deadline: deadline)
            session.registerAgent(for: peripheral)
            let adapter = await session.adapter.name
            try await session.connect(peripheral, options: settings.options, deadline: deadline) { ahead in
                output.event(.connectQueued(ahead: ahead, adapter: adapter))
            }
            var chars: [GattCharacteristic] = []
            for selector in settings.selectors {
                let chr = try peripheral.characteristic(selector, service: settings.service)
                if !chars.contains(where: { $0.path == chr.path }) { chars.append(chr) }
            }
            var sessions: [NotificationSession] = []
            for chr in chars {
                let take: NotificationSession.ValueSink = { [self] value in self.take(value, from: chr) }
                let s = settings.notifyVia == .acquire
                    ? try await peripheral.acquireNotifications(for: chr, onValue: take)
                    : try await peripheral.subscribe(to: chr, onValue: take) { [self] sharing in self.report(sharing, of: chr) }
                if s.sharing == .joined { self.report(.joined, of: chr) }
                await session.keep(s)
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

    /// One value, on the loop where it arrives: checked, queued for output
    /// and counted — no hand-over to another thread per value, no system
    /// call (the output's writer thread writes it). Values after the end
    /// are not shown.
    private func take(_ value: [UInt8], from chr: GattCharacteristic) {
        guard progress.value.end == nil else { return }
        reportReconnected()
        if let width = settings.sequenceWidth { checkSequence(value, characteristic: chr, width: width) }
        if output.value(value, characteristic: chr) == .closed { return finish(.readerGone) }
        progress.value.received += 1
        if let count = settings.count, progress.value.received >= count { finish(.countReached) }
    }

    /// On the loop: the `reconnected` event line, once per loss (before any
    /// value of the new sessions is queued).
    private func reportReconnected() {
        guard let lostAt = progress.value.lostAt else { return }
        progress.value.lostAt = nil
        let gap = (ContinuousClock.now - lostAt).components
        let seconds = ((Double(gap.seconds) + Double(gap.attoseconds) / 1e18) * 10).rounded() / 10
        output.event(.reconnected(gap: seconds))
    }

    /// Waits while the sessions stream (their values go through `take`):
    /// until the count is reached, the reader goes away, or a session fails
    /// (device disconnected, bluetoothd gone…).
    private func stream(_ sessions: [NotificationSession]) async -> StreamEnd {
        let (ends, waiting) = AsyncStream<StreamEnd>.makeStream(bufferingPolicy: .bufferingNewest(1))
        if let already = await central.onLoop({ [self] () -> StreamEnd? in
            progress.value.waiting = waiting
            return progress.value.end
        }) {
            return already
        }
        let end = await withTaskGroup(of: StreamEnd.self) { group in
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
        await central.onLoop { [self] in progress.value.waiting = nil }
        return end
    }

    /// --reconnect's policy: which failures to wait out, and how long between attempts.
    static let policy = ReconnectPolicy()

    /// On the loop: reports what a value's sequence number shows (before the value itself).
    private func checkSequence(_ value: [UInt8], characteristic chr: GattCharacteristic, width: SequenceTracker.Width) {
        let key = chr.uuid.uuidString
        let finding = progress.value.sequences[key, default: SequenceTracker(width: width)].observe(value)
        if let finding { output.event(.sequence(finding, of: chr.uuid)) }
    }

    /// Saves this device's state (when a --restore-id is given).
    func save(state: PeripheralState, notifying: Bool, address: String? = nil) async {
        await recorder.save(device: device, state: state, notifying: notifying, address: address)
    }
}
