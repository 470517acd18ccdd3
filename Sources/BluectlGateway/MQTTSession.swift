import BluectlDBus
import CPaho
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One MQTT client session to one broker, through Eclipse Paho C's asynchronous
/// client (`libpaho-mqtt3as`): QoS 1, a persistent session (clean session off),
/// a retained `online` birth and `offline` last will on the status topic, and
/// Paho's automatic reconnect.
///
/// **Nothing lost**, in two stores on disk, each written before `publish` returns, so a
/// `kill -9` loses nothing accepted (on a full disk, see `drain`: a message Paho could not
/// store as it was handed waits in the backlog too; one whose store write failed as Paho
/// sent it, on its thread, is said at the next `drain`):
/// - Paho holds at most `window` messages (more only when it restored more at start, from
///   an earlier version's store): those it is sending and those the broker has not
///   acknowledged. It stores each in its store, a `MessageLog` (Paho's user
///   persistence: one append-only file in `persistenceDirectory`, rather than Paho's file
///   per message, which cost a third of the gateway's CPU per message); the next session
///   with the same client id and broker restores them (`restoreMessages`) and sends them
///   first. QoS 1 messages in flight when the connection drops are resent by the
///   persistent session.
/// - The rest wait in the `Backlog`, oldest first: everything while the broker is away,
///   and what comes while Paho's window is full. The owner moves them to Paho, in order,
///   as the window empties (`drain`, at each connection and delivery). Paho keeps what it
///   holds in memory as well; the backlog keeps only an index, so an outage costs disk,
///   not memory.
///
/// **The bound** is `maxBufferedMessages` waiting in the backlog (a record is about 1 KB,
/// and a log may grow to four times what it holds, or 16 MiB, before it is rewritten).
/// When it is reached the OLDEST waiting message is dropped to take the new one (the
/// newest reading is worth more than the oldest), and counted (`droppedMessages`).
/// A broker that accepts the connection without the session it had makes Paho discard
/// what it sent and had not had acknowledged (`discardedMessages`).
///
/// Threads: Paho calls back on its own threads. The callbacks hand an `MQTTEvent`
/// to `events` (an `AsyncStream`, safe from any thread) for its one consumer, the
/// owner of the session, and count deliveries (an atomic, below).
public final class MQTTSession: @unchecked Sendable {
    // @unchecked: every stored property but the two counters is immutable after `init`;
    // `handle` is only passed to Paho's functions, which lock Paho's own state; the
    // counters are atomics (`Counters`); the backlog locks its own state. `publish`,
    // `drain` and `close` are the owner's (one task): two publishing at once would be
    // safe but in no defined order.

    /// How to reach the broker and what to keep.
    public struct Configuration: Sendable {
        /// Paho's server URI: `tcp://host:port` or `ssl://host:port`.
        public var serverURI: String
        /// The MQTT client id: the persistent session and the message log are keyed by it.
        public var clientID: String
        /// Where the log of messages not yet acknowledged is kept (`logPath`).
        public var persistenceDirectory: String
        /// The retained `online` / `offline` topic (birth and last will).
        public var statusTopic: String
        /// At most this many messages wait for the broker (the backlog's capacity).
        public var maxBufferedMessages: Int32 = 50_000
        /// At most this many messages in Paho's hands at once (being sent, or sent and not
        /// yet acknowledged); the rest wait in the backlog, on disk and not in memory.
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
        /// PEM file of the CA certificates to trust (nil: the system's).
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
        /// Connected (the first time, or again by Paho's automatic reconnect).
        case connected
        /// The connection went away; Paho reconnects by itself.
        case connectionLost(String)
        /// A connection attempt failed; Paho tries again by itself.
        case connectFailed(String)
        /// The broker acknowledged a message, so the buffer has room again: reported once
        /// per `reportNextDelivery()`, not for every message (each would wake the owner).
        case delivered
        /// A message on a topic the session subscribed to (`subscribe`).
        case message(topic: String, payload: [UInt8])
    }

