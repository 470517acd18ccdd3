import BluectlDBus
import CMosquitto
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// libmosquitto's return codes, as its functions return them.
private let mosqSuccess = Int32(MOSQ_ERR_SUCCESS.rawValue)
private let mosqNoConnection = Int32(MOSQ_ERR_NO_CONN.rawValue)

/// One MQTT client session to one broker, through libmosquitto with no thread of its
/// own: QoS 1, a persistent session (clean session off), a retained `online` birth and
/// `offline` last will on the status topic, and reconnects (1 s, doubling to 16 s).
///
/// **Driven by its owner, one task:** `publish` writes the PUBLISH to the socket at once;
/// `service()`, which the owner calls every `serviceInterval`, reads what the broker sent
/// meanwhile (acknowledgements, commands), keeps the connection alive and reconnects.
/// libmosquitto's callbacks run inside those calls, so nothing is handed between threads
/// per message (Paho's asynchronous client, used before, woke a send thread per publish
/// and a receive thread per acknowledgement: docs/benchmarks.md). Only a connection
/// attempt runs on a thread of its own (`Attempt`): its host name lookup blocks.
///
/// **Nothing lost**, in two stores on disk, each written before `publish` returns, so a
/// `kill -9` loses nothing accepted:
/// - The message log (`log`) holds every message handed to the connection, from then
///   until the broker acknowledges it: at most `window` at once. After a connection is
///   lost, and at the next start, every message it holds is sent again first, in order,
///   whatever session the broker kept (a message may then arrive twice: QoS 1 is at least
///   once; none is discarded).
/// - The rest wait in the `Backlog`, oldest first: everything while the broker is away,
///   and what comes while the window is full. `drain` moves them on, in order, as the
///   window empties. An outage costs disk, not memory.
///
/// **The bound** is `maxBufferedMessages` waiting in the backlog (a record is about 1 KB,
/// and a log may grow to four times what it holds, or 16 MiB, before it is rewritten).
/// When it is reached the OLDEST waiting message is dropped to take the new one (the
/// newest reading is worth more than the oldest), and counted (`droppedMessages`).
public final class MQTTSession: @unchecked Sendable {
    // @unchecked: the session's state is its owner's (one task: `publish`, `service`,
    // `drain`, `subscribe`, `close`, and the callbacks libmosquitto makes inside them);
    // `connected` is an atomic (read anywhere); the log and the backlog lock their own
    // state; an `Attempt` hands its client over through an atomic.

    /// How to reach the broker and what to keep.
    public struct Configuration: Sendable {
        /// The broker: `tcp://host:port` or `ssl://host:port` (`BrokerAddress.sessionURI`).
        public var serverURI: String
        /// The MQTT client id: the persistent session and the message log are keyed by it.
        public var clientID: String
        /// Where the message log and the backlog are kept (`logPath`).
        public var persistenceDirectory: String
        /// The retained `online` / `offline` topic (birth and last will).
        public var statusTopic: String
        /// At most this many messages wait for the broker (the backlog's capacity).
        public var maxBufferedMessages: Int32 = 50_000
        /// At most this many messages handed to the connection at once (sent and not yet
        /// acknowledged); the rest wait in the backlog, on disk and not in memory.
        public var window = 64
        /// Seconds between keep-alive pings; the broker publishes the last will after 1.5 times this without one.
        public var keepAlive: Int32 = 10
        /// TLS settings for an `ssl://` URI.
        public var tls: TLS?
        /// The user name, when the broker asks for one.
        public var username: String?
        /// The password (read from a file or the environment, never from argv).
        public var password: String?

        /// A configuration for `serverURI` as `clientID`, keeping its message log in `persistenceDirectory`.
        public init(serverURI: String, clientID: String, persistenceDirectory: String, statusTopic: String) {
            self.serverURI = serverURI
            self.clientID = clientID
            self.persistenceDirectory = persistenceDirectory
            self.statusTopic = statusTopic
        }
    }

    /// TLS for `ssl://`: the server's certificate is verified unless `verify` is off.
    public struct TLS: Sendable {
        /// PEM file of the CA certificates to trust (nil: the system's, /etc/ssl/certs).
        public var caFile: String?
        /// PEM file of the client's certificate.
        public var certificateFile: String?
        /// PEM file of the client's private key.
        public var keyFile: String?
        /// Verify the server's certificate and host name.
        public var verify = true

