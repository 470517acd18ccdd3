// End to end: two `bluectl gateway --home-assistant` processes (different ids, different
// adapters of the stand-in) hearing one BTHome sensor make one Home Assistant device: the same
// discovery configs from both, the state on the shared topic `bluectl/sensors/<MAC>`, each
// reading (packet id) there once, and each gateway's own topic still fed (docs/gateway.md,
// "Several gateways").

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A BTHome v2 frame with packet id `packetID` and temperature `centidegrees` / 100 °C.
private func bthome(packet packetID: Int, _ centidegrees: Int) -> [AdField] {
    let t = UInt16(centidegrees)
    return [.addressType("public"), .rssi(-60), .name("DIY-sensor"), .flags([0x06]),
            .serviceData(["fcd2": [0x40, 0x00, UInt8(packetID), 0x02, UInt8(t & 0xff), UInt8(t >> 8)]])]
}

/// The packet ids of the records on `topic`, in the order they arrived (repeats kept).
private func packetIDs(_ reader: MQTTReader, _ topic: String) -> [Int] {
    reader.payloads(topic).compactMap { payload in
        (try? JSONValue.parse(payload))?["sensor"]?["packet_id"]?.number.map(Int.init)
    }
}

@Suite("Two gateways feed one Home Assistant device", .timeLimit(.minutes(3)))
struct GatewaySharedTests {
    /// The stand-in with two adapters (hci0, hci1), a mosquitto, a reader of everything on it
    /// and a state folder for each gateway.
    private func withTwoGatewaysScene(_ body: (PrivateBus, MosquittoBroker, MQTTReader, String, String) async throws -> Void) async throws {
        let second = AdapterSpec("hci1", address: "00:AA:01:01:00:27", alias: "second-gateway")
        try await withPrivateBus(adapters: [.hci0, second]) { bus in
            let broker = try await MosquittoBroker()
            try await broker.start()
            let reader = try await broker.subscribe()
            defer { reader.stop() }
            let (stateA, stateB) = (try stateFolder(), try stateFolder())
            defer { for state in [stateA, stateB] { try? FileManager.default.removeItem(atPath: state) } }
            try await body(bus, broker, reader, stateA, stateB)
            await broker.stop()
        }
    }

