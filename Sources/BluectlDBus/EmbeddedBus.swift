// The test seam of the D-Bus layer (swift-nio's `EmbeddedChannel`): a
// connection whose wire is in memory. It runs the connection's own code
// (tables, dispatch, owner tracking) and everything built on it; only the
// bytes never leave the process. docs/architecture.md, "The test seam".

extension DBusConnection {
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
        /// The serial of the next method call the test makes (`call(_:from:)`).
        var nextIncoming: UInt32 = 1
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

    init(uniqueName: String, owners: [String: String]) {
        self.uniqueName = uniqueName
        log = Locked(Log(owners: owners))
    }

    func attach(_ connection: DBusConnection) {
        connectionBox.withLock { $0.value = connection }
    }

    private var connection: DBusConnection {
        guard let connection = connectionBox.withLock({ $0.value }) else { preconditionFailure("no embedded connection") }
        return connection
    }

    /// On the loop: a message the connection sends. Returns its serial.
    func receive(_ message: DBusMessage) -> UInt32 {
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
        await Self.waitFor(limit: limit) { [log] in
            log.withLock { log -> DBusMessage? in
                for (index, message) in log.sent.enumerated()
                where message.kind == .methodCall && message.member == member && !log.taken.contains(index) {
                    log.taken.insert(index)
                    return message
                }
                return nil
            }
        }
    }

    /// What `look` finds, asking it every millisecond up to `limit` of real
    /// time (the test's side waiting for what the loop does on another
    /// thread); nil if it found nothing by then. Asks at least once.
    package static func waitFor<T>(limit: Duration, _ look: @Sendable () -> T?) async -> T? {
        let deadline = ContinuousClock.now + limit
        while true {
            if let found = look() { return found }
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

    /// Calls a method of an object the connection exported, as `sender`
    /// would (a unique name, or the current owner of a well-known one:
    /// bluetoothd calling a GATT application). Returns the call as sent,
    /// for `answer(to:)`.
    @discardableResult
    package func call(_ call: DBusMessage, from sender: String) -> DBusMessage {
        var call = call
        let (serial, owner) = log.withLock { log -> (UInt32, String?) in
            defer { log.nextIncoming += 1 }
            return (log.nextIncoming, log.owners[sender])
        }
        call.serial = serial
        call.destination = uniqueName
        call.sender = sender.hasPrefix(":") ? sender : owner
        deliver(call)
        return call
    }

    /// The connection's reply (a method return or an error) to `call`,
    /// made with `call(_:from:)`, waiting for it up to `limit` of real time;
    /// nil if none came.
    package func answer(to call: DBusMessage, limit: Duration = .seconds(10)) async -> DBusMessage? {
        await Self.waitFor(limit: limit) { [log] in
            log.withLock { log in
                log.sent.first { ($0.kind == .methodReturn || $0.kind == .error) && $0.replySerial == call.serial
                    && $0.destination == call.sender }
            }
        }
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
        return await Self.waitFor(limit: limit) { loop.sync { loop.nextDeadline != nil } ? true : nil } ?? false
    }

    /// Moves the connection's virtual clock on, firing its timers on the way.
    package func advance(by duration: Duration) {
        connection.loop.advance(by: duration)
    }
}