        /// TLS with verification on and the system's CAs.
        public init() {}
    }

    /// What happened to the connection, for the session's owner.
    public enum Event: Sendable, Equatable {
        /// Connected (the first time, or again after a loss).
        case connected
        /// The connection went away; the session reconnects by itself.
        case connectionLost(String)
        /// A connection attempt failed; the session tries again by itself.
        case connectFailed(String)
        /// The broker acknowledged a message, so the buffer has room again: reported once
        /// per `reportNextDelivery()`, not for every message.
        case delivered
        /// A message on a topic the session subscribed to (`subscribe`).
        case message(topic: String, payload: [UInt8])
    }

    /// How often the owner calls `service()`: the longest an acknowledgement, a command or
    /// a lost connection waits to be noticed.
    public static let serviceInterval: Duration = .milliseconds(100)

    /// Whether `service` has not run since the last time this was asked: the owner's timer
    /// asks every `serviceInterval`, and wakes the owner only then (a session that publishes
    /// is serviced as it does). One asker.
    public var serviceIsDue: Bool {
        let now = services.load(ordering: .relaxed)
        return servicesSeen.exchange(now, ordering: .relaxed) == now
    }

    /// Connection events, in the order they happened. One consumer.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let library: MosquittoLibrary
    let configuration: Configuration
    /// The messages handed to the connection and not yet acknowledged (`f` and a sequence number).
    let log: MessageLog
    /// The messages waiting beyond the window, oldest first.
    let backlog: Backlog
    private let endpoint: Endpoint
    private let connected = Atomic<Bool>(false)
    /// How many times `service` ran: read by the owner's timer (`serviceIsDue`) on another task.
    private let services = Atomic<Int>(0)
    /// `services` when the timer last asked (the timer's alone).
    private let servicesSeen = Atomic<Int>(-1)
    /// libmosquitto's last error line (`configure`'s log callback), taken as a failure's
    /// reason. A lock, as the log callback also runs on an attempt's thread.
    private let lastLogError = Mutex<String?>(nil)

    // The owner's (see above).
    /// The connection's client (connecting, or connected), nil between connections.
    private var client: OpaquePointer?
    /// Whether `client` has had the broker's CONNACK.
    private var acknowledged = false
    /// The broker's refusal of `client` (its CONNACK code's text), said when it closes.
    private var refusal: String?
    /// A connection attempt under way on its own thread.
    private var attempt: Attempt?
    private var nextAttempt = ContinuousClock.now
    /// Whether `start` was called: no connection is tried before.
    private var started = false
    private var backoff: Duration = .seconds(1)
    /// Sequence numbers of the log's messages not sent on this connection, oldest first.
    private var toSend: [Int] = []
    /// The log's messages sent on this connection, by libmosquitto's message id.
    private var sent: [Int32: Int] = [:]
    /// Acknowledged messages whose removal from the log could not be written: tried again.
    private var acknowledgedHeld: [Int] = []
    private var nextSequence = 0
    private var deliveryWanted = false
    private var closing = false
    /// The `offline` status's message id at `close`, until acknowledged.
    private var offlineID: Int32?
    /// Messages lost after they were accepted, since the session was created: the log could
    /// not read them back (a damaged disk, or an earlier version's record this one cannot
    /// read), or libmosquitto refused them as no broker could take them (an invalid topic).
    public private(set) var lostMessages = 0
    /// Failures to say at the next `drain` (removals from the log that could not be written).
    private var unsaidRemovalFailures = 0

