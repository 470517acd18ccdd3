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
/// An embedded connection (`embedded()`) runs the same code over an
/// in-memory wire: a test answers its calls and emits signals by hand, on a
/// virtual clock (swift-nio's `EmbeddedChannel`).
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
    fileprivate enum Wire: Sendable {
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
        /// `filter.sender`, read per signal without a copy of the filter.
        let sender: String?
        let handler: SignalHandler

        init(filter: SignalFilter, handler: @escaping SignalHandler) {
            self.filter = filter
            self.sender = filter.sender
            self.handler = handler
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
        var owners: [String: String?] = [:]
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

    /// A connection over an in-memory wire, for tests: what it sends is
    /// recorded on the returned `EmbeddedBus` (the bus daemon's own methods
    /// are answered there), replies and signals are what the test hands
    /// in, and its loop's clock is virtual.
    package static func embedded(uniqueName: String = ":1.99", owners: [String: String] = [:]) -> (DBusConnection, EmbeddedBus) {
        let loop = EventLoop(embeddedAt: .now)
        let bus = EmbeddedBus(uniqueName: uniqueName, owners: owners)
        let connection = DBusConnection(wire: .embedded(bus), loop: loop, address: "embedded:", uniqueName: uniqueName)
        bus.attach(connection)
        return (connection, bus)
    }

    private static let initializeThreadsOnce: Void = {
        _ = dbus_threads_init_default()
    }()

    private init(wire: Wire, loop: EventLoop, address: String, uniqueName: String) {
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
    /// awaiting its reply.
    package func dropSubscription(_ token: SubscriptionToken) {
        let drop: @Sendable () -> Void = { [self] in
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
    private func runDrainHandlers() {
        guard !tables.value.drainHandlers.isEmpty, outgoingBacklog <= tables.value.drainedBelow else { return }
        let handlers = tables.value.drainHandlers
        tables.value.drainHandlers = []
        for handler in handlers { handler() }
    }

    // MARK: - The I/O thread

    private func startIOThread(_ io: LibDBusWire) {
        startThread(name: "bluectl-dbus-io") { [self] in
            loop.adoptCurrentThread()
            runLoop(io)
            shutDown()
            loop.releaseThread()
            io.ended()
        }
    }

    private func runLoop(_ io: LibDBusWire) {
        let busFD: Int32 = {
            var fd: Int32 = -1
            dbus_connection_get_unix_fd(io.raw, &fd)
            return fd
        }()
        // The poll set, refilled each turn (one array for the loop's life, not one per turn).
        var fds: [pollfd] = []
        fds.reserveCapacity(4)
        while true {
            // 1. run the jobs handed in (calls to send, subscriptions, …)
            loop.runJobs()
            if tables.value.stopRequested { return }
            // 2. wait for the bus (what libdbus's watches ask for), a wake-up,
            //    a watched descriptor, or the nearest timer
            let watched = loop.watched
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: busFD, events: io.pollEvents, revents: 0))
            fds.append(pollfd(fd: io.wakeFD, events: Int16(POLLIN), revents: 0))
            for watch in watched { fds.append(pollfd(fd: watch.fd, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), loop.hasJobs ? 0 : millisecondsToNextTimer())
            if ready < 0 && errno != EINTR { return }
            if fds[1].revents & Int16(POLLIN) != 0 {
                var counter: UInt64 = 0
                _ = read(io.wakeFD, &counter, 8)
            }
            // 3. move the bytes poll found, then handle every complete message
            io.handle(fds[0].revents)
            var connected = dbus_connection_get_is_connected(io.raw) != 0
            while let message = dbus_connection_pop_message(io.raw) {
                // what was handed in before this message arrived applies to it
                loop.runJobs()
                let owned = RawMessage(taking: message)
                if !handle(owned) { connected = false }
            }
            if !connected { return }
            runDrainHandlers()
            // 4. the watched descriptors that are ready (an AcquireNotify socket)
            for (index, watch) in watched.enumerated() where fds[index + 2].revents != 0 {
                loop.descriptorReady(watch.id)
                loop.runJobs()
            }
            // 5. the timers whose time has come (call deadlines among them)
            loop.fireDueTimers()
        }
    }

    private func millisecondsToNextTimer() -> Int32 {
        guard let next = loop.nextDeadline else { return -1 }
        let remaining = next - loop.now
        if remaining <= .zero { return 0 }
        let ms = remaining.seconds * 1000
        return Int32(min(ms.rounded(.up), 60_000))
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
        return handle(message)
    }

    /// Handles one incoming message on the loop (the embedded wire hands its
    /// messages here directly); false when it says the connection is gone.
    fileprivate func handle(_ message: DBusMessage) -> Bool {
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
        guard let call = tables.value.pending.removeValue(forKey: serial) else { return nil }
        loop.cancel(call.timer)
        return call
    }

    private func dispatchSignal(_ message: DBusMessage) {
        // Owner changes come only from the bus daemon itself.
        if message.sender == Self.busName, message.interface == Self.busName,
           message.member == "NameOwnerChanged", message.arguments.count == 3,
           let name = message.arguments[0].string, let newOwner = message.arguments[2].string,
           tables.value.owners[name] != nil {
            let owner: String? = newOwner.isEmpty ? nil : newOwner
            tables.value.owners[name] = .some(owner)
            for handler in tables.value.ownerHandlers.values { handler(name, owner) }
        }
        let owners = tables.value.owners
        // The owner of a well-known name, looked up once per message (most
        // subscriptions name the same one, org.bluez).
        var resolved: (name: String, owner: String?)?
        // A copy: a handler may subscribe or unsubscribe.
        for subscription in tables.value.subscriptions.values {
            guard subscription.filter.matches(message) else { continue }
            if let sender = subscription.sender {
                let expected: String?
                if sender.utf8.first == UInt8(ascii: ":") {
                    expected = sender
                } else if let resolved, resolved.name == sender {
                    expected = resolved.owner
                } else {
                    expected = owners[sender] ?? nil
                    resolved = (sender, expected)
                }
                guard let expected, message.sender == expected else { continue }
            }
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
    fileprivate func shutDown() {
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

/// The libdbus connection and the descriptor that wakes its I/O thread.
private final class LibDBusWire: Sendable {
    /// Touched only by the I/O thread (and by `deinit`, once it has stopped).
    nonisolated(unsafe) let raw: OpaquePointer
    let wakeFD: Int32
    /// Posted once the I/O thread has shut the connection down.
    nonisolated(unsafe) private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(raw: OpaquePointer, wakeFD: Int32) {
        self.raw = raw
        self.wakeFD = wakeFD
        sem_init(done, 0, 0)
    }

    deinit {
        dbus_connection_unref(raw)
        _ = closeDescriptor(wakeFD)
        sem_destroy(done)
        done.deallocate()
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: libdbus's watches of the socket

    /// The socket's watches, as libdbus hands them out
    /// (`dbus_connection_set_watch_functions`): the I/O thread polls for
    /// what they ask and hands them what poll found (`dbus_watch_handle`),
    /// so libdbus reads and writes without a poll of its own. (Its
    /// `dbus_connection_read_write` polls the socket again, with no wait:
    /// a second system call per message, which the lab's emulated CPUs
    /// charge dearly.) libdbus calls the functions below from inside its
    /// own calls, which the I/O thread alone makes, and from `connect`'s
    /// before that thread starts.
    nonisolated(unsafe) private var readWatch: OpaquePointer?
    nonisolated(unsafe) private var writeWatch: OpaquePointer?

    /// Installs the watch functions (libdbus adds its watches at once); false when libdbus is out of memory.
    func watchSocket() -> Bool {
        let add: DBusAddWatchFunction = { watch, data in
            let io = Unmanaged<LibDBusWire>.fromOpaque(data!).takeUnretainedValue()
            let flags = dbus_watch_get_flags(watch)
            if flags & DBUS_WATCH_READABLE.rawValue != 0 { io.readWatch = watch }
            if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { io.writeWatch = watch }
            return 1
        }
        let remove: DBusRemoveWatchFunction = { watch, data in
            let io = Unmanaged<LibDBusWire>.fromOpaque(data!).takeUnretainedValue()
            if io.readWatch == watch { io.readWatch = nil }
            if io.writeWatch == watch { io.writeWatch = nil }
        }
        // Whether a watch is enabled is asked at every turn (`pollEvents`).
        let toggled: DBusWatchToggledFunction = { _, _ in }
        // Unretained: the connection is closed (its watches removed) before this object goes.
        return dbus_connection_set_watch_functions(raw, add, remove, toggled, Unmanaged.passUnretained(self).toOpaque(), nil) != 0
    }

    /// What to poll the socket for: what the enabled watches ask.
    var pollEvents: Int16 {
        var events: Int16 = 0
        if let readWatch, dbus_watch_get_enabled(readWatch) != 0 { events |= Int16(POLLIN) }
        if let writeWatch, dbus_watch_get_enabled(writeWatch) != 0 { events |= Int16(POLLOUT) }
        return events
    }

    /// Hands libdbus what poll found on the socket: it reads (and queues
    /// the complete messages), writes what waits, or learns the socket's end.
    func handle(_ revents: Int16) {
        let trouble = (revents & Int16(POLLERR) != 0 ? DBUS_WATCH_ERROR.rawValue : 0)
            | (revents & Int16(POLLHUP) != 0 ? DBUS_WATCH_HANGUP.rawValue : 0)
        if let readWatch, revents & Int16(POLLIN) != 0 || trouble != 0 {
            _ = dbus_watch_handle(readWatch, (revents & Int16(POLLIN) != 0 ? DBUS_WATCH_READABLE.rawValue : 0) | trouble)
        }
        if let writeWatch, revents & Int16(POLLOUT) != 0 {
            _ = dbus_watch_handle(writeWatch, DBUS_WATCH_WRITABLE.rawValue)
        }
    }

    func ended() { sem_post(done) }

    /// Waits for the I/O thread's end (and lets the next waiter through).
    func waitForEnd() {
        while sem_wait(done) != 0 {}
        sem_post(done)
    }
}

/// The in-memory wire of an embedded connection, and the test's hands on
/// it: every message the connection sends is recorded here, the bus
/// daemon's own methods (AddMatch, RemoveMatch, GetNameOwner, Ping) are
/// answered as dbus-daemon would, and the test answers the rest and emits
/// signals (`reply`, `fail`, `emit`, `setOwner`), on the connection's virtual
/// clock (`advance(by:)`).
package final class EmbeddedBus: Sendable {
    /// What the connection sent, and the bus daemon's name table: written on
    /// the loop, read by the test's thread, hence a lock.
    private struct Log {
        var nextSerial: UInt32 = 1
        var sent: [DBusMessage] = []
        /// How many of `sent` `nextCall` has handed out already, per position.
        var taken: Set<Int> = []
        var owners: [String: String]
    }
    private let log: Locked<Log>
    private let uniqueName: String
    /// Weak: the connection holds its wire (this), the test holds the connection.
    private let connectionBox = Locked(WeakConnection())

    private struct WeakConnection {
        weak var value: DBusConnection?
    }

    fileprivate init(uniqueName: String, owners: [String: String]) {
        self.uniqueName = uniqueName
        log = Locked(Log(owners: owners))
    }

    fileprivate func attach(_ connection: DBusConnection) {
        connectionBox.withLock { $0.value = connection }
    }

    private var connection: DBusConnection {
        guard let connection = connectionBox.withLock({ $0.value }) else { preconditionFailure("no embedded connection") }
        return connection
    }

    /// On the loop: a message the connection sends. Returns its serial.
    fileprivate func receive(_ message: DBusMessage) -> UInt32 {
        var message = message
        message.sender = uniqueName
        let serial = log.withLock { log -> UInt32 in
            defer { log.nextSerial += 1 }
            message.serial = log.nextSerial
            log.sent.append(message)
            return log.nextSerial
        }
        if message.kind == .methodCall, message.destination == DBusConnection.busName {
            answerAsBusDaemon(message)
        }
        return serial
    }

    private func answerAsBusDaemon(_ call: DBusMessage) {
        var reply: DBusMessage
        switch call.member {
        case "AddMatch", "RemoveMatch", "Ping":
            reply = .methodReturn(to: call)
        case "GetNameOwner":
            let name = call.arguments.first?.string ?? ""
            if let owner = log.withLock({ $0.owners[name] }) {
                reply = .methodReturn(to: call, arguments: [.string(owner)])
            } else {
                reply = .error(to: call, name: "org.freedesktop.DBus.Error.NameHasNoOwner",
                               message: "Could not get owner of name '\(name)': no such name")
            }
        default:
            reply = .error(to: call, name: "org.freedesktop.DBus.Error.UnknownMethod", message: "not modelled")
        }
        reply.sender = DBusConnection.busName
        deliver(reply)
    }

    /// Hands `message` to the connection, as if it came off the bus.
    package func deliver(_ message: DBusMessage) {
        let connection = self.connection
        connection.loop.execute {
            if !connection.handle(message) { connection.shutDown() }
        }
    }

    // MARK: - The test's side

    /// Every message sent so far, in order (bus daemon calls included).
    package var sent: [DBusMessage] { log.withLock { $0.sent } }

    /// The method calls sent so far to anyone but the bus daemon.
    package var calls: [DBusMessage] {
        sent.filter { $0.kind == .methodCall && $0.destination != DBusConnection.busName }
    }

    /// The next method call to `member` not handed out before (in the
    /// order sent), waiting for it up to `limit` of real time; nil if none
    /// came (the test then fails saying what was sent instead).
    package func nextCall(_ member: String, limit: Duration = .seconds(10)) async -> DBusMessage? {
        let deadline = ContinuousClock.now + limit
        while true {
            let found = log.withLock { log -> DBusMessage? in
                for (index, message) in log.sent.enumerated()
                where message.kind == .methodCall && message.member == member && !log.taken.contains(index) {
                    log.taken.insert(index)
                    return message
                }
                return nil
            }
            if let found { return found }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Answers `call` with `arguments`.
    package func reply(to call: DBusMessage, _ arguments: [DBusValue] = [], from sender: String? = nil) {
        var reply = DBusMessage.methodReturn(to: call, arguments: arguments)
        reply.sender = sender ?? call.destination.flatMap { name in log.withLock { $0.owners[name] } } ?? call.destination
        deliver(reply)
    }

    /// Answers `call` with the error `name`.
    package func fail(_ call: DBusMessage, name: String, message: String = "") {
        var reply = DBusMessage.error(to: call, name: name, message: message)
        reply.sender = call.destination.flatMap { name in log.withLock { $0.owners[name] } } ?? call.destination
        deliver(reply)
    }

    /// Emits `signal` from the current owner of `name` (or from `name` itself when it is unique).
    package func emit(_ signal: DBusMessage, from name: String) {
        var signal = signal
        signal.sender = name.hasPrefix(":") ? name : log.withLock { $0.owners[name] }
        deliver(signal)
    }

    /// `name` gets a new owner (nil: none), with the bus daemon's NameOwnerChanged.
    package func setOwner(_ name: String, to owner: String?) {
        let old = log.withLock { log -> String? in
            defer { log.owners[name] = owner }
            return log.owners[name]
        }
        var signal = DBusMessage.signal(
            path: ObjectPath(verified: "/org/freedesktop/DBus"), interface: DBusConnection.busName,
            member: "NameOwnerChanged", arguments: [.string(name), .string(old ?? ""), .string(owner ?? "")])
        signal.sender = DBusConnection.busName
        deliver(signal)
    }

    /// Waits (up to `limit` of real time) until the loop has a timer: the
    /// code under test has started what `advance(by:)` is to move on.
    package func untilTimerScheduled(limit: Duration = .seconds(10)) async -> Bool {
        let loop = connection.loop
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if loop.sync({ loop.nextDeadline != nil }) { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return false
    }

    /// Moves the connection's virtual clock on, firing its timers on the way.
    package func advance(by duration: Duration) {
        connection.loop.advance(by: duration)
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

