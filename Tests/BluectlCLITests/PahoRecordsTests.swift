import Foundation
import Testing
@testable import BluectlGateway

/// An earlier bluectl's messages, kept by Paho C 1.3 under its own keys in the message log,
/// taken in once (`PahoRecords`): the byte layouts below are Paho's (its `s-` record is the
/// PUBLISH packet as sent; its `c-` record its queued command, `int`s little-endian).
@Suite("Paho's records taken in (an upgrade from the Paho-based gateway)")
struct PahoRecordsTests {
    /// Paho's `s-ID` record: the PUBLISH as sent (QoS 1).
    private func sent(_ id: Int, _ topic: String, _ payload: String, retained: Bool = false) -> [UInt8] {
        let t = Array(topic.utf8), p = Array(payload.utf8)
        var remaining = 2 + t.count + 2 + p.count
        var length: [UInt8] = []
        repeat {
            var byte = UInt8(remaining % 128)
            remaining /= 128
            if remaining > 0 { byte |= 0x80 }
            length.append(byte)
        } while remaining > 0
        return [0x32 | (retained ? 1 : 0)] + length + [UInt8(t.count >> 8), UInt8(t.count & 0xff)] + t
            + [UInt8(id >> 8), UInt8(id & 0xff)] + p
    }

    /// Paho's `c-N` record: a queued command (type 3 PUBLISH, 8 SUBSCRIBE).
    private func queued(type: Int32 = 3, token: Int32, _ topic: String, _ payload: String, retained: Bool = false) -> [UInt8] {
        func int32(_ v: Int32) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        let p = Array(payload.utf8)
        return int32(type) + int32(token) + Array(topic.utf8) + [0] + int32(Int32(p.count)) + p + int32(1) + int32(retained ? 1 : 0)
    }

    private func log(_ records: [String: [UInt8]]) throws -> MessageLog {
        let log = try MessageLog(path: try MessageLogTests.folder() + "/old.log")
        for (key, bytes) in records {
            #expect(bytes.withUnsafeBytes { log.put(key, [($0.baseAddress, $0.count)]) })
        }
        return log
    }

    private func message(_ log: MessageLog, _ key: String) -> Backlog.Message? {
        log.get(key).flatMap(Backlog.decode)
    }

    @Test("sent ones first by packet id, then queued ones by number; a queued one whose token is a sent one's id taken once; other commands and QoS 2 records dropped; an unreadable one counted")
    func order() throws {
        let log = try log([
            "s-7": sent(7, "t/a", "sent 7"),
            "s-3": sent(3, "t/b", "sent 3", retained: true),
            "c-12": queued(token: 20, "t/c", "queued 12"),
            "c-10": queued(token: 3, "t/b", "sent 3", retained: true),   // its removal had failed: the same as s-3
            "c-11": queued(type: 8, token: 21, "t/#", ""),
            "sc-4": [0x62, 0x02, 0x00, 0x04],
            "s-9": [0x32, 0x7f, 0x00],   // cut short
            "f5": Backlog.encode(.init(topic: "t/new", payload: Array("mine".utf8), retained: false)),
        ])
        #expect(try PahoRecords.adopt(in: log) == 1)
        #expect(log.keys.sorted() == ["f5", "f6", "f7", "f8"])
        #expect(message(log, "f6") == .init(topic: "t/b", payload: Array("sent 3".utf8), retained: true))
        #expect(message(log, "f7") == .init(topic: "t/a", payload: Array("sent 7".utf8), retained: false))
        #expect(message(log, "f8") == .init(topic: "t/c", payload: Array("queued 12".utf8), retained: false))
        #expect(message(log, "f5")?.topic == "t/new")
    }

    @Test("a payload of 200 bytes (a remaining length of two bytes) and an empty one read back whole")
    func lengths() {
        let long = String(repeating: "y", count: 200)
        #expect(PahoRecords.publishPacket(sent(1, "t/long", long)) == .init(topic: "t/long", payload: Array(long.utf8), retained: false))
        #expect(PahoRecords.publishPacket(sent(2, "t/empty", "")) == .init(topic: "t/empty", payload: [], retained: false))
        #expect(PahoRecords.publishPacket(Array(sent(1, "t/long", long).dropLast())) == nil)
        #expect(PahoRecords.command(Array(queued(token: 1, "t", "abc").dropLast(5))) == nil)
    }

    @Test("a key neither Paho nor the session writes: refused, naming the file and the key, nothing changed")
    func foreignKey() throws {
        let log = try log(["zz-1": [1, 2, 3], "s-1": sent(1, "t", "p")])
        #expect {
            _ = try PahoRecords.adopt(in: log)
        } throws: { error in
            "\(error)".contains("key \"zz-1\"") && "\(error)".contains(log.path)
        }
        #expect(log.keys.sorted() == ["s-1", "zz-1"])
    }

    @Test("a session opened on an upgraded gateway's log has Paho's messages pending, to be sent first")
    func session() throws {
        let root = try MessageLogTests.folder()
        let configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:1", clientID: "bluectl-up",
                                                      persistenceDirectory: root, statusTopic: "bluectl/up/status")
        do {
            let old = try MessageLog(path: MQTTSession.logPath(configuration))
            for (key, bytes) in ["s-2": sent(2, "t/1", "one"), "c-5": queued(token: 3, "t/2", "two")] {
                #expect(bytes.withUnsafeBytes { old.put(key, [($0.baseAddress, $0.count)]) })
            }
        }
        let session = try MQTTSession(configuration)
        #expect(session.pendingMessages == 2 && session.lostMessages == 0)
        #expect(session.log.keys.sorted() == ["f0", "f1"])
        #expect(session.log.get("f0").flatMap(Backlog.decode)?.payload == Array("one".utf8))
    }
}
