// `bluectl proxy` announcing itself over mDNS through a real avahi-daemon on
// the private bus (AvahiDaemon.swift): the `_esphomelib._tcp` service read
// back through Avahi (avahi-browse: name, port, TXT record), Home
// Assistant's client at the address and port Avahi resolved, the service
// gone after SIGTERM; a name taken on the network; no avahi-daemon (one
// warning, the proxy serves), then one coming, leaving and coming back.

import Foundation
import Testing

@Suite(.serialized) struct ProxyMDNSTests {
    static let type = "_esphomelib._tcp"

    /// Starts `bluectl proxy` announcing itself (no --no-mdns) on a free port; returns it and the port.
    static func startProxy(_ bus: PrivateBus, name: String, extra: [String] = []) async throws -> (ChildProcess, Int) {
        let proxy = try bus.startBluectl(["proxy", "--port", "0", "--name", name] + extra, environment: ["BLUECTL_LOG_LEVEL": "info"])
        guard await proxy.waitForStderr(timeout: .seconds(30), { $0.contains("listening on port ") }) else {
            throw BusTierError("bluectl proxy did not listen: \(await proxy.wait(timeout: .seconds(2)))")
        }
        let line = proxy.stderr.split(separator: "\n").first { $0.contains("listening on port ") } ?? ""
        #expect(line.hasSuffix("mDNS through avahi-daemon"), "\(line)")
        let port = try #require(Int(String(line.split(separator: "listening on port ").last?.prefix { $0.isNumber } ?? "")))
        return (proxy, port)
    }

    /// Waits for the proxy's log line saying Avahi established `name`.
    static func waitAnnounced(_ proxy: ChildProcess, as name: String) async throws {
        guard await proxy.waitForStderr(timeout: .seconds(30), { $0.contains("announced over mDNS as \"\(name)\"") }) else {
            throw BusTierError("the proxy was not announced as \"\(name)\": \(proxy.stderr)")
        }
    }

    /// The services Avahi resolves named `name` (waiting up to 10 s for one, when `present`, or for none).
    static func services(_ bus: PrivateBus, named name: String, present: Bool = true) async throws -> [AvahiDaemon.Service] {
        var found: [AvahiDaemon.Service] = []
        _ = try await bus.eventually(timeout: .seconds(10)) {
            found = try await AvahiDaemon.browse(bus, type).filter { $0.name == name }
            return found.isEmpty != present
        }
        return found
    }

    static func bluectlVersion(_ bus: PrivateBus) async throws -> String {
        let result = try await bus.runBluectl(["--version"])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func announcedWithESPHomesRecordsThenGoneAfterSIGTERM() async throws {
        try await withPrivateBus { bus in
            _ = try await AvahiDaemon.start(on: bus)
            let (proxy, port) = try await Self.startProxy(bus, name: "attic-proxy")
            try await Self.waitAnnounced(proxy, as: "attic-proxy")
            let service = try #require(try await Self.services(bus, named: "attic-proxy").first)
            #expect(service.port == port)
            #expect(service.address == "127.0.0.1")
            #expect(service.host == "bluectl-bus.local", "the host's own name, as Avahi publishes it")
            let version = try await Self.bluectlVersion(bus)
            #expect(service.txt == ["board=host", "friendly_name=attic-proxy", "mac=00aa01000023", "version=\(version)"],
                    "ESPHome's keys; no api_encryption in plaintext")
            // Home Assistant's client at what Avahi resolved: the unique id Home Assistant takes
            // from the TXT record's mac is the device info's mac_address.
            let info = try #require(try await ProxyTests.runClient(bus, ["info", service.address, String(service.port)]).first)
            #expect(info["name"]?.string == "attic-proxy")
            let mac = try #require(service.txt.first { $0.hasPrefix("mac=") }?.dropFirst(4))
            #expect(info["mac_address"]?.string?.lowercased().filter { $0 != ":" } == String(mac))
            #expect(info["mac_address"]?.string == AdapterSpec.hci0.address)
            proxy.signal(SIGTERM)
            let end = await proxy.wait(timeout: .seconds(15))
            #expect(end.exitCode == 143, "\(end)")
            #expect(!end.stderr.contains("[warning]"), "\(end.stderr)")
            #expect(try await Self.services(bus, named: "attic-proxy", present: false).isEmpty, "withdrawn on exit")
        }
    }

