// End to end: the peripheral role — `bluectl serve` and `bluectl advertise`,
// the real binary against the stand-in's model of bluetoothd 5.66's server
// side (GattManager1, LEAdvertisingManager1), with the stand-in's simulated
// remote central (Mock.Remote*) reading, writing and subscribing the way a
// central's bluetoothd would. Contract: README "The peripheral role",
// docs/peripheral.md. Assertions are on bluectl's output, on what the
// central gets, and on what the stand-in holds registered afterwards.

import Foundation
import Testing

/// The central the stand-in simulates (connected to hci0).
private let centralAddress = "00:AA:01:C0:00:01"

/// A heart-rate database with every flag combination a test needs.
let heartRateSpec = """
    {"services":[{"uuid":"heart_rate","primary":true,"characteristics":[
      {"uuid":"2a37","flags":["notify"],"value":"0040"},
      {"uuid":"body_sensor_location","flags":["read"],"value":"01",
       "descriptors":[{"uuid":"2901","flags":["read"],"value":"636865737420737472617020"}]},
      {"uuid":"2a39","flags":["write"]},
      {"uuid":"12345678-1234-5678-1234-56789abcdef1","flags":["read","write","write-without-response"],"value":"48656c6c6f"},
      {"uuid":"12345678-1234-5678-1234-56789abcdef2","flags":["indicate"]}
    ]}]}
    """

