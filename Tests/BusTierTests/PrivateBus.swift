// Bus tier harness: a private dbus-daemon per test, the BlueZ stand-in
// (python-dbusmock + Fixtures/bluez_standin.py) on it, and the real bluectl
// binary pointed at it through DBUS_SYSTEM_BUS_ADDRESS.
//
//     @Test func example() async throws {
//         try await withPrivateBus { bus in                 // hci0 powered, by default
//             try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:FF", [.name("HR"), .rssi(-50)])
//             let r = try await bus.runBluectl(["scan", "--json", "--timeout", "2"])
//             #expect(r.exitCode == 0)
//         }
//     }
//
// Everything a test starts is torn down when the closure returns or throws
// (processes killed, temp dir removed). Tests may run in parallel: each has
// its own bus, socket and temp dir; BusSlots bounds how many buses run at
// once (default: 2 × CPUs within 4…8; BUS_TIER_PARALLEL overrides).
// If the test process dies, its buses still end: dbus-daemon runs under
// timeout(1) (30 min), and the stand-in and bluectl leave with their bus.
// BUS_TIER_KEEP=1 keeps each bus's temp dir (stand-in log: standin.log).
//
// A sanitizer report from bluectl fails the test that ran it, whatever the
// test itself checks (see SanitizerReports): every child whose command line
// names the bluectl executable runs with halt_on_error=1 and has its stderr
// searched when it is waited for or when its bus is torn down.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Errors

struct BusTierError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Locations

enum BusTier {
    static let python = "/usr/bin/python3"
    static let dbusDaemon = "/usr/bin/dbus-daemon"
    static let busctl = "/usr/bin/busctl"
    static let dbusMonitor = "/usr/bin/dbus-monitor"

    /// Fixtures/ as copied into the test bundle's resources (falls back to the
    /// source tree).
    static let fixtures: URL = {
        if let url = Bundle.module.url(forResource: "Fixtures", withExtension: nil),
           FileManager.default.fileExists(atPath: url.appendingPathComponent("bluez_standin.py").path) {
            return url
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    }()

    static func fixture(_ name: String) -> String { fixtures.appendingPathComponent(name).path }

    /// The bluectl executable built next to this test bundle
    /// (.build/<triple>/<config>/bluectl); BLUECTL_BIN overrides.
    static func bluectlExecutable() throws -> String {
        let env = ProcessInfo.processInfo.environment
        if let explicit = env["BLUECTL_BIN"], !explicit.isEmpty { return explicit }
        return try builtExecutable("bluectl")
    }

    /// An executable of this package built next to this test bundle (the
    /// examples: "ScanExample", …).
    static func builtExecutable(_ name: String) throws -> String {
        var dirs: [URL] = []
        if let executableDirectory { dirs.append(executableDirectory) }
        if let arg0 = CommandLine.arguments.first {
            dirs.append(URL(fileURLWithPath: arg0).standardizedFileURL.resolvingSymlinksInPath().deletingLastPathComponent())
        }
        dirs.append(Bundle.main.bundleURL.deletingLastPathComponent())
        dirs.append(Bundle.main.bundleURL)
        dirs.append(Bundle.module.bundleURL.deletingLastPathComponent())
        for bundle in Bundle.allBundles {
            dirs.append(bundle.bundleURL.deletingLastPathComponent())
        }
        for dir in dirs {
            var d = dir
            // inside a .xctest bundle directory (macOS layout): go up to the build dir
            while d.pathExtension == "xctest" || d.lastPathComponent == "MacOS" || d.lastPathComponent == "Contents" {
                d = d.deletingLastPathComponent()
            }
            let candidate = d.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw BusTierError("\(name) executable not found next to the test bundle (looked in \(dirs.map(\.path)))\(name == "bluectl" ? "; set BLUECTL_BIN" : "")")
    }

    /// A path for a fixture a test writes at run time under one name: in the
    /// directory of the running test executable (its build's: .build*/<triple>/<config>),
    /// so that runs of two builds at once (CI runs the ASan and the TSan tests
    /// together) never share the file, and the runs of one build leave one file,
    /// not one each. The temporary directory where that directory is unknown.
    static func runFile(_ name: String) -> String {
        (executableDirectory ?? FileManager.default.temporaryDirectory).appendingPathComponent(name).path
    }

    /// The directory of the running test executable (/proc/self/exe's).
    private static let executableDirectory: URL? =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            .map { URL(fileURLWithPath: $0).deletingLastPathComponent() }

    /// Environment for children: the caller's, minus anything that would
    /// point them at another bus or Python.
    static func baseEnvironment() -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        for key in ["DBUS_SYSTEM_BUS_ADDRESS", "DBUS_SESSION_BUS_ADDRESS", "DBUS_STARTER_ADDRESS",
                    "DBUS_STARTER_BUS_TYPE", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"] {
            env.removeValue(forKey: key)
        }
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env["LC_ALL"] = "C.UTF-8"
        return env
    }

    /// Runs bluectl with an environment of the caller's choosing (e.g. no bus).
    static func runBluectl(_ arguments: [String], environment: [String: String],
                           timeout: Duration = .seconds(20)) async throws -> ProcessResult {
        var env = baseEnvironment()
        env.merge(environment) { _, new in new }
        return try await runProcess(try bluectlExecutable(), arguments, environment: env, timeout: timeout)
    }
}

// MARK: - Concurrency bound

actor BusSlots {
    static let shared = BusSlots()

    private var available: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init() {
        let env = ProcessInfo.processInfo.environment["BUS_TIER_PARALLEL"].flatMap { Int($0) }
        // Bus tests mostly wait (scan timeouts), so more buses than CPUs is fine.
        available = max(1, env ?? min(8, max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)))
    }