    /// Connection events, in the order Paho reported them. One consumer.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let handle: MQTTAsync
    /// Paho's functions (the library, opened at the first session).
    private let paho: PahoLibrary
    /// Retained by Paho's callbacks (their context) until `deinit`.
    private let context: UnsafeMutableRawPointer
    let configuration: Configuration
    /// Paho's store (its user persistence, `persistence` below).
    let log: MessageLog
    /// The messages waiting beyond what Paho holds, oldest first.
    let backlog: Backlog
    /// Paho's table of the store's functions: Paho keeps the pointer, so it lives until `deinit`.
    private let persistence: UnsafeMutablePointer<MQTTClient_persistence>
    /// Messages handed to Paho (and restored from an earlier session's log), and
    /// deliveries: the two sides of `discardedMessages`.
    private let counters: Counters

    /// Paho's process-wide set-up, once, before the first client. Left to itself
    /// Paho initialises OpenSSL at the first client whatever the URI (its error
    /// strings and every algorithm: 1.3 MB more resident for `mqtt://`, measured
    /// against the bus-tier stand-in); OpenSSL 3 initialises itself when a TLS
    /// connection first needs it, and Paho's TLS needs nothing more from this.
    private static let pahoInitialized: Void = {
        var inits = MQTTAsync_init_options()
        inits.struct_id = (77, 81, 84, 71)   // "MQTG"
        inits.struct_version = 0
        inits.do_openssl_init = 0
        PahoLibrary.shared?.MQTTAsync_global_init(&inits)
    }()

    /// Creates the client and restores the messages Paho kept from an earlier session.
    /// Throws when Paho refuses the URI, the client id or the persistence directory.
    public init(_ configuration: Configuration) throws(MQTTError) {
        guard let paho = PahoLibrary.shared else { throw MQTTError(unavailable: PahoLibrary.failure ?? PahoLibrary.soname) }
        self.paho = paho
        self.configuration = configuration
        (events, continuation) = AsyncStream<Event>.makeStream()
        _ = Self.pahoInitialized
        var handle: MQTTAsync?
        var options = cpaho_create_options()
        options.sendWhileDisconnected = 1
        options.allowDisconnectedSendAtAnyTime = 1
        // Paho's own bound, past which it drops its oldest silently: above what it is ever
        // handed (the window, and `offline` at `close` past it).
        options.maxBufferedMessages = max(configuration.maxBufferedMessages, Int32(Self.window(configuration)) + 1)
        options.deleteOldestMessages = 1
        options.restoreMessages = 1
        options.persistQoS0 = 0
        options.MQTTVersion = MQTTVERSION_3_1_1
        backlog = try Backlog(path: Self.backlogPath(configuration), capacity: Int(configuration.maxBufferedMessages))
        let log = try MessageLog(path: Self.logPath(configuration))
        // An earlier bluectl's messages, kept by Paho's file persistence, go out first.
        _ = log.adopt(pahoFolder: Self.pahoFolder(configuration), upTo: configuration.persistenceDirectory)
        self.log = log
        persistence = .allocate(capacity: 1)
        persistence.initialize(to: Self.persistenceTable(log))
        let rc = paho.MQTTAsync_createWithOptions(&handle, configuration.serverURI, configuration.clientID,
                                             MQTTCLIENT_PERSISTENCE_USER, persistence, &options)
        guard rc == MQTTASYNC_SUCCESS, let handle else {
            persistence.deallocate()
            throw MQTTError(code: rc, "cannot create the MQTT client for \(configuration.serverURI)")
        }
        self.handle = handle
        let counters = Counters()
        self.counters = counters
        context = Unmanaged.passRetained(CallbackTarget(continuation, counters)).toOpaque()
        _ = paho.MQTTAsync_setCallbacks(handle, context, { context, _ in
            CallbackTarget.from(context).continuation.yield(.connectionLost("connection lost"))
        }, { context, topic, topicLength, message in
            // Copied out, then Paho's copies freed: the owner reads the message on its own task.
            if let topic, let body = message?.pointee {
                let name = topicLength > 0
                    ? String(decoding: UnsafeRawBufferPointer(start: topic, count: Int(topicLength)), as: UTF8.self)
                    : String(cString: topic)
                let payload = body.payloadlen > 0 && body.payload != nil
                    ? Array(UnsafeRawBufferPointer(start: body.payload, count: Int(body.payloadlen))) : []
                CallbackTarget.from(context).continuation.yield(.message(topic: name, payload: payload))
            }
            var topic = topic, message = message
            PahoLibrary.shared?.MQTTAsync_freeMessage(&message)
            PahoLibrary.shared?.MQTTAsync_free(topic)
            return 1
        }, { context, _ in
            // Called under Paho's lock, with the message taken off its in-flight list
            // (`MQTTAsync_cycle`): `discardedMessages` relies on both happening together.
            let target = CallbackTarget.from(context)
            target.counters.delivered.add(1, ordering: .sequentiallyConsistent)
            if target.counters.deliveryWanted.exchange(false, ordering: .sequentiallyConsistent) {
                target.continuation.yield(.delivered)
            }
        })
        _ = paho.MQTTAsync_setConnected(handle, context) { context, _ in
            CallbackTarget.from(context).continuation.yield(.connected)
        }
        // Restored messages are waiting: counted as accepted, so their delivery is no drop.
        counters.accepted.store(pahoPending, ordering: .sequentiallyConsistent)
    }

