import Foundation
import Testing
@testable import BluectlGateway

/// `MQTTSession` alone against a real mosquitto: the backlog goes out through Paho's
/// window, in order, and Paho never holds more than the window.
@Suite("MQTTSession's backlog through Paho's window, against a real mosquitto", .timeLimit(.minutes(2)))
struct MQTTSessionTests {
    @Test("40 messages published with the broker down, then 10 once connected while those wait, arrive in order through a window of 4; Paho never holds more than 4")
    func backlogThroughWindow() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let reader = try await broker.subscribe(["bluectl/window/#"])
        defer { reader.stop() }
        await broker.stop()
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        var configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:\(broker.port)", clientID: "bluectl-window",
                                                      persistenceDirectory: root, statusTopic: "bluectl/window/status")
        configuration.window = 4
        configuration.keepAlive = 5
        let session = try MQTTSession(configuration)
        try session.start()
        for n in 0..<40 { try session.publish("bluectl/window/readings", Array("reading \(n)".utf8)) }
        #expect(session.pendingMessages == 40)
        let backlogPath = MQTTSession.backlogPath(configuration)
        #expect(MessageLog.contents(at: backlogPath)?.count == 40)
        try await broker.start()
        // Connected, with nothing drained yet: these must wait behind the 40, not overtake them.
        #expect(try await eventually(timeout: .seconds(40), every: .milliseconds(20)) { session.isConnected })
        for n in 40..<50 { try session.publish("bluectl/window/readings", Array("reading \(n)".utf8)) }

        // The owner's part (the gateway drains at each connection and delivery): here every
        // 20 ms. Paho's share, looked at right after each drain: its pending messages (all
        // but the backlog's) and the messages in its store (queued commands, `c-`; sent and
        // not acknowledged, `s-`).
        let logPath = MQTTSession.logPath(configuration)
        var mostPendingInPaho = 0, mostInPahoStore = 0
        let drained = try await eventually(timeout: .seconds(40), every: .milliseconds(20)) {
            guard session.pendingMessages > 0 else { return true }
            try session.drain()
            let waiting = MessageLog.contents(at: backlogPath)?.count ?? 0
            mostPendingInPaho = max(mostPendingInPaho, session.pendingMessages - waiting)
            let store = (MessageLog.contents(at: logPath) ?? [:]).keys
            mostInPahoStore = max(mostInPahoStore, store.filter { $0.hasPrefix("c-") }.count, store.filter { $0.hasPrefix("s-") }.count)
            return false
        }
        #expect(drained && session.pendingMessages == 0)
        #expect(session.droppedMessages == 0)
        #expect(mostPendingInPaho >= 1 && mostPendingInPaho <= 4, "Paho held \(mostPendingInPaho) messages at once")
        #expect(mostInPahoStore <= 4, "Paho's store held \(mostInPahoStore) messages at once")
        let expected = (0..<50).map { "reading \($0)" }
        #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/window/readings").count >= 50 }, "\(reader.messages)")
        #expect(reader.payloads("bluectl/window/readings") == expected)
        #expect(MessageLog.contents(at: backlogPath) == [:])
        await session.close(timeout: .milliseconds(500))
        await broker.stop()
    }

    @Test("a broker that comes back without the session (killed before it saved it): the 3 messages Paho had sent and not had acknowledged are counted as discarded, not as dropped; the session goes on")
    func sessionLostDiscards() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let session = try await connectedSession(broker, "lost", root: root)
        broker.pause()   // takes the 3 PUBLISHes (the kernel does), acknowledges none
        for n in 0..<3 { try session.publish("bluectl/lost/readings", Array("reading \(n)".utf8)) }
        #expect(session.pendingMessages == 3 && session.backlog.isEmpty)
        // Sent, not only queued (Paho keeps a queued one across the reconnect): each sent
        // message is in Paho's store under `s-`.
        let logPath = MQTTSession.logPath(session.configuration)
        #expect(try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
            (MessageLog.contents(at: logPath) ?? [:]).keys.filter { $0.hasPrefix("s-") }.count == 3
        })
        await broker.crash()
        try await broker.start()   // no saved state: sessionPresent 0 at the reconnect
        _ = try await eventually(timeout: .seconds(30), every: .milliseconds(20)) {
            session.discardedMessages >= 3 && session.isConnected
        }
        #expect(session.discardedMessages == 3 && session.droppedMessages == 0 && session.pendingMessages == 0,
                "discarded \(session.discardedMessages), dropped \(session.droppedMessages), pending \(session.pendingMessages)")
        let reader = try await broker.subscribe(["bluectl/lost/#"])
        defer { reader.stop() }
        try session.publish("bluectl/lost/readings", Array("reading 3".utf8))
        #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/lost/readings") == ["reading 3"] }, "\(reader.messages)")
        #expect(session.discardedMessages == 3)
        await session.close(timeout: .milliseconds(500))
        await broker.stop()
    }

    /// A folder of the test's own for a session's logs.
    private static func folder() throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-session-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        return root
    }

    /// A session on `broker` (window 4) in a folder of its own, connected.
    private func connectedSession(_ broker: MosquittoBroker, _ name: String, root: String) async throws -> MQTTSession {
        var configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:\(broker.port)", clientID: "bluectl-\(name)",
                                                      persistenceDirectory: root, statusTopic: "bluectl/\(name)/status")
        configuration.window = 4
        configuration.keepAlive = 5
        let session = try MQTTSession(configuration)
        try session.start()
        #expect(try await eventually(timeout: .seconds(20), every: .milliseconds(20)) { session.isConnected })
        return session
    }

    /// Drains (as the gateway's owner does at each delivery) until nothing is pending;
    /// false when something still is after 20 s.
    private func drainAll(_ session: MQTTSession) async throws -> Bool {
        try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
            guard session.pendingMessages > 0 || !session.backlog.isEmpty else { return true }
            try? session.drain()
            return false
        }
    }

    @Test("Paho's store cannot be written (a full disk) as a message is handed: a copy waits in the backlog, never handed again, removed once Paho holds nothing; each message arrives once, in order")
    func pahoStoreWriteFails() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let reader = try await broker.subscribe(["bluectl/full/#"])
        defer { reader.stop() }
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let session = try await connectedSession(broker, "full", root: root)
        session.log.failNextWrites(1)
        try session.publish("bluectl/full/readings", Array("reading 0".utf8))
        #expect(session.log.failedPuts == 1)
        #expect(session.backlog.firstHanded == .unstoredByPaho && session.backlog.count == 1, "no durable copy of the message Paho could not store")
        for n in 1..<6 { try session.publish("bluectl/full/readings", Array("reading \(n)".utf8)) }
        #expect(try await drainAll(session))
        #expect(session.backlog.isEmpty && session.pendingMessages == 0)
        let expected = (0..<6).map { "reading \($0)" }
        #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/full/readings").count >= 6 })
        try await Task.sleep(for: .milliseconds(300))   // a copy sent twice would be here by now
        #expect(reader.payloads("bluectl/full/readings") == expected)
        await session.close(timeout: .milliseconds(500))
        await broker.stop()
    }

    @Test("the backlog's removal cannot be written after Paho took its oldest: only the removal is tried again; each message arrives once, in order")
    func backlogRemovalFails() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let reader = try await broker.subscribe(["bluectl/removal/#"])
        defer { reader.stop() }
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        await broker.stop()
        var configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:\(broker.port)", clientID: "bluectl-removal",
                                                      persistenceDirectory: root, statusTopic: "bluectl/removal/status")
        configuration.window = 4
        let session = try MQTTSession(configuration)
        try session.start()
        for n in 0..<6 { try session.publish("bluectl/removal/readings", Array("reading \(n)".utf8)) }
        #expect(session.backlog.count == 6)
        try await broker.start()
        #expect(try await eventually(timeout: .seconds(40), every: .milliseconds(20)) { session.isConnected })
        session.backlog.log.failNextWrites(1)
        #expect(throws: MQTTError.self) { try session.drain() }
        #expect(session.backlog.firstHanded == .removalFailed && session.backlog.count == 6)
        // The handed one is counted once: in Paho's hands until the broker acknowledges it
        // (which may already have happened), not also as waiting in the backlog.
        #expect(session.backlog.waiting == 5 && (5...6).contains(session.pendingMessages), "\(session.pendingMessages) pending")
        #expect(try await drainAll(session))
        #expect(session.backlog.isEmpty)
        let expected = (0..<6).map { "reading \($0)" }
        #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/removal/readings").count >= 6 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(reader.payloads("bluectl/removal/readings") == expected)
        await session.close(timeout: .milliseconds(500))
        await broker.stop()
    }
}
