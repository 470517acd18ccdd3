/// The records an earlier bluectl's MQTT client, Eclipse Paho C 1.3, kept in the message
/// log (its store, under Paho's keys), read once at start and put back as this session's
/// own (`f` and a sequence number), so that an upgrade loses none of the messages Paho had
/// not had acknowledged. Paho's layouts (1.3.11 and 1.3.12 alike, amd64 and arm64: its
/// `int`s little-endian):
///
/// - `s-ID`: a PUBLISH sent and not acknowledged, as on the wire: the fixed header byte
///   (`0x3_`: bit 0 retained), the remaining length (MQTT's variable-byte integer), the
///   topic (2-byte big-endian length, then its bytes), the packet id (2 bytes), the payload.
/// - `c-N`: a command queued and not yet sent: type (4 bytes; 3 is PUBLISH), token (4: the
///   packet id it will be sent with), the topic NUL-terminated, payload length (4), the
///   payload, QoS (4), retained (4). Other commands (subscriptions) are dropped: the
///   gateway subscribes again at each connection.
/// - `sc-`, `r-`, `q-` (QoS 2 and received messages): nothing of the gateway's to send.
///
/// Order, as Paho itself replayed them: the sent ones first (by packet id), then the queued
/// ones by N; a queued one whose token is a sent one's packet id is the same message
/// (its removal had failed), taken once.
enum PahoRecords {
    /// Converts every Paho record in `log`; returns how many PUBLISH records could not be
    /// read (lost: counted in `MQTTSession.lostMessages`). Throws when the log holds
    /// a key neither Paho nor this session writes, or a conversion cannot be written.
    static func adopt(in log: MessageLog) throws(MQTTError) -> Int {
        var sent: [(id: Int, message: Backlog.Message)] = []
        var queued: [(n: Int, token: Int, message: Backlog.Message)] = []
        var unreadable = 0
        var old: [String] = []
        var highest = -1
        for key in log.keys {
            if key.first == "f", let n = Int(key.dropFirst()), key == "f\(n)" {
                highest = max(highest, n)
                continue
            }
            guard let dash = key.firstIndex(of: "-"), let number = Int(key[key.index(after: dash)...]),
                  ["s", "s5", "c", "c5", "sc", "sc5", "r", "r5", "q", "q5"].contains(key[..<dash]) else {
                throw MQTTError(persistence: "\(log.path) holds a record that is not a message (key \"\(key)\"): move it aside to start without what it holds")
            }
            old.append(key)
            let prefix = key[..<dash]
            guard prefix == "s" || prefix == "c" else { continue }
            guard let bytes = log.get(key) else {
                unreadable += 1
                continue
            }
            if prefix == "s" {
                if let message = publishPacket(bytes) { sent.append((number, message)) } else { unreadable += 1 }
            } else if let command = command(bytes) {
                if let publish = command { queued.append((number, publish.token, publish.message)) }
            } else {
                unreadable += 1
            }
        }
        let sentIDs = Set(sent.map(\.id))
        let messages = sent.sorted { $0.id < $1.id }.map(\.message)
            + queued.sorted { $0.n < $1.n }.filter { !sentIDs.contains($0.token) }.map(\.message)
        var sequence = highest + 1
        for message in messages {
            guard Backlog.encode(message).withUnsafeBytes({ log.put("f\(sequence)", [($0.baseAddress, $0.count)]) }) else {
                throw MQTTError(persistence: "cannot write \(log.path) (taking in an earlier version's messages)")
            }
            sequence += 1
        }
        for key in old where !log.remove(key) {
            throw MQTTError(persistence: "cannot write \(log.path) (taking in an earlier version's messages)")
        }
        return unreadable
    }

    /// A PUBLISH packet as Paho kept it (`s-`), or nil.
    static func publishPacket(_ bytes: [UInt8]) -> Backlog.Message? {
        guard bytes.count >= 2, bytes[0] >> 4 == 3 else { return nil }
        var at = 1, remaining = 0, shift = 0
        while true {
            guard at < bytes.count, shift <= 21 else { return nil }
            let byte = bytes[at]
            remaining |= Int(byte & 0x7f) << shift
            at += 1
            shift += 7
            if byte & 0x80 == 0 { break }
        }
        guard at + remaining == bytes.count, remaining >= 2 else { return nil }
        let topicLength = Int(bytes[at]) << 8 | Int(bytes[at + 1])
        at += 2
        let qos = (bytes[0] >> 1) & 3
        let idLength = qos > 0 ? 2 : 0
        guard at + topicLength + idLength <= bytes.count else { return nil }
        let topic = String(decoding: bytes[at..<(at + topicLength)], as: UTF8.self)
        at += topicLength + idLength
        return Backlog.Message(topic: topic, payload: Array(bytes[at...]), retained: bytes[0] & 1 == 1)
    }

    /// A queued command as Paho kept it (`c-`): its token and message for a PUBLISH, `.some(nil)`
    /// for another command, nil when it cannot be read.
    static func command(_ bytes: [UInt8]) -> (token: Int, message: Backlog.Message)?? {
        func int32(_ at: Int) -> Int? {
            guard at + 4 <= bytes.count else { return nil }
            return Int(Int32(bitPattern: UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24))
        }
        guard let type = int32(0) else { return nil }
        guard type == 3 else { return .some(nil) }
        guard let token = int32(4), let nul = bytes[8...].firstIndex(of: 0) else { return nil }
        let topic = String(decoding: bytes[8..<nul], as: UTF8.self)
        guard let length = int32(nul + 1), length >= 0, nul + 5 + length + 8 <= bytes.count,
              let retained = int32(nul + 5 + length + 4) else { return nil }
        let payload = Array(bytes[(nul + 5)..<(nul + 5 + length)])
        return .some((token, Backlog.Message(topic: topic, payload: payload, retained: retained != 0)))
    }
}