    @Test func encryptedProxySaysNoiseIsRequired() async throws {
        try await withPrivateBus { bus in
            _ = try await AvahiDaemon.start(on: bus)
            let keyFile = bus.directory.appendingPathComponent("api.key").path
            #expect(FileManager.default.createFile(atPath: keyFile, contents: Data((ProxyTests.key + "\n").utf8),
                                                   attributes: [.posixPermissions: 0o600]))
            let (proxy, _) = try await Self.startProxy(bus, name: "noise-proxy", extra: ["--key-file", keyFile])
            try await Self.waitAnnounced(proxy, as: "noise-proxy")
            let service = try #require(try await Self.services(bus, named: "noise-proxy").first)
            #expect(service.txt.contains("api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256"), "\(service.txt)")
            proxy.signal(SIGINT)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 130)
        }
    }

    @Test func aNameTakenIsReplacedByAvahisAlternative() async throws {
        try await withPrivateBus { bus in
            _ = try await AvahiDaemon.start(on: bus)
            // Another `_esphomelib._tcp` service named "kitchen" on this host first.
            let other = try bus.spawn(AvahiDaemon.publisher, ["-s", "kitchen", Self.type, "1234"])
            guard await other.waitForStderr(timeout: .seconds(20), { $0.contains("Established under name 'kitchen'") }) else {
                throw BusTierError("avahi-publish did not publish: \(await other.wait(timeout: .seconds(2)))")
            }
            let (proxy, port) = try await Self.startProxy(bus, name: "kitchen")
            try await Self.waitAnnounced(proxy, as: "kitchen #2")
            #expect(proxy.stderr.contains("proxy: mDNS: \"kitchen\" is taken on the network: announced as \"kitchen #2\""), "\(proxy.stderr)")
            #expect(try await Self.services(bus, named: "kitchen #2").first?.port == port)
            #expect(try await Self.services(bus, named: "kitchen").first?.port == 1234, "the other service is left alone")
            proxy.signal(SIGTERM)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 143)
            #expect(try await Self.services(bus, named: "kitchen #2", present: false).isEmpty)
        }
    }

    @Test func noAvahiOneWarningThenAnnouncedWhenItComesAndAgainAfterARestart() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await Self.startProxy(bus, name: "shed-proxy")
            guard await proxy.waitForStderr(timeout: .seconds(10), { $0.contains("not announced over mDNS") }) else {
                throw BusTierError("no warning without avahi-daemon: \(proxy.stderr)")
            }
            let warnings = proxy.stderr.split(separator: "\n").filter { $0.contains("[warning]") }
            #expect(warnings.count == 1, "\(warnings)")
            #expect(warnings.first?.hasSuffix("proxy: not announced over mDNS: avahi-daemon is not running (org.freedesktop.Avahi is not on "
                                             + "the system bus); add the proxy in Home Assistant by host and port (announced if avahi-daemon starts)") == true,
                    "\(warnings)")
            // The proxy serves all the same.
            let info = try #require(try await ProxyTests.runClient(bus, ["info", "127.0.0.1", String(port)]).first)
            #expect(info["name"]?.string == "shed-proxy")

            let avahi = try await AvahiDaemon.start(on: bus)
            try await Self.waitAnnounced(proxy, as: "shed-proxy")
            #expect(try await Self.services(bus, named: "shed-proxy").first?.port == port)

            try await avahi.stop(bus)
            guard await proxy.waitForStderr(timeout: .seconds(10), { $0.contains("avahi-daemon left the system bus") }) else {
                throw BusTierError("avahi-daemon's leaving not seen: \(proxy.stderr)")
            }
            _ = try await AvahiDaemon.start(on: bus)
            guard await proxy.waitForStderr(timeout: .seconds(30), {
                $0.components(separatedBy: "announced over mDNS as \"shed-proxy\"").count == 3
            }) else {
                throw BusTierError("not announced again after avahi-daemon's restart: \(proxy.stderr)")
            }
            #expect(try await Self.services(bus, named: "shed-proxy").first?.port == port)
            proxy.signal(SIGTERM)
            #expect(await proxy.wait(timeout: .seconds(15)).exitCode == 143)
        }
    }
}
