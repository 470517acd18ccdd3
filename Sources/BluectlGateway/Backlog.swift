import BluectlDBus

/// The messages waiting for the broker beyond the session's window, oldest first, in a
/// `MessageLog` of their own (a record per message, keyed `w` and its sequence number).
///
/// **Why:** a client library that keeps what it has not sent in memory holds a whole
/// outage's readings there (about 2 KB of heap each with Paho, used before: a day's outage
/// at 50,000 messages would hold about 100 MB). Here a waiting message costs an index
/// entry in memory (tens of bytes); `MQTTSession` hands the connection at most its
/// `window` at a time.
///
/// **Order:** appended at the tail, taken from the head; a message is removed only after
/// the session has put it in its own log and sent it, so a `kill -9` in between sends it
/// twice, never loses it (QoS 1 is at least once).
///
/// **The bound:** at most `capacity` messages; past it the oldest is dropped to take the
/// new one, and counted (`dropped`).
///
/// **Handed, still held:** a message the session took whose removal here could not be
/// written (a full disk) stays as the oldest, marked (`firstHanded`): never handed again,
/// removed when it can be (`MQTTSession.drain`); the capacity pushing it out is that
/// removal, not a drop.
///
/// Threads: `append`, `first` and `removeFirst` are the session owner's; the counts are
/// also read elsewhere (tests), so head, tail and the drop count are behind one lock
/// (`Locked`), held at most while the log's index is looked at, never across a file
/// operation. A sequence number is taken under it, so even two appends at once would not
/// share a key.
package final class Backlog: Sendable {
    /// One waiting message.
    package struct Message: Equatable, Sendable {
        package var topic: String
        package var payload: [UInt8]
        package var retained: Bool

        package init(topic: String, payload: [UInt8], retained: Bool) {
            self.topic = topic
            self.payload = payload
            self.retained = retained
        }
    }

    private struct State {
        /// The sequence number of the oldest message held (when `head < tail`).
        var head: Int
        /// The sequence number the next message gets.
        var tail: Int
        /// Messages dropped because `capacity` were waiting, since the backlog was opened.
        var dropped = 0
        /// Why the oldest message, already handed to the session's connection, is still held (`markFirstHanded`).
        var firstHanded: Handed?
    }

    /// Why the oldest message is held though the session has it (`firstHanded`).
    package enum Handed: Sendable {
        /// Its removal could not be written: the removal is tried again.
        case removalFailed
    }

    /// At most this many messages wait; the oldest is dropped to take a new one past it.
    package let capacity: Int
    let log: MessageLog
    private let state: Locked<State>

    /// Opens (or creates) the backlog at `path`, with what an earlier run left in it.
    /// Throws as `MessageLog` does (a file it cannot open, lock or read), and when it holds
    /// a key this type does not write (not `w` and a sequence number): nothing is dropped
    /// silently.
    package init(path: String, capacity: Int) throws(MQTTError) {
        self.capacity = max(1, capacity)
        log = try MessageLog(path: path)
        var sequences: [Int] = []
        for key in log.keys {
            guard key.first == "w", let n = Int(key.dropFirst()), n >= 0, key == "w\(n)" else {
                throw MQTTError(persistence: "\(path) holds a record that is not a waiting message (key \"\(key)\"): move it aside to start without what it holds")
            }
            sequences.append(n)
        }
        state = Locked(State(head: sequences.min() ?? 0, tail: (sequences.max() ?? -1) + 1))
    }

    /// The file's path.
    package var path: String { log.path }

    /// Messages waiting.
    package var count: Int { log.count }

    /// Whether none is waiting.
    package var isEmpty: Bool { log.count == 0 }

    /// Messages dropped because `capacity` were waiting, since the backlog was opened.
    package var dropped: Int { state.withLock { $0.dropped } }

    /// Appends `message`, on disk before this returns, dropping the oldest when `capacity`
    /// were waiting. False when the file cannot be written (then nothing changed).
    package func append(_ message: Message) -> Bool {
        // A number not used after a failed put is a gap, which `headKey` steps over.
        let key = state.withLock { state in
            defer { state.tail += 1 }
            return "w\(state.tail)"
        }
        guard Self.encode(message).withUnsafeBytes({ log.put(key, [($0.baseAddress, $0.count)]) }) else { return false }
        while log.count > capacity {
            let handed = firstHanded != nil
            guard removeFirst() else { break }
            // A message already handed leaves as it would have (it is in the session's log,
            // sent or to be sent): no drop.
            if !handed { state.withLock { $0.dropped += 1 } }
        }
        return true
    }

    /// Whether the oldest message is already handed to the session's connection and only
    /// kept here until it can be removed (its removal could not be written):
    /// `MQTTSession.drain` removes it, and never hands it again.
    package var firstHanded: Handed? { state.withLock { $0.firstHanded } }

    /// Marks the oldest message as handed (`firstHanded`), until it is removed.
    package func markFirstHanded(_ why: Handed) { state.withLock { $0.firstHanded = why } }

    /// Messages waiting that are not handed yet.
    package var waiting: Int { max(0, count - (firstHanded == nil ? 0 : 1)) }

    /// The oldest message waiting, or nil (none, or the file cannot be read now). A record
    /// that does not read as a message (not one this type wrote) is dropped, counted, and
    /// the next one is looked at (only a file written by something else can hold one).
    package var first: Message? {
        while let key = headKey() {
            guard let bytes = log.get(key) else { return nil }
            if let message = Self.decode(bytes) { return message }
            guard removeFirst() else { return nil }
            state.withLock { $0.dropped += 1 }
        }
        return nil
    }

    /// Removes the oldest message (after the session took it). False when there is none or the
    /// removal cannot be written.
    @discardableResult
    package func removeFirst() -> Bool {
        guard let key = headKey(), log.remove(key) else { return false }
        state.withLock {
            $0.head += 1
            $0.firstHanded = nil
        }
        return true
    }

    /// The key of the oldest message held, the head moved past numbers not held; nil when
    /// none is.
    private func headKey() -> String? {
        guard log.count > 0 else { return nil }
        return state.withLock { state in
            while state.head < state.tail {
                let key = "w\(state.head)"
                if log.contains(key) { return key }
                state.head += 1
            }
            return nil
        }
    }

    /// flags (1: bit 0 retained), topic length (2, little-endian), topic, payload.
    static func encode(_ message: Message) -> [UInt8] {
        let topic = Array(message.topic.utf8.prefix(Int(UInt16.max)))
        var bytes: [UInt8] = [message.retained ? 1 : 0, UInt8(topic.count & 0xff), UInt8(topic.count >> 8)]
        bytes.reserveCapacity(3 + topic.count + message.payload.count)
        bytes += topic
        bytes += message.payload
        return bytes
    }

    static func decode(_ bytes: [UInt8]) -> Message? {
        guard bytes.count >= 3, bytes[0] <= 1 else { return nil }
        let length = Int(bytes[1]) | Int(bytes[2]) << 8
        guard bytes.count >= 3 + length else { return nil }
        return Message(topic: String(decoding: bytes[3..<(3 + length)], as: UTF8.self),
                       payload: Array(bytes[(3 + length)...]), retained: bytes[0] == 1)
    }
}
