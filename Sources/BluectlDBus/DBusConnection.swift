import CBluectlShim
import CDBus
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A private connection to a message bus, owned by one I/O thread.
///
/// Why this shape (docs/bluez-pitfalls.md, "libdbus from Swift"):
/// - only the I/O thread touches the libdbus connection, so no two threads
///   ever pop each other's messages;
/// - replies are matched to calls through our own serial → handler table
///   with deadlines the I/O loop enforces, so every timeout really fires
///   (libdbus's pending-call timeouts need a main loop we don't have);
/// - signals are delivered in bus order on the I/O thread, and a signal
///   subscribed for a well-known name (`org.bluez`) is accepted only when its
///   sender is that name's current unique owner, tracked from
///   `NameOwnerChanged` — another client cannot impersonate bluetoothd.
public final class DBusConnection: Sendable {
    /// The address tried: `$DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket.
    public static var systemBusAddress: String {
        // getenv, not ProcessInfo: that copies the whole environment into a dictionary first.
        if let raw = getenv("DBUS_SYSTEM_BUS_ADDRESS"), raw.pointee != 0 {
            return String(cString: raw)
        }
        return "unix:path=/var/run/dbus/system_bus_socket"
    }

    /// The bus daemon's own name; only it can send `NameOwnerChanged`.
    public static let busName = "org.freedesktop.DBus"

    public let address: String
    /// Our unique name on the bus (":1.42").
    public let uniqueName: String

    /// Touched only by the I/O thread (and by `deinit`, once it has stopped).
    nonisolated(unsafe) private let raw: OpaquePointer
    private let wakeFD: Int32
    private let state = Locked(State())

    /// Token for a registered signal handler; pass it to `unsubscribe`.
    public struct SubscriptionToken: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    public typealias ReplyHandler = @Sendable (Result<DBusMessage, DBusError>) -> Void
    public typealias SignalHandler = @Sendable (DBusMessage) -> Void
    public typealias MethodHandler = @Sendable (DBusMessage, DBusConnection) -> Void
    public typealias OwnerHandler = @Sendable (_ name: String, _ newOwner: String?) -> Void

    private struct Pending {
        var method: String
        var timeout: Double
        var deadline: ContinuousClock.Instant
        var handler: ReplyHandler
    }

    private struct Outgoing {
        var raw: RawMessage
        var callID: UInt64?
    }

    private struct Subscription {
        var filter: SignalFilter
        var handler: SignalHandler
    }

    private struct State: ~Copyable {
        var nextID: UInt64 = 1
        var outbox: [Outgoing] = []
        /// Calls not yet sent are keyed by id only; once sent, `serials` maps back.
        var pending: [UInt64: Pending] = [:]
        var serials: [UInt32: UInt64] = [:]
        var subscriptions: [UInt64: Subscription] = [:]
        var methodHandlers: [ObjectPath: MethodHandler] = [:]
        /// Well-known name → current unique owner (nil: no owner), for tracked names.
        var owners: [String: String?] = [:]
        var ownerHandlers: [UInt64: OwnerHandler] = [:]
        var disconnectHandlers: [@Sendable () -> Void] = []
        var running = true
        var closed = false
    }

    // MARK: - Opening

    /// Connects to the bus at `address` (default: the system bus), says Hello
    /// and starts the I/O thread.
    public static func connect(address: String = DBusConnection.systemBusAddress) throws(DBusError) -> DBusConnection {
        DBusConnection.initializeThreadsOnce
        var error = DBusError_C()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard bluectl_valid_utf8(address), let raw = dbus_connection_open_private(address, &error) else {
            throw .connectionFailed(address: address, reason: errorText(error, fallback: "invalid address"))
        }
        dbus_connection_set_exit_on_disconnect(raw, 0)
        guard dbus_bus_register(raw, &error) != 0, let unique = dbus_bus_get_unique_name(raw) else {
            let reason = errorText(error, fallback: "registration failed")
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
            throw .connectionFailed(address: address, reason: reason)
        }
        let wake = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wake >= 0 else {
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
            throw .connectionFailed(address: address, reason: "eventfd: \(String(cString: strerror(errno)))")
        }
        let connection = DBusConnection(raw: raw, address: address, uniqueName: String(cString: unique), wakeFD: wake)
        connection.startIOThread()
        return connection
    }