    deinit {
        var handle: MQTTAsync? = handle
        paho.MQTTAsync_destroy(&handle)
        persistence.deallocate()
        Unmanaged<CallbackTarget>.fromOpaque(context).release()
        continuation.finish()
    }

    /// Starts connecting: returns at once; the outcome comes on `events`, and Paho
    /// keeps trying (1 s, doubling to 16 s) until `close`. Publishing works meanwhile.
    public func start() throws(MQTTError) {
        var options = cpaho_connect_options()
        options.keepAliveInterval = configuration.keepAlive
        options.cleansession = 0
        options.automaticReconnect = 1
        options.minRetryInterval = 1
        options.maxRetryInterval = 16
        options.connectTimeout = 10
        options.MQTTVersion = MQTTVERSION_3_1_1
        options.context = context
        options.onFailure = { context, response in
            let text = response.flatMap { $0.pointee.message.map { String(cString: $0) } }
                ?? response.map { MQTTError.describe($0.pointee.code) } ?? "unknown"
            CallbackTarget.from(context).continuation.yield(.connectFailed(text))
        }
        let rc = withCStrings([configuration.statusTopic, "offline", configuration.username, configuration.password,
                               configuration.tls?.caFile, configuration.tls?.certificateFile, configuration.tls?.keyFile]) { c in
            var will = cpaho_will_options()
            will.topicName = UnsafePointer(c[0])
            will.message = UnsafePointer(c[1])
            will.retained = 1
            will.qos = 1
            options.username = UnsafePointer(c[2])
            options.password = UnsafePointer(c[3])
            var ssl = cpaho_ssl_options()
            if let tls = configuration.tls {
                ssl.trustStore = UnsafePointer(c[4])
                ssl.keyStore = UnsafePointer(c[5])
                ssl.privateKey = UnsafePointer(c[6])
                ssl.enableServerCertAuth = tls.verify ? 1 : 0
                ssl.verify = tls.verify ? 1 : 0
            }
            return withUnsafeMutablePointer(to: &will) { will in
                withUnsafeMutablePointer(to: &ssl) { ssl in
                    options.will = will
                    if configuration.tls != nil { options.ssl = ssl }
                    return paho.MQTTAsync_connect(handle, &options)
                }
            }
        }
        guard rc == MQTTASYNC_SUCCESS else { throw MQTTError(code: rc, "cannot connect to \(configuration.serverURI)") }
    }