    /// Creates the session (nothing is connected before `start`), opening its two stores
    /// and taking in what an earlier run left: its messages are sent first. Throws when
    /// libmosquitto cannot be loaded, the URI is not one, or a store cannot be opened or read.
    public init(_ configuration: Configuration) throws(MQTTError) {
        guard let library = MosquittoLibrary.shared else {
            throw MQTTError(unavailable: MosquittoLibrary.failure ?? MosquittoLibrary.soname)
        }
        guard let endpoint = Endpoint(configuration.serverURI) else {
            throw MQTTError(code: Int32(MOSQ_ERR_INVAL.rawValue), "cannot use \(configuration.serverURI) as a broker")
        }
        self.library = library
        self.configuration = configuration
        self.endpoint = endpoint
        (events, continuation) = AsyncStream<Event>.makeStream()
        backlog = try Backlog(path: Self.backlogPath(configuration), capacity: Int(configuration.maxBufferedMessages))
        let log = try MessageLog(path: Self.logPath(configuration))
        // An earlier bluectl's messages, kept by Paho (as files, or in this log under its
        // keys), go out first.
        _ = log.adopt(pahoFolder: Self.pahoFolder(configuration), upTo: configuration.persistenceDirectory)
        lostMessages = try PahoRecords.adopt(in: log)
        self.log = log
        toSend = log.keys.compactMap(Self.sequence).sorted()
        nextSequence = (toSend.last ?? -1) + 1
    }

    deinit {
        if let client { library.mosquitto_destroy(client) }
        if let attempt, !attempt.abandon() { library.mosquitto_destroy(attempt.client) }
        continuation.finish()
    }

    /// Starts connecting: returns at once; the outcome comes on `events` (through
    /// `service()`), and the session keeps trying until `close`. Publishing works meanwhile.
    public func start() throws(MQTTError) {
        started = true
        nextAttempt = .now
        service()
    }

    /// Reads and writes what the connection has, without waiting: acknowledgements, commands
    /// (`Event.message`), keep-alive pings, a lost connection; reconnects when it is time.
    /// The owner calls it every `serviceInterval`.
    public func service() {
        services.add(1, ordering: .relaxed)
        if let attempt, let (rc, error) = attempt.result {
            self.attempt = nil
            if rc == mosqSuccess {
                client = attempt.client
            } else {
                library.mosquitto_destroy(attempt.client)
                failedAttempt(lastLogError.withLock { $0.take() } ?? describe(rc, errno: error))
            }
        }
        if client == nil, attempt == nil, started, !closing, ContinuousClock.now >= nextAttempt { startAttempt() }
        guard let client else { return }
        // `mosquitto_loop` reads at most as many packets as messages are in flight (one when
        // none are): again while the socket has more, so commands and retained configs are
        // not held back to one packet per call.
        var rc = mosqSuccess
        for _ in 0..<100 {
            rc = library.mosquitto_loop(client, 0, 1)
            guard rc == mosqSuccess, Self.readable(library.mosquitto_socket(client)) else { break }
        }
        if rc != mosqSuccess || (acknowledged && !isConnected) {
            lose(lastLogError.withLock { $0.take() } ?? describe(rc, errno: errno))
        } else if isConnected, !toSend.isEmpty {
            // A new connection's first job (and a send refused for a while, tried again).
            sendHeld()
        }
    }

    /// Publishes `payload` on `topic` with QoS 1: handed to the connection when connected,
    /// nothing is waiting before it and the window has room (in the log first); else
    /// appended to the backlog. Both are on disk before this returns. When
    /// `maxBufferedMessages` are waiting, the oldest of them is dropped to make room
    /// (counted in `droppedMessages`). Throws when neither store can be written, or the
    /// broker could never take the message (an invalid topic).
    public func publish(_ topic: String, _ payload: [UInt8], retained: Bool = false) throws(MQTTError) {
        let message = Backlog.Message(topic: topic, payload: payload, retained: retained)
        if backlog.isEmpty, isConnected, toSend.isEmpty, inFlight < window, try hand(message) {
            // What the broker sent meanwhile (acknowledgements, commands) is read now, while
            // the owner is awake anyway: the owner's timer then has nothing to do.
            service()
            return
        }
        guard backlog.append(message) else {
            throw MQTTError(persistence: "cannot publish on \(topic): cannot write \(log.path) or \(backlog.path)")
        }
        // Accepted: a failure here leaves it waiting, and the owner's next `drain` says why.
        try? drain()
    }