    private static let initializeThreadsOnce: Void = {
        _ = dbus_threads_init_default()
    }()

    private init(raw: OpaquePointer, address: String, uniqueName: String, wakeFD: Int32) {
        self.raw = raw
        self.address = address
        self.uniqueName = uniqueName
        self.wakeFD = wakeFD
    }

    deinit {
        // The I/O thread holds `self` until it has closed the connection.
        dbus_connection_unref(raw)
        _ = closeDescriptor(wakeFD)
    }

    /// Stops the I/O thread and closes the connection. Pending calls fail
    /// with `.disconnected`. Safe to call more than once.
    public func close() {
        let wasRunning = state.withLock { state -> Bool in
            let was = state.running
            state.running = false
            return was
        }
        if wasRunning { wake() }
        ioDone.wait()
        ioDone.signal()
    }

    public var isConnected: Bool { state.withLock { $0.running && !$0.closed } }

    // MARK: - Calls

    /// Sends `message` (a method call) and hands the reply, an error reply as
    /// `.remote`, `.timedOut` or `.disconnected` to `handler` on the I/O
    /// thread, in bus order with signals.
    public func call(_ message: DBusMessage, timeout: Duration, handler: @escaping ReplyHandler) {
        let seconds = timeout.seconds
        let encoded: RawMessage
        do {
            encoded = try MessageCodec.encode(message)
        } catch {
            handler(.failure(error))
            return
        }
        let accepted = state.withLock { state -> Bool in
            guard state.running, !state.closed else { return false }
            let id = state.nextID
            state.nextID += 1
            state.pending[id] = Pending(
                method: message.methodDescription, timeout: seconds,
                deadline: .now + timeout, handler: handler)
            state.outbox.append(Outgoing(raw: encoded, callID: id))
            return true
        }
        guard accepted else {
            handler(.failure(.disconnected))
            return
        }
        wake()
    }

    /// Sends a method call and waits for its reply. An error reply throws
    /// `.remote(name:message:)`; no reply within `timeout` throws `.timedOut`.
    /// Task cancellation abandons the call.
    public func call(_ message: DBusMessage, timeout: Duration) async throws -> DBusMessage {
        let reply = HandOff<DBusMessage>()
        return try await withTaskCancellationHandler {
            call(message, timeout: timeout) { reply.settle($0.mapError { $0 }) }
            return try await reply.wait()
        } onCancel: {
            reply.settle(.failure(CancellationError()))
        }
    }