    /// Publishes `payload` on `topic` with QoS 1: handed to Paho when connected, nothing
    /// is waiting before it and Paho's window has room; else appended to the backlog (on
    /// disk: kept across a crash), and what the window takes of it moved on (`drain`).
    /// When `maxBufferedMessages` are waiting, the oldest of them is dropped to make room
    /// (counted in `droppedMessages`). The owner's: not from two tasks at once.
    public func publish(_ topic: String, _ payload: [UInt8], retained: Bool = false) throws(MQTTError) {
        let message = Backlog.Message(topic: topic, payload: payload, retained: retained)
        if backlog.isEmpty, isConnected, pahoPending < window {
            if try hand(message) { return }
            // Paho could not store it: a copy waits in the backlog, handed, until Paho holds
            // nothing (sent by then), so a crash never loses it.
            guard backlog.append(message) else {
                throw MQTTError(persistence: "cannot write \(log.path) or \(backlog.path): the message on \(topic) is only in memory until sent")
            }
            backlog.markFirstHanded(.unstoredByPaho)
            return
        }
        guard backlog.append(message) else {
            throw MQTTError(persistence: "cannot publish on \(topic): cannot write \(backlog.path)")
        }
        // Accepted: a refusal by Paho here leaves it waiting, and the owner's next `drain` says why.
        try? drain()
    }

    /// Moves the backlog's oldest messages to Paho, in order, while connected and Paho's
    /// window has room; when some are left, asks for the next delivery to be reported
    /// (`Event.delivered`), at which the owner calls this again. Call it at each
    /// `connected` and `delivered` event, and now and then (a delivery between the last
    /// look and the request would otherwise be missed). Throws when Paho refuses one (it
    /// stays first in the backlog).
    public func drain() throws(MQTTError) {
        let unseen = unseenStoreFailures()
        try drainBacklog()
        // Paho writes a message to its store again as it sends it, on its own thread: when
        // that fails, the message is only in Paho's memory until acknowledged. Said here,
        // at the next drain (at least once a second), as nothing else can catch it.
        if unseen > 0 {
            throw MQTTError(persistence: "cannot write \(log.path): \(unseen) of Paho's writes failed; what it is sending is only in memory until the broker acknowledges it")
        }
    }

    /// Paho's store writes that failed since the last look, and not seen around a hand.
    private func unseenStoreFailures() -> Int {
        let failed = log.failedPuts
        return failed - counters.failedPutsSeen.exchange(failed, ordering: .relaxed)
    }

    private func drainBacklog() throws(MQTTError) {
        guard !backlog.isEmpty else { return }
        // The oldest is already in Paho's hands (the disk full?) and never handed again
        // (each acknowledgement would send it once more): removed now if its removal failed
        // before; if Paho could not store it, once Paho holds nothing (it is sent by then),
        // and nothing else is handed meanwhile (each would be only in Paho's memory too).
        if let handed = backlog.firstHanded {
            if handed == .unstoredByPaho {
                guard pahoPending == 0 else { return reportNextDelivery() }
            }
            guard backlog.removeFirst() else {
                backlog.markFirstHanded(.removalFailed)
                throw Self.removalFailed(backlog)
            }
        }
        reportNextDelivery()
        while isConnected, pahoPending < window, let message = backlog.first {
            if try !hand(message) {
                backlog.markFirstHanded(.unstoredByPaho)
                throw MQTTError(persistence: "cannot write \(log.path): the oldest waiting message is sent, and held in \(backlog.path) until Paho holds nothing")
            }
            guard backlog.removeFirst() else {
                backlog.markFirstHanded(.removalFailed)
                throw Self.removalFailed(backlog)
            }
        }
    }