    /// Moves the backlog's oldest messages to the connection, in order, while connected and
    /// the window has room (reading the broker's acknowledgements meanwhile); when some are
    /// left, asks for the next delivery to be reported (`Event.delivered`), at which the
    /// owner calls this again. Call it at each `connected` and `delivered` event, and now
    /// and then. Throws when a store cannot be written (the message stays first in the
    /// backlog) or a removal from the log could not be written (that message may be sent
    /// twice).
    public func drain() throws(MQTTError) {
        retryHeldRemovals()
        var rounds = 0
        while true {
            try moveBacklog()
            rounds += 1
            guard !backlog.isEmpty, isConnected, rounds < 8 else { break }
            // The window is full: what the broker acknowledged meanwhile makes room.
            let before = inFlight
            service()
            guard inFlight < before else { break }
        }
        if !backlog.isEmpty { reportNextDelivery() }
        if unsaidRemovalFailures > 0 {
            defer { unsaidRemovalFailures = 0 }
            throw MQTTError(persistence: "cannot write \(log.path): \(unsaidRemovalFailures) acknowledged messages are still in it and may be sent again")
        }
    }

    private func moveBacklog() throws(MQTTError) {
        // The oldest is already handed (its removal here could not be written): removed now.
        if backlog.firstHanded != nil {
            guard backlog.removeFirst() else { throw Self.removalFailed(backlog) }
        }
        var refused: MQTTError?
        while isConnected, toSend.isEmpty, inFlight < window, let message = backlog.first {
            do throws(MQTTError) {
                guard try hand(message) else {
                    throw MQTTError(persistence: "cannot write \(log.path): the waiting messages stay in \(backlog.path)")
                }
            } catch {
                guard error.code != Int32(MOSQ_ERR_ERRNO.rawValue) else { throw error }
                // One the broker could never take: lost, and said, not left to block the rest.
                refused = error
                lostMessages += 1
            }
            guard backlog.removeFirst() else {
                backlog.markFirstHanded(.removalFailed)
                throw Self.removalFailed(backlog)
            }
        }
        if let refused { throw refused }
    }

    private static func removalFailed(_ backlog: Backlog) -> MQTTError {
        MQTTError(persistence: "cannot write \(backlog.path): the oldest waiting message is sent but still held")
    }

    /// The window: at most `window`, and never more than `maxBufferedMessages`.
    private var window: Int { max(1, min(configuration.window, Int(configuration.maxBufferedMessages))) }

    /// Messages handed to the connection and not acknowledged: sent, or to be sent first.
    private var inFlight: Int { toSend.count + sent.count }

    /// Puts `message` in the log, then sends it (or keeps it to send first when it cannot be
    /// sent now); false when the log cannot be written (nothing sent). Throws when the
    /// broker could never take it (removed again).
    private func hand(_ message: Backlog.Message) throws(MQTTError) -> Bool {
        let sequence = nextSequence
        guard Backlog.encode(message).withUnsafeBytes({ log.put(Self.key(sequence), [($0.baseAddress, $0.count)]) }) else {
            return false
        }
        nextSequence += 1
        // Behind older ones still to send, or not connected: kept to send first, in order.
        guard toSend.isEmpty, let rc = send(message, sequence) else {
            toSend.append(sequence)
            return true
        }
        if rc == mosqSuccess { return true }
        guard Self.unsendable.contains(rc) else {
            toSend.append(sequence)   // refused for now: sent at the next `service`
            return true
        }
        _ = log.remove(Self.key(sequence))
        throw MQTTError(code: rc, "cannot publish on \(message.topic)")
    }

    /// Return codes of `mosquitto_publish` that no later attempt would change.
    private static let unsendable = Set([MOSQ_ERR_INVAL, MOSQ_ERR_PAYLOAD_SIZE, MOSQ_ERR_MALFORMED_UTF8,
                                         MOSQ_ERR_OVERSIZE_PACKET, MOSQ_ERR_QOS_NOT_SUPPORTED].map { Int32($0.rawValue) })

    /// Sends the log's message `sequence` on this connection (recorded in `sent`):
    /// `mosquitto_publish`'s return code, or nil when not connected.
    private func send(_ message: Backlog.Message, _ sequence: Int) -> Int32? {
        guard let client, isConnected else { return nil }
        var id: Int32 = 0
        let rc = message.payload.withUnsafeBytes { bytes in
            library.mosquitto_publish(client, &id, message.topic, Int32(bytes.count), bytes.baseAddress, 1, message.retained)
        }
        if rc == mosqSuccess { sent[id] = sequence }
        return rc
    }