    @Test("Two gateways: the same configs from both, each packet id once on bluectl/sensors/MAC, both own topics fed")
    func twoGateways() async throws {
        try await withTwoGatewaysScene { bus, broker, reader, stateA, stateB in
            // One sensor in range of both adapters: the same frames on each.
            func advertise(_ packetID: Int, on adapters: [String] = ["hci0", "hci1"]) async throws {
                for adapter in adapters { try await bus.updateAdvertiser(adapter, sensorAddress, bthome(packet: packetID, 2000 + packetID * 10)) }
            }
            for adapter in ["hci0", "hci1"] { try await bus.addAdvertiser(adapter, sensorAddress, bthome(packet: 0, 2000)) }
            let shared = "bluectl/sensors/\(sensorAddress)"
            let (ownA, ownB) = ("bluectl/alpha/devices/\(sensorAddress)", "bluectl/beta/devices/\(sensorAddress)")
            let alpha = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "alpha", "--adapter", "hci0", "--home-assistant"],
                                             environment: ["STATE_DIRECTORY": stateA])
            #expect(await reader.wait(timeout: .seconds(30)) { packetIDs($0, shared) == [0] }, "\(reader.messages) \(alpha.stderr)")
            let beta = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "beta", "--adapter", "hci1", "--home-assistant"],
                                            environment: ["STATE_DIRECTORY": stateB])
            // Each knows the other: a config naming both gateways' status, from each (beta's once it
            // read alpha's retained status, alpha's once beta said online).
            let config = "homeassistant/device/bluectl_a4c138000027/config"
            let both = JSONValue.array([.object(["topic": .string("bluectl/alpha/status")]), .object(["topic": .string("bluectl/beta/status")])])
            let temperature = { (payload: String) in (try? JSONValue.parse(payload))?["components"]?["temperature_c"] }
            let namesBoth = { (reader: MQTTReader) in reader.payloads(config).filter { temperature($0)?["availability"] == both }.count >= 2 }
            #expect(await reader.wait(timeout: .seconds(30)) { namesBoth($0) && packetIDs($0, ownB) == [0] },
                    "\(reader.messages) \(beta.stderr)")

            // Home Assistant starts: each gateway publishes its config again, the same bytes.
            let before = reader.payloads(config).count
            try await broker.publish("homeassistant/status", "online")
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(config).count == before + 2 }, "\(reader.messages)")
            let again = Array(reader.payloads(config).dropFirst(before))
            #expect(again.count == 2 && Set(again).count == 1, "\(again)")
            #expect(try JSONValue.parse(try #require(again.first))["device"] == .object([
                "identifiers": .array([.string("bluectl_a4c138000027")]), "name": .string("A4:C1:38:00:00:27"), "model": .string("bthome")]))
            #expect(temperature(try #require(again.first)) == .object([
                "platform": .string("sensor"), "name": .string("temperature_c"), "unique_id": .string("bluectl_a4c138000027_temperature_c"),
                "state_topic": .string(shared), "value_template": .string("{{ value_json.sensor.temperature_c }}"),
                "device_class": .string("temperature"), "state_class": .string("measurement"), "unit_of_measurement": .string("°C"),
                "availability": both, "availability_mode": .string("any"),
            ]))

            // Readings both hear, one only beta hears (alpha, first in rank, never publishes it: beta
            // does, after its hold), then both again; a last one only beta hears ends beta's holds
            // of all before it (its messages arrive in order).
            for packetID in 1...4 {
                try await advertise(packetID)
                #expect(await reader.wait(timeout: .seconds(20)) { packetIDs($0, shared).contains(packetID) }, "\(reader.messages)")
            }
            try await advertise(5, on: ["hci1"])
            #expect(await reader.wait(timeout: .seconds(20)) { packetIDs($0, shared).contains(5) }, "\(reader.messages) \(beta.stderr)")
            for packetID in 6...8 {
                try await advertise(packetID)
                #expect(await reader.wait(timeout: .seconds(20)) { packetIDs($0, shared).contains(packetID) }, "\(reader.messages)")
            }
            #expect(await reader.wait(timeout: .seconds(20)) { packetIDs($0, ownA).contains(8) && packetIDs($0, ownB).contains(8) },
                    "\(reader.messages)")
            try await advertise(9, on: ["hci1"])
            #expect(await reader.wait(timeout: .seconds(20)) { packetIDs($0, shared).contains(9) }, "\(reader.messages)")

            #expect(packetIDs(reader, shared) == Array(0...9), "each reading once, in order: \(packetIDs(reader, shared))")
            #expect(Set(packetIDs(reader, ownA)) == Set([0, 1, 2, 3, 4, 6, 7, 8]), "\(packetIDs(reader, ownA))")
            #expect(Set(packetIDs(reader, ownB)) == Set(0...9), "\(packetIDs(reader, ownB))")
            // Each record on the shared topic says which gateway published it.
            let publishers = reader.payloads(shared).compactMap { (try? JSONValue.parse($0))?["gateway"]?.text }
            #expect(publishers.count == 10 && Set(publishers).isSubset(of: ["alpha", "beta"]), "\(publishers)")

            for gateway in [alpha, beta] { gateway.signal(SIGTERM) }
            for (gateway, id) in [(alpha, "alpha"), (beta, "beta")] {
                #expect(await gateway.wait(timeout: .seconds(15)).exitCode == 143)
                #expect(await reader.wait(timeout: .seconds(10)) { $0.payloads("bluectl/\(id)/status").last == "offline" }, "\(reader.messages)")
            }
        }
    }

    @Test("A measurement only one gateway hears: the gateway started later, hearing less, carries it from its first config on; every config holds both")
    func componentsCarriedOn() async throws {
        try await withTwoGatewaysScene { bus, broker, reader, stateA, stateB in
            // alpha's adapter hears the temperature only; beta's a frame with the humidity too.
            let temperature: [UInt8] = [0x40, 0x02, 0xd0, 0x07]
            try await bus.addAdvertiser("hci0", sensorAddress, [.addressType("public"), .rssi(-60), .serviceData(["fcd2": temperature])])
            try await bus.addAdvertiser("hci1", sensorAddress, [.addressType("public"), .rssi(-60),
                                                                .serviceData(["fcd2": temperature + [0x03, 0x88, 0x13]])])
            let topic = "homeassistant/device/bluectl_a4c138000027/config"
            func ids(_ payload: String) -> [String] {
                guard case .object(let components)? = (try? JSONValue.parse(payload))?["components"] else { return [] }
                return components.keys.sorted()
            }
            // beta, hearing both, first; then alpha, hearing less, starts: its configs carry beta's
            // humidity from the first (it reads the retained config before it publishes), so Home
            // Assistant never sees a config without it.
            let beta = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "beta", "--adapter", "hci1", "--home-assistant"],
                                            environment: ["STATE_DIRECTORY": stateB])
            #expect(await reader.wait(timeout: .seconds(30)) { $0.payloads(topic).last.map(ids)?.count == 2 }, "\(reader.messages) \(beta.stderr)")
            let union = try #require(reader.payloads(topic).last.map(ids))
            #expect(union.contains("temperature_c"), "\(union)")
            let beforeAlpha = reader.payloads(topic).count
            let alpha = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "alpha", "--adapter", "hci0", "--home-assistant"],
                                             environment: ["STATE_DIRECTORY": stateA])
            // Two more: beta's again (alpha's status is new: its availability) and alpha's first, once settled.
            #expect(await reader.wait(timeout: .seconds(30)) { $0.payloads(topic).count >= beforeAlpha + 2 }, "\(reader.messages) \(alpha.stderr)")
            #expect(reader.payloads(topic).allSatisfy { ids($0) == union }, "a config without a component: \(reader.payloads(topic).map(ids))")
            // Home Assistant starts: each publishes the device's config again, alpha's with beta's humidity
            // (and any config a gateway's status brings meanwhile holds both too).
            let before = reader.payloads(topic).count
            try await broker.publish("homeassistant/status", "online")
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(topic).count >= before + 2 }, "\(reader.messages)")
            let again = reader.payloads(topic).dropFirst(before).map(ids)
            #expect(again.count >= 2 && again.allSatisfy { $0 == union }, "\(again)")
            #expect(reader.payloads(topic).allSatisfy { ids($0) == union }, "\(reader.payloads(topic).map(ids))")
            // What Home Assistant reads when it starts: the retained config, with both.
            let late = try await broker.subscribe([topic])
            defer { late.stop() }
            // (The first is the retained one; any later one, too, holds both.)
            #expect(await late.wait(timeout: .seconds(10)) { !$0.payloads(topic).isEmpty }, "\(late.messages)")
            #expect(late.payloads(topic).allSatisfy { ids($0) == union }, "\(late.messages)")
            for gateway in [alpha, beta] { gateway.signal(SIGTERM) }
            for gateway in [alpha, beta] { #expect(await gateway.wait(timeout: .seconds(15)).exitCode == 143) }
        }
    }
}

