import BluectlDBus

/// A pure state machine: a value that takes an event and says what to do
/// (postgres-nio's `ConnectionStateMachine` shape). `MachineDriver` runs it.
package protocol StateMachine: Sendable {
    associatedtype State: Sendable
    associatedtype Event: Sendable
    associatedtype Action: Sendable
    /// What `handle` returns: an array, or an `InlineList` where an event
    /// comes by the thousand (no allocation per event). `[]` is none (the
    /// driver's step returns it for an event not taken, not an optional:
    /// an optional `InlineList` is copied through the runtime's witnesses).
    associatedtype Actions: Sequence<Action>, ExpressibleByArrayLiteral = [Action]

    var state: State { get }
    /// Whether the machine has reached an end (the driver then lets go).
    var isFinished: Bool { get }
    mutating func handle(_ event: Event) -> Actions
    /// Whether the trace shows this event (not every value of a stream).
    static func traces(_ event: Event) -> Bool
}

extension StateMachine {
    package static func traces(_ event: Event) -> Bool { true }
}

/// Runs one state machine on the event loop — the one generic driver of
/// connect, service discovery, notifications and the GATT server.
/// Everything reaches the machine as an event on the loop (mirror changes,
/// D-Bus replies, signals, timers, the caller's cancellation), and `perform`
/// carries out each action the machine returns, also on the loop; nothing
/// else touches the machine.
/// The caller awaits the first answer (`answer(_:)`); the driver lets go of
/// its timers and its mirror observer when the machine finishes. A machine
/// that serves rather than answers once (`GattServerMachine`) is started by
/// `start(perform:)` instead, and runs until it finishes.
package final class MachineDriver<Machine: StateMachine, Output: Sendable>: Sendable {
    package typealias Perform = (Machine.Action, MachineDriver) -> Void

    private struct Running {
        var machine: Machine
        var perform: Perform?
        var started = false
        var cancelPending = false
        var ended = false
        /// Events that came before the start (`follow` is set up before the
        /// caller's first look at bluetoothd), handed to the machine right
        /// after it.
        var early: [Machine.Event] = []
        /// The timers not yet fired, by the driver's own number: a fired or
        /// cancelled one leaves, so a machine that runs long (the GATT
        /// server's) keeps only those it still waits for.
        var timers: [UInt64: EventLoop.TimerID] = [:]
        var lastTimer: UInt64 = 0
        /// Timers a later one replaces or `cancelTimer(_:)` cancels, by key.
        var keyedTimers: [String: UInt64] = [:]
        var observer: UInt64?
        /// Run once when the machine ends (unsubscribing, finishing streams).
        var cleanup: [() -> Void] = []

        /// The machine's step for `event` and, in `performer`, who performs
        /// its actions; none, and no performer, when the machine does not
        /// take it now (ended, or not started: it waits in `early`).
        mutating func step(_ event: Machine.Event, performer: inout Perform?) -> Machine.Actions {
            guard !ended else { return [] }
            guard started else {
                early.append(event)
                return []
            }
            guard let perform else { return [] }
            performer = perform
            return machine.handle(event)
        }
    }

    package let mirror: BlueZMirror
    package let label: String
    private let running: LoopBound<Running>
    private let firstAnswer = HandOff<Output>()
    private let end = HandOff<Void>()

    package init(mirror: BlueZMirror, machine: Machine, label: String) {
        self.mirror = mirror
        self.label = label
        running = LoopBound(Running(machine: machine), loop: mirror.loop)
    }

    package var loop: EventLoop { mirror.loop }
    package var connection: DBusConnection { mirror.connection }

    /// Whether the machine has ended (loop only): a late reply finds nobody to take what it brings.
    package var hasEnded: Bool { running.value.ended }

    // MARK: - Starting and awaiting

    /// Starts the machine on the loop (`setUp`, then `start`), performing its
    /// actions with `perform`; `cancel` is sent if the calling task is
    /// cancelled. Returns the first answer.
    package func run(start: Machine.Event, cancel: Machine.Event,
                     setUp: @escaping @Sendable (MachineDriver) -> Void,
                     perform: @escaping @Sendable (Machine.Action, MachineDriver) -> Void) async throws -> Output {
        if Task.isCancelled {
            abandon()
            throw CancellationError()
        }
        return try await withTaskCancellationHandler {
            loop.execute { [self] in
                guard !running.value.ended else { return }   // abandoned meanwhile: its answer is given
                running.value.perform = perform
                running.value.started = true
                if running.value.cancelPending {
                    answer(.failure(CancellationError()))
                    finish()
                    return
                }
                setUp(self)
                send(start, traceAs: "start")
                let early = running.value.early
                running.value.early.removeAll()
                for event in early { send(event) }
            }
            return try await firstAnswer.wait()
        } onCancel: {
            loop.execute { [self] in
                if running.value.started { send(cancel) } else { running.value.cancelPending = true }
            }
        }
    }

    /// Starts, on the loop, a machine that has no start event and no caller
    /// awaiting an answer (the GATT server: it serves bluetoothd's calls
    /// until stopped); each `send` then runs it. Events sent before are
    /// handed to it now.
    package func start(perform: @escaping Perform) {
        loop.assertInLoop()
        guard !running.value.ended, !running.value.started else { return }
        running.value.perform = perform
        running.value.started = true
        let early = running.value.early
        running.value.early.removeAll()
        for event in early { send(event) }
    }

    /// The machine as it is now (loop only): what it holds, for reads of
    /// its state between events.
    package var machine: Machine { running.value.machine }

    /// The tree now, as the machine's start is to see it: the changes
    /// followed so far are in it, so they are not replayed after the start.
    /// Read on the loop and handed over: the caller's thread never blocks.
    package func snapshot() async -> BlueZObjectTree {
        await loop.submit { [self] in
            running.value.early.removeAll()
            return mirror.tree
        }
    }

    /// A call whose answer the machine's start is built from (bluetoothd's
    /// word on the device now), and the tree as it was when the answer came:
    /// the changes followed before it are in them, so they are not replayed
    /// after the start.
    package func look(_ message: DBusMessage, timeout: Duration) async -> (Result<DBusMessage, DBusError>, BlueZObjectTree) {
        let answer = HandOff<(Result<DBusMessage, DBusError>, BlueZObjectTree)>()
        connection.call(message, timeout: timeout) { [self] result in
            running.value.early.removeAll()
            answer.settle(.success((result, mirror.tree)))
        }
        return (try? await answer.wait()) ?? (.failure(.disconnected), BlueZObjectTree())
    }

    /// Lets go of a driver that will not be run (the caller found nothing
    /// to do): its observer and anything queued for it go.
    package func abandon() {
        loop.execute { [self] in finish() }
    }

    /// Waits until the machine has ended and the driver let go.
    package func ended() async {
        try? await end.wait()
    }

    // MARK: - On the loop

    /// Feeds `event` to the machine and performs what it returns. Events
    /// before the start wait for it; after the end they are dropped.
    package func send(_ event: Machine.Event, traceAs name: String? = nil) {
        // The checks and the machine's step in one access of the loop's
        // state (this runs per notification value); the actions are
        // performed after it, since performing one may send another event.
        var perform: Perform?
        let actions = running.value.step(event, performer: &perform)
        guard let perform else { return }
        if Machine.traces(event) {
            Trace.log("\(label): \(name ?? "\(event)") -> \(running.value.machine.state) \(actions)")
        }
        for action in actions {
            perform(action, self)
        }
        if running.value.machine.isFinished { finish() }
    }

    /// Sends `event` after `delay` (a loop timer, dropped when the machine
    /// ends). With `key`, it replaces the timer of that key still running.
    package func after(_ delay: Duration, _ event: Machine.Event, replacing key: String? = nil) {
        guard !running.value.ended else { return }
        running.value.lastTimer += 1
        let number = running.value.lastTimer
        running.value.timers[number] = loop.schedule(after: delay) { [self] in
            running.value.timers[number] = nil
            if let key, running.value.keyedTimers[key] == number { running.value.keyedTimers[key] = nil }
            send(event)
        }
        if let key, let earlier = running.value.keyedTimers.updateValue(number, forKey: key),
           let timer = running.value.timers.removeValue(forKey: earlier) {
            loop.cancel(timer)
        }
    }

    /// Cancels the timer of `key` still running (nothing when there is none).
    package func cancelTimer(_ key: String) {
        guard let number = running.value.keyedTimers.removeValue(forKey: key),
              let timer = running.value.timers.removeValue(forKey: number) else { return }
        loop.cancel(timer)
    }

    /// Sends a D-Bus method call; its reply becomes the event `map` makes of it.
    package func call(_ message: DBusMessage, timeout: Duration,
                      _ map: @escaping @Sendable (Result<DBusMessage, DBusError>) -> Machine.Event?) {
        connection.call(message, timeout: timeout) { [self] result in
            if let event = map(result) { send(event) }
        }
    }

    /// Feeds the mirror's changes to the machine, each through `map`. From
    /// any thread, before `run` too: then the changes between this call and
    /// the start (while the caller asks bluetoothd how things are) reach the
    /// machine right after its start, none lost.
    package func follow(_ map: @escaping @Sendable (BlueZObjectTree.Change, borrowing BlueZObjectTree) -> [Machine.Event]) {
        let register: @Sendable () -> Void = { [self] in
            guard !running.value.ended else { return }
            running.value.observer = mirror.observe(start: { _ in }, onChange: { [self] change, tree, _ in
                for event in map(change, tree) { send(event) }
            }, onBusLost: { [self] in
                for event in map(.cleared, BlueZObjectTree()) { send(event) }
            })
        }
        if loop.inLoop { register() } else { loop.execute(register) }
    }

    /// Runs `body` when the machine ends.
    package func onEnd(_ body: @escaping () -> Void) {
        running.value.cleanup.append(body)
    }

    /// The answer the caller of `run` awaits (the first one counts).
    package func answer(_ result: Result<Output, any Error>) {
        firstAnswer.settle(result)
    }

    /// The machine has ended: timers and observer go, cleanup runs, and a
    /// caller still waiting is told the run was cancelled.
    private func finish() {
        guard !running.value.ended else { return }
        running.value.ended = true
        for timer in running.value.timers.values { loop.cancel(timer) }
        running.value.timers.removeAll()
        running.value.keyedTimers.removeAll()
        if let observer = running.value.observer { mirror.stopObserving(observer) }
        let cleanup = running.value.cleanup
        running.value.cleanup.removeAll()
        running.value.perform = nil
        for body in cleanup { body() }
        firstAnswer.settle(.failure(CancellationError()))
        end.settle(.success(()))
    }
}
