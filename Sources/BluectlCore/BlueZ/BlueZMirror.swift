import BluectlDBus

/// Keeps a `BlueZObjectTree` current from bluetoothd's signals and lets any
/// number of listeners take a snapshot and the changes after it, with no gap.
///
/// The mirror lives on the connection's event loop: signals and replies are
/// applied there, in bus order, and the tree, its listeners and observers
/// are the loop's alone (no lock). Order matters (docs/bluez-pitfalls.md, 4):
/// the signal subscriptions are in place before `GetManagedObjects`, so
/// nothing that happens in between is missed. Only signals from the current
/// owner of `org.bluez` are accepted; when the owner changes (bluetoothd
/// restarted or gone), the tree is cleared and re-read.
package final class BlueZMirror: Sendable {
    package let connection: DBusConnection
    /// The loop that owns the mirror (the connection's).
    package var loop: EventLoop { connection.loop }
    private let callTimeout: Duration

    private struct State {
        var tree = BlueZObjectTree()
        var listeners: [UInt64: Listener] = [:]
        var observers: [UInt64: Observer] = [:]
        var nextListener: UInt64 = 1
        var owner: String?
        /// The bus connection is gone: no change will ever come.
        var busLost = false

        /// Who hears of a change, and the tree after it.
        var afterChange: (Dictionary<UInt64, Listener>.Values, Dictionary<UInt64, Observer>.Values, BlueZObjectTree, Bool) {
            (listeners.values, observers.values, tree, owner != nil)
        }
    }
    private let state: LoopBound<State>

    /// A `changes()` stream and the changes it wants (tested on the loop,
    /// so that a high-rate change nobody listens for wakes no task). A
    /// class, as `Observer`: `mutate` takes each one out of its list per
    /// change, one reference rather than its every field.
    private final class Listener {
        let continuation: AsyncStream<BlueZObjectTree.Change>.Continuation
        let wants: @Sendable (BlueZObjectTree.Change) -> Bool

        init(continuation: AsyncStream<BlueZObjectTree.Change>.Continuation,
             wants: @escaping @Sendable (BlueZObjectTree.Change) -> Bool) {
            self.continuation = continuation
            self.wants = wants
        }
    }

    /// An `observe` callback pair.
    private final class Observer {
        let onChange: (BlueZObjectTree.Change, borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Void
        let onBusLost: () -> Void

        init(onChange: @escaping (BlueZObjectTree.Change, borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Void,
             onBusLost: @escaping () -> Void) {
            self.onChange = onChange
            self.onBusLost = onBusLost
        }
    }

    private init(connection: DBusConnection, callTimeout: Duration) {
        self.connection = connection
        self.callTimeout = callTimeout
        state = LoopBound(State(), loop: connection.loop)
    }

    /// Subscribes, reads the tree, and keeps it current. Throws
    /// `BluetoothError.bluetoothdNotRunning` when org.bluez has no owner.
    package static func start(connection: DBusConnection, timeout: Duration) async throws -> BlueZMirror {
        let mirror = BlueZMirror(connection: connection, callTimeout: timeout)
        try await mirror.subscribe()
        return mirror
    }

    private func subscribe() async throws {
        // The handlers hold the mirror strongly: the connection drops them
        // when it closes. (A weak reference gives the mirror a side table
        // whose only pointer LeakSanitizer cannot read: a mirror still alive
        // at exit then showed up as a leak, in about 1 run of 600.)
        // Listening for owner changes first: none slips in before the owner is known.
        connection.onOwnerChange { [self] name, newOwner in
            guard name == BlueZ.service else { return }
            ownerChanged(to: newOwner)
        }
        let owner = try await connection.trackOwner(of: BlueZ.service, timeout: callTimeout)
        // The owner as tracked when this runs: a change handled meanwhile is in it.
        loop.execute { [self] in state.value.owner = connection.owner(of: BlueZ.service) }
        connection.onDisconnect { [self] in busLost() }
        // One match rule for every signal of bluetoothd's (its ObjectManager's
        // at "/" and its objects' PropertiesChanged; `apply` ignores the rest):
        // one round trip to the bus daemon, not one per kind, before a
        // one-shot command can look at the tree.
        let bluetoothd = SignalFilter(sender: BlueZ.service)
        _ = try await connection.subscribe(bluetoothd, timeout: callTimeout) { [self] message in
            apply(message)
        }
        guard owner != nil else { throw BluetoothError.bluetoothdNotRunning }
        let read = HandOff<Void>()
        readTree { error in read.settle(error.map { .failure($0) } ?? .success(())) }
        try await read.wait()
    }

    /// GetManagedObjects; the reply is applied on the loop, in order.
    private func readTree(completion: @escaping @Sendable ((any Error)?) -> Void) {
        let call = DBusMessage.methodCall(
            destination: BlueZ.service, path: .root, interface: BlueZ.objectManager, member: "GetManagedObjects")
        connection.call(call, timeout: callTimeout) { [self] result in
            switch result {
            case .success(let reply):
                guard let objects = reply.arguments.first else {
                    completion(DBusError.unexpectedReply("GetManagedObjects returned nothing"))
                    return
                }
                mutate { tree in tree.replace(withManagedObjects: objects) }
                completion(nil)
            case .failure(let error):
                completion(BluetoothError(error, operation: "read BlueZ's objects"))
            }
        }
    }

    /// On the loop: the bus connection is gone.
    private func busLost() {
        state.value.busLost = true
        let listeners = state.value.listeners.values
        let observers = state.value.observers.values
        state.value.listeners.removeAll()
        state.value.observers.removeAll()
        for listener in listeners { listener.continuation.finish() }
        for observer in observers { observer.onBusLost() }
    }

    private func ownerChanged(to newOwner: String?) {
        state.value.owner = newOwner
        mutate { tree in tree.clear() }
        if newOwner != nil { readTree { _ in } }
    }

    private func apply(_ message: DBusMessage) {
        // The change read in place; `mutate`'s closure captures the change
        // and the path, not the message: one that did copied the message
        // whole (per notification value).
        let wasPropertiesChanged: Void? = message.withPropertiesChanged { change in
            guard let path = message.path, path.isDescendant(of: BlueZ.root) else { return }
            mutate { tree in tree.apply(change, at: path) }
        }
        if wasPropertiesChanged != nil { return }
        guard message.interface == BlueZ.objectManager, message.path == .root else { return }
        let arguments = message.arguments
        switch message.member {
        case "InterfacesAdded": mutate { tree in tree.apply(interfacesAdded: arguments) }
        case "InterfacesRemoved": mutate { tree in tree.apply(interfacesRemoved: arguments) }
        default: return
        }
    }

    /// Applies what bluetoothd answered when asked, for a property 5.66 changes
    /// without a signal (`BlueZ566.mtuMissing`, pitfall 26): the mirror, its
    /// listeners and observers see it as if it had been signalled.
    package func record(_ properties: [DBusProperty], interface: String, at paths: [ObjectPath]) async {
        await loop.submit { [self] in
            for path in paths {
                mutate { tree in tree.apply(PropertiesChanged(interface: interface, changed: properties), at: path) }
            }
        }
    }

    /// On the loop: applies a change and tells every listener and observer.
    private func mutate(_ body: (inout BlueZObjectTree) -> BlueZObjectTree.Change?) {
        guard let change = body(&state.value.tree) else { return }
        // Copies (references, not the objects), taken in one access of the
        // loop's state (this runs per notification value): a listener or
        // observer may stop listening or observing.
        let (listeners, observers, tree, running) = state.value.afterChange
        for listener in listeners where listener.wants(change) { listener.continuation.yield(change) }
        for observer in observers { observer.onChange(change, tree, running) }
    }

    // MARK: - Reading

    /// The tree as it is now (from any thread: a copy handed over by the
    /// loop). Blocks a thread off the loop until the loop answers: for
    /// synchronous code only (the public getters, and the loop itself, where
    /// it runs inline); async code asks `currentTree()` or `properties(_:_:)`.
    package var tree: BlueZObjectTree { loop.sync { [self] in state.value.tree } }

    /// The tree as it is now, for async code: read on the loop and handed
    /// over (`EventLoop.submit`), no thread blocked.
    package func currentTree() async -> BlueZObjectTree {
        await loop.submit { [self] in state.value.tree }
    }

    /// One object's properties of `interface` now (nil: not in the tree), for async code.
    package func properties(_ path: ObjectPath, _ interface: String) async -> PropertyMap? {
        await loop.submit { [self] in state.value.tree.properties(path, interface) }
    }

    /// Whether bluetoothd is on the bus now.
    package var bluetoothdRunning: Bool { loop.sync { [self] in state.value.owner != nil } }

    /// On the loop: calls `start` with the tree now, then `onChange` with
    /// every change and the tree right after it, in bus order, until
    /// `stopObserving` (the returned id). For consumers that turn changes
    /// into events of their own (a scan, a state machine's driver): no
    /// hand-over to a task per change, no copy of the tree. The callbacks
    /// must be quick. `onBusLost` runs once the bus connection is gone (at
    /// once if it already is; the id is then inert).
    package func observe(
        start: (borrowing BlueZObjectTree) -> Void,
        onChange: @escaping (BlueZObjectTree.Change, borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Void,
        onBusLost: @escaping () -> Void
    ) -> UInt64 {
        let tree = state.value.tree
        start(tree)
        let id = state.value.nextListener
        state.value.nextListener += 1
        if state.value.busLost {
            onBusLost()
        } else {
            state.value.observers[id] = Observer(onChange: onChange, onBusLost: onBusLost)
        }
        return id
    }

    /// On the loop: ends an `observe`.
    package func stopObserving(_ id: UInt64) {
        state.value.observers.removeValue(forKey: id)
    }

    /// `observe` from any thread: registered on the loop (after what was
    /// handed to it before), ended by the returned observation's `cancel()`,
    /// also from any thread.
    package func observeFromAnywhere(
        start: @escaping @Sendable (borrowing BlueZObjectTree) -> Void,
        onChange: @escaping @Sendable (BlueZObjectTree.Change, borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Void,
        onBusLost: @escaping @Sendable () -> Void
    ) -> MirrorObservation {
        let observation = MirrorObservation(mirror: self)
        loop.execute { [self] in
            guard !observation.state.value.cancelled else { return }
            observation.state.value.id = observe(start: start, onChange: onChange, onBusLost: onBusLost)
        }
        return observation
    }

    /// Waits until `holds` is true of the tree (and whether bluetoothd runs),
    /// tested on the loop now and after every change, at most `timeout` (a
    /// loop timer); false when time ran out, the bus connection was lost or
    /// the caller was cancelled.
    package func waitUntil(timeout: Duration,
                           _ holds: @escaping @Sendable (borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Bool) async -> Bool {
        let outcome = HandOff<Bool>()
        let wait = LoopBound<(observer: UInt64?, timer: EventLoop.TimerID?, over: Bool)>((nil, nil, false), loop: loop)
        @Sendable func end(_ reached: Bool) {
            guard !wait.value.over else { return }
            wait.value.over = true
            outcome.settle(.success(reached))
            if let observer = wait.value.observer { stopObserving(observer) }
            if let timer = wait.value.timer { loop.cancel(timer) }
        }
        loop.execute { [self] in
            var reachedAtStart = false
            let observer = observe(start: { tree in reachedAtStart = holds(tree, state.value.owner != nil) },
                                   onChange: { _, tree, running in if holds(tree, running) { end(true) } },
                                   onBusLost: { end(false) })
            guard !wait.value.over else { return }   // the bus was lost already, or the caller gave up
            wait.value.observer = observer
            if reachedAtStart {
                end(true)
            } else {
                wait.value.timer = loop.schedule(after: timeout) { end(false) }
            }
        }
        return await withTaskCancellationHandler {
            (try? await outcome.wait()) ?? false
        } onCancel: {
            loop.execute { end(false) }
        }
    }

    /// A snapshot and every change after it. The stream ends when the
    /// consumer stops iterating or the bus connection is lost.
    package func changes(
        where wants: @escaping @Sendable (BlueZObjectTree.Change) -> Bool = { _ in true }
    ) -> (BlueZObjectTree, AsyncStream<BlueZObjectTree.Change>) {
        let (stream, continuation) = AsyncStream<BlueZObjectTree.Change>.makeStream()
        let (snapshot, id) = loop.sync { [self] () -> (BlueZObjectTree, UInt64?) in
            if state.value.busLost {
                continuation.finish()
                return (state.value.tree, nil)
            }
            let id = state.value.nextListener
            state.value.nextListener += 1
            state.value.listeners[id] = Listener(continuation: continuation, wants: wants)
            return (state.value.tree, id)
        }
        if let id {
            // Handing a job to the loop never waits (see EventLoop.execute),
            // so this is safe inside a task's cancellation.
            continuation.onTermination = { [self] _ in
                loop.execute { [self] in _ = state.value.listeners.removeValue(forKey: id) }
            }
        }
        return (snapshot, stream)
    }
}

/// An `observeFromAnywhere` registration; `cancel()` ends it from any thread.
package final class MirrorObservation: Sendable {
    fileprivate struct State {
        var id: UInt64?
        var cancelled = false
    }
    private let mirror: BlueZMirror
    fileprivate let state: LoopBound<State>

    fileprivate init(mirror: BlueZMirror) {
        self.mirror = mirror
        state = LoopBound(State(), loop: mirror.loop)
    }

    /// Stops the callbacks (on the loop, after what was handed to it before).
    package func cancel() {
        mirror.loop.execute { [self] in
            state.value.cancelled = true
            if let id = state.value.id { mirror.stopObserving(id) }
        }
    }
}
