import BluectlDBus

/// How one bluectl process tells the others that a `Value` signal is its
/// read, not a notification.
///
/// bluetoothd 5.66 emits `PropertiesChanged(Value)` on every successful
/// `ReadValue` of a characteristic (src/gatt-client.c `chrc_read_cb` →
/// `write_characteristic_cb`), and every subscriber receives it exactly as it
/// receives a notification. So a bluectl read of a characteristic that is
/// notifying brackets its call with two signals of its own, on the
/// characteristic's path: `Started` before `ReadValue`, and after the answer
/// `Finished(reply_serial, value)` (`reply_serial` 0 when the read failed:
/// then bluetoothd emitted nothing). bluetoothd sends that `Value` signal and
/// then, in the same function with nothing between, its reply: the signal's
/// serial is `reply_serial - 1`. The bus delivers `Started` to a subscriber
/// before the signal (the reader sends it before its call) and `Finished`
/// after it, so the subscriber holds values while a read is open and drops
/// exactly that one (`ReadCopyFilter`). See docs/notifications.md.
enum ReadMarker {
    static let interface = "org.bluectl.ReadMarker1"
    static let started = "Started"
    static let finished = "Finished"

    /// How long a subscriber holds values for a read whose `Finished` never
    /// comes (the reader was killed): longer than any read's own limit.
    static let holdLimit: Duration = .seconds(40)

    static func send(_ member: String, path: ObjectPath, arguments: [DBusValue] = [], on connection: DBusConnection) {
        // A marker that cannot be sent only costs the subscribers their
        // filtering (the connection is closing): the read goes on.
        try? connection.send(.signal(path: path, interface: interface, member: member, arguments: arguments))
    }
}

/// A subscriber's side of `ReadMarker`: a pure value that decides which
/// `Value` signals are notifications (delivered, in order) and which one is
/// another bluectl's read (dropped). Driven from the bus thread.
struct ReadCopyFilter: Sendable, Equatable {
    struct Held: Sendable, Equatable {
        var bytes: [UInt8]
        var serial: UInt32
    }

    /// Readers with a read open (their unique bus names) and when to stop
    /// waiting for their `Finished`.
    private(set) var openReads: [String: ContinuousClock.Instant] = [:]
    private(set) var held: [Held] = []
    /// Values recognised as reads and dropped.
    private(set) var dropped = 0

    /// A `Value` signal from bluetoothd: the values to deliver now. With no
    /// read open and nothing held (nearly always), that value alone, with
    /// no allocation and no look at the clock.
    mutating func value(_ bytes: [UInt8], serial: UInt32, now: @autoclosure () -> ContinuousClock.Instant) -> InlineList<[UInt8]> {
        if openReads.isEmpty, held.isEmpty { return InlineList(bytes) }
        var out = expire(now: now())
        if openReads.isEmpty {
            out.append(bytes)
        } else {
            held.append(Held(bytes: bytes, serial: serial))
        }
        return InlineList(out)
    }

    /// `Started` from `reader`.
    mutating func started(by reader: String, now: ContinuousClock.Instant) -> [[UInt8]] {
        let out = expire(now: now)
        openReads[reader] = now + ReadMarker.holdLimit
        return out
    }

    /// `Finished(replySerial, value)` from `reader`: drops the read's own
    /// signal (serial `replySerial - 1`, the same bytes), then releases what
    /// no other open read still holds.
    mutating func finished(by reader: String, replySerial: UInt32, value: [UInt8], now: ContinuousClock.Instant) -> [[UInt8]] {
        guard openReads.removeValue(forKey: reader) != nil else {
            // `Finished` without `Started` (we subscribed in between): the
            // read's signal, if any, was delivered before we held anything.
            return expire(now: now)
        }
        if replySerial > 0, let i = held.firstIndex(where: { $0.serial == replySerial &- 1 && $0.bytes == value }) {
            held.remove(at: i)
            dropped += 1
        }
        return expire(now: now)
    }

    /// Everything held, in order (the session ends, or reads timed out).
    mutating func releaseAll() -> [[UInt8]] {
        openReads.removeAll()
        defer { held.removeAll() }
        return held.map(\.bytes)
    }

    private mutating func expire(now: ContinuousClock.Instant) -> [[UInt8]] {
        openReads = openReads.filter { $0.value > now }
        guard openReads.isEmpty, !held.isEmpty else { return [] }
        return releaseAll()
    }
}
