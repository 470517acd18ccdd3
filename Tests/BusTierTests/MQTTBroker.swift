// A real MQTT broker for the gateway's tests: Debian's mosquitto, started per
// test on a free loopback port with a configuration and a persistence folder of
// its own (so a restart keeps the sessions, as a production broker does), and
// mosquitto_sub as the reader of what reached it.

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice for port 0).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BusTierError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw BusTierError("bind: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// One mosquitto on `port`, stopped and started again on the same port and folder.
final class MosquittoBroker: @unchecked Sendable {
    // @unchecked: used by one test's task only.
    let port: Int
    let folder: String
    private var process: ChildProcess?

    /// With `tls`, a second listener on `tlsPort`: TLS with a certificate for 127.0.0.1 signed by
    /// `ca.crt` (made here with openssl; `other-ca.crt` signs nothing of it), and only the user
    /// `gateway` with the password `secret` admitted.
    let tlsPort: Int?

    init(tls: Bool = false) async throws {
        port = try freeLoopbackPort()
        tlsPort = tls ? try freeLoopbackPort() : nil
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-mqtt-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var config = """
            per_listener_settings true
            persistence true
            persistence_location \(folder)/
            log_dest stderr
            log_type all
            user \(String(cString: getpwuid(getuid()).pointee.pw_name))
            listener \(port) 127.0.0.1
            allow_anonymous true

            """
        if let tlsPort {
            try await makeCertificates(in: folder)
            try await run("/usr/bin/mosquitto_passwd", ["-b", "-c", folder + "/passwd", "gateway", "secret"])
            config += """
                listener \(tlsPort) 127.0.0.1
                cafile \(folder)/ca.crt
                certfile \(folder)/server.crt
                keyfile \(folder)/server.key
                allow_anonymous false
                password_file \(folder)/passwd

                """
        }
        try config.write(toFile: folder + "/mosquitto.conf", atomically: false, encoding: .utf8)
    }

    var tlsURL: String { "mqtts://127.0.0.1:\(tlsPort ?? 0)" }

    var url: String { "mqtt://127.0.0.1:\(port)" }
    var log: String { process?.stderr ?? "" }

    /// Starts the broker and waits until it listens.
    func start() async throws {
        let child = try ChildProcess("/usr/sbin/mosquitto", ["-c", folder + "/mosquitto.conf"])
        process = child
        guard await child.waitForStderr(timeout: .seconds(15), { $0.contains("running") }) else {
            throw BusTierError("mosquitto did not start: \(child.stderr)")
        }
    }

    /// SIGTERM (mosquitto saves its sessions), then waits for it to end.
    func stop() async {
        guard let process else { return }
        process.signal(SIGTERM)
        _ = await process.wait(timeout: .seconds(10))
        self.process = nil
    }

    /// SIGSTOP: it still takes connections' bytes (the kernel does) and answers nothing.
    func pause() { process?.signal(SIGSTOP) }

    /// SIGKILL, then waits for it to end: the sessions it had not saved are gone.
    func crash() async {
        guard let process else { return }
        process.signal(SIGKILL)
        _ = await process.wait(timeout: .seconds(10))
        self.process = nil
    }

    deinit {
        process?.signal(SIGKILL)
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// mosquitto_sub on `topics` with a persistent session (QoS 1, clean session
    /// off), printing "TOPIC PAYLOAD" lines; returns once a probe published after
    /// it started has reached it, so it is subscribed.
    func subscribe(_ topics: [String] = ["bluectl/#", "homeassistant/#"]) async throws -> MQTTReader {
        let id = "reader-\(UUID().uuidString.prefix(8))"
        let child = try ChildProcess("/usr/bin/mosquitto_sub",
                                     ["-h", "127.0.0.1", "-p", String(port)] + (topics + ["probe/#"]).flatMap { ["-t", $0] }
                                     + ["-v", "-q", "1", "-c", "-i", id])
        let reader = MQTTReader(child)
        for attempt in 0..<50 {
            _ = try await ChildProcess("/usr/bin/mosquitto_pub",
                                       ["-h", "127.0.0.1", "-p", String(port), "-t", "probe/\(attempt)", "-m", "x", "-q", "1"])
                .wait(timeout: .seconds(10))
            if await child.waitForStdout(timeout: .milliseconds(200), { $0.contains("probe/") }) { return reader }
        }
        throw BusTierError("mosquitto_sub did not subscribe: \(child.stderr)")
    }
}

/// What a mosquitto_sub printed, as (topic, payload) pairs.
struct MQTTReader: Sendable {
    let process: ChildProcess

    init(_ process: ChildProcess) { self.process = process }

    var messages: [(topic: String, payload: String)] {
        process.stdout.split(separator: "\n").compactMap { line -> (topic: String, payload: String)? in
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { return nil }
            return (String(parts[0]), String(parts[1]))
        }
    }

    /// The payloads published on `topic`, in order of arrival.
    func payloads(_ topic: String) -> [String] { messages.filter { $0.topic == topic }.map(\.payload) }

    /// Waits until `check` holds for what arrived.
    func wait(timeout: Duration, _ check: (MQTTReader) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if check(self) { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return check(self)
    }

    func stop() { process.signal(SIGKILL) }
}

/// Runs a tool to its end; throws with its output when it fails.
private func run(_ tool: String, _ arguments: [String]) async throws {
    let result = try await ChildProcess(tool, arguments).wait(timeout: .seconds(60))
    guard result.exitCode == 0 else { throw BusTierError("\(result)") }
}

/// A CA (`ca.crt`), a server certificate it signs for 127.0.0.1 (`server.crt`, `server.key`),
/// and another CA that signs nothing here (`other-ca.crt`), made with openssl in `folder`.
private func makeCertificates(in folder: String) async throws {
    let openssl = "/usr/bin/openssl"
    for (name, subject) in [("ca", "/CN=bluectl test CA"), ("other-ca", "/CN=bluectl other CA")] {
        try await run(openssl, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject,
                                "-keyout", "\(folder)/\(name).key", "-out", "\(folder)/\(name).crt"])
    }
    try await run(openssl, ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                            "-keyout", folder + "/server.key", "-out", folder + "/server.csr"])
    try "subjectAltName=IP:127.0.0.1\n".write(toFile: folder + "/server.ext", atomically: false, encoding: .utf8)
    try await run(openssl, ["x509", "-req", "-in", folder + "/server.csr", "-CA", folder + "/ca.crt", "-CAkey", folder + "/ca.key",
                            "-CAcreateserial", "-days", "2", "-extfile", folder + "/server.ext", "-out", folder + "/server.crt"])
}
