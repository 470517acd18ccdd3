import BluectlCore

/// What the gateway's scanner tells the gateway's owner task, which publishes it on
/// `bluectl/<id>/events` and says it on stderr.
enum GatewayScanEvent: Sendable {
    /// The scan was lost: bluetoothd stopped, the adapter went or was powered off.
    case interrupted(reason: String)
    /// Scanning again after `interrupted`, `gap` later.
    case resumed(gap: Duration, reason: String)
    /// The watchdog's recovery after `silent` without an advertisement; `error` when it failed.
    case recovered(ScanWatchdog.Step, silent: Duration, error: String?)
    /// The scan cannot go on (the bus connection is lost): the gateway ends with this error.
    case failed(any Error)
}

/// The gateway's scan, kept going in-process: one task owns the `ScanSession` and
/// starts it again when bluetoothd comes back (org.bluez has an owner and exports the
/// adapter again), when the adapter is powered on again, and when the watchdog asks
/// for a recovery (`recover`). Only the loss of the bus connection ends it.
///
/// Discoveries go to `onDiscovery` on the central's loop, as `startScan` hands them;
/// everything else reaches the owner task through `report`.
final class GatewayScanner: Sendable {
    private enum Input: Sendable {
        case ended(generation: Int, error: (any Error)?)
        case stateChanged
        case retry
        case recover(ScanWatchdog.Step, silent: Duration)
    }

    private let inputs: AsyncStream<Input>.Continuation
    private let task: Task<Void, Never>
    private let stateTask: Task<Void, Never>

    /// Starts the scan; its first failure is the caller's (thrown), as for `scan`.
    static func start(central: CentralManager, adapter: AdapterInfo, options: ScanOptions,
                      onDiscovery: @escaping ScanSession.DiscoverySink,
                      report: @escaping @Sendable (GatewayScanEvent) -> Void) async throws(BluetoothError) -> GatewayScanner {
        let first = try await central.startScan(adapter: adapter, options: options, onDiscovery: onDiscovery)
        return GatewayScanner(first: first, options: options, onDiscovery: onDiscovery, report: report)
    }

    private init(first: ScanSession, options: ScanOptions, onDiscovery: @escaping ScanSession.DiscoverySink,
                 report: @escaping @Sendable (GatewayScanEvent) -> Void) {
        let (stream, inputs) = AsyncStream<Input>.makeStream()
        self.inputs = inputs
        let central = first.central
        stateTask = Task { [adapterName = first.adapter.name] in
            for await _ in central.stateUpdates(adapter: adapterName) { inputs.yield(.stateChanged) }
        }
        task = Task {
            var owner = Owner(session: first, options: options, onDiscovery: onDiscovery, report: report, inputs: inputs)
            owner.watch()
            for await input in stream { await owner.handle(input) }
            await owner.stop()
        }
    }

    /// Asks for a recovery of a scan that heard nothing for `silent` (ignored while the scan is lost).
    func recover(_ step: ScanWatchdog.Step, silent: Duration) { inputs.yield(.recover(step, silent: silent)) }

    /// Stops the scan (StopDiscovery, within a second) and the task that keeps it going.
    func stop() async {
        stateTask.cancel()
        inputs.finish()
        await task.value
    }

    /// The task's state: the session (nil while lost) and what it needs to start another.
    private struct Owner {
        var session: ScanSession?
        let options: ScanOptions
        let onDiscovery: ScanSession.DiscoverySink
        let report: @Sendable (GatewayScanEvent) -> Void
        let inputs: AsyncStream<Input>.Continuation
        let central: CentralManager
        let adapterName: String
        /// Which session's end an `ended` input is about: the ends of sessions stopped on purpose are not losses.
        var generation = 0
        /// When and why the scan was lost (nil while scanning).
        var lost: (at: ContinuousClock.Instant, reason: String)?
        var retryPending = false
        /// Whether a refused start was said on stderr (once per loss).
        var complained = false

        init(session: ScanSession, options: ScanOptions, onDiscovery: @escaping ScanSession.DiscoverySink,
             report: @escaping @Sendable (GatewayScanEvent) -> Void, inputs: AsyncStream<Input>.Continuation) {
            self.session = session
            self.options = options
            self.onDiscovery = onDiscovery
            self.report = report
            self.inputs = inputs
            central = session.central
            adapterName = session.adapter.name
        }

