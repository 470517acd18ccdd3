// End to end: the gateway's per-device GATT work (the config's `devices`) against the
// stand-in's heart-rate peripheral (HeartRateGatt) and a real mosquitto: values on
// per-characteristic topics, periodic reads, the device's drops and reconnects as
// events, commands from MQTT through the allow-list with their results, and Home
// Assistant's `online` re-publishing the discovery configs (docs/gateway.md).

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

private let gateway = "gw"
private let deviceTopic = "bluectl/\(gateway)/devices/\(heartRateAddress)"
private let events = "bluectl/\(gateway)/events"

/// The device's GATT work: heart-rate notifications, the sensor location read every second,
/// and only the control point writable from MQTT.
private let config = """
    {"devices": {"\(heartRateAddress)": {"subscribe": ["heart_rate_measurement"],
                                        "read": [{"characteristic": "2a38", "every": 1}],
                                        "writable": ["2a39"]}}}
    """

@Suite("bluectl gateway's GATT devices against the stand-in and a real mosquitto", .timeLimit(.minutes(3)))
struct GatewayGattTests {
    @Test("Notifications in order on their topic as subscribe --json's records; reads every second; a drop and a reconnect as events, then values again; StopNotify and Disconnect at the end")
    func valuesAndReconnect() async throws {
        try await withGattScene { bus, broker, reader, g, gatewayProcess in
            let hrm = deviceTopic + "/gatt/2a37", location = deviceTopic + "/gatt/2a38"
            for bpm in UInt8(0x40)...0x49 { _ = try await bus.emitNotification(g.hrm, [0x00, bpm]) }
            let expected = (0x40...0x49).map { String(format: "00%02x", $0) }
            #expect(await reader.wait(timeout: .seconds(20)) { values($0, hrm).count >= 10 }, "\(reader.messages) \(gatewayProcess.stderr)")
            #expect(values(reader, hrm) == expected)
            let record = try JSONValue.parse(try #require(reader.payloads(hrm).first))
            guard case .object(let fields) = record else { Issue.record("not an object: \(record)"); return }
            // subscribe --json's record: its time, the device, the characteristic's full UUID, the value, the decoding.
            #expect(Set(fields.keys) == ["time", "device", "characteristic", "value", "decoded"], "\(record)")
            #expect(record["device"] == .string(heartRateAddress))
            #expect(record["characteristic"] == .string("00002a37-0000-1000-8000-00805f9b34fb"))
            // The periodic read: 01, then the new value once the device has it.
            #expect(await reader.wait(timeout: .seconds(10)) { values($0, location).count >= 2 }, "\(reader.messages)")
            #expect(Set(values(reader, location)) == ["01"])
            try await bus.setGattValue(g.location, [0x02])
            #expect(await reader.wait(timeout: .seconds(10)) { values($0, location).last == "02" }, "\(reader.messages)")
            // The link drops: an event, a reconnect (StartNotify again), values again.
            try await bus.dropConnection(g.device)
            #expect(await reader.wait(timeout: .seconds(30)) { eventNames($0).contains("device_reconnected") },
                    "\(reader.messages) \(gatewayProcess.stderr)")
            let names = eventNames(reader)
            #expect(names.filter { $0 != "read_failed" } == ["device_connected", "device_disconnected", "device_reconnected"], "\(names)")
            _ = try await bus.emitNotification(g.hrm, [0x00, 0x50])
            #expect(await reader.wait(timeout: .seconds(20)) { values($0, hrm).last == "0050" }, "\(reader.messages) \(gatewayProcess.stderr)")
            #expect(values(reader, hrm) == expected + ["0050"])
            #expect(try await bus.callCount(g.hrm, "StartNotify") == 2)
            gatewayProcess.signal(SIGTERM)
            let result = await gatewayProcess.wait(timeout: .seconds(15))
            #expect(result.exitCode == 143, "\(result)")
            // Nothing left in bluetoothd: notifications stopped, the connection it made undone.
            let calls = try await bus.calls(g.hrm)
            #expect(calls.last == "StopNotify", "\(calls)")
            #expect(try await bus.callCount(g.device, "Disconnect") >= 1)
        }
    }