    /// Convenience: a method call and its reply's arguments.
    public func callMethod(
        destination: String, path: ObjectPath, interface: String, member: String,
        arguments: [DBusValue] = [], timeout: Duration
    ) async throws -> [DBusValue] {
        let message = DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: member, arguments: arguments)
        return try await call(message, timeout: timeout).arguments
    }

    /// Sends a message that expects no reply (a signal, or a reply we make).
    public func send(_ message: DBusMessage) throws(DBusError) {
        let encoded = try MessageCodec.encode(message)
        let accepted = state.withLock { state -> Bool in
            guard state.running, !state.closed else { return false }
            state.outbox.append(Outgoing(raw: encoded, callID: nil))
            return true
        }
        guard accepted else { throw .disconnected }
        wake()
    }

    // MARK: - Signals

    /// Registers `handler` for signals matching `filter` and adds the match
    /// rule on the bus. When the filter names a well-known sender, its owner
    /// is tracked first so that only the owner's signals are accepted.
    /// The handler runs on the I/O thread and must return quickly.
    public func subscribe(_ filter: SignalFilter, timeout: Duration = .seconds(25), handler: @escaping SignalHandler) async throws -> SubscriptionToken {
        if let sender = filter.sender, !sender.hasPrefix(":") {
            _ = try await trackOwner(of: sender, timeout: timeout)
        }
        let id = state.withLock { state -> UInt64 in
            let id = state.nextID
            state.nextID += 1
            state.subscriptions[id] = Subscription(filter: filter, handler: handler)
            return id
        }
        do {
            try await busCall("AddMatch", [.string(filter.matchRule)], timeout: timeout)
        } catch {
            _ = state.withLock { $0.subscriptions.removeValue(forKey: id) }
            throw error
        }
        return SubscriptionToken(id: id)
    }

    /// Removes a handler and its match rule (leaked rules count against the
    /// daemon's per-connection limit).
    public func unsubscribe(_ token: SubscriptionToken, timeout: Duration = .seconds(5)) async {
        let removed = state.withLock { $0.subscriptions.removeValue(forKey: token.id) }
        guard let removed, isConnected else { return }
        _ = try? await busCall("RemoveMatch", [.string(removed.filter.matchRule)], timeout: timeout)
    }

    // MARK: - Name owners

    /// Starts tracking who owns `name` (NameOwnerChanged first, then
    /// GetNameOwner, so no change slips between) and returns the owner now.
    @discardableResult
    public func trackOwner(of name: String, timeout: Duration = .seconds(25)) async throws -> String? {
        guard bluectl_valid_bus_name(name), !name.hasPrefix(":") else {
            throw DBusError.invalidArgument("bus name \"\(name)\"")
        }
        if let known = state.withLock({ $0.owners[name] }) { return known }
        let rule = "type='signal',sender='\(Self.busName)',interface='\(Self.busName)',member='NameOwnerChanged',arg0='\(name)'"
        try await busCall("AddMatch", [.string(rule)], timeout: timeout)
        // The reply handler runs on the I/O thread in bus order: a
        // NameOwnerChanged that came before the reply is older than it.
        let owner = HandOff<String?>()
        let message = DBusMessage.methodCall(
            destination: Self.busName, path: ObjectPath(verified: "/org/freedesktop/DBus"),
            interface: Self.busName, member: "GetNameOwner", arguments: [.string(name)])
        call(message, timeout: timeout) { [self] result in
            switch result {
            case .success(let reply):
                let current = reply.arguments.first?.string
                state.withLock { $0.owners[name] = .some(current) }
                owner.settle(.success(current))
            case .failure(.remote(name: "org.freedesktop.DBus.Error.NameHasNoOwner", _)):
                state.withLock { $0.owners[name] = .some(nil) }
                owner.settle(.success(nil))
            case .failure(let error):
                owner.settle(.failure(error))
            }
        }
        return try await owner.wait()
    }

    /// The current owner of a tracked name (`nil` when it has none or is not tracked).
    public func owner(of name: String) -> String? {
        state.withLock { $0.owners[name] ?? nil }
    }

    /// Calls `handler` on the I/O thread whenever a tracked name changes owner.
    @discardableResult
    public func onOwnerChange(_ handler: @escaping OwnerHandler) -> SubscriptionToken {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.ownerHandlers[id] = handler
            return SubscriptionToken(id: id)
        }
    }

    /// Calls `handler` once, on the I/O thread, when the connection is lost.
    public func onDisconnect(_ handler: @escaping @Sendable () -> Void) {
        let already = state.withLock { state -> Bool in
            if state.closed { return true }
            state.disconnectHandlers.append(handler)
            return false
        }
        if already { handler() }
    }

    // MARK: - Exported objects

    /// Routes method calls for `path` to `handler` (on the I/O thread). The
    /// handler must eventually `send` a reply unless the caller asked for none.
    public func export(_ path: ObjectPath, handler: @escaping MethodHandler) {
        state.withLock { $0.methodHandlers[path] = handler }
    }

    public func unexport(_ path: ObjectPath) {
        _ = state.withLock { $0.methodHandlers.removeValue(forKey: path) }
    }

    // MARK: - The I/O thread

    private let ioDone = DispatchSemaphore(value: 0)

    private func startIOThread() {
        startThread(name: "bluectl-dbus-io") { [self] in
            runLoop()
            ioDone.signal()
        }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func runLoop() {
        let busFD: Int32 = {
            var fd: Int32 = -1
            dbus_connection_get_unix_fd(raw, &fd)
            return fd
        }()
        var connected = true
        while connected {
            // 1. send what callers queued, registering serials before any reply can be popped
            let (outgoing, running) = state.withLock { state -> ([Outgoing], Bool) in
                let out = state.outbox
                state.outbox.removeAll(keepingCapacity: true)
                return (out, state.running)
            }
            guard running else { break }
            for item in outgoing {
                var serial: UInt32 = 0
                if dbus_connection_send(raw, item.raw.pointer, &serial) == 0 {
                    if let id = item.callID {
                        let pending = state.withLock { $0.pending.removeValue(forKey: id) }
                        pending?.handler(.failure(.invalidArgument("out of memory sending \(pending?.method ?? "")")))
                    }
                    continue
                }
                if let id = item.callID {
                    state.withLock { state in
                        if state.pending[id] != nil { state.serials[serial] = id }
                    }
                }
            }
            // 2. wait for the bus, a wake-up, or the nearest deadline
            var fds = [
                pollfd(fd: busFD, events: Int16(POLLIN) | (dbus_connection_has_messages_to_send(raw) != 0 ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            ]
            let waitMilliseconds = millisecondsToNearestDeadline()
            let ready = poll(&fds, 2, waitMilliseconds)
            if ready < 0 && errno != EINTR { break }
            if fds[1].revents & Int16(POLLIN) != 0 {
                var counter: UInt64 = 0
                _ = read(wakeFD, &counter, 8)
            }
            // 3. move bytes both ways without blocking, then handle every complete message
            if dbus_connection_read_write(raw, 0) == 0 { connected = false }
            while let message = dbus_connection_pop_message(raw) {
                let owned = RawMessage(taking: message)
                if !handle(owned) { connected = false }
            }
            if fds[0].revents & Int16(POLLHUP | POLLERR) != 0, dbus_connection_get_is_connected(raw) == 0 {
                connected = false
            }
            // 4. fail the calls whose time is up
            expireDeadlines()
        }
        shutDown()
    }

    private func millisecondsToNearestDeadline() -> Int32 {
        let nearest = state.withLock { state in state.pending.values.map(\.deadline).min() }
        guard let nearest else { return -1 }
        let remaining = nearest - .now
        if remaining <= .zero { return 0 }
        let ms = remaining.seconds * 1000
        return Int32(min(ms.rounded(.up), 60_000))
    }

    private func expireDeadlines() {
        let now = ContinuousClock.now
        let expired = state.withLock { state -> [Pending] in
            let ids = state.pending.filter { $0.value.deadline <= now }.map(\.key)
            guard !ids.isEmpty else { return [] }
            let idSet = Set(ids)
            state.serials = state.serials.filter { !idSet.contains($0.value) }
            return ids.compactMap { state.pending.removeValue(forKey: $0) }
        }
        for call in expired {
            call.handler(.failure(.timedOut(method: call.method, seconds: call.timeout)))
        }
    }

    /// Returns false when the message says the connection is gone.
    private func handle(_ raw: RawMessage) -> Bool {
        let message: DBusMessage
        do {
            message = try MessageCodec.decode(raw.pointer)
        } catch {
            // A reply we cannot decode still ends its call.
            let replySerial = dbus_message_get_reply_serial(raw.pointer)
            if replySerial != 0, let call = takePending(serial: replySerial) {
                call.handler(.failure(error))
            }
            return true
        }
        switch message.kind {
        case .methodReturn, .error:
            guard let serial = message.replySerial, let call = takePending(serial: serial) else { return true }
            if let error = message.remoteError {
                call.handler(.failure(error))
            } else {
                call.handler(.success(message))
            }
        case .signal:
            if message.interface == "org.freedesktop.DBus.Local", message.member == "Disconnected" {
                return false
            }
            dispatchSignal(message)
        case .methodCall:
            dispatchMethodCall(message)
        }
        return true
    }

    private func takePending(serial: UInt32) -> Pending? {
        state.withLock { state in
            guard let id = state.serials.removeValue(forKey: serial) else { return nil }
            return state.pending.removeValue(forKey: id)
        }
    }

    private func dispatchSignal(_ message: DBusMessage) {
        // Owner changes come only from the bus daemon itself.
        if message.sender == Self.busName, message.interface == Self.busName,
           message.member == "NameOwnerChanged", message.arguments.count == 3,
           let name = message.arguments[0].string, let newOwner = message.arguments[2].string {
            let owner: String? = newOwner.isEmpty ? nil : newOwner
            let handlers = state.withLock { state -> [OwnerHandler] in
                guard state.owners[name] != nil else { return [] }
                state.owners[name] = .some(owner)
                return Array(state.ownerHandlers.values)
            }
            for handler in handlers { handler(name, owner) }
        }
        let handlers = state.withLock { state -> [SignalHandler] in
            state.subscriptions.values.compactMap { subscription in
                let filter = subscription.filter
                guard filter.matches(message) else { return nil }
                if let sender = filter.sender {
                    let expected: String? = sender.hasPrefix(":") ? sender : (state.owners[sender] ?? nil)
                    guard let expected, message.sender == expected else { return nil }
                }
                return subscription.handler
            }
        }
        for handler in handlers { handler(message) }
    }

    private func dispatchMethodCall(_ message: DBusMessage) {
        if message.interface == "org.freedesktop.DBus.Peer" {
            if message.member == "Ping" {
                try? send(.methodReturn(to: message))
                return
            }
        }
        let handler = message.path.flatMap { path in state.withLock { $0.methodHandlers[path] } }
        if let handler {
            handler(message, self)
        } else if !message.noReplyExpected {
            try? send(.error(to: message, name: "org.freedesktop.DBus.Error.UnknownObject",
                             message: "No such object \(message.path?.rawValue ?? "")"))
        }
    }

    private func shutDown() {
        dbus_connection_close(raw)
        let (pending, disconnectHandlers) = state.withLock { state -> ([Pending], [@Sendable () -> Void]) in
            state.running = false
            state.closed = true
            let pending = Array(state.pending.values)
            state.pending.removeAll()
            state.serials.removeAll()
            state.outbox.removeAll()
            let handlers = state.disconnectHandlers
            state.disconnectHandlers.removeAll()
            // A closed connection keeps no handler: whoever they hold (the
            // object tree's mirror, an agent) is free again, so that they can
            // hold it strongly instead of weakly (see BlueZMirror).
            state.subscriptions.removeAll()
            state.ownerHandlers.removeAll()
            state.methodHandlers.removeAll()
            return (pending, handlers)
        }
        for call in pending { call.handler(.failure(.disconnected)) }
        for handler in disconnectHandlers { handler() }
    }

    private func busCall(_ member: String, _ arguments: [DBusValue], timeout: Duration) async throws {
        _ = try await call(
            .methodCall(destination: Self.busName, path: ObjectPath(verified: "/org/freedesktop/DBus"),
                        interface: Self.busName, member: member, arguments: arguments),
            timeout: timeout)
    }

    private static func errorText(_ error: DBusError_C, fallback: String) -> String {
        guard dbus_error_is_set(withUnsafePointer(to: error) { $0 }) != 0, let message = error.message else {
            return fallback
        }
        return String(cString: message)
    }
}

// MARK: - Helpers

extension Duration {
    /// The duration in seconds, as a Double.
    public var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}

