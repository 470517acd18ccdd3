import Foundation
import Testing
@testable import BluectlGateway

/// The gateway's stores of messages (`MessageLog`), on real files, and through the session
/// (`MQTTSession` with no broker to reach).
@Suite("Message log (the gateway's store of unacknowledged messages)")
struct MessageLogTests {
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("mlog-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func put(_ log: MessageLog, _ key: String, _ parts: String...) -> Bool {
        let buffers = parts.map { Array($0.utf8) }
        // Each part from its own buffer (a record's header, topic and payload).
        func go(_ i: Int, _ held: [(UnsafeRawPointer?, Int)]) -> Bool {
            guard i < buffers.count else { return log.put(key, held) }
            return buffers[i].withUnsafeBytes { go(i + 1, held + [($0.baseAddress, $0.count)]) }
        }
        return go(0, [])
    }

    private func text(_ log: MessageLog, _ key: String) -> String? { log.get(key).map { String(decoding: $0, as: UTF8.self) } }

    @Test("put, get, replace, remove; reopened, the last record of each key wins")
    func roundTrip() throws {
        let path = try Self.folder() + "/a.log"
        do {
            let log = try MessageLog(path: path)
            #expect(put(log, "c-1", "head", "topic", "payload"))
            #expect(put(log, "c-2", "two"))
            #expect(put(log, "s-1", "sent"))
            #expect(put(log, "c-2", "two again"))
            #expect(log.remove("s-1"))
            #expect(log.remove("s5-1"))   // not held: nothing written
            #expect(text(log, "c-1") == "headtopicpayload")
            #expect(text(log, "c-2") == "two again")
            #expect(log.get("s-1") == nil)
            #expect(log.contains("c-1") && !log.contains("s-1"))
            #expect(Set(log.keys) == ["c-1", "c-2"])
        }
        let log = try MessageLog(path: path)
        #expect(Set(log.keys) == ["c-1", "c-2"])
        #expect(text(log, "c-1") == "headtopicpayload")
        #expect(text(log, "c-2") == "two again")
        let seen = try #require(MessageLog.contents(at: path))
        #expect(seen.mapValues { String(decoding: $0, as: UTF8.self) } == ["c-1": "headtopicpayload", "c-2": "two again"])
        #expect(log.clear())
        #expect(log.keys.isEmpty && log.fileSize == MessageLog.header.count)
    }

    @Test("a record torn at the end (killed in a put) is cut off; what came before is kept, and the log goes on")
    func tornEnd() throws {
        let path = try Self.folder() + "/torn.log"
        do {
            let log = try MessageLog(path: path)
            #expect(put(log, "c-1", "one"))
            #expect(put(log, "c-2", "two"))
        }
        let whole = try #require(FileManager.default.contents(atPath: path))
        for cut in [1, 5, 9] {   // in the header, the key, the data of a third record
            var torn = whole
            torn.append(contentsOf: [MessageLog.putKind, 3, 0, 5, 0, 0, 0] + Array("c-3three".utf8))
            torn.removeLast(torn.count - whole.count - cut)
            try torn.write(to: URL(fileURLWithPath: path))
            #expect(MessageLog.contents(at: path)?.keys.sorted() == ["c-1", "c-2"])
            let log = try MessageLog(path: path)
            #expect(log.fileSize == whole.count, "cut \(cut)")
            #expect(put(log, "c-4", "four"))
        }
        let log = try MessageLog(path: path)
        #expect(log.keys.sorted() == ["c-1", "c-2", "c-4"])
        #expect(text(log, "c-4") == "four")
    }

    @Test("a file that is not a message log is refused, not read or written")
    func notALog() throws {
        let path = try Self.folder() + "/other.log"
        try Data("something else entirely".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: MQTTError.self) { try MessageLog(path: path) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "something else entirely")
    }

