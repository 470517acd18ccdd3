import Foundation
import Testing
@testable import BluectlGateway

/// `MQTTSession` alone against a real mosquitto: the backlog goes out through Paho's
/// window, in order, and Paho never holds more than the window.
@Suite("MQTTSession's backlog through Paho's window, against a real mosquitto", .timeLimit(.minutes(2)))
struct MQTTSessionTests {
    @Test("40 messages published with the broker down arrive in order once it is up; Paho's log never held more than the window of 4")
    func backlogThroughWindow() async throws {
        let broker = try await MosquittoBroker()
        try await broker.start()
        let reader = try await broker.subscribe(["bluectl/window/#"])
        defer { reader.stop() }
        await broker.stop()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-session-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        var configuration = MQTTSession.Configuration(serverURI: "tcp://127.0.0.1:\(broker.port)", clientID: "bluectl-window",
                                                      persistenceDirectory: root, statusTopic: "bluectl/window/status")
        configuration.window = 4
        configuration.keepAlive = 5
        let session = try MQTTSession(configuration)
        try session.start()
        for n in 0..<40 { try session.publish("bluectl/window/readings", Array("reading \(n)".utf8)) }
        #expect(session.pendingMessages == 40)
        #expect(MessageLog.contents(at: MQTTSession.backlogPath(configuration))?.count == 40)
        try await broker.start()

        // The owner's part (the gateway drains at each connection and delivery): here every
        // 20 ms, Paho's log looked at each time.
        let logPath = MQTTSession.logPath(configuration)
        var mostHeldByPaho = 0
        let deadline = ContinuousClock.now + .seconds(40)
        while session.pendingMessages > 0, ContinuousClock.now < deadline {
            try session.drain()
            let commands = (MessageLog.contents(at: logPath) ?? [:]).keys.filter { $0.hasPrefix("c-") }.count
            mostHeldByPaho = max(mostHeldByPaho, commands)
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(session.pendingMessages == 0)
        #expect(session.droppedMessages == 0)
        #expect(mostHeldByPaho >= 1 && mostHeldByPaho <= 4, "Paho's log held \(mostHeldByPaho) messages at once")
        let expected = (0..<40).map { "reading \($0)" }
        #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/window/readings").count >= 40 }, "\(reader.messages)")
        #expect(reader.payloads("bluectl/window/readings") == expected)
        #expect(MessageLog.contents(at: MQTTSession.backlogPath(configuration)) == [:])
        await session.close(timeout: .milliseconds(500))
        await broker.stop()
    }
}