    /// Every message the log holds that is not sent on this connection, oldest first (at a
    /// new connection: all of them). One the broker could never take is lost, and said.
    private func sendHeld() {
        while let sequence = toSend.first, isConnected, sent.count < window {
            guard let bytes = log.get(Self.key(sequence)), let message = Backlog.decode(bytes) else {
                // Not readable back (a damaged disk): lost, and said (`lostMessages`).
                _ = log.remove(Self.key(sequence))
                lostMessages += 1
                toSend.removeFirst()
                continue
            }
            guard let rc = send(message, sequence) else { return }
            if rc == mosqSuccess {
                toSend.removeFirst()
            } else if Self.unsendable.contains(rc) {
                _ = log.remove(Self.key(sequence))
                lostMessages += 1
                toSend.removeFirst()
            } else {
                return   // tried again at the next `service`, before anything newer
            }
        }
    }

    private func retryHeldRemovals() {
        acknowledgedHeld.removeAll { log.remove(Self.key($0)) }
    }

    /// Messages accepted and not yet acknowledged by the broker: waiting in the backlog,
    /// or handed to the connection.
    public var pendingMessages: Int { backlog.waiting + inFlight }

    /// Whether a publish now would be taken without dropping an older message: fewer
    /// than `maxBufferedMessages` are waiting in the backlog.
    public var hasRoom: Bool { backlog.count < backlog.capacity }

    /// Messages dropped, oldest first, because `maxBufferedMessages` were waiting in the
    /// backlog, since the session was created.
    public var droppedMessages: Int { backlog.dropped }

    /// Subscribes to `filters` with QoS 1 (messages come as `Event.message`). Only while
    /// connected: call it at each `connected` (the persistent session keeps subscriptions,
    /// but the first connection has none).
    public func subscribe(_ filters: [String]) throws(MQTTError) {
        guard let client, isConnected else { throw MQTTError(code: mosqNoConnection, "cannot subscribe") }
        for filter in filters {
            let rc = library.mosquitto_subscribe(client, nil, filter, 1)
            guard rc == mosqSuccess else { throw MQTTError(code: rc, "cannot subscribe to \(filter)") }
        }
    }

    /// Publishes the retained `offline` status, then disconnects, waiting up to `timeout`
    /// for the messages in flight to be acknowledged. What is not stays in the log and the
    /// backlog for the next session. `offline` goes at once, past the backlog and the
    /// window: the disconnect is clean, so the broker will not publish the last will.
    public func close(timeout: Duration = .seconds(2)) async {
        closing = true
        if let attempt {
            self.attempt = nil
            if !attempt.abandon() { library.mosquitto_destroy(attempt.client) }
        }
        if let client, isConnected {
            var id: Int32 = 0
            let offline = Array("offline".utf8)
            if library.mosquitto_publish(client, &id, configuration.statusTopic, Int32(offline.count), offline, 1, true)
                == mosqSuccess {
                offlineID = id
            }
            let end = ContinuousClock.now + timeout
            while isConnected, sent.count + (offlineID == nil ? 0 : 1) > 0, ContinuousClock.now < end {
                await Self.pause(.milliseconds(10))
                service()
            }
            if let client = self.client {
                _ = library.mosquitto_disconnect(client)
                _ = library.mosquitto_loop(client, 0, 1)
            }
        }
        if let client { library.mosquitto_destroy(client) }
        client = nil
        connected.store(false, ordering: .relaxed)
        continuation.finish()
    }

    /// Sleeps `duration`, also in a cancelled task (a stop's last moments are bounded by
    /// their caller, and must not spin).
    private static func pause(_ duration: Duration) async {
        await Task { try? await Task.sleep(for: duration) }.value
    }

    /// Reports the next delivery (one `Event.delivered`), for an owner waiting for room in
    /// the buffer. Deliveries are otherwise only counted: reporting each one would cost the
    /// owner a wake-up per message published.
    public func reportNextDelivery() { deliveryWanted = true }

    /// Whether the session is connected now.
    public var isConnected: Bool { connected.load(ordering: .relaxed) }