    @Test("Commands: an allow-listed write reaches the device and is answered done; others are refused on the result topic and never reach it; a GATT value's numeric field has its Home Assistant config; Home Assistant's online re-publishes the configs")
    func commands() async throws {
        try await withGattScene(homeAssistant: true) { bus, broker, reader, g, gatewayProcess in
            let control = deviceTopic + "/gatt/2a39"
            try await broker.publish(control + "/write", #"{"value": "0102", "id": "c1"}"#)
            #expect(await reader.wait(timeout: .seconds(20)) { !$0.payloads(control + "/result").isEmpty }, "\(reader.messages) \(gatewayProcess.stderr)")
            #expect(try JSONValue.parse(try #require(reader.payloads(control + "/result").first)) == .object([
                "result": .string("done"), "id": .string("c1"), "device": .string(heartRateAddress),
                "characteristic": .string("00002a39-0000-1000-8000-00805f9b34fb"), "type": .string("with-response"), "value": .string("0102"),
            ]))
            #expect(try await bus.gattWrites(g.control).map(\.hex) == ["0102"])
            // Not allow-listed (though the device would take it), a bad payload, a device not in the config.
            let custom = deviceTopic + "/gatt/\(HeartRateGatt.customUUID)"
            let other = "bluectl/\(gateway)/devices/00:AA:01:00:00:77/gatt/2a39"
            try await broker.publish(custom + "/write", "01")
            try await broker.publish(control + "/write", "zz")
            try await broker.publish(other + "/write", "01")
            try await broker.publish(deviceTopic + "/gatt/heart_rate_measurement/write", "01")
            let refusals = [(custom, "is not writable from MQTT"), (control, "invalid value: "),
                            (other, "is not a device of this gateway's config"), (deviceTopic + "/gatt/heart_rate_measurement", "is not writable from MQTT")]
            #expect(await reader.wait(timeout: .seconds(20)) { r in refusals.allSatisfy { !r.payloads($0.0 + "/result").isEmpty } },
                    "\(reader.messages) \(gatewayProcess.stderr)")
            for (topic, reason) in refusals {
                let result = try JSONValue.parse(try #require(reader.payloads(topic + "/result").last))
                #expect(result["result"] == .string("refused"), "\(topic): \(result)")
                #expect(result["reason"]?.string?.contains(reason) == true, "\(topic): \(result)")
            }
            #expect(try await bus.callCount(g.custom, "WriteValue") == 0)
            #expect(try await bus.gattWrites(g.control).map(\.hex) == ["0102"], "the bad payload reached nothing")
            // A GATT value's numeric field is an entity too: the heart rate (bpm) on the
            // characteristic's topic, available with this gateway (its connection).
            _ = try await bus.emitNotification(g.hrm, [0x00, 0x48])
            let bpm = "homeassistant/device/bluectl_aabbccddeeff/config"
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(bpm).count == 1 && !values($0, deviceTopic + "/gatt/2a38").isEmpty },
                    "\(reader.messages) \(gatewayProcess.stderr)")
            let device = try JSONValue.parse(try #require(reader.payloads(bpm).first))
            #expect(device["device"] == .object(["identifiers": .array([.string("bluectl_aabbccddeeff")]), "name": .string(heartRateAddress)]))
            // The body sensor location (read every second, text) is no sensor to graph: no component.
            #expect(device["components"] == .object(["2a37_bpm": .object([
                "platform": .string("sensor"),
                "name": .string("Heart Rate Measurement"), "unique_id": .string("bluectl_aabbccddeeff_2a37_bpm"),
                "state_topic": .string(deviceTopic + "/gatt/2a37"), "value_template": .string("{{ value_json.decoded.bpm }}"),
                "state_class": .string("measurement"), "unit_of_measurement": .string("bpm"),
                "availability_topic": .string("bluectl/\(gateway)/status"),
            ])]), "\(device)")
            // The field the template reads is in the values.
            #expect(reader.payloads(deviceTopic + "/gatt/2a37").contains { (try? JSONValue.parse($0))?["decoded"]?["bpm"] == .int(0x48) })
            // Home Assistant says it started: every config published so far goes out again.
            let config = "homeassistant/device/bluectl_a4c138000027/config"
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(config).count == 1 }, "\(reader.messages)")
            try await broker.publish("homeassistant/status", "offline")
            try await broker.publish("homeassistant/status", "online")
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads(config).count == 2 && $0.payloads(bpm).count == 2 }, "\(reader.messages)")
            #expect(Set(reader.payloads(config)).count == 1, "the same config again")
            #expect(Set(reader.payloads(bpm)).count == 1, "the same GATT config again")
            gatewayProcess.signal(SIGTERM)
            #expect(await gatewayProcess.wait(timeout: .seconds(15)).exitCode == 143)
        }
    }

    @Test("A write under way when the gateway stops is answered on its result topic (failed, the gateway stopping), a command during the stop is answered too, and the device is still disconnected")
    func writeUnderWayAtStop() async throws {
        try await withGattScene { bus, broker, reader, g, gatewayProcess in
            try await bus.hang(g.control, "WriteValue")
            let control = deviceTopic + "/gatt/2a39"
            try await broker.publish(control + "/write", #"{"value": "07", "id": "late"}"#)
            let sent = ContinuousClock.now
            while try await bus.callCount(g.control, "WriteValue") == 0, ContinuousClock.now - sent < .seconds(20) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await bus.callCount(g.control, "WriteValue") == 1, "the write reached the device: \(gatewayProcess.stderr)")
            // The stop (after a signal: 300 ms for the write under way, then the device's
            // disconnect) made to last past the command's way from mosquitto_pub to the gateway.
            try await bus.mock("DelayReply", [.string(g.device), .string("Disconnect"), .uint32(500)])
            gatewayProcess.signal(SIGTERM)
            // A command during the stop: refused, or, if it came before the stop began, cancelled
            // with the other.
            try await broker.publish(control + "/write", #"{"value": "08", "id": "later"}"#)
            #expect(await gatewayProcess.wait(timeout: .seconds(20)).exitCode == 143, "\(gatewayProcess.stderr)")
            #expect(await reader.wait(timeout: .seconds(10)) { $0.payloads(control + "/result").count == 2 }, "\(reader.messages)")
            let results = try reader.payloads(control + "/result").map { try JSONValue.parse($0) }
            let result = try #require(results.first { $0["id"] == .string("late") })
            #expect(result["result"] == .string("failed"), "\(result)")
            #expect(result["reason"]?.string?.hasPrefix("the gateway stopped before the write") == true, "\(result)")
            let later = try #require(results.first { $0["id"] == .string("later") })
            #expect((later["result"] == .string("refused") && later["reason"] == .string("the gateway is stopping"))
                    || (later["result"] == .string("failed") && later["reason"]?.string?.hasPrefix("the gateway stopped before") == true),
                    "\(later)")
            #expect(try await bus.callCount(g.device, "Disconnect") >= 1, "the connection it made was undone")
        }
    }

    @Test("A command that reaches a gateway without GATT devices (its persistent session still subscribed by a run that had some) is refused, with the command's id")
    func commandWithoutDevices() async throws {
        try await withGattScene { bus, broker, reader, _, gatewayProcess in
            gatewayProcess.signal(SIGTERM)
            #expect(await gatewayProcess.wait(timeout: .seconds(15)).exitCode == 143, "\(gatewayProcess.stderr)")
            let state = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-gw-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: state) }
            // The same id, no config: the broker still delivers the command topics to its session.
            let plain = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", gateway], environment: ["STATE_DIRECTORY": state])
            defer { plain.signal(SIGKILL) }
            let control = deviceTopic + "/gatt/2a39"
            try await broker.publish(control + "/write", #"{"value": "07", "id": "c9"}"#)
            #expect(await reader.wait(timeout: .seconds(20)) { !$0.payloads(control + "/result").isEmpty }, "\(reader.messages) \(plain.stderr)")
            let result = try JSONValue.parse(try #require(reader.payloads(control + "/result").first))
            #expect(result == .object(["result": .string("refused"), "id": .string("c9"), "reason": .string("this gateway has no GATT devices")]))
            plain.signal(SIGTERM)
            #expect(await plain.wait(timeout: .seconds(15)).exitCode == 143, "\(plain.stderr)")
        }
    }

    @Test("A set-up that fails after a subscription stops that subscription: the device's work ends with device_failed and nothing is left notifying")
    func failedSetUpStopsItsSubscriptions() async throws {
        // 2a37 is subscribed first; 2a38 cannot notify, so the set-up fails after it, for good.
        let failing = """
            {"devices": {"\(heartRateAddress)": {"subscribe": ["heart_rate_measurement", "2a38"]}}}
            """
        try await withGattScene(config: failing, ready: "device_failed") { bus, _, reader, g, gatewayProcess in
            let calls = try await bus.calls(g.hrm)
            #expect(calls.filter { $0 == "StartNotify" }.count == 1, "\(calls)")
            #expect(calls.filter { $0 == "StopNotify" }.count == 1, "\(calls) \(gatewayProcess.stderr)")
            #expect(eventNames(reader) == ["device_failed"])
            gatewayProcess.signal(SIGTERM)
            #expect(await gatewayProcess.wait(timeout: .seconds(15)).exitCode == 143)
            #expect(try await bus.callCount(g.hrm, "StopNotify") == 1, "stopped once")
        }
    }

    /// The heart-rate peripheral (and with `homeAssistant` a BTHome sensor), a broker with a
    /// reader, and a gateway with `config` once its device has given the event `ready`.
    private func withGattScene(homeAssistant: Bool = false, config: String = config, ready: String = "device_connected",
                               _ body: (PrivateBus, MosquittoBroker, MQTTReader, HeartRateGatt, ChildProcess) async throws -> Void) async throws {
        try await withPrivateBus { bus in
            let broker = try await MosquittoBroker()
            try await broker.start()
            let reader = try await broker.subscribe()
            defer { reader.stop() }
            let g = try await HeartRateGatt.install(bus)
            if homeAssistant {
                try await bus.addAdvertiser("hci0", "A4:C1:38:00:00:27", [.addressType("public"), .rssi(-60), .name("DIY-sensor"),
                                                                         .serviceData(["fcd2": [0x40, 0x02, 0xd0, 0x07]])])
            }
            let state = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-gw-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: state) }
            try config.write(toFile: state + "/gateway.json", atomically: false, encoding: .utf8)
            let gatewayProcess = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", gateway, "--config", state + "/gateway.json"]
                                                      + (homeAssistant ? ["--home-assistant"] : []),
                                                      environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(30)) { eventNames($0).contains(ready) },
                    "\(reader.messages) \(gatewayProcess.stderr)")
            try await body(bus, broker, reader, g, gatewayProcess)
            gatewayProcess.signal(SIGKILL)
            await broker.stop()
        }
    }
}

/// The `value`s published on `topic`, in order of arrival.
private func values(_ reader: MQTTReader, _ topic: String) -> [String] {
    reader.payloads(topic).compactMap { (try? JSONValue.parse($0))?["value"]?.string }
}

/// The GATT device events, in order of arrival.
private func eventNames(_ reader: MQTTReader) -> [String] {
    reader.payloads(events).compactMap { payload in
        guard let event = try? JSONValue.parse(payload), event["device"] == .string(heartRateAddress) else { return nil }
        return event["event"]?.string
    }
}

extension MosquittoBroker {
    /// mosquitto_pub of `payload` on `topic` (QoS 1, `retained` or not), to its end.
    func publish(_ topic: String, _ payload: String, retained: Bool = false) async throws {
        let result = try await ChildProcess("/usr/bin/mosquitto_pub",
                                            ["-h", "127.0.0.1", "-p", String(port), "-t", topic, "-m", payload, "-q", "1"] + (retained ? ["-r"] : []))
            .wait(timeout: .seconds(10))
        guard result.exitCode == 0 else { throw BusTierError("mosquitto_pub: \(result)") }
    }
}