    private static func removalFailed(_ backlog: Backlog) -> MQTTError {
        MQTTError(persistence: "cannot write \(backlog.path): the oldest waiting message is sent but still held")
    }

    /// Paho's window: at most `window`, and never more than `maxBufferedMessages`.
    private var window: Int { Self.window(configuration) }

    private static func window(_ configuration: Configuration) -> Int {
        max(1, min(configuration.window, Int(configuration.maxBufferedMessages)))
    }

    /// Hands one message to Paho, which stores it before this returns; false when that
    /// store write failed (a full disk: Paho says nothing of it, the log counts it), which
    /// the caller then deals with and says.
    private func hand(_ message: Backlog.Message) throws(MQTTError) -> Bool {
        let failedPuts = log.failedPuts
        var pahoMessage = cpaho_message()
        pahoMessage.qos = 1
        pahoMessage.retained = message.retained ? 1 : 0
        var response = cpaho_response_options()
        let rc = message.payload.withUnsafeBytes { bytes in
            pahoMessage.payload = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
            pahoMessage.payloadlen = Int32(bytes.count)
            return paho.MQTTAsync_sendMessage(handle, message.topic, &pahoMessage, &response)
        }
        guard rc == MQTTASYNC_SUCCESS else { throw MQTTError(code: rc, "cannot publish on \(message.topic)") }
        counters.accepted.add(1, ordering: .sequentiallyConsistent)
        guard log.failedPuts != failedPuts else { return true }
        _ = unseenStoreFailures()   // this one is the caller's to say
        return false
    }

    /// Messages accepted and not yet acknowledged by the broker: waiting in the backlog
    /// or in Paho's buffer, or sent and in flight.
    public var pendingMessages: Int { backlog.waiting + pahoPending }

    /// Messages in Paho's hands (`MQTTAsync_getPendingTokens`: queued, or sent and in
    /// flight): a walk of its window (of what it restored at start, until that is sent),
    /// at each publish.
    private var pahoPending: Int {
        var tokens: UnsafeMutablePointer<MQTTAsync_token>?
        guard paho.MQTTAsync_getPendingTokens(handle, &tokens) == MQTTASYNC_SUCCESS, let tokens else { return 0 }
        defer { paho.MQTTAsync_free(tokens) }
        var count = 0
        while tokens[count] != -1 { count += 1 }
        return count
    }

    /// Whether a publish now would be taken without dropping an older message: fewer
    /// than `maxBufferedMessages` are waiting in the backlog.
    public var hasRoom: Bool { backlog.count < backlog.capacity }

    /// Messages dropped, oldest first, because `maxBufferedMessages` were waiting in the
    /// backlog, since the session was created.
    public var droppedMessages: Int { backlog.dropped }

    /// Messages Paho discarded, since the session was created: handed to it (or restored
    /// from its store at start) and neither delivered nor pending there. That happens when
    /// a broker accepts the connection without the session it had (a broker replaced, or
    /// restarted without its saved state: MQTT 3.1.1 then has the client discard its own
    /// session state): the messages sent and not acknowledged go with it, and may or may
    /// not have reached the broker. (Paho's own buffer bound, which would drop too, is never
    /// reached: the window.) Exact, as the pending count and the delivery count are read
    /// with no delivery in between: Paho takes a message off its lists and calls back under
    /// one lock.
    public var discardedMessages: Int {
        while true {
            let before = counters.delivered.load(ordering: .sequentiallyConsistent)
            let pending = pahoPending
            let after = counters.delivered.load(ordering: .sequentiallyConsistent)
            if before == after {
                return max(0, counters.accepted.load(ordering: .sequentiallyConsistent) - pending - after)
            }
        }
    }

