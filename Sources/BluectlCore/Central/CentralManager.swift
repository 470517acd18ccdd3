import BluectlDBus

/// The central: CoreBluetooth's CBCentralManager on BlueZ. One bus
/// connection, one mirror of BlueZ's tree, shared by everything it does.
public final class CentralManager: Sendable {
    package let connection: DBusConnection
    package let mirror: BlueZMirror
    /// The per-call D-Bus timeout (an operation's overall deadline is the caller's).
    public let callTimeout: Duration
    /// The one `Peripheral` of each device (see `peripheral(_:)`), the loop's.
    let peripheralTable: LoopBound<[ObjectPath: WeakPeripheral]>
    /// Whose turn it is to connect on each adapter.
    let turns: AdapterTurns
    /// The discovery each adapter runs while devices are being looked for (`findDevice`).
    let finding: FindingDiscovery

    private init(connection: DBusConnection, mirror: BlueZMirror, callTimeout: Duration) {
        self.connection = connection
        self.mirror = mirror
        self.callTimeout = callTimeout
        peripheralTable = LoopBound([:], loop: mirror.loop)
        turns = AdapterTurns(loop: mirror.loop)
        finding = FindingDiscovery(loop: mirror.loop)
    }

    /// Connects to the system bus and reads BlueZ's tree.
    ///
    /// - Parameters:
    ///   - busAddress: a D-Bus address to use instead of the system bus
    ///     (default: `DBUS_SYSTEM_BUS_ADDRESS`, else the system bus socket).
    ///   - callTimeout: how long one call to bluetoothd may take.
    public static func open(
        busAddress: String? = nil, callTimeout: Duration = .seconds(25)
    ) async throws(BluetoothError) -> CentralManager {
        let connection: DBusConnection
        do {
            connection = try DBusConnection.connect(address: busAddress ?? DBusConnection.systemBusAddress)
        } catch {
            throw BluetoothError(error, operation: "connect to the system bus")
        }
        return try await open(connection: connection, callTimeout: callTimeout)
    }

    /// A central on `connection` (an embedded one in the driver tests);
    /// closes it when BlueZ's tree cannot be read.
    package static func open(connection: DBusConnection, callTimeout: Duration) async throws(BluetoothError) -> CentralManager {
        do {
            let mirror = try await BlueZMirror.start(connection: connection, timeout: callTimeout)
            return CentralManager(connection: connection, mirror: mirror, callTimeout: callTimeout)
        } catch {
            connection.close()
            throw BluetoothError.from(error, operation: "read BlueZ's objects")
        }
    }

    /// Closes the bus connection: every session, stream and call of this central ends (BlueZ drops what this process registered when it leaves the bus).
    public func close() { connection.close() }

    /// Whether a round trip to the bus daemon completes within `timeout`:
    /// this central's connection and its I/O thread are alive. A service's
    /// watchdog asks this before telling its supervisor all is well.
    public func busResponds(within timeout: Duration) async -> Bool {
        (try? await connection.callMethod(
            destination: "org.freedesktop.DBus", path: ObjectPath(verified: "/org/freedesktop/DBus"),
            interface: "org.freedesktop.DBus.Peer", member: "Ping", timeout: timeout)) != nil
    }

    // MARK: - Adapters and state

    /// All adapters, in path order (hci0, hci1, …).
    public var adapters: [AdapterInfo] { Self.adapters(in: mirror.tree) }

    /// The adapters in `tree`, in path order.
    static func adapters(in tree: borrowing BlueZObjectTree) -> [AdapterInfo] {
        tree.paths(with: BlueZ.adapterInterface).map {
            AdapterInfo(path: $0, properties: tree.properties($0, BlueZ.adapterInterface) ?? [:])
        }
    }

    /// The adapter named `name` ("hci1"), or by default the first powered
    /// one (else the first one). Throws when there is none or it is missing.
    public func adapter(named name: String?) throws(BluetoothError) -> AdapterInfo {
        try Self.adapter(named: name, among: adapters)
    }

