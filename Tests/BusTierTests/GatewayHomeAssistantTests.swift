// End to end: `bluectl gateway --home-assistant` publishes its discovery configs again when
// Home Assistant says it started (`online` on homeassistant/status), against the stand-in and
// a real mosquitto (docs/gateway.md, "Home Assistant").

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("bluectl gateway and Home Assistant's status", .timeLimit(.minutes(3)))
struct GatewayHomeAssistantTests {
    @Test("homeassistant/status online → every config published so far goes out again; offline → nothing")
    func republishOnOnline() async throws {
        try await withPrivateBus { bus in
            let broker = try await MosquittoBroker()
            try await broker.start()
            let reader = try await broker.subscribe()
            defer { reader.stop() }
            try await bus.addAdvertiser("hci0", "A4:C1:38:00:00:27", [.addressType("public"), .rssi(-60), .name("DIY-sensor"),
                                                                     .serviceData(["fcd2": [0x40, 0x02, 0xd0, 0x07]])])
            let state = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-gw-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: state) }
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "hall", "--home-assistant"],
                                               environment: ["STATE_DIRECTORY": state])
            let config = "homeassistant/device/bluectl_a4c138000027/config"
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(config).count == 1 }, "\(reader.messages) \(gateway.stderr)")
            // Subscribed once connected: `offline` changes nothing, `online` sends the config again.
            // Retained, as a broker keeps Home Assistant's status: whether the gateway's subscription
            // reached the broker before or after, the gateway gets it once.
            try await broker.publish("homeassistant/status", "offline", retained: true)
            try await broker.publish("homeassistant/status", "online", retained: true)
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(config).count == 2 }, "\(reader.messages) \(gateway.stderr)")
            #expect(Set(reader.payloads(config)).count == 1, "the same config again: \(reader.payloads(config))")
            try await broker.publish("homeassistant/status", "online")
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(config).count == 3 }, "\(reader.messages)")
            gateway.signal(SIGTERM)
            #expect(await gateway.wait(timeout: .seconds(15)).exitCode == 143)
            await broker.stop()
        }
    }
}