    /// Subscribes to `filters` with QoS 1 (messages come as `Event.message`). Only while
    /// connected: call it at each `connected` (the persistent session keeps subscriptions,
    /// but the first connection has none).
    public func subscribe(_ filters: [String]) throws(MQTTError) {
        for filter in filters {
            var response = cpaho_response_options()
            let rc = paho.MQTTAsync_subscribe(handle, filter, 1, &response)
            guard rc == MQTTASYNC_SUCCESS else { throw MQTTError(code: rc, "cannot subscribe to \(filter)") }
        }
    }

    /// Publishes the retained `offline` status, then disconnects, waiting up to
    /// `timeout` for messages in flight. Messages not yet sent stay in the message log
    /// and the backlog for the next session. `offline` is handed to Paho at once, past
    /// the backlog and the window: the disconnect is clean, so the broker will not
    /// publish the last will, and `offline` queued behind waiting readings would not go out.
    public func close(timeout: Duration = .seconds(2)) async {
        _ = try? hand(Backlog.Message(topic: configuration.statusTopic, payload: Array("offline".utf8), retained: true))
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let done = OneShot()
        // Paho may never call back: a DISCONNECT queued behind `offline` when the connection
        // has just gone is never processed (no reconnect after a disconnect, no timeout for a
        // queued command). So the wait ends 2 s after `timeout` whatever Paho does (after a
        // signal, the process's own 2 s limit comes first).
        let limit = Task {
            try? await Task.sleep(for: timeout + .seconds(2))
            done.fire()
        }
        defer { limit.cancel() }
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            done.set(waiter)
            var options = cpaho_disconnect_options()
            options.timeout = milliseconds
            let box = done.holdForPaho()
            options.context = box
            options.onSuccess = { context, _ in OneShot.releasedByPaho(context)?.fire() }
            options.onFailure = { context, _ in OneShot.releasedByPaho(context)?.fire() }
            if paho.MQTTAsync_disconnect(handle, &options) != MQTTASYNC_SUCCESS {
                OneShot.releasedByPaho(box)?.fire()
            }
        }
        continuation.finish()
    }

    /// Reports the next delivery (one `Event.delivered`), for an owner waiting for room in
    /// the buffer. Deliveries are otherwise only counted: reporting each one would cost the
    /// owner a wake-up per message published.
    public func reportNextDelivery() {
        counters.deliveryWanted.store(true, ordering: .sequentiallyConsistent)
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

    /// Paho's user persistence over `log`: `log` is the context Paho hands to `popen`, which
    /// makes it the handle of every other call. Nothing is retained: the session holds the
    /// log until after `MQTTAsync_destroy`.
    ///
    /// `pahoCopy`: what `pget` and `pkeys` hand over, Paho frees, with its own `free`,
    /// which (in Debian's build, with Paho's heap tracking) frees only what Paho's own
    /// allocator gave: so it comes from `MQTTAsync_malloc`; the system's `malloc` would
    /// leak every restored message.
    private static func persistenceTable(_ log: MessageLog) -> MQTTClient_persistence {
        var table = MQTTClient_persistence()
        table.context = Unmanaged.passUnretained(log).toOpaque()
        table.popen = { handle, _, _, context in
            handle?.pointee = context
            return 0
        }
        table.pclose = { _ in 0 }
        table.pput = { handle, key, count, buffers, lengths in
            guard let key, count >= 0 else { return MQTTCLIENT_PERSISTENCE_ERROR }
            let parts = (0..<Int(count)).map { (UnsafeRawPointer(buffers?[$0]), Int(lengths?[$0] ?? 0)) }
            return MessageLog.from(handle).put(String(cString: key), parts) ? 0 : MQTTCLIENT_PERSISTENCE_ERROR
        }
        table.pget = { handle, key, buffer, length in
            guard let key, let bytes = MessageLog.from(handle).get(String(cString: key)),
                  let copy = PahoLibrary.shared?.MQTTAsync_malloc(max(1, bytes.count)) else { return MQTTCLIENT_PERSISTENCE_ERROR }
            bytes.withUnsafeBytes { if let base = $0.baseAddress { copy.copyMemory(from: base, byteCount: $0.count) } }
            buffer?.pointee = copy.assumingMemoryBound(to: CChar.self)   // Paho frees it (`pahoCopy`)
            length?.pointee = Int32(bytes.count)
            return 0
        }
        table.premove = { handle, key in
            guard let key else { return MQTTCLIENT_PERSISTENCE_ERROR }
            return MessageLog.from(handle).remove(String(cString: key)) ? 0 : MQTTCLIENT_PERSISTENCE_ERROR
        }
        table.pkeys = { handle, keys, count in
            let held = MessageLog.from(handle).keys
            count?.pointee = Int32(held.count)
            guard !held.isEmpty else {
                keys?.pointee = nil
                return 0
            }
            // Paho frees the array and each key (`pahoCopy`).
            guard let memory = PahoLibrary.shared?.MQTTAsync_malloc(held.count * MemoryLayout<UnsafeMutablePointer<CChar>?>.stride) else {
                return MQTTCLIENT_PERSISTENCE_ERROR
            }
            let array = memory.bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: held.count)
            for (i, key) in held.enumerated() {
                let utf8 = Array(key.utf8CString)
                let copy = PahoLibrary.shared?.MQTTAsync_malloc(utf8.count)?.bindMemory(to: CChar.self, capacity: utf8.count)
                copy?.initialize(from: utf8, count: utf8.count)
                array[i] = copy
            }
            keys?.pointee = array
            return 0
        }
        table.pclear = { handle in
            MessageLog.from(handle).clear() ? 0 : MQTTCLIENT_PERSISTENCE_ERROR
        }
        table.pcontainskey = { handle, key in
            guard let key else { return MQTTCLIENT_PERSISTENCE_ERROR }
            return MessageLog.from(handle).contains(String(cString: key)) ? 0 : MQTTCLIENT_PERSISTENCE_ERROR
        }
        return table
    }

    /// Why no session can be made on this machine (Paho's library cannot be loaded), or
    /// nil: for a command to say so before it starts anything.
    public static var unavailableReason: String? {
        PahoLibrary.failure.map { MQTTError(unavailable: $0).description }
    }

    /// Whether the session is connected now.
    public var isConnected: Bool { paho.MQTTAsync_isConnected(handle) != 0 }
}