    /// `adapter(named:)` among `all`.
    static func adapter(named name: String?, among all: [AdapterInfo]) throws(BluetoothError) -> AdapterInfo {
        if let name {
            guard let found = all.first(where: { $0.name == name }) else { throw .adapterNotFound(name) }
            return found
        }
        guard let first = all.first(where: \.powered) ?? all.first else { throw .noAdapter }
        return first
    }

    /// The adapter, failing when it is powered off.
    public func poweredAdapter(named name: String?) throws(BluetoothError) -> AdapterInfo {
        let adapter = try adapter(named: name)
        guard adapter.powered else { throw .adapterPoweredOff(adapter.name) }
        return adapter
    }

    /// CBCentralManager.state for the adapter chosen as by `adapter(named:)`.
    public func state(adapter name: String? = nil) -> CentralState {
        CentralState.derive(
            bluetoothdRunning: mirror.bluetoothdRunning, accessDenied: false,
            adapter: try? adapter(named: name))
    }

    /// The central's state now, then each time it changes, for the adapter
    /// chosen as by `adapter(named:)` (CoreBluetooth's
    /// `centralManagerDidUpdateState`): bluetoothd stopping or coming back,
    /// the adapter powering off or on, going or coming. A slow consumer
    /// gets the latest state (the stream keeps one). Ends when the consuming
    /// task is cancelled or the bus connection is lost.
    public func stateUpdates(adapter name: String? = nil) -> AsyncStream<CentralState> {
        let (stream, continuation) = AsyncStream<CentralState>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let last = LoopBound<CentralState?>(nil, loop: mirror.loop)
        let report: @Sendable (borrowing BlueZObjectTree, Bool) -> Void = { tree, running in
            let chosen = try? Self.adapter(named: name, among: Self.adapters(in: tree))
            let state = CentralState.derive(bluetoothdRunning: running, accessDenied: false, adapter: chosen)
            guard last.value != state else { return }
            last.value = state
            continuation.yield(state)
        }
        let mirror = self.mirror
        let observation = mirror.observeFromAnywhere(start: { tree in report(tree, mirror.bluetoothdRunning) },
                                                     onChange: { _, tree, running in report(tree, running) },
                                                     onBusLost: { continuation.finish() })
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    /// Sets `Adapter1.Powered` and waits until BlueZ reports it.
    public func setPowered(_ on: Bool, adapter: AdapterInfo, timeout: Duration) async throws(BluetoothError) {
        try await setAdapterProperty("Powered", .boolean(on), adapter: adapter, what: "power \(on ? "on" : "off") \(adapter.name)",
                                     timeout: timeout) { ($0["Powered"]?.bool ?? false) == on }
    }

    /// Waits until bluetoothd is on the bus and exports `adapter` again
    /// (after it stopped or crashed and was restarted, as systemd does).
    public func waitForAdapter(_ adapter: AdapterInfo, timeout: Duration) async throws(BluetoothError) {
        let back = await mirror.waitUntil(timeout: timeout) { tree, running in
            running && tree.properties(adapter.path, BlueZ.adapterInterface) != nil
        }
        guard back else { throw .timeout("wait for bluetoothd to export \(adapter.name) again") }
    }

    // MARK: - Scanning

    /// Starts a discovery session on `adapter` with `options`. Results come
    /// through the session's `discoveries`, which end when the session is
    /// stopped: by `stop()`, by the consuming task being cancelled, after
    /// `duration`, or once `limit` distinct devices were reported (each of
    /// these also sends StopDiscovery; BlueZ also ends the session if this
    /// process leaves the bus).
    ///
    /// With `onDiscovery`, each result is handed to it instead, on the
    /// thread it is found on (the central's event loop), and `discoveries`
    /// only ends or fails: no hand-over to another thread per
    /// advertisement, which is most of a busy scan's cost. `onDiscovery`
    /// must be quick and must not block: the loop (every call, signal and
    /// timer of the central) waits for it. It may call `cancel()` of the
    /// returned session.
    public func startScan(adapter: AdapterInfo, options: ScanOptions, duration: Duration? = nil,
                          limit: Int? = nil,
                          onDiscovery: ScanSession.DiscoverySink? = nil) async throws(BluetoothError) -> ScanSession {
        // The steps, not the events: BLUECTL_DEBUG=1 shows what was asked of bluetoothd.
        if options.passive == nil {
            Trace.log("scan \(adapter.name): SetDiscoveryFilter \(options.traceDescription)")
            do {
                _ = try await connection.callMethod(
                    destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface,
                    member: "SetDiscoveryFilter", arguments: [options.discoveryFilter], timeout: callTimeout)
            } catch {
                throw BluetoothError.from(error, operation: "set the discovery filter on \(adapter.name)")
            }
        } else if let reason = advertisementMonitorUnavailability(adapter: adapter) {
            throw .notSupported(reason)
        }
        // Listen before starting, so the first advertisement is not missed.
        // The tracker runs where the changes are applied (the bus thread,
        // under the mirror's lock): one hand-over per discovery, not two.
        let (discoveries, continuation) = AsyncThrowingStream<Discovery, any Error>.makeStream()
        let end = ScanEnd(central: self, adapter: adapter, continuation: continuation, passive: options.passive != nil)
        let tracker = LoopBound(ScanTrackerBox(ScanTracker(adapter: adapter.path, options: options), limit: limit),
                                loop: mirror.loop)
        let adapterPath = adapter.path
        let adapterName = adapter.name
        let deliver: ScanSession.DiscoverySink = onDiscovery ?? { continuation.yield($0) }
        // On the loop. Results wait until StartDiscovery succeeded (a sink
        // must not print devices of a scan that then fails), and none is
        // delivered once the scan ended (a sink, unlike the stream, would
        // still take them: `--count 2` printed every device already in range).
        let report: @Sendable (Discovery) -> Void = { discovery in
            guard !tracker.value.ended, !end.hasStopped else { return }
            if tracker.value.held != nil {
                tracker.value.held?.append(discovery)
                return
            }
            deliver(discovery)
            if tracker.value.reachedLimit(after: discovery) { end.stop() }
        }
        let observation = mirror.observeFromAnywhere(start: { tree in
            for discovery in tracker.value.tracker.start(with: tree) { report(discovery) }
        }, onChange: { change, tree, bluetoothdRunning in
            if case .cleared = change {
                tracker.value.ended = true
                continuation.finish(throwing: BluetoothError.bluetoothdNotRunning)
                return
            }
            if case .removed(let path, let interfaces) = change, path == adapterPath,
               interfaces.contains(BlueZ.adapterInterface) {
                tracker.value.ended = true
                continuation.finish(throwing: BluetoothError.adapterNotFound(adapterName))
                return
            }
            if let discovery = tracker.value.tracker.handle(change, in: tree) { report(discovery) }
        }, onBusLost: {
            tracker.value.ended = true
            continuation.finish(throwing: BluetoothError.disconnected("lost the connection to the system bus"))
        })
        continuation.onTermination = { termination in
            observation.cancel()
            // The consumer went away: end the discovery too. (After an error
            // there is no discovery left to stop.)
            // (Handed to the loop, not waited for: this may run inside the
            // consumer task's cancellation, while the loop yields to it.)
            // A passive scan's monitor is stopped however the scan ended: after bluetoothd
            // went, its objects would stay exported (unregistering then fails harmlessly).
            if case .cancelled = termination { end.stopSoon() } else if options.passive != nil { end.stopSoon() }
        }
        do {
            if let patterns = options.passive {
                let monitor = try await AdvertisementMonitor.register(central: self, adapter: adapter, patterns: patterns)
                end.attach(monitor)
            } else {
                _ = try await connection.callMethod(
                    destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface,
                    member: "StartDiscovery", timeout: callTimeout)
            }
        } catch {
            if options.passive != nil { end.registrationFailed() }
            mirror.loop.execute {
                tracker.value.ended = true
                tracker.value.held = nil
            }
            continuation.finish()
            Trace.log("scan \(adapter.name): \(options.passive == nil ? "StartDiscovery" : "RegisterMonitor") refused: \(error)")
            if let error = error as? BluetoothError { throw error }
            throw BluetoothError.from(error, operation: "start discovery on \(adapter.name)")
        }
        Trace.log("scan \(adapter.name): \(options.passive == nil ? "StartDiscovery" : "the monitor") answered; results from here on"
            + (duration.map { ", for \($0)" } ?? "") + (limit.map { ", until \($0) devices" } ?? ""))
        // What was found meanwhile goes out first, in order, then the rest as it comes.
        mirror.loop.execute {
            let held = tracker.value.held ?? []
            tracker.value.held = nil
            for discovery in held { report(discovery) }
        }
        if let duration { end.stop(after: duration) }
        return ScanSession(central: self, adapter: adapter, discoveries: discoveries, end: end)
    }
}

/// A scan's tracker and its count of devices, the loop's (in a `LoopBound`).
private struct ScanTrackerBox {
    var tracker: ScanTracker
    /// Results found before StartDiscovery succeeded (nil once it did).
    var held: [Discovery]? = []
    /// Whether the scan failed (nothing more is delivered).
    var ended = false
    private let limit: Int?
    private var reported = 0