    @Test("damage before the end is an error naming the offset, and the file is left as it was; a header torn at creation reads as empty")
    func damage() throws {
        let path = try Self.folder() + "/damaged.log"
        do {
            let log = try MessageLog(path: path)
            #expect(put(log, "c-1", "one"))
            #expect(put(log, "c-2", "two"))
        }
        var bytes = try #require(FileManager.default.contents(atPath: path))
        let second = MessageLog.header.count + MessageLog.recordHeaderSize + 3 + 3
        bytes[second] = 0x7a   // the second record's kind: not one the log writes
        try bytes.write(to: URL(fileURLWithPath: path))
        do {
            _ = try MessageLog(path: path)
            Issue.record("a damaged log was opened")
        } catch {
            #expect(error.description.contains("damaged at byte \(second)"), "\(error)")
        }
        #expect(FileManager.default.contents(atPath: path) == bytes)
        #expect(MessageLog.contents(at: path) == nil)

        let torn = try Self.folder() + "/torn-header.log"
        try Data(MessageLog.header.prefix(3)).write(to: URL(fileURLWithPath: torn))
        let log = try MessageLog(path: torn)
        #expect(log.keys.isEmpty && put(log, "c-1", "one"))
        #expect(MessageLog.contents(at: torn)?.keys.sorted() == ["c-1"])
    }

    @Test("one process at a time: a second open of an open log is refused, saying why")
    func oneWriter() throws {
        let path = try Self.folder() + "/busy.log"
        let first = try MessageLog(path: path)
        #expect(put(first, "c-1", "one"))
        do {
            _ = try MessageLog(path: path)
            Issue.record("a second writer was let in")
        } catch {
            #expect(error.description.contains("in use by another process"), "\(error)")
        }
    }

    @Test("held nothing past 256 KiB: cut back to its header; a quarter held past 16 MiB: rewritten with only that")
    func size() throws {
        let path = try Self.folder() + "/size.log"
        let log = try MessageLog(path: path)
        let payload = String(repeating: "x", count: 1000)
        for n in 0..<400 {   // the steady state: each message put, sent, removed
            #expect(put(log, "c-\(n)", payload))
            #expect(log.remove("c-\(n)"))
        }
        #expect(log.fileSize < 300 * 1024, "\(log.fileSize)")
        #expect(log.fileSize > MessageLog.header.count)   // cut once, then grown again: never held nothing long
        // An outage: 20,000 held (20 MB), then all but 100 acknowledged.
        for n in 0..<20_000 { #expect(put(log, "c-\(n)", payload)) }
        let before = log.fileSize
        for n in 0..<19_900 { _ = log.remove("c-\(n)") }
        // Rewritten once a quarter was held (about 5 MB then), the later removals appended:
        // without the rewrite the file would only have grown.
        #expect(log.fileSize < before / 3, "\(log.fileSize) of \(before)")
        #expect(log.keys.count == 100)
        #expect(text(log, "c-19950") == payload)
        let seen = try #require(MessageLog.contents(at: path))
        #expect(seen.count == 100 && seen["c-19999"] == Array(payload.utf8))
        // The rewritten file is locked as the first was.
        #expect(throws: MQTTError.self) { try MessageLog(path: path) }
    }

    @Test("an earlier bluectl's files (Paho's file persistence) are taken in, then removed with their folders")
    func adoptsPahoFiles() throws {
        let root = try Self.folder()
        let configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:1", clientID: "bluectl-old",
                                                      persistenceDirectory: root, statusTopic: "bluectl/old/status")
        let paho = MQTTSession.pahoFolder(configuration)
        #expect(paho == root + "/bluectl-old-tcp-//127.0.0.1-1")
        try FileManager.default.createDirectory(atPath: paho, withIntermediateDirectories: true)
        try Data("first".utf8).write(to: URL(fileURLWithPath: paho + "/c-1.msg"))
        try Data("second".utf8).write(to: URL(fileURLWithPath: paho + "/c-2.msg"))
        let log = try MessageLog(path: MQTTSession.logPath(configuration))
        #expect(log.adopt(pahoFolder: paho, upTo: root) == 2)
        #expect(text(log, "c-1") == "first" && text(log, "c-2") == "second")
        #expect(!FileManager.default.fileExists(atPath: root + "/bluectl-old-tcp-"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["bluectl-old-tcp___127.0.0.1_1.log"])
    }

