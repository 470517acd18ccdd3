import Synchronization

// The parts of one MQTT connection that `MQTTSession` keeps beside its own state: where
// the broker is, and a connection attempt under way on its own thread.

/// The broker's host, port and whether TLS is used, from `tcp://HOST:PORT` or
/// `ssl://HOST:PORT` (an IPv6 host in brackets).
struct Endpoint: Sendable {
    let host: String
    let port: Int32
    let tls: Bool

    init?(_ uri: String) {
        let tls: Bool
        let rest: Substring
        if uri.hasPrefix("tcp://") { (tls, rest) = (false, uri.dropFirst(6)) }
        else if uri.hasPrefix("ssl://") { (tls, rest) = (true, uri.dropFirst(6)) }
        else { return nil }
        guard let colon = rest.lastIndex(of: ":"), let port = Int32(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
            return nil
        }
        var host = rest[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty else { return nil }
        self.host = String(host)
        self.port = port
        self.tls = tls
    }
}

/// One connection attempt's client while its thread looks the host up and connects
/// (`mosquitto_connect_async`): the owner takes it when the thread is done, or abandons it
/// (`close`) and the thread destroys it. One atomic decides which.
final class Attempt: @unchecked Sendable {
    // @unchecked: `client` is the thread's until `state` says done, then the owner's;
    // `rc` is written before `state` is released and read after it is acquired.
    let client: OpaquePointer
    private var rc: Int32 = 0
    private var error: Int32 = 0
    private let state = Atomic<Int>(0)   // 0 under way, 1 done, 2 abandoned
    init(client: OpaquePointer) { self.client = client }

    /// The thread: the attempt is done with `rc` (and the thread's `errno`). False when the
    /// owner abandoned it (then the client is the thread's to destroy).
    func finish(_ rc: Int32, errno error: Int32) -> Bool {
        self.rc = rc
        self.error = error
        return state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
    }

    /// The owner: the attempt's return code and errno once done, else nil.
    var result: (Int32, Int32)? { state.load(ordering: .acquiring) == 1 ? (rc, error) : nil }

    /// The owner gives the attempt up. True when the thread will destroy the client; false
    /// when it is done already (the client is the owner's to destroy).
    func abandon() -> Bool {
        state.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged
    }
}