    /// Why no session can be made on this machine (libmosquitto cannot be loaded), or
    /// nil: for a command to say so before it starts anything.
    public static var unavailableReason: String? {
        MosquittoLibrary.failure.map { MQTTError(unavailable: $0).description }
    }

    // MARK: - Connections

    /// A new client for one connection, configured, its name lookup and connect on a
    /// thread of its own.
    private func startAttempt() {
        guard let mosq = library.mosquitto_new(configuration.clientID, false, Unmanaged.passUnretained(self).toOpaque()) else {
            return failedAttempt("cannot make an MQTT client")
        }
        if let reason = configure(mosq) {
            library.mosquitto_destroy(mosq)
            return failedAttempt(reason)
        }
        let attempt = Attempt(client: mosq)
        self.attempt = attempt
        let (library, host, port, keepAlive) = (library, endpoint.host, endpoint.port, configuration.keepAlive)
        startThread(name: "bluectl-mqtt-connect") {
            let rc = library.mosquitto_connect_async(attempt.client, host, port, keepAlive)
            if !attempt.finish(rc, errno: errno) { library.mosquitto_destroy(attempt.client) }
        }
    }

    /// Sets up a new client: MQTT 3.1.1, the window, the last will, the credentials, TLS,
    /// and the callbacks (which reach this session through the client's user data). The
    /// reason it cannot be, or nil.
    private func configure(_ mosq: OpaquePointer) -> String? {
        _ = library.mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V311))
        _ = library.mosquitto_max_inflight_messages_set(mosq, UInt32(window + 1))
        let offline = Array("offline".utf8)
        var rc = library.mosquitto_will_set(mosq, configuration.statusTopic, Int32(offline.count), offline, 1, true)
        guard rc == mosqSuccess else { return "cannot set the last will: \(describe(rc, errno: errno))" }
        if let username = configuration.username {
            rc = library.mosquitto_username_pw_set(mosq, username, configuration.password)
            guard rc == mosqSuccess else { return "cannot set the user name: \(describe(rc, errno: errno))" }
        }
        if endpoint.tls {
            let tls = configuration.tls ?? TLS()
            rc = library.mosquitto_tls_set(mosq, tls.caFile, tls.caFile == nil ? "/etc/ssl/certs" : nil,
                                           tls.certificateFile, tls.keyFile, nil)
            guard rc == mosqSuccess else { return "cannot use the TLS files: \(describe(rc, errno: errno))" }
            _ = library.mosquitto_tls_opts_set(mosq, tls.verify ? 1 : 0, nil, nil)
            _ = library.mosquitto_tls_insecure_set(mosq, !tls.verify)
        }
        library.mosquitto_connect_with_flags_callback_set(mosq) { _, object, rc, _ in
            MQTTSession.from(object).didConnect(rc)
        }
        library.mosquitto_disconnect_callback_set(mosq) { _, object, _ in
            MQTTSession.from(object).didDisconnect()
        }
        library.mosquitto_publish_callback_set(mosq) { _, object, id in
            MQTTSession.from(object).didDeliver(id)
        }
        // libmosquitto says why a TLS handshake failed (the certificate, the host name) only
        // in its log: its last error line is kept as the reason of the failure that follows.
        library.mosquitto_log_callback_set(mosq) { _, object, level, text in
            guard level & Int32(MOSQ_LOG_ERR) != 0, let text else { return }
            MQTTSession.from(object).lastLogError.withLock { $0 = String(cString: text) }
        }
        library.mosquitto_message_callback_set(mosq) { _, object, message in
            guard let message else { return }
            let m = message.pointee
            let topic = String(cString: m.topic)
            let payload = m.payloadlen > 0 && m.payload != nil
                ? Array(UnsafeRawBufferPointer(start: m.payload, count: Int(m.payloadlen))) : []
            MQTTSession.from(object).continuation.yield(.message(topic: topic, payload: payload))
        }
        return nil
    }

    private static func from(_ object: UnsafeMutableRawPointer?) -> MQTTSession {
        Unmanaged<MQTTSession>.fromOpaque(object!).takeUnretainedValue()
    }

    private func didConnect(_ rc: Int32) {
        guard rc == 0 else {
            refusal = library.mosquitto_connack_string(rc).map { String(cString: $0) } ?? "refused (CONNACK \(rc))"
            return
        }
        acknowledged = true
        connected.store(true, ordering: .relaxed)
        // The log is wanted for a connection's failure only: with a callback set, libmosquitto
        // formats a line for every packet.
        if let client { library.mosquitto_log_callback_set(client, nil) }
        backoff = .seconds(1)
        continuation.yield(.connected)
    }

    /// libmosquitto closed the socket (inside `mosquitto_loop`): the client goes at `lose`.
    private func didDisconnect() {
        connected.store(false, ordering: .relaxed)
    }

    private func didDeliver(_ id: Int32) {
        if id == offlineID { offlineID = nil }
        guard let sequence = sent.removeValue(forKey: id) else { return }
        if !log.remove(Self.key(sequence)) {
            acknowledgedHeld.append(sequence)
            unsaidRemovalFailures += 1
        }
        if deliveryWanted {
            deliveryWanted = false
            continuation.yield(.delivered)
        }
    }

    /// The connection's end (or its attempt's): the client destroyed, what was sent on it
    /// to be sent again first, the next attempt after the back-off.
    private func lose(_ reason: String) {
        if let client { library.mosquitto_destroy(client) }
        client = nil
        connected.store(false, ordering: .relaxed)
        toSend = (Array(sent.values) + toSend).sorted()
        sent = [:]
        if acknowledged {
            acknowledged = false
            nextAttempt = .now + .seconds(1)
            continuation.yield(.connectionLost("connection lost (\(reason))"))
        } else {
            failedAttempt(refusal ?? reason)
        }
        refusal = nil
    }

    private func failedAttempt(_ reason: String) {
        nextAttempt = .now + backoff
        backoff = min(backoff * 2, .seconds(16))
        if !closing { continuation.yield(.connectFailed(reason)) }
    }

    /// libmosquitto's reason for `rc`, with `error` (the errno of the thread that failed)
    /// for a system call's failure and a name lookup's.
    private func describe(_ rc: Int32, errno error: Int32) -> String {
        switch rc {
        case Int32(MOSQ_ERR_ERRNO.rawValue): String(cString: strerror(error))
        case Int32(MOSQ_ERR_EAI.rawValue): "cannot look up \(endpoint.host): " + String(cString: gai_strerror(error))
        case Int32(MOSQ_ERR_KEEPALIVE.rawValue): "no answer from the broker within \(configuration.keepAlive) s"
        default: library.mosquitto_strerror(rc).map { String(cString: $0) } ?? "error \(rc)"
        }
    }

    /// Whether `fd` has bytes to read now.
    private static func readable(_ fd: Int32) -> Bool {
        guard fd >= 0 else { return false }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLIN) != 0
    }

    // MARK: - Stores

    /// The log's key of message `sequence`.
    private static func key(_ sequence: Int) -> String { "f\(sequence)" }

    /// The sequence number of a log key, nil for another key.
    private static func sequence(_ key: String) -> Int? {
        guard key.first == "f", let n = Int(key.dropFirst()), n >= 0, key == "f\(n)" else { return nil }
        return n
    }

    /// The message log of `configuration`: in its `persistenceDirectory`, one per client id
    /// and broker (the name made of both, other characters than letters, digits, `.`, `-`
    /// and `_` as `_`).
    package static func logPath(_ configuration: Configuration) -> String {
        let name = (configuration.clientID + "-" + configuration.serverURI).map { c in
            c.isASCII && (c.isLetter || c.isNumber || c == "." || c == "-" || c == "_") ? c : "_"
        }
        return configuration.persistenceDirectory + "/" + String(name) + ".log"
    }

    /// The backlog of `configuration`: beside its message log, `….waiting.log`.
    package static func backlogPath(_ configuration: Configuration) -> String {
        String(logPath(configuration).dropLast(".log".count)) + ".waiting.log"
    }

    /// Where Paho's own file persistence (an earlier bluectl's) kept this client's files:
    /// `DIRECTORY/CLIENTID-URI` with `:` as `-` (Paho 1.3's `pstopen`).
    static func pahoFolder(_ configuration: Configuration) -> String {
        configuration.persistenceDirectory + "/" + configuration.clientID + "-"
            + configuration.serverURI.replacing(":", with: "-")
    }
}
