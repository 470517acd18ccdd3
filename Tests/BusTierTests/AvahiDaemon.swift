// A real avahi-daemon (Debian's, installed by Scripts/deps) on a test's
// private bus, for `bluectl proxy`'s mDNS announcement (ProxyMDNSTests).
//
// Each daemon runs in a network and mount namespace of its own
// (unshare(1), as root): its mDNS traffic stays on that namespace's
// loopback (no other test's daemon, nor the host's network, sees its
// names, so parallel tests never collide), and a tmpfs on /run gives it a
// pid file and socket of its own (avahi-daemon refuses to start while
// another's pid file names a live process). The daemon owns
// org.freedesktop.Avahi on the private bus (its policy lets anyone own any
// name) and is reached only through it. Debug output: BUS_TIER_KEEP=1 keeps
// the bus's directory, with avahi.conf.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

final class AvahiDaemon: @unchecked Sendable {
    static let executable = "/usr/sbin/avahi-daemon"
    static let browser = "/usr/bin/avahi-browse"
    static let publisher = "/usr/bin/avahi-publish"

    let child: ChildProcess

    private init(child: ChildProcess) { self.child = child }

    /// Starts avahi-daemon on `bus`, its host name `hostName`; returns once it
    /// owns org.freedesktop.Avahi and its server runs.
    static func start(on bus: PrivateBus, hostName: String = "bluectl-bus") async throws -> AvahiDaemon {
        guard FileManager.default.isExecutableFile(atPath: executable), FileManager.default.isExecutableFile(atPath: browser) else {
            throw BusTierError("no \(executable) or \(browser): run Scripts/deps (avahi-daemon, avahi-utils)")
        }
        guard geteuid() == 0 else {
            throw BusTierError("avahi-daemon runs in its own network and mount namespace, which needs root (unshare --net --mount)")
        }
        let config = bus.directory.appendingPathComponent("avahi.conf")
        // Loopback only, IPv4 only (the proxy's family), nothing of its own published but the host's address.
        try """
            [server]
            host-name=\(hostName)
            use-ipv4=yes
            use-ipv6=no
            allow-interfaces=lo
            enable-dbus=yes
            [wide-area]
            enable-wide-area=no
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """.write(to: config, atomically: true, encoding: .utf8)
        let script = """
            set -e
            mount -t tmpfs tmpfs /run
            ip link set lo up
            exec \(executable) --no-drop-root --no-chroot --no-rlimits --no-proc-title -f "$1"
            """
        let child = try bus.spawn("/usr/bin/unshare", ["--net", "--mount", "/bin/sh", "-c", script, "avahi", config.path])
        let daemon = AvahiDaemon(child: child)
        guard await child.waitForStderr(timeout: .seconds(30), { $0.contains("Server startup complete") }) else {
            throw BusTierError("avahi-daemon did not start: \(await child.wait(timeout: .seconds(2)))")
        }
        guard try await bus.eventually(timeout: .seconds(10), { try await bus.owner(of: "org.freedesktop.Avahi") != nil }) else {
            throw BusTierError("avahi-daemon does not own org.freedesktop.Avahi: \(child.stderr)")
        }
        return daemon
    }

    /// Stops it (SIGTERM, as systemd does) and waits for it to leave the bus.
    func stop(_ bus: PrivateBus) async throws {
        child.signal(SIGTERM)
        _ = await child.wait(timeout: .seconds(10))
        guard try await bus.eventually(timeout: .seconds(10), { try await bus.owner(of: "org.freedesktop.Avahi") == nil }) else {
            throw BusTierError("org.freedesktop.Avahi still owned after avahi-daemon's SIGTERM")
        }
    }

    /// One resolved service as `avahi-browse -p` prints it.
    struct Service: Equatable {
        var name: String
        var host: String
        var address: String
        var port: Int
        /// The TXT strings, without their quotes, sorted (Avahi lists them in its own order).
        var txt: [String]
    }

    /// The services of `type` Avahi knows now, resolved (`avahi-browse -rpt`).
    static func browse(_ bus: PrivateBus, _ type: String) async throws -> [Service] {
        let result = try await bus.spawn(browser, ["--resolve", "--parsable", "--terminate", type]).wait(timeout: .seconds(20))
        guard result.exitCode == 0 else { throw BusTierError("avahi-browse \(type): \(result)") }
        // =;lo;IPv4;NAME;TYPE;DOMAIN;HOST;ADDRESS;PORT;"k=v" "k=v"
        return result.stdout.split(separator: "\n").compactMap { line -> Service? in
            let fields = line.split(separator: ";", maxSplits: 9, omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 10, fields[0] == "=", let port = Int(fields[8]) else { return nil }
            let txt = fields[9].split(separator: "\" \"").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            return Service(name: unescape(fields[3]), host: fields[6], address: fields[7], port: port, txt: txt.sorted())
        }
    }

    /// avahi-browse's escapes in names: "\032" is a byte in decimal, "\." a dot.
    static func unescape(_ text: String) -> String {
        var bytes: [UInt8] = []
        var rest = Substring(text).utf8[...]
        while let byte = rest.first {
            rest = rest.dropFirst()
            guard byte == UInt8(ascii: "\\") else { bytes.append(byte); continue }
            let digits = rest.prefix(3)
            if digits.count == 3, let value = UInt8(String(decoding: digits, as: UTF8.self)) {
                bytes.append(value)
                rest = rest.dropFirst(3)
            } else if let next = rest.first {
                bytes.append(next)
                rest = rest.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