        /// Follows the current session's end (with onDiscovery its stream only ends or fails).
        func watch() {
            guard let session else { return }
            let (generation, inputs) = (self.generation, self.inputs)
            Task {
                do {
                    for try await _ in session.discoveries {}
                    inputs.yield(.ended(generation: generation, error: nil))
                } catch {
                    inputs.yield(.ended(generation: generation, error: error))
                }
            }
        }

        mutating func handle(_ input: Input) async {
            switch input {
            case .ended(let ended, let error):
                guard ended == generation, session != nil else { return }
                session = nil
                generation += 1
                if let error, case .disconnected? = error as? BluetoothError {
                    report(.failed(error))
                    inputs.finish()
                    return
                }
                lose(Self.reason(error))
                await resume()
            case .stateChanged:
                let state = await adapterState()
                if session != nil, state != .poweredOn {
                    await dropSession()
                    lose(state == .poweredOff ? "\(adapterName) was powered off" : Self.reason(state))
                }
                await resume()
            case .retry:
                retryPending = false
                await resume()
            case .recover(let step, let silent):
                guard session != nil else { return }
                await dropSession()
                var failure: String?
                if step == .powerCycle {
                    do {
                        let adapter = try await currentAdapter()
                        try await central.setPowered(false, adapter: adapter, timeout: .seconds(10))
                        try await central.setPowered(true, adapter: adapter, timeout: .seconds(10))
                    } catch {
                        failure = "\(error)"
                    }
                }
                if let started = await startSession() {
                    failure = failure ?? started
                    report(.recovered(step, silent: silent, error: failure))
                    lose("the scan could not be started again: \(started)")
                    scheduleRetry()
                } else {
                    report(.recovered(step, silent: silent, error: failure))
                }
            }
        }

        /// Stops the session on purpose (its end is then no loss); within a second.
        mutating func dropSession() async {
            guard let old = session else { return }
            session = nil
            generation += 1
            _ = await Deadline(after: .seconds(1)).run(shielded: true) { try? await old.stop() }
        }

        mutating func lose(_ reason: String) {
            guard lost == nil else { return }
            lost = (.now, reason)
            report(.interrupted(reason: reason))
        }

        /// Starts the scan again if it is lost and the adapter is there and powered;
        /// a refusal is tried again a second later.
        mutating func resume() async {
            guard let lost, session == nil, await adapterState() == .poweredOn else { return }
            if let failure = await startSession() {
                if !complained { Output.error("gateway: cannot scan yet: \(failure); trying again each second") }
                complained = true
                scheduleRetry()
                return
            }
            self.lost = nil
            complained = false
            report(.resumed(gap: .now - lost.at, reason: lost.reason))
        }

        /// A new session on the adapter as BlueZ exports it now; nil when started, else why not.
        mutating func startSession() async -> String? {
            do {
                let adapter = try await currentAdapter()
                session = try await central.startScan(adapter: adapter, options: options, onDiscovery: onDiscovery)
                watch()
                return nil
            } catch {
                return "\(error)"
            }
        }

        mutating func scheduleRetry() {
            guard !retryPending else { return }
            retryPending = true
            Task { [inputs] in
                try? await Task.sleep(for: .seconds(1))
                inputs.yield(.retry)
            }
        }

        mutating func stop() async { await dropSession() }

        /// The adapter's state now, read on the central's loop (`onLoop`: no thread of the
        /// task's pool blocked, as the synchronous getter would from here).
        func adapterState() async -> CentralState {
            await central.onLoop { [central, adapterName] in central.state(adapter: adapterName) }
        }

        /// The adapter as BlueZ exports it now (read as `adapterState` is).
        func currentAdapter() async throws(BluetoothError) -> AdapterInfo {
            try await central.adapterOnLoop(named: adapterName)
        }

        static func reason(_ error: (any Error)?) -> String {
            switch error as? BluetoothError {
            case .bluetoothdNotRunning?: "bluetoothd stopped (exited or crashed)"
            case .adapterNotFound(let name)?: "\(name) went away"
            case let other?: "\(other)"
            case nil: error.map { "\($0)" } ?? "the scan ended"
            }
        }

        static func reason(_ state: CentralState) -> String {
            switch state {
            case .resetting: "bluetoothd stopped (exited or crashed)"
            case .unsupported: "the adapter went away"
            default: "the adapter is \(state.rawValue)"
            }
        }
    }
}
