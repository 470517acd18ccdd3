import BluectlDBus
import Dispatch

/// Keeps a `BlueZObjectTree` current from bluetoothd's signals and lets any
/// number of listeners take a snapshot and the changes after it, with no gap.
///
/// Order matters (docs/bluez-pitfalls.md, 4): the signal subscriptions are in place
/// before `GetManagedObjects`, and both are handled on the connection's I/O
/// thread in bus order, so nothing that happens in between is missed. Only
/// signals from the current owner of `org.bluez` are accepted; when the owner
/// changes (bluetoothd restarted or gone), the tree is cleared and re-read.
package final class BlueZMirror: Sendable {
    package let connection: DBusConnection
    private let callTimeout: Duration

    private struct State: ~Copyable {
        var tree = BlueZObjectTree()
        var listeners: [UInt64: Listener] = [:]
        var observers: [UInt64: Observer] = [:]
        var nextListener: UInt64 = 1
        var owner: String?
        var accessError: DBusError?
        /// The bus connection is gone: no change will ever come.
        var busLost = false
    }
    private let state = Locked(State())

    /// A `changes()` stream and the changes it wants (tested on the I/O thread,
    /// so that a high-rate change nobody listens for wakes no task).
    private struct Listener {
        var continuation: AsyncStream<BlueZObjectTree.Change>.Continuation
        var wants: @Sendable (BlueZObjectTree.Change) -> Bool
    }

    /// An `observe` callback pair.
    private struct Observer {
        var onChange: @Sendable (BlueZObjectTree.Change, borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Void
        var onBusLost: @Sendable () -> Void
    }

    private init(connection: DBusConnection, callTimeout: Duration) {
        self.connection = connection
        self.callTimeout = callTimeout
    }

    /// Subscribes, reads the tree, and keeps it current. Throws
    /// `BluetoothError.bluetoothdNotRunning` when org.bluez has no owner.
    package static func start(connection: DBusConnection, timeout: Duration) async throws -> BlueZMirror {
        let mirror = BlueZMirror(connection: connection, callTimeout: timeout)
        try await mirror.subscribe()
        return mirror
    }

    private func subscribe() async throws {
        let owner = try await connection.trackOwner(of: BlueZ.service, timeout: callTimeout)
        state.withLock { $0.owner = owner }
        // One handler for all listeners (not one per `changes()` call: a
        // long-running subscriber calls it again on every reconnect).
        // The handlers hold the mirror strongly: the connection drops them
        // when it closes. (A weak reference gives the mirror a side table
        // whose only pointer LeakSanitizer cannot read: a mirror still alive
        // at exit then showed up as a leak, in about 1 run of 600.)
        connection.onDisconnect { [self] in
            let (listeners, observers) = state.withLock { state -> ([AsyncStream<BlueZObjectTree.Change>.Continuation], [Observer]) in
                state.busLost = true
                return (state.listeners.values.map(\.continuation), Array(state.observers.values))
            }
            for listener in listeners { listener.finish() }
            for observer in observers { observer.onBusLost() }
        }
        connection.onOwnerChange { [self] name, newOwner in
            guard name == BlueZ.service else { return }
            ownerChanged(to: newOwner)
        }
        let objectManager = SignalFilter(sender: BlueZ.service, interface: BlueZ.objectManager, path: .root)
        _ = try await connection.subscribe(objectManager, timeout: callTimeout) { [self] message in
            apply(message)
        }
        let properties = SignalFilter(
            sender: BlueZ.service, interface: BlueZ.properties, member: "PropertiesChanged", pathNamespace: BlueZ.root)
        _ = try await connection.subscribe(properties, timeout: callTimeout) { [self] message in
            apply(message)
        }
        guard owner != nil else { throw BluetoothError.bluetoothdNotRunning }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            readTree { error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume() }
            }
        }
    }

    /// GetManagedObjects; the reply is applied on the I/O thread, in order.
    private func readTree(completion: @escaping @Sendable (Error?) -> Void) {
        let call = DBusMessage.methodCall(
            destination: BlueZ.service, path: .root, interface: BlueZ.objectManager, member: "GetManagedObjects")
        connection.call(call, timeout: callTimeout) { [self] result in
            switch result {
            case .success(let reply):
                guard let objects = reply.arguments.first else {
                    completion(DBusError.unexpectedReply("GetManagedObjects returned nothing"))
                    return
                }
                self.mutate { tree in tree.replace(withManagedObjects: objects) }
                completion(nil)
            case .failure(let error):
                if case .remote(let name, _) = error, name == "org.freedesktop.DBus.Error.AccessDenied" {
                    self.state.withLock { $0.accessError = error }
                }
                completion(BluetoothError(error, operation: "read BlueZ's objects"))
            }
        }
    }

    private func ownerChanged(to newOwner: String?) {
        state.withLock { $0.owner = newOwner }
        mutate { tree in tree.clear() }
        if newOwner != nil { readTree { _ in } }
    }

    private func apply(_ message: DBusMessage) {
        mutate { tree in
            switch message.member {
            case "InterfacesAdded": return tree.apply(interfacesAdded: message.arguments)
            case "InterfacesRemoved": return tree.apply(interfacesRemoved: message.arguments)
            case "PropertiesChanged":
                guard let path = message.path else { return nil }
                return tree.apply(propertiesChangedAt: path, arguments: message.arguments)
            default: return nil
            }
        }
    }

    /// Applies a change and tells every listener, under one lock so that a
    /// new listener's snapshot and its first change line up exactly.
    private func mutate(_ body: (inout BlueZObjectTree) -> BlueZObjectTree.Change?) {
        state.withLock { state in
            guard let change = body(&state.tree) else { return }
            for listener in state.listeners.values where listener.wants(change) { listener.continuation.yield(change) }
            for observer in state.observers.values { observer.onChange(change, state.tree, state.owner != nil) }
        }
    }

    // MARK: - Reading

    /// The tree as it is now.
    package var tree: BlueZObjectTree { state.withLock { $0.tree } }

    /// Whether bluetoothd is on the bus now.
    package var bluetoothdRunning: Bool { state.withLock { $0.owner != nil } }

    /// Calls `start` with the tree now, then `onChange` with every change and
    /// the tree right after it — on the bus thread, under the mirror's lock,
    /// in bus order — until `stopObserving` (the returned id). For consumers
    /// that turn changes into events of their own at a high rate (a scan):
    /// no hand-over to a task per change, no copy of the tree. The callbacks
    /// must be quick and must not call the mirror. `onBusLost` runs once the
    /// bus connection is gone (at once if it already is).
    package func observe(
        start: (borrowing BlueZObjectTree) -> Void,
        onChange: @escaping @Sendable (BlueZObjectTree.Change, borrowing BlueZObjectTree, _ bluetoothdRunning: Bool) -> Void,
        onBusLost: @escaping @Sendable () -> Void
    ) -> UInt64 {
        let (id, lost) = state.withLock { state -> (UInt64, Bool) in
            start(state.tree)
            let id = state.nextListener
            state.nextListener += 1
            if state.busLost { return (id, true) }
            state.observers[id] = Observer(onChange: onChange, onBusLost: onBusLost)
            return (id, false)
        }
        if lost { onBusLost() }
        return id
    }

    /// Ends an `observe`. Takes the mirror's lock: never call it from a
    /// callback, nor where a task's cancellation could hold a lock the bus
    /// thread waits for (see `changes(where:)`); `DispatchQueue.global()` is safe.
    package func stopObserving(_ id: UInt64) {
        _ = state.withLock { $0.observers.removeValue(forKey: id) }
    }

    /// A snapshot and every change after it. The stream ends when the
    /// returned token's `cancel()` runs or the consumer stops iterating.
    package func changes(
        where wants: @escaping @Sendable (BlueZObjectTree.Change) -> Bool = { _ in true }
    ) -> (BlueZObjectTree, AsyncStream<BlueZObjectTree.Change>) {
        let (stream, continuation) = AsyncStream<BlueZObjectTree.Change>.makeStream()
        let snapshot = state.withLock { state -> BlueZObjectTree in
            if state.busLost {
                continuation.finish()
                return state.tree
            }
            let id = state.nextListener
            state.nextListener += 1
            state.listeners[id] = Listener(continuation: continuation, wants: wants)
            // Not under the lock here: onTermination can run inside a task's
            // cancellation, holding that task's status lock, while the I/O
            // thread holds our lock and yields to that very task (which takes
            // the status lock) — a lock-order deadlock, seen in `scan --count`.
            // Until removed, yields to the finished stream do nothing.
            // Strong: the stream's end releases this closure (no weak reference, see `subscribe`).
            continuation.onTermination = { [self] _ in
                DispatchQueue.global().async {
                    _ = self.state.withLock { $0.listeners.removeValue(forKey: id) }
                }
            }
            return state.tree
        }
        return (snapshot, stream)
    }
}