    init(_ tracker: ScanTracker, limit: Int?) {
        self.tracker = tracker
        self.limit = limit
    }

    /// Whether `discovery` was the `limit`th distinct device.
    mutating func reachedLimit(after discovery: Discovery) -> Bool {
        guard let limit, discovery.kind == .discovered else { return false }
        reported += 1
        return reported == limit
    }
}

/// The end of one scan, which several things may ask for (`stop()`, the
/// consumer's cancellation, the duration, the limit): the stream finishes
/// and StopDiscovery goes out once; later askers get the same outcome.
final class ScanEnd: Sendable {
    private let central: CentralManager
    private let adapter: AdapterInfo
    private let continuation: AsyncThrowingStream<Discovery, any Error>.Continuation
    private struct State {
        /// The StopDiscovery call, once started (its task is shared by all askers).
        var stopping: Task<BluetoothError?, Never>?
        /// The duration's timer, cancelled when the scan ends first.
        var timer: EventLoop.TimerID?
        /// A passive scan's monitor, stopped in place of StopDiscovery.
        var monitor: AdvertisementMonitor?
        /// Whether a passive scan's registering ended (attached or failed), and who waits for it:
        /// a stop before then waits for the monitor to stop it.
        var registered = false
        var awaitingMonitor: [CheckedContinuation<AdvertisementMonitor?, Never>] = []
    }
    /// The loop's: the limit asks there, the consumer's cancellation and
    /// any task hand their asking to it.
    private let state: LoopBound<State>