    func acquire() async {
        if available > 0 { available -= 1; return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty { available += 1 } else { waiters.removeFirst().resume() }
    }
}

// MARK: - The private bus

final class PrivateBus: @unchecked Sendable {
    let directory: URL
    /// The address dbus-daemon printed (unix:path=…,guid=…).
    let address: String
    private let daemon: ChildProcess
    private let lock = NSLock()
    private var standIn: ChildProcess?
    private var children: [ChildProcess] = []
    private var stopped = false

    var standInLog: String { (try? String(contentsOf: directory.appendingPathComponent("standin.log"), encoding: .utf8)) ?? "" }
    var daemonStderr: String { daemon.stderr }

    /// Environment for clients of this bus (bluectl, Python, tools).
    var environment: [String: String] {
        var env = BusTier.baseEnvironment()
        env["DBUS_SYSTEM_BUS_ADDRESS"] = address
        return env
    }

    private init(directory: URL, address: String, daemon: ChildProcess) {
        self.directory = directory
        self.address = address
        self.daemon = daemon
    }

    /// Starts dbus-daemon (and the stand-in with `adapters`, unless `standIn` is false).
    /// `deny`: (interface, member) pairs the bus policy refuses to send (AccessDenied).
    /// `experimental`: the stand-in as bluetoothd -E (AdvertisementMonitorManager1 on each adapter).
    static func start(standIn: Bool = true, adapters: [AdapterSpec] = [.hci0],
                      deny: [(interface: String, member: String)] = [], experimental: Bool = false) async throws -> PrivateBus {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("bluectl-bus-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let socket = dir.appendingPathComponent("system_bus_socket").path
        let daemon: ChildProcess
        do {
            var config = BusTier.fixture("bus.conf")
            if !deny.isEmpty {
                let rules = deny.map { "    <deny send_interface=\"\($0.interface)\" send_member=\"\($0.member)\"/>\n" }.joined()
                let text = try String(contentsOfFile: config, encoding: .utf8)
                    .replacingOccurrences(of: "  </policy>", with: rules + "  </policy>")
                config = dir.appendingPathComponent("bus.conf").path
                try text.write(toFile: config, atomically: true, encoding: .utf8)
            }
            let argv = [BusTier.dbusDaemon, "--config-file=\(config)", "--nofork", "--nopidfile",
                        "--address=unix:path=\(socket)", "--print-address=1"]
            // an orphaned bus (test process killed) must not live forever
            let watchdog = "/usr/bin/timeout"
            daemon = FileManager.default.isExecutableFile(atPath: watchdog)
                ? try ChildProcess(watchdog, ["1800"] + argv, environment: BusTier.baseEnvironment())
                : try ChildProcess(argv[0], Array(argv.dropFirst()), environment: BusTier.baseEnvironment())
        } catch {
            try? FileManager.default.removeItem(at: dir)
            throw error
        }
        guard await daemon.waitForStdout(timeout: .seconds(10), { $0.contains("\n") }) else {
            daemon.stopNow()
            try? FileManager.default.removeItem(at: dir)
            throw BusTierError("dbus-daemon did not print its address: \(await daemon.wait(timeout: .seconds(1)))")
        }
        let address = daemon.stdout.split(separator: "\n").first.map(String.init) ?? ""
        let bus = PrivateBus(directory: dir, address: address, daemon: daemon)
        if standIn {
            do {
                try await bus.startStandIn(adapters: adapters, experimental: experimental)
            } catch {
                bus.stop()
                throw error
            }
        }
        return bus
    }

    /// Starts the stand-in (again, after `stopStandIn`: as when bluetoothd restarts).
    func startStandIn(adapters: [AdapterSpec], experimental: Bool = false) async throws {
        let params: [String: Any] = ["adapters": adapters.map {
            ["name": $0.name, "address": $0.address, "alias": $0.alias, "powered": $0.powered] as [String: Any]
        }, "experimental": experimental]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: params), as: UTF8.self)
        let child = try ChildProcess(BusTier.python, [
            "-m", "dbusmock", "--system", "--template", BusTier.fixture("bluez_standin.py"),
            "--logfile", directory.appendingPathComponent("standin.log").path, "-p", json,
        ], environment: environment)
        lock.withLock { standIn = child }
        // Ready when the stand-in answers on org.bluez. Generous: under TSan, four buses'
        // sanitized bluectl processes on two cores kept a python start past 15 s
        // (CI on a quiet machine, twice in 548 tests); a start is set-up, not what is tested.
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let probe = try await runProcess(BusTier.busctl, [
                "--address=\(address)", "call", "org.bluez", "/", "org.freedesktop.DBus.Mock", "StandInVersion",
            ], timeout: .seconds(5))
            if probe.exitCode == 0 && probe.stdout.contains("bluez_standin") { return }
            if !child.isRunning {
                throw BusTierError("the BlueZ stand-in exited: \(await child.wait(timeout: .seconds(1)))\n\(standInLog)")
            }
            if ContinuousClock.now >= deadline {
                throw BusTierError("the BlueZ stand-in did not come up on \(address): \(probe)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Kills everything this bus started and removes its directory. Idempotent.
    func stop() {
        let (all, already): ([ChildProcess], Bool) = lock.withLock {
            defer { stopped = true }
            return (children + (standIn.map { [$0] } ?? []), stopped)
        }
        if already { return }
        for c in all { c.kill9() }
        for c in all { c.stopNow(grace: 0.5) }
        // bluectl children never waited for (background ones the test left running)
        for c in all { c.recordSanitizerReports() }
        daemon.stopNow()
        if ProcessInfo.processInfo.environment["BUS_TIER_KEEP"] == nil {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    deinit { stop() }

    /// Stops the stand-in only (org.bluez leaves the bus, as when bluetoothd stops).
    func stopStandIn() async {
        let c = lock.withLock { () -> ChildProcess? in defer { standIn = nil }; return standIn }
        c?.signal(SIGTERM)
        _ = await c?.wait(timeout: .seconds(5))
    }

    private func track(_ child: ChildProcess) {
        lock.withLock { children.append(child) }
    }

    // MARK: generic clients

    /// Starts a child on this bus; it is killed at teardown if still running.
    func spawn(_ executable: String, _ arguments: [String], environment extra: [String: String] = [:],
               input: Bool = false) throws -> ChildProcess {
        var env = environment
        env.merge(extra) { _, new in new }
        let child = try ChildProcess(executable, arguments, environment: env, input: input)
        track(child)
        return child
    }

    func busctl(_ arguments: [String], timeout: Duration = .seconds(15)) async throws -> ProcessResult {
        try await spawn(BusTier.busctl, ["--address=\(address)"] + arguments).wait(timeout: timeout)
    }

    /// Method call through busctl; returns the reply's values (see BusctlText).
    @discardableResult
    func call(_ destination: String, _ path: String, _ interface: String, _ method: String,
              _ args: [BusValue] = [], timeout: Duration = .seconds(30)) async throws -> [JSONValue] {
        var argv = ["--timeout=\(Int(timeout.components.seconds))", "call",
                    destination, path, interface, method]
        if !args.isEmpty {
            argv += ["--", args.map(\.signature).joined()] + args.flatMap(\.words)
        }
        let r = try await busctl(argv, timeout: timeout + .seconds(5))
        guard r.exitCode == 0 else {
            throw BusTierError("\(interface).\(method) on \(path) failed: \(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        return try BusctlText.parse(r.stdout).values
    }

    /// A property as {"type": sig, "data": value}.
    func property(_ path: String, _ interface: String, _ name: String) async throws -> JSONValue {
        let r = try await busctl(["get-property", "org.bluez", path, interface, name])
        guard r.exitCode == 0 else {
            throw BusTierError("get-property \(path) \(interface).\(name): \(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        let (sig, values) = try BusctlText.parse(r.stdout)
        return .object(["type": .string(sig), "data": values.first ?? .null])
    }

    func adapterProperty(_ adapter: String, _ name: String) async throws -> JSONValue? {
        try await property("/org/bluez/\(adapter)", "org.bluez.Adapter1", name)["data"]
    }

    func managedObjects() async throws -> [String: JSONValue] {
        try await call("org.bluez", "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
            .first?.object ?? [:]
    }

    /// The unique name owning `name` (nil if none).
    func owner(of name: String) async throws -> String? {
        let r = try await busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                  "org.freedesktop.DBus", "GetNameOwner", "s", name])
        guard r.exitCode == 0 else { return nil }
        return try BusctlText.parse(r.stdout).values.first?.string
    }

    /// Runs a Python script (with dbus-python) against this bus.
    func runPython(_ script: String, _ arguments: [String] = [], timeout: Duration = .seconds(20)) async throws -> ProcessResult {
        try await spawn(BusTier.python, ["-c", script] + arguments).wait(timeout: timeout)
    }

    func startPython(_ script: String, _ arguments: [String] = []) throws -> ChildProcess {
        try spawn(BusTier.python, ["-c", script] + arguments)
    }

    /// dbus-monitor on this bus, ready (its own NameAcquired seen) when returned.
    func startMonitor(_ matchRules: [String] = []) async throws -> ChildProcess {
        let m = try spawn(BusTier.dbusMonitor, ["--address", address] + matchRules)
        guard await m.waitForStdout(timeout: .seconds(10), { $0.contains("member=NameAcquired") }) else {
            throw BusTierError("dbus-monitor did not start: \(await m.wait(timeout: .seconds(1)))")
        }
        return m
    }

    /// Runs Fixtures/rogue_emitter.py (a non-owner faking BlueZ's signals).
    func runRogueEmitter(_ arguments: [String] = []) async throws -> ProcessResult {
        try await spawn(BusTier.python, [BusTier.fixture("rogue_emitter.py")] + arguments).wait(timeout: .seconds(20))
    }

    // MARK: bluectl

    /// Runs the real bluectl against this bus with a hard timeout (killed and
    /// reported as timedOut when it runs out).
    func runBluectl(_ arguments: [String], timeout: Duration = .seconds(20),
                    environment extra: [String: String] = [:]) async throws -> ProcessResult {
        try await startBluectl(arguments, environment: extra).wait(timeout: timeout)
    }

    /// Starts bluectl in the background (stream its output, signal it, wait).
    func startBluectl(_ arguments: [String], environment extra: [String: String] = [:], input: Bool = false) throws -> ChildProcess {
        try spawn(try BusTier.bluectlExecutable(), arguments, environment: extra, input: input)
    }

    // MARK: waiting

    /// Polls `check` until it returns true or the time is up.
    func eventually(timeout: Duration = .seconds(5), _ check: () async throws -> Bool) async throws -> Bool {
        try await BusTierTests.eventually(timeout: timeout, check)
    }
}

/// Runs `body` with a fresh private bus (stand-in with `adapters`, unless
/// `standIn` is false); tears everything down afterwards, also on failure
/// (then the stand-in's log is printed to help).
func withPrivateBus<T>(standIn: Bool = true, adapters: [AdapterSpec] = [.hci0],
                       deny: [(interface: String, member: String)] = [], experimental: Bool = false,
                       _ body: (PrivateBus) async throws -> T) async throws -> T {
    await BusSlots.shared.acquire()
    let bus: PrivateBus
    do {
        bus = try await PrivateBus.start(standIn: standIn, adapters: adapters, deny: deny, experimental: experimental)
    } catch {
        await BusSlots.shared.release()
        throw error
    }
    do {
        let result = try await body(bus)
        bus.stop()
        await BusSlots.shared.release()
        return result
    } catch {
        let log = bus.standInLog
        bus.stop()
        await BusSlots.shared.release()
        if !log.isEmpty {
            FileHandle.standardError.write(Data("--- BlueZ stand-in log (\(error)) ---\n\(log.suffix(6000))\n".utf8))
        }
        throw error
    }
}