    @Test("a session with no broker: publishes accepted wait in the backlog, none in the connection's log, and a new session has them pending")
    func throughSession() throws {
        let root = try Self.folder()
        // Port 1: nothing listens; the session is never started, so nothing is sent anyway.
        let configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:1", clientID: "bluectl-test",
                                                      persistenceDirectory: root, statusTopic: "bluectl/test/status")
        do {
            let session = try MQTTSession(configuration)
            for n in 0..<5 { try session.publish("bluectl/test/devices/x", Array("reading \(n)".utf8)) }
            #expect(session.pendingMessages == 5)
        }
        #expect(MessageLog.contents(at: MQTTSession.logPath(configuration)) == [:])
        let held = try #require(MessageLog.contents(at: MQTTSession.backlogPath(configuration)))
        #expect(held.keys.sorted() == (0..<5).map { "w\($0)" })
        for n in 0..<5 {
            let bytes = try #require(held["w\(n)"])
            let message = try #require(Backlog.decode(bytes))
            #expect(message == Backlog.Message(topic: "bluectl/test/devices/x", payload: Array("reading \(n)".utf8), retained: false))
        }
        let again = try MQTTSession(configuration)
        #expect(again.pendingMessages == 5)
        #expect(again.droppedMessages == 0 && again.lostMessages == 0)
    }
}

/// The messages waiting beyond the session's window (`Backlog`), on real files.
@Suite("Backlog (the gateway's messages waiting for the broker)")
struct BacklogTests {
    private func message(_ n: Int, retained: Bool = false) -> Backlog.Message {
        Backlog.Message(topic: "t/\(n)", payload: Array("reading \(n)".utf8), retained: retained)
    }