    /// Whether the scan is passive (a monitor, no discovery to stop).
    private let passive: Bool

    init(central: CentralManager, adapter: AdapterInfo,
         continuation: AsyncThrowingStream<Discovery, any Error>.Continuation, passive: Bool = false) {
        self.passive = passive
        self.central = central
        self.adapter = adapter
        self.continuation = continuation
        state = LoopBound(State(), loop: central.mirror.loop)
    }

    /// Ends the stream and sends StopDiscovery (once); the task answers
    /// with the call's failure, if any. On the loop (a sink, a timer, a
    /// job); a task asks through `stopFromTask()`.
    @discardableResult
    func stop() -> Task<BluetoothError?, Never> {
        if let stopping = state.value.stopping { return stopping }
        let (central, adapter) = (central, adapter)
        let monitor = state.value.monitor
        let task = Task { [self] () -> BluetoothError? in
            if let monitor { return await monitor.stop() }
            // a monitor still being registered: stopped once attached (nothing when registering failed)
            if passive { return await registeredMonitor()?.stop() }
            Trace.log("scan \(adapter.name): StopDiscovery")
            do {
                _ = try await central.connection.callMethod(
                    destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface,
                    member: "StopDiscovery", timeout: central.callTimeout)
                return nil
            } catch {
                return BluetoothError.from(error, operation: "stop discovery on \(adapter.name)")
            }
        }
        state.value.stopping = task
        if let timer = state.value.timer { state.loop.cancel(timer) }
        // Finishing runs onTermination, which may ask again: it finds `stopping`.
        continuation.finish()
        return task
    }

