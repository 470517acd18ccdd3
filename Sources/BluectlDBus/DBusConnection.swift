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

/// A private connection to a message bus, whose state one event loop owns.
///
/// Why this shape (docs/bluez-pitfalls.md, "libdbus from Swift";
/// docs/architecture.md, "The event loop"):
/// - the connection's I/O thread is its `EventLoop`: it alone touches the
///   libdbus connection (no two threads ever pop each other's messages) and
///   the tables below (calls waiting for replies, signal subscriptions,
///   exported objects, name owners), so they need no lock; other threads
///   hand it jobs;
/// - replies are matched to calls through our own serial → handler table,
///   with each call's deadline a timer of the loop, so every timeout really
///   fires (libdbus's pending-call timeouts need a main loop we don't have);
/// - signals are delivered in bus order on the loop, and a signal
///   subscribed for a well-known name (`org.bluez`) is accepted only when its
///   sender is that name's current unique owner, tracked from
///   `NameOwnerChanged` — another client cannot impersonate bluetoothd.
///
/// An embedded connection (`embedded()`, EmbeddedBus.swift) runs the same
/// code over an in-memory wire: a test answers its calls and emits signals
/// by hand, on a virtual clock (swift-nio's `EmbeddedChannel`).
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
    /// The loop that owns this connection (and what BluectlCore builds on it).
    package let loop: EventLoop
    private let wire: Wire
    private let tables: LoopBound<Tables>

    /// Token for a registered signal handler; pass it to `unsubscribe`.
    public struct SubscriptionToken: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    public typealias ReplyHandler = @Sendable (Result<DBusMessage, DBusError>) -> Void
    public typealias SignalHandler = @Sendable (DBusMessage) -> Void
    public typealias MethodHandler = @Sendable (DBusMessage, DBusConnection) -> Void
    public typealias OwnerHandler = @Sendable (_ name: String, _ newOwner: String?) -> Void

    /// Where messages go and come from.
    enum Wire: Sendable {
        case libdbus(LibDBusWire)
        case embedded(EmbeddedBus)
    }

    private struct Pending {
        var method: String
        var timeout: Double
        var timer: EventLoop.TimerID
        var handler: ReplyHandler
    }

    /// A class: every signal is checked against every subscription, and
    /// copying a filter's strings for each check cost more than the check.
    private final class Subscription {
        let filter: SignalFilter
        let handler: SignalHandler

        init(filter: SignalFilter, handler: @escaping SignalHandler) {
            self.filter = filter
            self.handler = handler
        }

        /// `filter.matches(message)` in a call of its own, where the filter
        /// is read in place: inlined into the loop over the subscriptions,
        /// the whole filter was copied (six strings retained and released)
        /// around the path-namespace and arg0 tests, per signal.
        @inline(never)
        func accepts(_ message: DBusMessage) -> Bool { filter.matches(message) }

        /// The owner of the filter's sender (a well-known name) as looked up
        /// in `Tables.owners`, and the version of the owners it was looked up
        /// in. Touched on the loop only, as the tables that hold the
        /// subscription are.
        private var ownerLookedUp: (version: UInt64, owner: String?) = (0, nil)

        /// Whether `message` comes from the filter's sender: that unique
        /// name, or the owner now of that well-known name (`owners`: the
        /// tracked names, at `version`), looked up again only when the
        /// owners changed (going through them was some 140 instructions per
        /// signal and subscription). In a call of its own as `accepts` is:
        /// inlined, the names were copied.
        @inline(never)
        func comesFromSender(_ message: DBusMessage, owners: [String: String?], version: UInt64) -> Bool {
            guard let sender = filter.sender else { return true }
            if sender.utf8.first == UInt8(ascii: ":") { return sameName(message.sender, sender) }
            if ownerLookedUp.version != version {
                // A few names are tracked: going through them costs less
                // than hashing the name.
                ownerLookedUp = (version, owners.first { sameName($0.key, sender) }?.value ?? nil)
            }
            return ownerLookedUp.owner.map { sameName(message.sender, $0) } ?? false
        }
    }

    /// Everything the loop keeps for the connection.
    private struct Tables {
        var nextID: UInt64 = 1
        /// Calls sent and not answered, by serial.
        var pending: [UInt32: Pending] = [:]
        var subscriptions: [UInt64: Subscription] = [:]
        var methodHandlers: [ObjectPath: MethodHandler] = [:]
        /// Well-known name → current unique owner (nil: no owner), for tracked names.
        var owners: [String: String?] = [:] {
            didSet { ownersVersion &+= 1 }
        }
        /// Counts the changes of `owners`, from 1: a subscription's owner
        /// looked up at another version is looked up again.
        var ownersVersion: UInt64 = 1
        var ownerHandlers: [UInt64: OwnerHandler] = [:]
        var disconnectHandlers: [@Sendable () -> Void] = []
        /// Run once the bytes waiting to be written fall to `drainedBelow` (`whenDrained`).
        var drainHandlers: [() -> Void] = []
        var drainedBelow = 0
        /// `close()` asked the I/O thread to stop.
        var stopRequested = false
        var closed = false

        mutating func takeID() -> UInt64 {
            defer { nextID += 1 }
            return nextID
        }
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
        let io = LibDBusWire(raw: raw, wakeFD: wake)
        guard io.watchSocket() else {
            dbus_connection_close(raw)
            throw .connectionFailed(address: address, reason: "libdbus refused the socket's watches (out of memory)")
        }
        let loop = EventLoop(wake: { io.wake() })
        let connection = DBusConnection(wire: .libdbus(io), loop: loop, address: address,
                                        uniqueName: String(cString: unique))
        connection.startIOThread(io)
        return connection
    }

    private static let initializeThreadsOnce: Void = {
        _ = dbus_threads_init_default()
    }()

    init(wire: Wire, loop: EventLoop, address: String, uniqueName: String) {
        self.wire = wire
        self.loop = loop
        self.address = address
        self.uniqueName = uniqueName
        tables = LoopBound(Tables(), loop: loop)
    }

    /// Stops the I/O thread and closes the connection. Pending calls fail
    /// with `.disconnected`. Safe to call more than once, from any thread
    /// (on the loop itself it does not wait for the end).
    public func close() {
        switch wire {
        case .libdbus(let io):
            loop.execute { [self] in tables.value.stopRequested = true }
            if !loop.inLoop { io.waitForEnd() }
        case .embedded:
            loop.execute { [self] in shutDown() }
        }
    }

    /// On the loop: `close()` asked the I/O thread to stop.
    var stopRequested: Bool { tables.value.stopRequested }

    /// Whether the connection is open (not closed, not lost).
    public var isConnected: Bool { loop.sync { [self] in !tables.value.closed && !tables.value.stopRequested } }

    // MARK: - Calls

    /// Sends `message` (a method call) and hands the reply, an error reply as
    /// `.remote`, `.timedOut` or `.disconnected` to `handler` on the loop,
    /// in bus order with signals.
    public func call(_ message: DBusMessage, timeout: Duration, handler: @escaping ReplyHandler) {
        let outgoing: Outgoing
        do {
            outgoing = try Outgoing(message, for: wire)
        } catch {
            handler(.failure(error))
            return
        }
        loop.execute { [self] in
            startCall(outgoing, method: message.methodDescription, timeout: timeout, handler: handler)
        }
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
    /// Throws `.disconnected` when the connection is known to be closed.
    public func send(_ message: DBusMessage) throws(DBusError) {
        let outgoing = try Outgoing(message, for: wire)
        if loop.inLoop {
            guard !tables.value.closed else { throw .disconnected }
            transmit(outgoing)
            return
        }
        loop.execute { [self] in
            if !tables.value.closed { transmit(outgoing) }
        }
    }

    /// On the loop: sends the call and files its handler and deadline.
    private func startCall(_ outgoing: Outgoing, method: String, timeout: Duration, handler: @escaping ReplyHandler) {
        guard !tables.value.closed else {
            handler(.failure(.disconnected))
            return
        }
        guard let serial = transmit(outgoing) else {
            handler(.failure(.invalidArgument("out of memory sending \(method)")))
            return
        }
        let timer = loop.schedule(after: timeout) { [self] in
            guard let call = tables.value.pending.removeValue(forKey: serial) else { return }
            call.handler(.failure(.timedOut(method: call.method, seconds: call.timeout)))
        }
        tables.value.pending[serial] = Pending(method: method, timeout: timeout.seconds, timer: timer, handler: handler)
    }

    /// On the loop: hands a message to the wire; its serial, or nil when libdbus could not take it.
    @discardableResult
    private func transmit(_ outgoing: Outgoing) -> UInt32? {
        switch (wire, outgoing) {
        case (.libdbus(let io), .raw(let raw)):
            var serial: UInt32 = 0
            return dbus_connection_send(io.raw, raw.pointer, &serial) == 0 ? nil : serial
        case (.embedded(let bus), .message(let message)):
            return bus.receive(message)
        default:
            preconditionFailure("a message encoded for another wire")
        }
    }

    // MARK: - Signals

    /// Registers `handler` for signals matching `filter` and adds the match
    /// rule on the bus. When the filter names a well-known sender, its owner
    /// is tracked first so that only the owner's signals are accepted.
    /// The handler runs on the loop and must return quickly.
    public func subscribe(_ filter: SignalFilter, timeout: Duration = .seconds(25), handler: @escaping SignalHandler) async throws -> SubscriptionToken {
        if let sender = filter.sender, !sender.hasPrefix(":") {
            _ = try await trackOwner(of: sender, timeout: timeout)
        }
        let id = await loop.submit { [self] in
            let id = tables.value.takeID()
            tables.value.subscriptions[id] = Subscription(filter: filter, handler: handler)
            return id
        }
        do {
            try await busCall("AddMatch", [.string(filter.matchRule)], timeout: timeout)
        } catch {
            loop.execute { [self] in _ = tables.value.subscriptions.removeValue(forKey: id) }
            throw error
        }
        return SubscriptionToken(id: id)
    }

    /// Removes a handler and its match rule (leaked rules count against the
    /// daemon's per-connection limit), from any thread: the handler goes (on
    /// the loop, at once when called there) and RemoveMatch is sent without
    /// awaiting its reply. An `onOwnerChange` handler's token removes that
    /// handler (the tracked name stays tracked).
    package func dropSubscription(_ token: SubscriptionToken) {
        let drop: @Sendable () -> Void = { [self] in
            if tables.value.ownerHandlers.removeValue(forKey: token.id) != nil { return }
            guard let removed = tables.value.subscriptions.removeValue(forKey: token.id), !tables.value.closed else { return }
            call(.methodCall(destination: Self.busName, path: ObjectPath(verified: "/org/freedesktop/DBus"),
                             interface: Self.busName, member: "RemoveMatch", arguments: [.string(removed.filter.matchRule)]),
                 timeout: .seconds(5)) { _ in }
        }
        if loop.inLoop { drop() } else { loop.execute(drop) }
    }

    // MARK: - Name owners

    /// Starts tracking who owns `name` (NameOwnerChanged first, then
    /// GetNameOwner, so no change slips between) and returns the owner now.
    @discardableResult
    public func trackOwner(of name: String, timeout: Duration = .seconds(25)) async throws -> String? {
        guard bluectl_valid_bus_name(name), !name.hasPrefix(":") else {
            throw DBusError.invalidArgument("bus name \"\(name)\"")
        }
        if let known = await loop.submit({ [self] in tables.value.owners[name] }) { return known }
        let rule = "type='signal',sender='\(Self.busName)',interface='\(Self.busName)',member='NameOwnerChanged',arg0='\(name)'"
        // AddMatch and GetNameOwner go out together, one round trip instead of
        // two: the bus daemon handles a connection's messages in order, so the
        // rule is in place before the owner is looked up. The reply handler
        // runs on the loop in bus order: a NameOwnerChanged that came before
        // the reply is older than it.
        // A failed AddMatch (answered first) keeps the owner from being recorded:
        // a name tracked without its rule would never see its owner change.
        let matched = HandOff<Void>()
        let ruleFailure = LoopBound<DBusError?>(nil, loop: loop)
        call(.methodCall(destination: Self.busName, path: ObjectPath(verified: "/org/freedesktop/DBus"),
                         interface: Self.busName, member: "AddMatch", arguments: [.string(rule)]),
             timeout: timeout) { result in
            if case .failure(let error) = result { ruleFailure.value = error }
            _ = matched.settle(result.map { _ in () }.mapError { $0 })
        }
        let owner = HandOff<String?>()
        let message = DBusMessage.methodCall(
            destination: Self.busName, path: ObjectPath(verified: "/org/freedesktop/DBus"),
            interface: Self.busName, member: "GetNameOwner", arguments: [.string(name)])
        call(message, timeout: timeout) { [self] result in
            if let failure = ruleFailure.value {
                owner.settle(.failure(failure))
                return
            }
            switch result {
            case .success(let reply):
                let current = reply.arguments.first?.string
                tables.value.owners[name] = .some(current)
                owner.settle(.success(current))
            case .failure(.remote(name: "org.freedesktop.DBus.Error.NameHasNoOwner", _)):
                tables.value.owners[name] = .some(nil)
                owner.settle(.success(nil))
            case .failure(let error):
                owner.settle(.failure(error))
            }
        }
        try await matched.wait()
        return try await owner.wait()
    }

    /// The current owner of a tracked name (`nil` when it has none or is not tracked).
    public func owner(of name: String) -> String? {
        loop.sync { [self] in tables.value.owners[name] ?? nil }
    }

    /// Calls `handler` on the loop whenever a tracked name changes owner.
    @discardableResult
    public func onOwnerChange(_ handler: @escaping OwnerHandler) -> SubscriptionToken {
        loop.sync { [self] in
            let id = tables.value.takeID()
            tables.value.ownerHandlers[id] = handler
            return SubscriptionToken(id: id)
        }
    }

    /// Calls `handler` once, on the loop, when the connection is lost (at
    /// once when it already is).
    public func onDisconnect(_ handler: @escaping @Sendable () -> Void) {
        loop.execute { [self] in
            if tables.value.closed { handler() } else { tables.value.disconnectHandlers.append(handler) }
        }
    }

    // MARK: - Exported objects

    /// Routes method calls for `path` to `handler` (on the loop). The
    /// handler must eventually `send` a reply unless the caller asked for
    /// none. In place for every message handled after this returns.
    public func export(_ path: ObjectPath, handler: @escaping MethodHandler) {
        loop.sync { [self] in tables.value.methodHandlers[path] = handler }
    }

    public func unexport(_ path: ObjectPath) {
        loop.execute { [self] in _ = tables.value.methodHandlers.removeValue(forKey: path) }
    }

    // MARK: - Outgoing backlog

    /// On the loop: the bytes sent but not yet written to the bus socket
    /// (libdbus's outgoing queue; the bus daemon reads it as fast as its
    /// limits for us allow). Always 0 on an embedded wire.
    package var outgoingBacklog: Int {
        loop.assertInLoop()
        guard case .libdbus(let io) = wire else { return 0 }
        return Int(dbus_connection_get_outgoing_size(io.raw))
    }

    /// On the loop: runs `handler` once the outgoing backlog is at most
    /// `bytes` (at once when it already is; never when the connection closes first).
    package func whenDrained(below bytes: Int, _ handler: @escaping () -> Void) {
        loop.assertInLoop()
        if outgoingBacklog <= bytes || tables.value.closed {
            if !tables.value.closed { handler() }
            return
        }
        tables.value.drainedBelow = tables.value.drainHandlers.isEmpty ? bytes : min(bytes, tables.value.drainedBelow)
        tables.value.drainHandlers.append(handler)
    }

    /// On the loop, after the socket was written: the drain handlers whose level is reached.
    func runDrainHandlers() {
        guard !tables.value.drainHandlers.isEmpty, outgoingBacklog <= tables.value.drainedBelow else { return }
        let handlers = tables.value.drainHandlers
        tables.value.drainHandlers = []
        for handler in handlers { handler() }
    }

    /// Returns false when the message says the connection is gone.
    /// `recentPath`: the I/O thread's, from one message to the next.
    func handle(_ raw: RawMessage, recentPath: inout RecentPath) -> Bool {
        do {
            return try MessageCodec.decode(raw.pointer, recentPath: &recentPath) { handle($0) }
        } catch {
            // A reply we cannot decode still ends its call.
            let replySerial = dbus_message_get_reply_serial(raw.pointer)
            if replySerial != 0, let call = takePending(serial: replySerial) {
                call.handler(.failure(error))
            }
            return true
        }
    }

    /// Handles one incoming message on the loop (the embedded wire hands its
    /// messages here directly); false when it says the connection is gone.
    func handle(_ message: DBusMessage) -> Bool {
        switch message.kind {
        case .methodReturn, .error:
            guard let serial = message.replySerial, let call = takePending(serial: serial) else { return true }
            if let error = message.remoteError {
                call.handler(.failure(error))
            } else {
                call.handler(.success(message))
            }
        case .signal:
            if sameName(message.member, "Disconnected"), sameName(message.interface, "org.freedesktop.DBus.Local") {
                return false
            }
            dispatchSignal(message)
        case .methodCall:
            dispatchMethodCall(message)
        }
        return true
    }

    private func takePending(serial: UInt32) -> Pending? {
        guard let call = tables.value.pending.removeValue(forKey: serial) else { return nil }
        loop.cancel(call.timer)
        return call
    }

    private func dispatchSignal(_ message: DBusMessage) {
        // Owner changes come only from the bus daemon itself.
        if sameName(message.member, "NameOwnerChanged"), sameName(message.sender, Self.busName),
           sameName(message.interface, Self.busName), message.arguments.count == 3,
           let name = message.arguments[0].string, let newOwner = message.arguments[2].string,
           tables.value.owners[name] != nil {
            let owner: String? = newOwner.isEmpty ? nil : newOwner
            tables.value.owners[name] = .some(owner)
            for handler in tables.value.ownerHandlers.values { handler(name, owner) }
        }
        let (owners, version) = (tables.value.owners, tables.value.ownersVersion)
        // A copy: a handler may subscribe or unsubscribe.
        for subscription in tables.value.subscriptions.values {
            guard subscription.accepts(message),
                  subscription.comesFromSender(message, owners: owners, version: version) else { continue }
            subscription.handler(message)
        }
    }

    private func dispatchMethodCall(_ message: DBusMessage) {
        if message.interface == "org.freedesktop.DBus.Peer" {
            if message.member == "Ping" {
                try? send(.methodReturn(to: message))
                return
            }
        }
        if let path = message.path, let handler = tables.value.methodHandlers[path] {
            handler(message, self)
        } else if !message.noReplyExpected {
            try? send(.error(to: message, name: "org.freedesktop.DBus.Error.UnknownObject",
                             message: "No such object \(message.path?.rawValue ?? "")"))
        }
    }

    /// On the loop, once: the connection is closed; every call waiting
    /// fails and the disconnect handlers run.
    func shutDown() {
        guard !tables.value.closed else { return }
        if case .libdbus(let io) = wire { dbus_connection_close(io.raw) }
        tables.value.closed = true
        let pending = tables.value.pending.values
        tables.value.pending.removeAll()
        for call in pending { loop.cancel(call.timer) }
        let disconnectHandlers = tables.value.disconnectHandlers
        tables.value.disconnectHandlers.removeAll()
        // A closed connection keeps no handler: whoever they hold (the
        // object tree's mirror, an agent) is free again, so that they can
        // hold it strongly instead of weakly (see BlueZMirror).
        tables.value.subscriptions.removeAll()
        tables.value.ownerHandlers.removeAll()
        tables.value.methodHandlers.removeAll()
        for call in pending { call.handler(.failure(.disconnected)) }
        for handler in disconnectHandlers { handler() }
        // What still waits on a timer (a scan's duration) learnt of the end
        // from the disconnect handlers; the timers would only hold it.
        loop.cancelAll()
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

/// A message ready for the wire: encoded by libdbus (which also checks it
/// the way libdbus would otherwise abort on), or kept as is for an embedded
/// wire (after the same check).
private enum Outgoing: Sendable {
    case raw(RawMessage)
    case message(DBusMessage)

    init(_ message: DBusMessage, for wire: DBusConnection.Wire) throws(DBusError) {
        let raw = try MessageCodec.encode(message)
        if case .embedded = wire { self = .message(message) } else { self = .raw(raw) }
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

