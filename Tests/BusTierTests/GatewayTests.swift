// End to end: `bluectl gateway` against the BlueZ stand-in and a real mosquitto
// (MQTTBroker.swift): the records it publishes, its birth and last will, and
// nothing lost while the broker is away or the gateway is killed (docs/gateway.md).

import BluectlGateway
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

let sensorAddress = "A4:C1:38:00:00:27"

/// A BTHome v2 frame with temperature `centidegrees` / 100 °C.
func bthome(_ centidegrees: Int) -> [AdField] {
    let t = UInt16(centidegrees)
    return [.addressType("public"), .rssi(-60), .name("DIY-sensor"), .flags([0x06]),
            .serviceData(["fcd2": [0x40, 0x02, UInt8(t & 0xff), UInt8(t >> 8)]])]
}

/// A folder of its own for the gateway's state ($STATE_DIRECTORY); removed by the caller.
func stateFolder() throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-gw-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}

/// The temperatures of the device's records as they arrived, each kept at its first
/// arrival (QoS 1 is at least once: a resent message may come twice).
func temperatures(_ reader: MQTTReader, gateway: String) -> [Double] {
    var seen: [Double] = []
    for payload in reader.payloads("bluectl/\(gateway)/devices/\(sensorAddress)") {
        guard let record = try? JSONValue.parse(payload), let number = record["sensor"]?["temperature_c"]?.number else { continue }
        if !seen.contains(number) { seen.append(number) }
    }
    return seen
}

/// The bytes of lowercase hex digits.
private func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8)
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

extension JSONValue {
    /// A number, integer or not.
    var number: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    /// A string.
    var text: String? { if case .string(let s) = self { s } else { nil } }
}

/// The messages the gateway's logs (`MessageLog`: the connection's and the backlog) under the state folder hold:
/// one per message accepted and not yet acknowledged, read as the gateway left them on disk.
private func heldMessages(_ folder: String) -> [String] {
    let paths = FileManager.default.enumerator(atPath: folder)?.compactMap { $0 as? String } ?? []
    return paths.filter { $0.hasSuffix(".log") }.flatMap { path in
        (MessageLog.contents(at: folder + "/" + path) ?? [:]).values.map { String(decoding: $0, as: UTF8.self) }
    }
}

/// The sensor's service data at step `step` (20.0 °C + step × 0.1, `bthome`) as rendered in a record.
private func serviceDataHex(_ step: Int) -> String {
    let t = 2000 + step * 10
    return "4002" + String(format: "%02x%02x", t & 0xff, t >> 8)
}

/// How many of the messages held under `folder` (`heldMessages`) hold the service data `hex`
/// (a record's `service_data` value, as the gateway renders it).
private func messagesHolding(_ folder: String, _ hex: String) -> Int {
    heldMessages(folder).filter { $0.contains(hex) }.count
}

