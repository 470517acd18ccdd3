// `bluectl proxy` against the stand-in, with Home Assistant's own ESPHome
// client (aioesphomeapi from PyPI, in the test virtualenv: Scripts/deps)
// driving Tests/ProxyClient/esphome_client.py: device info, raw
// advertisements with the right address and data, two clients at once, and
// garbage clients disconnected while a good one goes on.

import Foundation
import Testing

@Suite(.serialized) struct ProxyTests {
    static let client = ReferenceDecoderTests.repository.appendingPathComponent("Tests/ProxyClient/esphome_client.py").path

    static func python() throws -> String {
        let python = ReferenceDecoderTests.repository.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw BusTierError("no .venv/bin/python: run Scripts/deps, which makes the test virtualenv")
        }
        return python
    }

    /// Starts `bluectl proxy` on a free port; returns it and the port once it listens.
    static func startProxy(_ bus: PrivateBus, name: String = "bus-proxy", extra: [String] = []) async throws -> (ChildProcess, String) {
        let proxy = try bus.startBluectl(["proxy", "--port", "0", "--name", name, "--no-mdns"] + extra,
                                         environment: ["BLUECTL_LOG_LEVEL": "info"])
        guard await proxy.waitForStderr(timeout: .seconds(30), { $0.contains("listening on port ") }) else {
            throw BusTierError("bluectl proxy did not listen: \(await proxy.wait(timeout: .seconds(2)))")
        }
        let line = proxy.stderr.split(separator: "\n").first { $0.contains("listening on port ") } ?? ""
        let port = String(line.split(separator: "listening on port ").last?.prefix { $0.isNumber } ?? "")
        return (proxy, port)
    }

    /// One client run to its end: its JSON lines.
    static func runClient(_ bus: PrivateBus, _ arguments: [String]) async throws -> [JSONValue] {
        let result = try await bus.spawn(try python(), [client] + arguments).wait(timeout: .seconds(60))
        guard result.termination == .exited(0) else {
            throw BusTierError("esphome_client.py \(arguments.joined(separator: " ")) ended \(result.termination): \(result.stderr)")
        }
        return try result.jsonLines()
    }

    /// A client subscribed to raw advertisements, waiting for `address`.
    static func startAdvertsClient(_ bus: PrivateBus, port: String, address: String) async throws -> ChildProcess {
        let child = try bus.spawn(try python(), [client, "adverts", "127.0.0.1", port, address, "30"])
        guard await child.waitForStdout(timeout: .seconds(30), { $0.contains("\"subscribed\": true") }) else {
            throw BusTierError("the adverts client did not subscribe: \(await child.wait(timeout: .seconds(2)))")
        }
        return child
    }

    /// The advertisement line of a finished adverts client.
    static func advertisement(_ child: ChildProcess) async throws -> JSONValue {
        let result = await child.wait(timeout: .seconds(40))
        guard result.termination == .exited(0) else {
            throw BusTierError("the adverts client ended \(result.termination): \(result.stderr)")
        }
        return try #require(try result.jsonLines().last)
    }

    let advertiser = "AA:BB:CC:DD:EE:02"
    let fields: [AdField] = [
        .name("Thermo"), .rssi(-61), .addressType("random"), .txPower(4), .uuids(["0000180d-0000-1000-8000-00805f9b34fb"]),
        .serviceData(["0000fcd2-0000-1000-8000-00805f9b34fb": [0x40, 0x02, 0x03]]), .manufacturerData([0x004C: [0x01, 0x02, 0x03]]),
    ]

    /// What the stand-in's advertiser sends, as aioesphomeapi and bluetooth-data-tools read it.
    func checkAdvertisement(_ adv: JSONValue) {
        #expect(adv["address"]?.string == advertiser)
        #expect(adv["address_type"]?.int == 1, "random")
        #expect(adv["rssi"]?.int == -61)
        #expect(adv["name"]?.string == "Thermo")
        #expect(adv["service_uuids"]?.array?.compactMap(\.string) == ["0000180d-0000-1000-8000-00805f9b34fb"])
        #expect(adv["service_data"]?["0000fcd2-0000-1000-8000-00805f9b34fb"]?.string == "400203")
        #expect(adv["manufacturer_data"]?["76"]?.string == "010203")
        #expect(adv["tx_power"]?.int == 4)
    }

    @Test func deviceInfoAsHomeAssistantReadsIt() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus, name: "kitchen-proxy")
            let info = try #require(try await Self.runClient(bus, ["info", "127.0.0.1", port]).first)
            #expect(info["name"]?.string == "kitchen-proxy")
            #expect(info["mac_address"]?.string == AdapterSpec.hci0.address)
            #expect(info["bluetooth_mac_address"]?.string == AdapterSpec.hci0.address)
            #expect(info["bluetooth_proxy_feature_flags"]?.int == 127,
                    "passive scan (1), connections (2), remote caching (4), pairing (8), cache clearing (16), raw advertisements (32), scanner state and mode (64)")
            #expect(info["feature_flags_compat"]?.int == 127)
            #expect(info["legacy_bluetooth_proxy_version"]?.int == 5)
            #expect(info["api_version"]?.array?.compactMap(\.int) == [1, 14])
            proxy.signal(SIGINT)
            let end = await proxy.wait(timeout: .seconds(15))
            #expect(end.exitCode == 130, "\(end)")
            #expect(!end.stderr.contains("[warning]"), "an orderly client leaves no warning: \(end.stderr)")
        }
    }

    @Test func twoClientsGetTheAdvertisement() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus)
            let first = try await Self.startAdvertsClient(bus, port: port, address: advertiser)
            let second = try await Self.startAdvertsClient(bus, port: port, address: advertiser)
            try await bus.addAdvertiser("hci0", advertiser, fields)
            checkAdvertisement(try await Self.advertisement(first))
            checkAdvertisement(try await Self.advertisement(second))
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    /// An advertisement whose RSSI the controller did not give (HCI's 127, which
    /// bluetoothd 5.66 passes on as RSSI 127, as the lab's emulated controller
    /// reports): forwarded with -127.
    @Test func advertisementWithoutRSSIForwarded() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus)
            let client = try await Self.startAdvertsClient(bus, port: port, address: advertiser)
            try await bus.addAdvertiser("hci0", advertiser, fields.map { if case .rssi = $0 { .rssi(127) } else { $0 } })
            let adv = try await Self.advertisement(client)
            #expect(adv["rssi"]?.int == -127, "\(adv)")
            #expect(adv["name"]?.string == "Thermo", "\(adv)")
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    @Test func garbageClientsDisconnectedGoodOneGoesOn() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus)
            let good = try await Self.startAdvertsClient(bus, port: port, address: advertiser)
            let kinds = ["preamble": "bad preamble 0x42", "length": "frame length 2097151 exceeds 65535 bytes",
                         "type": "unknown message type 1011", "protobuf": "HelloRequest (1, 3 bytes) does not decode",
                         "before-hello": "PingRequest before HelloRequest"]
            for (kind, line) in kinds.sorted(by: { $0.key < $1.key }) {
                let result = try #require(try await Self.runClient(bus, ["garbage", "127.0.0.1", port, kind]).first)
                #expect(result["closed_by_server"]?.bool == true, "\(kind)")
                #expect(await proxy.waitForStderr(timeout: .seconds(10)) { $0.contains("disconnected: \(line)") }, "\(kind): \(proxy.stderr)")
            }
            let warnings = proxy.stderr.split(separator: "\n").filter { $0.contains("[warning]") }
            #expect(warnings.count == kinds.count, "one line per garbage client: \(warnings)")
            // The good client, connected all along, still gets the advertisement and answers.
            try await bus.addAdvertiser("hci0", advertiser, fields)
            checkAdvertisement(try await Self.advertisement(good))
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    @Test func portInUseRefused() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus)
            let second = try await bus.runBluectl(["proxy", "--port", port, "--no-mdns"])
            #expect(second.exitCode == 69, "\(second)")
            #expect(second.stderrLines == ["bluectl: cannot bind to port \(port): Address already in use"], "\(second.stderr)")
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    /// ESPHome's encryption: the key as a device's `api: encryption: key:` (base64 of 32 bytes).
    static let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    static let otherKey = "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4="

    @Test func noiseEncryptionWithTheRightKeyOnly() async throws {
        try await withPrivateBus { bus in
            let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-proxy-key-\(getpid())").path
            // Only its owner may read it, as the sensor keys file.
            #expect(FileManager.default.createFile(atPath: keyFile, contents: Data((Self.key + "\n").utf8),
                                                   attributes: [.posixPermissions: 0o600]))
            defer { try? FileManager.default.removeItem(atPath: keyFile) }
            let (proxy, port) = try await Self.startProxy(bus, name: "noise-proxy", extra: ["--key-file", keyFile])
            #expect(proxy.stderr.contains("encrypted (Noise)"))
            let info = try #require(try await Self.runClient(bus, ["info", "127.0.0.1", port, Self.key]).first)
            #expect(info["name"]?.string == "noise-proxy")
            #expect(info["bluetooth_mac_address"]?.string == AdapterSpec.hci0.address)
            #expect(info["bluetooth_proxy_feature_flags"]?.int == 127)
            // Another key: aioesphomeapi reports it as such, the proxy logs one line.
            let wrong = try #require(try await Self.runClient(bus, ["refused", "127.0.0.1", port, Self.otherKey]).first)
            #expect(wrong["error"]?.string == "InvalidEncryptionKeyAPIError", "\(wrong)")
            #expect(await proxy.waitForStderr(timeout: .seconds(10)) { $0.contains("the client's encryption key is not this proxy's") })
            // Plaintext against the encrypted proxy: the client is told encryption is required.
            let plain = try #require(try await Self.runClient(bus, ["refused", "127.0.0.1", port]).first)
            #expect(plain["error"]?.string == "RequiresEncryptionAPIError", "\(plain)")
            #expect(await proxy.waitForStderr(timeout: .seconds(10)) { $0.contains("the client speaks the plaintext API") })
            // And the right key still works after both.
            let again = try #require(try await Self.runClient(bus, ["info", "127.0.0.1", port, Self.key]).first)
            #expect(again["name"]?.string == "noise-proxy")
            // Advertisements over the encrypted connection.
            let good = try bus.spawn(try Self.python(), [Self.client, "adverts", "127.0.0.1", port, advertiser, "30", Self.key])
            #expect(await good.waitForStdout(timeout: .seconds(30)) { $0.contains("\"subscribed\": true") })
            try await bus.addAdvertiser("hci0", advertiser, fields)
            checkAdvertisement(try await Self.advertisement(good))
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    @Test func scanResumesAfterBluetoothdRestarts() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus)
            let client = try await Self.startAdvertsClient(bus, port: port, address: advertiser)
            await bus.stopStandIn()
            #expect(await proxy.waitForStderr(timeout: .seconds(15)) { $0.contains("went away: scanning again once they are back") })
            try await bus.startStandIn(adapters: [.hci0])
            #expect(await proxy.waitForStderr(timeout: .seconds(30)) { $0.contains("proxy: scanning hci0 again") }, "\(proxy.stderr)")
            // The client, connected all along, hears a device the new scan finds.
            try await bus.addAdvertiser("hci0", advertiser, fields)
            checkAdvertisement(try await Self.advertisement(client))
            #expect(proxy.isRunning)
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    /// Connects a client to the heart-rate device once the proxy has heard it;
    /// the client's lines ("connected" true, or its error).
    /// `connectTimeout`: how long the client waits for the connect (seconds; aioesphomeapi's
    /// timeout, longer than the proxy's own so that the proxy's is the one tested).
    private func connectWhenHeard(_ bus: PrivateBus, _ port: String, connectTimeout: Int = 40) async throws -> ChildProcess {
        let heard = try await Self.startAdvertsClient(bus, port: port, address: heartRateAddress)
        _ = try await HeartRateGatt.install(bus)
        _ = try await Self.advertisement(heard)
        return try bus.spawn(try Self.python(), [Self.client, "hold", "127.0.0.1", port, heartRateAddress, "5", String(connectTimeout)])
    }

    /// Connect answered by the bus itself, the device's object gone (seen in
    /// the lab just after bluetoothd restarted): the proxy tries again once
    /// the device is in BlueZ's tree, and Home Assistant's client, which
    /// would not retry, is connected.
    @Test func connectRetriedWhenBlueZDroppedTheDevice() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus)
            try await bus.injectError(heartRatePath, "Connect", "org.freedesktop.DBus.Error.UnknownObject",
                                      "Method \"Connect\" with signature \"\" on interface \"org.bluez.Device1\" doesn't exist\n", times: 1)
            let client = try await connectWhenHeard(bus, port)
            #expect(await client.waitForStdout(timeout: .seconds(30)) { $0.contains("\"connected\": true") }, "\(client.stdout) \(client.stderr) \(proxy.stderr)")
            #expect(try await bus.callCount(heartRatePath, "Connect") == 2)
            let said = proxy.stderr.split(separator: "\n").filter { $0.contains("trying again once the scan sees it") }
            #expect(said.count == 1 && said[0].contains("BlueZ dropped it while connecting"), "\(proxy.stderr)")
            client.signal(SIGTERM)
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    /// bluetoothd gone while Connect is out (5.66 crashes in the lab on quick
    /// reconnects): the proxy waits for it and its scan to find the device
    /// again, then connects, within its connect time (60 s here, and the
    /// client waits 90 s: a stand-in's start took over 15 s under
    /// ThreadSanitizer, and that is set-up, not what is tested).
    @Test func connectWaitsForTheDeviceAfterBluetoothdRestarts() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus, extra: ["--connect-timeout", "60"])
            try await bus.hang(heartRatePath, "Connect")
            let client = try await connectWhenHeard(bus, port, connectTimeout: 90)
            let deadline = ContinuousClock.now + .seconds(30)
            while try await bus.callCount(heartRatePath, "Connect") == 0, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            try #require(try await bus.callCount(heartRatePath, "Connect") == 1, "the proxy never sent Connect: \(proxy.stderr)")
            await bus.stopStandIn()
            #expect(await proxy.waitForStderr(timeout: .seconds(30)) { $0.contains("bluetoothd stopped while connecting; trying again once the scan sees it") }, "\(proxy.stderr)")
            try await bus.startStandIn(adapters: [.hci0])
            #expect(await proxy.waitForStderr(timeout: .seconds(30)) { $0.contains("proxy: scanning hci0 again") }, "\(proxy.stderr)")
            try await Task.sleep(for: .seconds(1))   // the device is not back at once: the proxy waits
            _ = try await HeartRateGatt.install(bus)
            #expect(await client.waitForStdout(timeout: .seconds(60)) { $0.contains("\"connected\": true") }, "\(client.stdout) \(client.stderr) \(proxy.stderr)")
            client.signal(SIGTERM)
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }
}