extension PrivateBus {
    /// Writes `text` to a fresh file in the bus's directory (removed with the
    /// bus: these were left in /tmp, one folder per call) and returns its path.
    func temporaryFile(_ text: String, name: String = "spec.json") throws -> String {
        let dir = directory.appendingPathComponent("file-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }
}

/// The bytes of a busctl `ay` reply.
private func bytes(_ value: JSONValue?) -> [UInt8] {
    guard case .array(let items)? = value else { return [] }
    return items.compactMap { if case .int(let n) = $0 { UInt8(exactly: n) } else { nil } }
}

extension PrivateBus {
    /// (hci, owner, path, state) of each GATT application or advertisement the stand-in holds.
    func registered(_ what: String) async throws -> [String] {
        guard case .array(let rows)? = try await mock(what).first else { return [] }
        return rows.map { "\($0)" }
    }

    func remoteRead(_ attribute: String, offset: UInt16 = 0) async throws -> [UInt8] {
        bytes(try await mock("RemoteRead", [.string("hci0"), .string(centralAddress), .string(attribute), .uint16(offset)]).first)
    }

    func remoteWrite(_ attribute: String, _ value: [UInt8], _ kind: String = "request") async throws {
        try await mock("RemoteWrite", [.string("hci0"), .string(centralAddress), .string(attribute), .bytes(value), .string(kind)])
    }

    func remoteNotifications(_ characteristic: String) async throws -> [[UInt8]] {
        guard case .array(let values)? = try await mock(
            "RemoteNotifications", [.string("hci0"), .string(centralAddress), .string(characteristic)]).first else { return [] }
        return values.map { bytes($0) }
    }
}

@Suite("bluectl serve and advertise (the peripheral role), end to end", .timeLimit(.minutes(3)))
struct PeripheralRoleTests {

    @Test("serve: reads answered from the SPEC's values, writes printed and kept, notifications and indications fed on stdin arrive all and in order, nothing left registered after Ctrl-C")
    func serveHeartRate() async throws {
        try await withPrivateBus { bus in
            let spec = try bus.temporaryFile(heartRateSpec)
            let serve = try bus.startBluectl(["serve", spec, "--adapter", "hci0", "--advertise", "--name", "bus-hr", "--json"], input: true)
            let started = await serve.waitForStdoutLines(1, timeout: .seconds(15))
            #expect(started, "\(serve.stdout)")
            let ready = try JSONValue.parse(serve.stdout.split(separator: "\n").first.map(String.init) ?? "")
            #expect(ready["event"] == .string("serving"))
            #expect(ready["adapter"] == .string("hci0"))
            #expect(ready["services"] == .array([.string("0000180d-0000-1000-8000-00805f9b34fb")]))
            #expect(ready["advertising"] == .bool(true))
            #expect(ready["name"] == .string("bus-hr"))
            #expect(try await bus.registered("RegisteredApplications").count == 1)
            #expect(try await bus.registered("RegisteredAdvertisements").count == 1)

            try await bus.mock("RemoteConnect", [.string("hci0"), .string(centralAddress), .dict([])])
            #expect(try await bus.remoteRead("2a38") == [0x01])
            #expect(try await bus.remoteRead("2901") == Array("chest strap ".utf8))
            #expect(try await bus.remoteRead("12345678-1234-5678-1234-56789abcdef1", offset: 2) == Array("llo".utf8))
            await #expect(throws: BusTierError.self, "a write-only characteristic is not readable: bluetoothd's own ATT error") {
                _ = try await bus.remoteRead("2a39")
            }
            try await bus.remoteWrite("2a39", [0x01])
            try await bus.remoteWrite("12345678-1234-5678-1234-56789abcdef1", [0x41, 0x42], "command")
            #expect(try await bus.remoteRead("12345678-1234-5678-1234-56789abcdef1") == [0x41, 0x42], "a write replaces the value")

            try await bus.mock("RemoteSubscribe", [.string("hci0"), .string(centralAddress), .string("2a37"), .string("notify")])
            #expect(await serve.waitForStdout(timeout: .seconds(10)) { $0.contains("\"subscribed\"") })
            for i in 0..<50 { serve.writeInput("{\"characteristic\":\"2a37\",\"value\":\"00\(String(format: "%02x", i))\"}\n") }
            serve.writeInput("{\"characteristic\":\"2a99\",\"value\":\"00\"}\nnot json\n")
            try await bus.mock("RemoteSubscribe", [.string("hci0"), .string(centralAddress), .string("12345678-1234-5678-1234-56789abcdef2"),
                                                   .string("indicate")])
            serve.writeInput("{\"characteristic\":\"12345678-1234-5678-1234-56789abcdef2\",\"value\":\"aa\"}\n")
            #expect(await serve.waitForStdout(timeout: .seconds(10)) { $0.contains("\"confirmed\"") }, "\(serve.stdout)")
            let notified = try await bus.remoteNotifications("2a37")
            #expect(notified == (0..<50).map { [0x00, UInt8($0)] }, "every value, in order")
            #expect(try await bus.remoteNotifications("12345678-1234-5678-1234-56789abcdef2") == [[0xaa]])

            serve.signal(SIGINT)
            let r = await serve.wait(timeout: .seconds(10))
            #expect(r.termination == .exited(130), "\(r)")
            #expect(r.stderrLines == [
                "bluectl: stdin line 51: characteristic: 2a99 (Database Change Increment) is not served",
                "bluectl: stdin line 52: not a JSON object",
            ], "\(r)")
            let events = try r.jsonLines().compactMap { $0["event"]?.string }
            #expect(events.filter { $0 == "read" }.count == 4, "\(events)")
            let writes = try r.jsonLines().filter { $0["event"] == .string("write") }
            #expect(writes.count == 2)
            #expect(writes.first?["central"] == .string(centralAddress))
            #expect(writes.first?["characteristic"] == .string("00002a39-0000-1000-8000-00805f9b34fb"))
            #expect(writes.first?["value"] == .string("01"))
            #expect(writes.allSatisfy { $0["type"] == nil }, "bluetoothd 5.66 does not say how a central wrote")
            #expect(events.contains("subscribed") && events.contains("confirmed"))
            #expect(try await bus.registered("RegisteredApplications").isEmpty, "unregistered on Ctrl-C")
            #expect(try await bus.registered("RegisteredAdvertisements").isEmpty)
        }
    }

    @Test("serve: a bad SPEC is refused with its JSON path (65) before anything is registered; an unreadable one 64")
    func badSpecs() async throws {
        try await withPrivateBus { bus in
            for (spec, message) in [
                ("[]", "invalid SPEC"),
                ("{\"services\":[]}", "services: empty"),
                ("{\"service\":[]}", "unknown key \"service\""),
                ("{\"services\":[{\"uuid\":\"zz\"}]}", "services[0].uuid: invalid UUID"),
                ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"flags\":[\"reed\"]}]}]}",
                 "services[0].characteristics[0].flags[0]: unknown flag \"reed\""),
                ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"flags\":[]}]}]}",
                 "services[0]: characteristics[0].flags: empty"),
                ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"flags\":[\"read\"],\"value\":\"0g\"}]}]}",
                 "services[0].characteristics[0].value"),
                ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"flags\":[\"notify\"],\"descriptors\":[{\"uuid\":\"2902\",\"flags\":[\"read\"]}]}]}]}",
                 "descriptors[0].uuid: 2902"),
                ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"flags\":[\"notify\"],\"descriptors\":[{\"uuid\":\"2901\",\"flags\":[\"notify\"]}]}]}]}",
                 "\"notify\" is not a descriptor flag"),
                ("{\"services\":[{\"uuid\":\"180d\",\"characteristics\":[{\"uuid\":\"2a37\",\"flags\":[\"read\"],\"value\":\"\(String(repeating: "00", count: 513))\"}]}]}",
                 "513 bytes, longer than ATT's 512"),
                ("{\"services\":[{\"uuid\":\"180d\",\"primary\":\"yes\"}]}", "services[0].primary: expected true or false"),
            ] {
                let r = try await bus.runBluectl(["serve", try bus.temporaryFile(spec)])
                expectCleanFailure(r, 65, message)
            }
            expectCleanFailure(try await bus.runBluectl(["serve", "/nonexistent/spec.json"]), 64, "cannot read SPEC")
            expectCleanFailure(try await bus.runBluectl(["serve", try bus.temporaryFile(heartRateSpec), "--name", "x"]), 64,
                               "--name needs --advertise")
            #expect(try await bus.registered("RegisteredApplications").isEmpty)
        }
    }

    @Test("advertise: every field reaches a scanner on another adapter; too long is refused with the parts' sizes; --duration ends it, unregistered")
    func advertiseFields() async throws {
        try await withPrivateBus(adapters: [.hci0, AdapterSpec("hci1", address: "00:AA:01:00:00:24", alias: "bus-tier-scanner")]) { bus in
            let ad = try bus.startBluectl(["advertise", "--adapter", "hci0", "--name", "bus-adv", "--service", "180d",
                                           "--manufacturer", "0xffff=0102", "--service-data", "feaa=0a0b", "--appearance", "0x0341",
                                           "--tx-power", "--json", "--duration", "30"])
            let started = await ad.waitForStdoutLines(1, timeout: .seconds(15))
            #expect(started, "\(ad.stdout)")
            let line = try JSONValue.parse(ad.stdout.split(separator: "\n").first.map(String.init) ?? "")
            #expect(line["event"] == .string("advertising"))
            #expect(line["length"] == .int(3 + 4 + 6 + 6 + 4 + 3), "flags, UUID list, service data, manufacturer data, appearance, TX power")
            let scan = try await bus.runBluectl(["scan", "--adapter", "hci1", "--json", "--timeout", "4"])
            let seen = try #require(try scan.jsonLines().first { $0["name"] == .string("bus-adv") }, "\(scan)")
            #expect(seen["address"] == .string("00:AA:01:00:00:23"))
            #expect(seen["service_uuids"] == .array([.string("0000180d-0000-1000-8000-00805f9b34fb")]))
            #expect(seen["manufacturer_data"] == .object(["0xffff": .string("0102")]))
            #expect(seen["service_data"] == .object(["0000feaa-0000-1000-8000-00805f9b34fb": .string("0a0b")]))
            #expect(seen["appearance"] == .int(0x0341))
            #expect(seen["tx_power"] != nil, "\(seen)")
            ad.signal(SIGTERM)
            #expect(await ad.wait(timeout: .seconds(10)).termination == .exited(143))
            #expect(try await bus.registered("RegisteredAdvertisements").isEmpty)

            let long = try await bus.runBluectl(["advertise", "--adapter", "hci0", "--manufacturer", "0xffff=\(String(repeating: "ab", count: 26))"])
            expectCleanFailure(long, 64, "advertisement of 33 bytes is longer than the adapter's 31 (flags 3, manufacturer data 30)")
            let timed = try await bus.runBluectl(["advertise", "--adapter", "hci0", "--service", "180f", "--duration", "1"])
            #expect(timed.termination == .exited(0), "\(timed)")
            #expect(timed.stdoutLines.count == 1 && timed.stdout.contains("advertising"), "\(timed)")
            #expect(try await bus.registered("RegisteredAdvertisements").isEmpty)
            expectCleanFailure(try await bus.runBluectl(["advertise", "--manufacturer", "zz=01"]), 64, "company id is 16-bit hex")
            expectCleanFailure(try await bus.runBluectl(["advertise", "--name", String(repeating: "n", count: 30)]), 64, "a scan response holds 29")
        }
    }
}