@Suite("bluectl gateway publishes to a real mosquitto", .timeLimit(.minutes(3)))
struct GatewayTests {
    @Test("A device's record is scan --json's plus gateway, retained on bluectl/ID/devices/MAC; status online, then offline on SIGTERM; a twin with the same id refused")
    func records() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "kitchen"],
                                               environment: ["STATE_DIRECTORY": state])
            let topic = "bluectl/kitchen/devices/\(sensorAddress)"
            let arrived = await reader.wait(timeout: .seconds(20)) { !$0.payloads(topic).isEmpty && $0.payloads("bluectl/kitchen/status") == ["online"] }
            #expect(arrived, "\(reader.messages) \(gateway.stderr)")
            let record = try JSONValue.parse(try #require(reader.payloads(topic).first))
            #expect(record["gateway"] == .string("kitchen"))
            #expect(record["address"] == .string(sensorAddress))
            #expect(record["adapter"] == .string("hci0"))
            #expect(record["rssi"] == .int(-60))
            #expect(record["name"] == .string("DIY-sensor"))
            #expect(record["sensor"] == .object(["format": .string("bthome"), "encrypted": .bool(false), "temperature_c": .int(20)]))
            #expect(record["service_data"] == .object(["0000fcd2-0000-1000-8000-00805f9b34fb": .string("4002d007")]))
            // The same fields as scan --json's record, plus gateway.
            let scan = try await bus.runBluectl(["scan", "--json", "--timeout", "2"])
            let scanned = try #require(try scan.jsonLines().first { $0["address"] == .string(sensorAddress) })
            guard case .object(let scannedFields) = scanned, case .object(let published) = record else {
                Issue.record("not objects: \(scanned) \(record)")
                return
            }
            #expect(Set(published.keys) == Set(scannedFields.keys).union(["gateway"]), "\(published.keys) vs \(scannedFields.keys)")
            // A second gateway with the same id and broker would share the message log: refused.
            let twin = try await bus.runBluectl(["gateway", "--broker", broker.url, "--id", "kitchen"],
                                                environment: ["STATE_DIRECTORY": state])
            #expect(twin.exitCode == 69 && twin.stderr.contains("in use by another process"), "\(twin)")
            // Retained: a reader that comes later gets the last record at once.
            let late = try await broker.subscribe()
            defer { late.stop() }
            #expect(await late.wait(timeout: .seconds(10)) { !$0.payloads(topic).isEmpty }, "\(late.messages)")
            gateway.signal(SIGTERM)
            let result = await gateway.wait(timeout: .seconds(10))
            #expect(result.exitCode == 143, "\(result)")
            #expect(await reader.wait(timeout: .seconds(10)) { $0.payloads("bluectl/kitchen/status").last == "offline" }, "\(reader.messages)")
            // Nothing left registered in bluetoothd: the discovery it started is stopped.
            #expect(try await bus.discoverySessions().isEmpty)
        }
    }

    @Test("--home-assistant: a retained device config, one component per decoded number, its state the device's shared topic")
    func homeAssistantDiscovery() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "hall", "--home-assistant"],
                                               environment: ["STATE_DIRECTORY": state])
            let topic = "homeassistant/device/bluectl_a4c138000027/config"
            #expect(await reader.wait(timeout: .seconds(20)) { !$0.payloads(topic).isEmpty }, "\(reader.messages) \(gateway.stderr)")
            let config = try JSONValue.parse(try #require(reader.payloads(topic).first))
            let bluectlVersion = try await ProxyMDNSTests.bluectlVersion(bus)
            #expect(config == .object([
                "device": .object(["identifiers": .array([.string("bluectl_a4c138000027")]), "name": .string("A4:C1:38:00:00:27"),
                                   "model": .string("bthome")]),
                "origin": .object(["name": .string("bluectl"), "sw_version": .string(bluectlVersion)]),
                "components": .object(["temperature_c": .object([
                    "platform": .string("sensor"),
                    "name": .string("temperature_c"), "unique_id": .string("bluectl_a4c138000027_temperature_c"),
                    "state_topic": .string("bluectl/sensors/\(sensorAddress)"),
                    "value_template": .string("{{ value_json.sensor.temperature_c }}"),
                    "device_class": .string("temperature"), "state_class": .string("measurement"),
                    "unit_of_measurement": .string("°C"),
                    "availability": .array([.object(["topic": .string("bluectl/hall/status")])]), "availability_mode": .string("any"),
                ])]),
            ]), "\(config)")
            // The shared state topic carries the gateway's record (a reading without a packet id:
            // published as heard).
            #expect(await reader.wait(timeout: .seconds(20)) { !$0.payloads("bluectl/sensors/\(sensorAddress)").isEmpty },
                    "\(reader.messages)")
            let shared = try JSONValue.parse(try #require(reader.payloads("bluectl/sensors/\(sensorAddress)").first))
            #expect(shared["gateway"] == .string("hall") && shared["sensor"]?["temperature_c"] == .int(20), "\(shared)")
            // Retained, and once per run: a new reading does not publish it again.
            try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2010))
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "hall") == [20.0, 20.1] }, "\(reader.messages)")
            #expect(reader.payloads(topic).count == 1)
            let late = try await broker.subscribe(["homeassistant/#"])
            defer { late.stop() }
            #expect(await late.wait(timeout: .seconds(10)) { $0.payloads(topic).count == 1 }, "\(late.messages)")
            gateway.signal(SIGTERM)
            _ = await gateway.wait(timeout: .seconds(10))
        }
    }

    @Test("--config: only the advertisements its filters admit are published; min_interval spaces a device's readings")
    func configFilters() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let other = "A4:C1:38:00:00:28"
            let plain = "00:AA:01:00:00:99"
            try await bus.addAdvertiser("hci0", other, bthome(3000))
            try await bus.addAdvertiser("hci0", plain, [.addressType("public"), .rssi(-50), .name("plain")])
            let config = state + "/gateway.json"
            try """
                {"advertisements": {"addresses": ["\(sensorAddress)", "\(plain)"], "sensor_formats": ["bthome"], "min_interval": 3600}}
                """.write(toFile: config, atomically: false, encoding: .utf8)
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "filtered", "--config", config],
                                               environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "filtered") == [20.0] }, "\(reader.messages) \(gateway.stderr)")
            // A new reading within min_interval is not published; the filtered-out devices never are.
            try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2010))
            try await bus.updateAdvertiser("hci0", other, bthome(3010))
            // The gateway has heard the change once scan (another client) reports it.
            let scan = try await bus.runBluectl(["scan", "--json", "--timeout", "1"])
            #expect(scan.stdout.contains("4002da07"), "\(scan)")
            gateway.signal(SIGTERM)
            _ = await gateway.wait(timeout: .seconds(10))
            #expect(await reader.wait(timeout: .seconds(10)) { $0.payloads("bluectl/filtered/status").last == "offline" })
            #expect(temperatures(reader, gateway: "filtered") == [20.0])
            let devices = Set(reader.messages.map(\.topic).filter { $0.hasPrefix("bluectl/filtered/devices/") })
            #expect(devices == ["bluectl/filtered/devices/\(sensorAddress)"], "\(reader.messages)")
        }
    }

    @Test("mqtts://: the broker's certificate verified against --ca, the password from the environment; a wrong CA is refused")
    func tls() async throws {
        try await withPrivateBus { bus in
            let broker = try await MosquittoBroker(tls: true)
            try await broker.start()
            let reader = try await broker.subscribe()
            defer { reader.stop() }
            let state = try stateFolder()
            defer { try? FileManager.default.removeItem(atPath: state) }
            try await bus.addAdvertiser("hci0", sensorAddress, bthome(2000))
            // Another CA: the handshake fails, said on stderr; the gateway keeps trying and buffering.
            let refused = try bus.startBluectl(["gateway", "--broker", broker.tlsURL, "--id", "tls", "--ca", broker.folder + "/other-ca.crt",
                                                "--username", "gateway"],
                                               environment: ["STATE_DIRECTORY": state, "BLUECTL_MQTT_PASSWORD": "secret"])
            #expect(await refused.waitForStderr(timeout: .seconds(20)) { $0.contains("cannot connect") }, "\(refused.stderr)")
            #expect(reader.payloads("bluectl/tls/status").isEmpty, "\(reader.messages)")
            refused.signal(SIGTERM)
            _ = await refused.wait(timeout: .seconds(10))
            // The right CA and password: connected; what the refused run buffered arrives too.
            let password = state + "/password"
            #expect(FileManager.default.createFile(atPath: password, contents: Data("secret\n".utf8), attributes: [.posixPermissions: 0o600]))
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.tlsURL, "--id", "tls", "--ca", broker.folder + "/ca.crt",
                                                "--username", "gateway", "--password-file", password],
                                               environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/tls/status").contains("online") && temperatures($0, gateway: "tls") == [20.0] },
                    "\(reader.messages) \(gateway.stderr)")
            #expect(await gateway.waitForStderr(timeout: .seconds(10)) { $0.contains("connected to mqtts://127.0.0.1:") }, "\(gateway.stderr)")
            gateway.signal(SIGTERM)
            _ = await gateway.wait(timeout: .seconds(10))
            // The password from the environment; a wrong one is refused by the broker.
            for (password, accepted) in [("wrong", false), ("secret", true)] {
                let again = try bus.startBluectl(["gateway", "--broker", broker.tlsURL, "--id", "tls", "--ca", broker.folder + "/ca.crt",
                                                  "--username", "gateway"],
                                                 environment: ["STATE_DIRECTORY": state, "BLUECTL_MQTT_PASSWORD": password])
                #expect(await again.waitForStderr(timeout: .seconds(20)) { $0.contains(accepted ? "connected to" : "cannot connect") },
                        "\(password): \(again.stderr)")
                again.signal(SIGTERM)
                _ = await again.wait(timeout: .seconds(10))
            }
            await broker.stop()
        }
    }

    @Test("Scripts/systemd/bluectl-gateway@.service passes systemd-analyze verify, runs gateway as Type=notify with a watchdog")
    func systemdUnit() async throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let unit = try String(contentsOf: repo.appendingPathComponent("Scripts/systemd/bluectl-gateway@.service"), encoding: .utf8)
        for line in ["Type=notify", "WatchdogSec=", "Restart=on-failure", "StateDirectory=bluectl",
                     "ExecStart=/usr/local/bin/bluectl gateway --id %i --broker ${BROKER} $GATEWAY_OPTS"] {
            #expect(unit.contains(line), "\(line)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-gateway-unit-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A copy whose ExecStart names the bluectl just built, its EnvironmentFile one that exists.
        let conf = directory.appendingPathComponent("gateway-test.conf")
        try "BROKER=mqtt://localhost\n".write(to: conf, atomically: true, encoding: .utf8)
        let copy = directory.appendingPathComponent("bluectl-gateway@test.service")
        try unit.replacingOccurrences(of: "/usr/local/bin/bluectl", with: try BusTier.bluectlExecutable())
            .replacingOccurrences(of: "/etc/bluectl/gateway-%i.conf", with: conf.path)
            .write(to: copy, atomically: true, encoding: .utf8)
        let r = try await runProcess("/usr/bin/systemd-analyze", ["verify", copy.path], timeout: .seconds(30))
        #expect(r.exitCode == 0 && r.stderr.isEmpty && r.stdout.isEmpty, "\(r)")
    }

    @Test("--layout theengs: Theengs Gateway's topics, and its fields with the values Theengs Decoder gives the same frame")
    func theengsLayout() async throws {
        try await withScene(brokerUp: true) { bus, broker, _, state in
            // An ATC1441 thermometer (Tests/SensorReference/gen_atc1441.py's first frame): -40 °C, 0 %, 80 %, 2.9 V.
            let address = "A4:C1:38:0B:5E:ED"
            let data = "a4c1380b5eedfe7000500b5400"
            try await bus.addAdvertiser("hci0", address, [.addressType("public"), .rssi(-70),
                                                          .serviceData(["181a": hexBytes(data)])])
            // A device no decoder reads: its raw data as Theengs Gateway publishes it (publish_all).
            try await bus.addAdvertiser("hci0", "C0:FF:EE:00:00:01", [.addressType("random"), .rssi(-60),
                                                                     .manufacturerData([0x0059: [0x01, 0x02]]),
                                                                     .serviceData(["fe9f": [0x00, 0x07]])])
            let home = try await broker.subscribe(["home/#", "homeassistant/#"])
            defer { home.stop() }
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "TheengsGateway", "--layout", "theengs",
                                                "--home-assistant"], environment: ["STATE_DIRECTORY": state])
            let topic = "home/TheengsGateway/BTtoMQTT/A4C1380B5EED"
            #expect(await home.wait(timeout: .seconds(20)) { !$0.payloads(topic).isEmpty && $0.payloads("home/TheengsGateway/LWT") == ["online"] },
                    "\(home.messages) \(gateway.stderr)")
            let ours = try JSONValue.parse(try #require(home.payloads(topic).first))
            let python = ReferenceDecoderTests.repository.appendingPathComponent(".venv/bin/python").path
            let script = """
                import json, TheengsDecoder
                print(TheengsDecoder.decodeBLE(json.dumps({"id": "\(address)", "servicedata": "\(data)", "servicedatauuid": "0x181a"})))
                """
            let decoded = try await runProcess(python, ["-c", script], timeout: .seconds(60))
            let theirs = try JSONValue.parse(decoded.stdout)
            for field in ["id", "mac", "brand", "model", "model_id", "type", "tempc", "tempf", "hum", "batt", "volt"] {
                #expect(ours[field] != nil && ours[field]?.number == theirs[field]?.number && ours[field]?.text == theirs[field]?.text,
                        "\(field): ours \(String(describing: ours[field])), Theengs \(String(describing: theirs[field]))")
            }
            #expect(ours["rssi"] == .int(-70))
            let raw = "home/TheengsGateway/BTtoMQTT/C0FFEE000001"
            #expect(await home.wait(timeout: .seconds(20)) { !$0.payloads(raw).isEmpty }, "\(home.messages)")
            let undecoded = try JSONValue.parse(try #require(home.payloads(raw).first))
            #expect(undecoded["manufacturerdata"] == .string("59000102") && undecoded["mfr"] == .string("Nordic Semiconductor ASA"),
                    "\(undecoded)")
            #expect(undecoded["servicedata"] == .string("0007") && undecoded["servicedatauuid"] == .string("fe9f"), "\(undecoded)")
            #expect(undecoded["brand"] == nil && undecoded["tempc"] == nil, "\(undecoded)")
            let deviceTopic = "homeassistant/device/bluectl_a4c1380b5eed/config"
            #expect(await home.wait(timeout: .seconds(20)) { !$0.payloads(deviceTopic).isEmpty }, "\(home.messages)")
            let device = try JSONValue.parse(try #require(home.payloads(deviceTopic).first))
            let config = try #require(device["components"]?["temperature_c"], "\(device)")
            #expect(device["device"]?["via_device"] == .string("bluectl_gateway_TheengsGateway"), "\(device)")
            // Theengs Gateway's state topic, which every gateway in its layout feeds; no availability, as Theengs'.
            #expect(config["state_topic"] == .string("+/+/BTtoMQTT/A4C1380B5EED"))
            #expect(config["value_template"] == .string("{{ value_json.tempc }}"))
            #expect(config["availability_topic"] == nil && config["availability"] == nil, "\(config)")
            gateway.signal(SIGTERM)
            _ = await gateway.wait(timeout: .seconds(10))
        }
    }

    @Test("kill -9 of the gateway: the broker publishes its last will, offline, retained")
    func lastWill() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "lwt"], environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/lwt/status") == ["online"] }, "\(reader.messages) \(gateway.stderr)")
            gateway.signal(SIGKILL)
            _ = await gateway.wait(timeout: .seconds(5))
            // The broker notices the dead connection within 1.5 keep-alives (10 s).
            #expect(await reader.wait(timeout: .seconds(30)) { $0.payloads("bluectl/lwt/status") == ["online", "offline"] }, "\(reader.messages)")
            let late = try await broker.subscribe(["bluectl/lwt/status"])
            defer { late.stop() }
            #expect(await late.wait(timeout: .seconds(10)) { $0.payloads("bluectl/lwt/status") == ["offline"] }, "\(late.messages)")
        }
    }

    @Test("Broker down at start, then up: every distinct reading arrives, in order")
    func brokerDownAtStart() async throws {
        try await withScene(brokerUp: false) { bus, broker, reader, state in
            let gateway = try await startWithoutBroker(bus, broker, id: "late", state: state, readings: 20)
            try await broker.start()
            await expectReadingsThenStop(20, reader, gateway: "late", gatewayProcess: gateway)
        }
    }

    @Test("Broker stopped mid-run and started again: the readings of the outage all arrive, in order")
    func brokerOutage() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "outage"], environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "outage") == [20.0] }, "\(reader.messages) \(gateway.stderr)")
            await broker.stop()
            #expect(await gateway.waitForStderr(timeout: .seconds(30)) { $0.contains("connection lost") }, "\(gateway.stderr)")
            try await buffer(readings: 30, bus: bus, state: state, alreadySent: 1)
            try await broker.start()
            // Back: an event says for how long it was away (the outage lasted at least the 29 readings' buffering).
            #expect(await reader.wait(timeout: .seconds(40)) { !$0.payloads("bluectl/outage/events").isEmpty }, "\(reader.messages)")
            let event = try JSONValue.parse(try #require(reader.payloads("bluectl/outage/events").first))
            #expect(event["event"] == .string("reconnected"), "\(event)")
            #expect((event["away_s"]?.number ?? 0) > 0, "\(event)")
            await expectReadingsThenStop(30, reader, gateway: "outage", gatewayProcess: gateway)
        }
    }

    @Test("--max-buffered: past the bound the OLDEST readings are dropped (from the log on disk too), counted, and the count published once connected, after the newest")
    func bufferBound() async throws {
        try await withScene(brokerUp: false) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "full", "--max-buffered", "5"],
                                               environment: ["STATE_DIRECTORY": state])
            #expect(await gateway.waitForStderr(timeout: .seconds(20)) { $0.contains("cannot connect") }, "\(gateway.stderr)")
            // 20.0 on disk before the sensor steps (as in startWithoutBroker: the full run at gw27c's
            // 2337c24 stepped before the scan had first seen the device: 20.1 came first, 6 dropped, not 7).
            #expect(try await bus.eventually(timeout: .seconds(20)) { heldMessages(state).count >= 1 }, "\(gateway.stderr)")
            try await buffer(readings: 5, bus: bus, state: state)
            #expect(messagesHolding(state, serviceDataHex(0)) == 1, "20.0 on disk")
            for step in 5..<12 { try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2000 + step * 10)) }
            // The gateway took the last (21.10 °C, 2110 = 0x083e) once the log holds it; the
            // first 7 (20.0 … 20.6) were pushed out, from the log too: 5 held, the newest 5.
            // (The new record is written before the oldest's removal: waited for together.)
            let newest5 = Array(repeating: 0, count: 7) + Array(repeating: 1, count: 5)
            #expect(try await bus.eventually(timeout: .seconds(20)) { (0..<12).map { messagesHolding(state, serviceDataHex($0)) } == newest5 },
                    "\((0..<12).map { messagesHolding(state, serviceDataHex($0)) }) \(gateway.stderr)")
            try await broker.start()
            #expect(await reader.wait(timeout: .seconds(40)) { !$0.payloads("bluectl/full/events").isEmpty }, "\(reader.messages) \(gateway.stderr)")
            let event = try JSONValue.parse(try #require(reader.payloads("bluectl/full/events").first))
            #expect(event["event"] == .string("dropped"))
            #expect(event["count"] == .int(7), "\(event)")
            #expect(event["reason"] == .string("the buffer of messages waiting for the broker was full: the oldest were dropped"), "\(event)")
            // The newest 5 arrived, in order.
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "full").contains(21.1) }, "\(reader.messages)")
            #expect(temperatures(reader, gateway: "full") == (7..<12).map { 20.0 + Double($0) / 10 })
            gateway.signal(SIGTERM)
            _ = await gateway.wait(timeout: .seconds(10))
        }
    }

    @Test("kill -9 while buffering, started again with the broker up: the readings it had accepted arrive, in order")
    func killWhileBuffering() async throws {
        try await withScene(brokerUp: false) { bus, broker, reader, state in
            let first = try await startWithoutBroker(bus, broker, id: "crash", state: state, readings: 15)
            first.signal(SIGKILL)
            _ = await first.wait(timeout: .seconds(5))
            try await broker.start()
            let second = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "crash"], environment: ["STATE_DIRECTORY": state])
            await expectReadingsThenStop(15, reader, gateway: "crash", gatewayProcess: second)
        }
    }

    /// A bus whose sensor advertises 20.00 °C, a broker (running, or stopped again when not
    /// `brokerUp`) with a reader whose persistent session outlives the broker's restarts, and a
    /// state folder for the gateway.
    func withScene(brokerUp: Bool, experimental: Bool = false,
                           _ body: (PrivateBus, MosquittoBroker, MQTTReader, String) async throws -> Void) async throws {
        try await withPrivateBus(experimental: experimental) { bus in
            let broker = try await MosquittoBroker()
            try await broker.start()
            let reader = try await broker.subscribe()
            defer { reader.stop() }
            if !brokerUp { await broker.stop() }
            let state = try stateFolder()
            defer { try? FileManager.default.removeItem(atPath: state) }
            try await bus.addAdvertiser("hci0", sensorAddress, bthome(2000))
            try await body(bus, broker, reader, state)
            await broker.stop()
        }
    }

    /// A gateway started while the broker is down, once it is scanning (it says so when its
    /// first connection attempt failed), with `readings` distinct readings buffered on disk.
    private func startWithoutBroker(_ bus: PrivateBus, _ broker: MosquittoBroker, id: String, state: String,
                                    readings: Int) async throws -> ChildProcess {
        let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", id], environment: ["STATE_DIRECTORY": state])
        #expect(await gateway.waitForStderr(timeout: .seconds(20)) { $0.contains("cannot connect") }, "\(gateway.stderr)")
        // The sensor's first reading (20.0) on disk before it changes: the scan's first sight of
        // the device can come after the broker's refusal (seen under ASan: the test stepped to
        // 20.1 before the gateway had seen 20.0, which it then never heard).
        #expect(try await bus.eventually(timeout: .seconds(20)) { heldMessages(state).count >= 1 }, "\(gateway.stderr)")
        try await buffer(readings: readings, bus: bus, state: state)
        return gateway
    }

    /// The sensor steps 0.1 °C at a time until `readings` distinct ones were advertised; returns
    /// once the gateway has them all on disk (its log: one per message not yet acknowledged).
    private func buffer(readings: Int, bus: PrivateBus, state: String, alreadySent: Int = 0) async throws {
        for step in 1..<readings { try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2000 + step * 10)) }
        let waiting = readings - alreadySent
        #expect(try await bus.eventually(timeout: .seconds(20)) { heldMessages(state).count >= waiting }, "\(heldMessages(state).count) held, not \(waiting)")
    }

    /// Every reading of 20.0, 20.1, … arrived, in order; then the gateway is stopped.
    private func expectReadingsThenStop(_ count: Int, _ reader: MQTTReader, gateway: String, gatewayProcess: ChildProcess) async {
        let expected = (0..<count).map { 20.0 + Double($0) / 10 }
        #expect(await reader.wait(timeout: .seconds(40)) { temperatures($0, gateway: gateway).count >= count },
                "\(temperatures(reader, gateway: gateway)) \(gatewayProcess.stderr)")
        #expect(temperatures(reader, gateway: gateway) == expected)
        gatewayProcess.signal(SIGTERM)
        _ = await gatewayProcess.wait(timeout: .seconds(10))
    }
}