    /// A passive scan's monitor, registered: stopped with the scan (at once if the scan
    /// ended meanwhile), and its failure (bluetoothd released it) ends the scan.
    func attach(_ monitor: AdvertisementMonitor) {
        state.loop.execute { [self] in
            // a stop that came first waits in `registeredMonitor()` and stops it
            state.value.monitor = monitor
            registering(ended: monitor)
        }
        let continuation = continuation
        Task {
            do {
                for try await _ in monitor.events {}
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }

    /// A passive scan's monitor could not be registered: a stop that came first has nothing to stop.
    func registrationFailed() {
        state.loop.execute { [self] in registering(ended: nil) }
    }

    /// On the loop: the monitor registered (nil: it was not); its waiters are told.
    private func registering(ended monitor: AdvertisementMonitor?) {
        state.value.registered = true
        let waiting = state.value.awaitingMonitor
        state.value.awaitingMonitor = []
        for waiter in waiting { waiter.resume(returning: monitor) }
    }

    /// The passive scan's monitor once registering ended (nil: it failed).
    private func registeredMonitor() async -> AdvertisementMonitor? {
        await withCheckedContinuation { (waiter: CheckedContinuation<AdvertisementMonitor?, Never>) in
            state.loop.execute { [self] in
                if state.value.registered { waiter.resume(returning: state.value.monitor) } else { state.value.awaitingMonitor.append(waiter) }
            }
        }
    }

    /// Whether the scan was stopped (on the loop).
    var hasStopped: Bool { state.value.stopping != nil }

    /// `stop()` from a task: handed to the loop, no thread blocked.
    func stopFromTask() async -> Task<BluetoothError?, Never> {
        await state.loop.submit { [self] in stop() }
    }

    /// `stop()` without waiting for the loop: from where blocking is not allowed.
    func stopSoon() {
        state.loop.execute { [self] in stop() }
    }

    /// Stops the scan when `duration` has passed (a loop timer).
    func stop(after duration: Duration) {
        state.loop.execute { [self] in
            guard state.value.stopping == nil else { return }
            state.value.timer = state.loop.schedule(after: duration) { [weak self] in self?.stop() }
        }
    }
}

/// A running discovery session.
public struct ScanSession: Sendable {
    /// Takes each result on the central's event loop (see
    /// `CentralManager.startScan(adapter:options:duration:limit:onDiscovery:)`).
    public typealias DiscoverySink = @Sendable (Discovery) -> Void

    /// The central that started the scan.
    public let central: CentralManager
    /// The adapter scanning.
    public let adapter: AdapterInfo
    /// Each device found, then each change of its advertisement when
    /// duplicates are asked for. Ends when the scan is stopped (see
    /// `CentralManager.startScan(adapter:options:duration:limit:onDiscovery:)`); fails when
    /// bluetoothd stops, the adapter goes or the bus connection is lost.
    public let discoveries: AsyncThrowingStream<Discovery, any Error>
    let end: ScanEnd

    /// Stops the scan: `discoveries` ends and StopDiscovery goes out, once
    /// however often this is called (or the scan also ended by its duration,
    /// its limit or its consumer's cancellation); returns when BlueZ answered.
    public func stop() async throws(BluetoothError) {
        if let failure = await end.stopFromTask().value { throw failure }
    }

    /// Stops the scan as `stop()` does, without waiting: for where waiting
    /// is not allowed, such as an `onDiscovery` sink (the loop itself).
    public func cancel() {
        end.stopSoon()
    }
}