    @Test("oldest first; reopened, it goes on where it stopped, numbering after what it holds")
    func order() throws {
        let path = try MessageLogTests.folder() + "/b.waiting.log"
        do {
            let backlog = try Backlog(path: path, capacity: 10)
            #expect(backlog.first == nil && backlog.isEmpty)
            for n in 0..<4 { #expect(backlog.append(message(n, retained: n == 2))) }
            #expect(backlog.count == 4)
            #expect(backlog.first == message(0))
            #expect(backlog.removeFirst())
            #expect(backlog.first == message(1))
        }
        let again = try Backlog(path: path, capacity: 10)
        #expect(again.count == 3)
        #expect(again.append(message(4)))
        var taken: [Backlog.Message] = []
        while let first = again.first {
            taken.append(first)
            #expect(again.removeFirst())
        }
        #expect(taken == [message(1), message(2, retained: true), message(3), message(4)])
        #expect(!again.removeFirst())
        #expect(again.dropped == 0)
    }

    @Test("past its capacity the OLDEST is dropped and counted, on disk too")
    func capacity() throws {
        let path = try MessageLogTests.folder() + "/b.waiting.log"
        let backlog = try Backlog(path: path, capacity: 3)
        for n in 0..<7 { #expect(backlog.append(message(n))) }
        #expect(backlog.count == 3 && backlog.dropped == 4)
        #expect(backlog.first == message(4))
        let held = try #require(MessageLog.contents(at: path))
        #expect(held.keys.sorted() == ["w4", "w5", "w6"])
    }

    @Test("a handed oldest whose removal failed (a full disk) is kept, marked, not counted as waiting; the capacity pushing it out is its removal, not a drop")
    func handedFirst() throws {
        let path = try MessageLogTests.folder() + "/b.waiting.log"
        let backlog = try Backlog(path: path, capacity: 3)
        for n in 0..<3 { #expect(backlog.append(message(n))) }
        // The session took message 0; its removal cannot be written.
        backlog.log.failNextWrites(1)
        #expect(!backlog.removeFirst())
        backlog.markFirstHanded(.removalFailed)
        #expect(backlog.firstHanded == .removalFailed && backlog.count == 3 && backlog.waiting == 2)
        // The disk has room again: a new message pushes out the handed 0, not a waiting one.
        #expect(backlog.append(message(3)))
        #expect(backlog.firstHanded == nil)
        #expect(backlog.dropped == 0)
        #expect(backlog.first == message(1))
        #expect(try #require(MessageLog.contents(at: path)).keys.sorted() == ["w1", "w2", "w3"])
        // Past the capacity with nothing handed: a drop, counted.
        #expect(backlog.append(message(4)))
        #expect(backlog.dropped == 1 && backlog.first == message(2))
    }

    @Test("a write that fails (a full disk) changes nothing: the put is refused and counted, the log reads the same after a reopen")
    func failedWrites() throws {
        let path = try MessageLogTests.folder() + "/b.waiting.log"
        do {
            let backlog = try Backlog(path: path, capacity: 10)
            #expect(backlog.append(message(0)))
            backlog.log.failNextWrites(1)
            #expect(!backlog.append(message(1)))
            #expect(backlog.log.failedPuts == 1)
            #expect(backlog.append(message(2)))
            #expect(backlog.count == 2)
        }
        let again = try Backlog(path: path, capacity: 10)
        var taken: [Backlog.Message] = []
        while let first = again.first {
            taken.append(first)
            #expect(again.removeFirst())
        }
        #expect(taken == [message(0), message(2)])
    }

    @Test("a record that is not a message is dropped, counted, and the next one read")
    func foreignRecord() throws {
        let path = try MessageLogTests.folder() + "/b.waiting.log"
        do {
            let log = try MessageLog(path: path)
            let bad: [UInt8] = [7, 0]
            #expect(bad.withUnsafeBytes { log.put("w0", [($0.baseAddress, $0.count)]) })
            let good = Backlog.encode(message(1))
            #expect(good.withUnsafeBytes { log.put("w1", [($0.baseAddress, $0.count)]) })
        }
        let backlog = try Backlog(path: path, capacity: 10)
        #expect(backlog.first == message(1))
        #expect(backlog.dropped == 1 && backlog.count == 1)
    }

    @Test("a key it does not write (not w and a sequence number) is refused at open, naming the file and the key")
    func foreignKey() throws {
        for key in ["x1", "w", "w03", "w-1"] {
            let path = try MessageLogTests.folder() + "/b.waiting.log"
            do {
                let log = try MessageLog(path: path)
                let good = Backlog.encode(message(1))
                #expect(good.withUnsafeBytes { log.put(key, [($0.baseAddress, $0.count)]) })
            }
            #expect {
                _ = try Backlog(path: path, capacity: 10)
            } throws: { error in
                "\(error)".contains(path) && "\(error)".contains("key \"\(key)\"")
            }
        }
    }

    @Test("encode and decode: topic, payload and the retained flag; too short or a bad flag is nil")
    func coding() {
        let message = Backlog.Message(topic: "bluectl/x/devices/AA", payload: [0, 1, 2, 255], retained: true)
        #expect(Backlog.decode(Backlog.encode(message)) == message)
        #expect(Backlog.decode(Backlog.encode(Backlog.Message(topic: "", payload: [], retained: false)))
                == Backlog.Message(topic: "", payload: [], retained: false))
        #expect(Backlog.decode([1, 5, 0, 65]) == nil)
        #expect(Backlog.decode([2, 0, 0]) == nil)
        #expect(Backlog.decode([0, 0]) == nil)
    }
}