/// The target of Paho's callbacks: the stream's continuation and the counters, both
/// safe from any thread.
private final class CallbackTarget: Sendable {
    let continuation: AsyncStream<MQTTSession.Event>.Continuation
    let counters: Counters
    init(_ continuation: AsyncStream<MQTTSession.Event>.Continuation, _ counters: Counters) {
        self.continuation = continuation
        self.counters = counters
    }
    static func from(_ context: UnsafeMutableRawPointer?) -> CallbackTarget {
        Unmanaged<CallbackTarget>.fromOpaque(context!).takeUnretainedValue()
    }
}

/// What `discardedMessages` is computed from, and whether the next delivery is reported.
/// Atomics: `delivered` is written on Paho's thread and read on the owner's; `accepted`
/// is written by `publish` (the owner, and `close`); `deliveryWanted` is set by the owner
/// and taken by Paho's thread; `failedPutsSeen` is the owner's alone, an atomic only to be
/// stored in this class.
private final class Counters: Sendable {
    let accepted = Atomic<Int>(0)
    let delivered = Atomic<Int>(0)
    let deliveryWanted = Atomic<Bool>(false)
    /// `MessageLog.failedPuts` when the owner last looked (`drain`, `publish`).
    let failedPutsSeen = Atomic<Int>(0)
}

/// Runs `body` with C copies of `texts` (nil stays nil), freed afterwards.
private func withCStrings<T>(_ texts: [String?], _ body: ([UnsafeMutablePointer<CChar>?]) -> T) -> T {
    let copies = texts.map { $0.map { strdup($0)! } }
    defer { copies.forEach { free($0) } }
    return body(copies)
}
