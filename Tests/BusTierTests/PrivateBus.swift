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
import Testing

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

// MARK: - JSON values (busctl --json output, bluectl --json lines)

enum JSONValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses one JSON text (JSONSerialization: fast enough for 100,000 lines).
    static func parse(_ text: String) throws -> JSONValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            throw BusTierError("not JSON: \(text.debugDescription): \(error)")
        }
        return try JSONValue(foundation: object)
    }

    private init(foundation value: Any) throws {
        switch value {
        case is NSNull:
            self = .null
        case let s as String:
            self = .string(s)
        case let n as NSNumber:
            // JSON true/false come as the boolean NSNumber subclass (NSNumber bridges 0/1 to Bool too)
            if String(describing: type(of: n)).contains("Boolean") {
                self = .bool(n.boolValue)
            } else if let i = Int64(exactly: n) {
                self = .int(i)
            } else {
                self = .double(n.doubleValue)
            }
        case let a as [Any]:
            self = .array(try a.map(JSONValue.init(foundation:)))
        case let o as [String: Any]:
            self = .object(try o.mapValues(JSONValue.init(foundation:)))
        default:
            throw BusTierError("unexpected JSON value \(value)")
        }
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    var string: String? { if case .string(let s) = self { return s }; return nil }
    var bool: Bool? { if case .bool(let b) = self { return b }; return nil }
    var int: Int? { if case .int(let i) = self { return Int(i) }; return nil }
    var array: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    var object: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }
    var keys: Set<String> { Set(object?.keys.map { $0 } ?? []) }
    var strings: [String]? { array?.compactMap(\.string) }

    var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .string(let s): return s.debugDescription
        case .array(let a): return "[" + a.map(\.description).joined(separator: ",") + "]"
        case .object(let o):
            return "{" + o.keys.sorted().map { "\($0.debugDescription):\(o[$0]!)" }.joined(separator: ",") + "}"
        }
    }
}

// MARK: - busctl's text output

/// Parses busctl's (non-JSON) output: "SIGNATURE value…", strings C-quoted,
/// arrays as a count then the elements, variants as "sig value", structs
/// flat. busctl --json cannot print dicts with non-string keys (a{qv}:
/// ManufacturerData) — it fails without a message — hence this parser.
/// Values come out as JSONValue: arrays → .array (ay too), dicts → .object
/// (keys as decimal text for integer keys), structs → .array, variants →
/// {"type": sig, "data": value} (the shape busctl --json uses).
enum BusctlText {
    static func parse(_ text: String) throws -> (signature: String, values: [JSONValue]) {
        var tokens = try tokenize(text)[...]
        guard let sig = tokens.popFirst() else { return ("", []) }
        var values: [JSONValue] = []
        for type in try splitTypes(sig) {
            values.append(try value(type, &tokens))
        }
        guard tokens.isEmpty else { throw BusTierError("busctl output: trailing tokens in \(text.debugDescription)") }
        return (sig, values)
    }

    private static func tokenize(_ text: String) throws -> [String] {
        var tokens: [String] = []
        var chars = Array(text.unicodeScalars)[...]
        while let c = chars.first {
            if c == " " || c == "\n" || c == "\t" || c == "\r" { chars.removeFirst(); continue }
            if c == "\"" {
                chars.removeFirst()
                var bytes: [UInt8] = []
                var closed = false
                while let d = chars.popFirst() {
                    if d == "\"" { closed = true; break }
                    if d != "\\" { bytes += Array(String(d).utf8); continue }
                    guard let e = chars.popFirst() else { break }
                    switch e {
                    case "n": bytes.append(0x0a)
                    case "t": bytes.append(0x09)
                    case "r": bytes.append(0x0d)
                    case "a": bytes.append(0x07)
                    case "b": bytes.append(0x08)
                    case "f": bytes.append(0x0c)
                    case "v": bytes.append(0x0b)
                    case "x":
                        var hex = ""
                        while hex.count < 2, let h = chars.first, h.properties.isASCIIHexDigit { hex.unicodeScalars.append(h); chars.removeFirst() }
                        bytes.append(UInt8(hex, radix: 16) ?? 0)
                    case "0"..."7":
                        var oct = String(e)
                        while oct.count < 3, let o = chars.first, ("0"..."7").contains(o) { oct.unicodeScalars.append(o); chars.removeFirst() }
                        bytes.append(UInt8(oct, radix: 8) ?? 0)
                    default: bytes += Array(String(e).utf8)
                    }
                }
                guard closed else { throw BusTierError("busctl output: unterminated string in \(text.debugDescription)") }
                tokens.append(String(decoding: bytes, as: UTF8.self))
            } else {
                var word = ""
                while let d = chars.first, d != " " && d != "\n" && d != "\t" && d != "\r" { word.unicodeScalars.append(d); chars.removeFirst() }
                tokens.append(word)
            }
        }
        return tokens
    }

    /// Splits a signature into its complete types.
    static func splitTypes(_ sig: String) throws -> [String] {
        var out: [String] = []
        var rest = Substring(sig)
        while !rest.isEmpty {
            let n = try completeTypeLength(rest)
            out.append(String(rest.prefix(n)))
            rest = rest.dropFirst(n)
        }
        return out
    }

    private static func completeTypeLength(_ sig: Substring) throws -> Int {
        guard let c = sig.first else { throw BusTierError("empty signature") }
        switch c {
        case "a": return 1 + (try completeTypeLength(sig.dropFirst()))
        case "(", "{":
            let close: Character = c == "(" ? ")" : "}"
            var n = 1
            var rest = sig.dropFirst()
            while let d = rest.first, d != close {
                let m = try completeTypeLength(rest)
                n += m
                rest = rest.dropFirst(m)
            }
            guard rest.first == close else { throw BusTierError("bad signature \(sig)") }
            return n + 1
        default: return 1
        }
    }

    private static func value(_ type: String, _ tokens: inout ArraySlice<String>) throws -> JSONValue {
        func next() throws -> String {
            guard let t = tokens.popFirst() else { throw BusTierError("busctl output ended early (\(type))") }
            return t
        }
        switch type.first {
        case "s", "o", "g": return .string(try next())
        case "b": return .bool(try next() == "true")
        case "y", "n", "q", "i", "u", "x", "t", "h":
            let t = try next()
            guard let v = Int64(t) ?? UInt64(t).map({ Int64(bitPattern: $0) }) else { throw BusTierError("not an integer: \(t)") }
            return .int(v)
        case "d":
            let t = try next()
            return .double(Double(t) ?? .nan)
        case "v":
            let sig = try next()
            return .object(["type": .string(sig), "data": try value(sig, &tokens)])
        case "(":
            let inner = String(type.dropFirst().dropLast())
            return .array(try splitTypes(inner).map { try value($0, &tokens) })
        case "a":
            let count = Int(try next()) ?? 0
            let elem = String(type.dropFirst())
            if elem.first == "{" {
                let kv = try splitTypes(String(elem.dropFirst().dropLast()))
                guard kv.count == 2 else { throw BusTierError("bad dict signature \(type)") }
                var dict: [String: JSONValue] = [:]
                for _ in 0..<count {
                    let k = try value(kv[0], &tokens)
                    let key = k.string ?? k.int.map(String.init) ?? k.description
                    dict[key] = try value(kv[1], &tokens)
                }
                return .object(dict)
            }
            return .array(try (0..<count).map { _ in try value(elem, &tokens) })
        default:
            throw BusTierError("unsupported type \(type) in busctl output")
        }
    }
}

// MARK: - Child processes

struct ProcessResult: Sendable, CustomStringConvertible {
    enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signaled(Int32)
    }

    let command: String
    let termination: Termination
    /// The hard timeout ran out and the process was killed (SIGKILL).
    let timedOut: Bool
    let stdout: String
    let stderr: String
    let duration: Duration

    /// Exit status; 128+N when killed by signal N (as a shell reports it).
    var exitCode: Int32 {
        switch termination {
        case .exited(let c): return c
        case .signaled(let s): return 128 + s
        }
    }

    var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    var stderrLines: [String] { stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }

    /// stdout as JSON lines (throws on a line that is not JSON).
    func jsonLines() throws -> [JSONValue] { try stdoutLines.map(JSONValue.parse) }

    var description: String {
        var s = "`\(command)` → \(termination)\(timedOut ? " (TIMED OUT, killed)" : "") after \(duration)"
        s += "\n--- stdout ---\n" + String(stdout.suffix(4000))
        s += "\n--- stderr ---\n" + String(stderr.suffix(4000))
        return s
    }
}

/// Collects everything written to a pipe (its read end, which it owns and
/// closes), on a dedicated thread.
private final class PipeCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var newlines = 0
    private var finished = false

    init(fd: Int32) {
        let t = Thread { [self] in
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    let chunk = buf[0..<n]
                    let lines = chunk.withUnsafeBytes { raw in raw.reduce(0) { $0 + ($1 == 0x0a ? 1 : 0) } }
                    lock.withLock { data.append(contentsOf: chunk); newlines += lines }
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            close(fd)
            lock.withLock { finished = true }
        }
        t.stackSize = 1 << 18
        t.start()
    }

    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
    var isFinished: Bool { lock.withLock { finished } }
    var lineCount: Int { lock.withLock { newlines } }
}

/// glibc functions Swift's Glibc module does not show (they need _GNU_SOURCE).
private enum Libc {
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    private static let pipe2: Pipe2? = dlsym(nil, "pipe2").map { unsafeBitCast($0, to: Pipe2.self) }
    private static let closeFrom: AddCloseFrom? =
        dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// pipe2(fds, O_CLOEXEC) (falls back to pipe + FD_CLOEXEC).
    static func pipeCloexec(_ fds: UnsafeMutablePointer<Int32>) -> Int32 {
        if let pipe2 { return pipe2(fds, O_CLOEXEC) }
        guard pipe(fds) == 0 else { return -1 }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return 0
    }

    /// posix_spawn_file_actions_addclosefrom_np (glibc ≥ 2.34), if there.
    static func addCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ fd: Int32) {
        _ = closeFrom?(actions, fd)
    }
}

/// Sanitizer reports of bluectl children: one place that sets their options and
/// one check of their stderr, so that a report fails the test even when the test
/// ignores the exit status, or runs bluectl in the background and kills it.
enum SanitizerReports {
    /// Lines that only a sanitizer runtime prints (ASan, LSan, TSan, UBSan).
    static let markers = [
        "==ERROR: AddressSanitizer", "AddressSanitizer:DEADLYSIGNAL", "SUMMARY: AddressSanitizer",
        "ERROR: LeakSanitizer",
        "WARNING: ThreadSanitizer", "ThreadSanitizer:DEADLYSIGNAL", "SUMMARY: ThreadSanitizer",
        "SUMMARY: UndefinedBehaviorSanitizer", "runtime error:",
    ]

    /// `environment` with halt_on_error=1 appended to ASAN_OPTIONS, TSAN_OPTIONS and
    /// UBSAN_OPTIONS (the last value of an option wins, so this one does); options
    /// already set (detect_leaks, …) and LSAN_OPTIONS (suppressions) are kept.
    static func environment(_ environment: [String: String]) -> [String: String] {
        var env = environment
        for key in ["ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"] {
            let existing = env[key].map { $0.hasSuffix(":") || $0.isEmpty ? $0 : $0 + ":" } ?? ""
            env[key] = existing + "halt_on_error=1"
        }
        return env
    }

    /// The lines of `stderr` a sanitizer wrote (empty when none).
    static func findings(in stderr: String) -> [Substring] {
        stderr.split(separator: "\n").filter { line in markers.contains { line.contains($0) } }
    }

    /// Whether `argv` runs bluectl (directly, or as an argument of a shell, setsid or a
    /// Python driver).
    static func runsBluectl(_ argv: [String]) -> Bool {
        guard let bluectl = bluectlPath else { return false }
        return argv.contains(bluectl)
    }

    private static let bluectlPath: String? = try? BusTier.bluectlExecutable()
}

/// A child process started with posix_spawn — not Foundation's Process, for
/// two reasons found here: Process passes on the signal mask of the spawning
/// thread (Swift's worker threads block SIGINT/SIGTERM/…, so children could
/// not be interrupted the way a shell's children can), and its reaping
/// (waitUntilExit/isRunning) was seen to hang with several children started
/// concurrently. Children here start with an empty signal mask, default
/// signal dispositions, stdin from /dev/null, no inherited descriptors
/// beyond 0–2, in their own process group; they are reaped by pid only.
final class ChildProcess: @unchecked Sendable {
    let command: String
    let pid: pid_t
    private let out: PipeCollector
    private let err: PipeCollector
    private let started = ContinuousClock.now
    private let lock = NSLock()
    private var waitStatus: Int32?
    private var endedAt: ContinuousClock.Instant?
    /// bluectl runs in it: its stderr is searched for sanitizer reports (once).
    let runsBluectl: Bool
    /// The write end of the child's stdin, when started with `input: true` (else stdin is /dev/null).
    private var inputFD: Int32?
    private var sanitizerChecked = false

    /// Starts `executable` with `arguments`; `environment` replaces the
    /// inherited one entirely when given.
    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: Bool = false) throws {
        command = ([executable] + arguments).map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ")
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard Libc.pipeCloexec(&outPipe) == 0 else { throw BusTierError("pipe2: \(String(cString: strerror(errno)))") }
        guard Libc.pipeCloexec(&errPipe) == 0 else {
            close(outPipe[0]); close(outPipe[1])
            throw BusTierError("pipe2: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var inPipe: [Int32] = [-1, -1]
        if input {
            guard Libc.pipeCloexec(&inPipe) == 0 else { throw BusTierError("pipe2: \(String(cString: strerror(errno)))") }
            posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        Libc.addCloseFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        sigdelset(&allSignals, SIGKILL)
        sigdelset(&allSignals, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        runsBluectl = SanitizerReports.runsBluectl([executable] + arguments)
        var env = environment ?? ProcessInfo.processInfo.environment
        if runsBluectl { env = SanitizerReports.environment(env) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        if input { close(inPipe[0]) }
        inputFD = input ? inPipe[1] : nil
        guard rc == 0 else {
            if input { close(inPipe[1]) }
            close(outPipe[0]); close(errPipe[0])
            throw BusTierError("cannot start \(command): \(String(cString: strerror(rc)))")
        }
        pid = child
        out = PipeCollector(fd: outPipe[0])
        err = PipeCollector(fd: errPipe[0])
    }

    /// Writes `text` to the child's stdin (started with `input: true`); false when it cannot take it.
    @discardableResult
    func writeInput(_ text: String) -> Bool {
        guard let fd = lock.withLock({ inputFD }) else { return false }
        _ = Glibc.signal(SIGPIPE, SIG_IGN)   // a child gone: EPIPE here, not the end of the test process
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return false }
            bytes = bytes.dropFirst(n)
        }
        return true
    }

    /// Closes the child's stdin (end of input).
    func closeInput() {
        lock.withLock {
            if let fd = inputFD { close(fd) }
            inputFD = nil
        }
    }

    /// Reaps the child if it has ended (never blocks).
    private func poll() -> Int32? {
        lock.withLock {
            if let waitStatus { return waitStatus }
            var status: Int32 = 0
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid || (r < 0 && errno == ECHILD) {
                waitStatus = r == pid ? status : (127 << 8)
                endedAt = ContinuousClock.now
            }
            return waitStatus
        }
    }

    var isRunning: Bool { poll() == nil }
    var stdout: String { out.text }
    var stderr: String { err.text }

    /// Sends `sig` to the child (not its group).
    func signal(_ sig: Int32) {
        if isRunning { kill(pid, sig) }
    }

    /// Waits until stdout satisfies `predicate` (true) or the time is up or the
    /// process ended without it (false).
    func waitForStdout(timeout: Duration, _ predicate: (String) -> Bool) async -> Bool {
        await waitFor(timeout: timeout) { predicate(self.stdout) }
    }

    /// Number of complete lines on stdout so far (cheap; no decoding).
    var stdoutLineCount: Int { out.lineCount }

    /// Waits until stdout has at least `count` complete lines.
    func waitForStdoutLines(_ count: Int, timeout: Duration) async -> Bool {
        await waitFor(timeout: timeout) { self.out.lineCount >= count }
    }

    func waitForStderr(timeout: Duration, _ predicate: (String) -> Bool) async -> Bool {
        await waitFor(timeout: timeout) { predicate(self.stderr) }
    }

    private func waitFor(timeout: Duration, _ check: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if check() { return true }
            if !isRunning {
                // let the readers catch the last output
                let drain = ContinuousClock.now + .seconds(1)
                while !(out.isFinished && err.isFinished) && ContinuousClock.now < drain {
                    try? await Task.sleep(for: .milliseconds(5))
                }
                return check()
            }
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits for the process to end; after `timeout` it is killed (SIGKILL,
    /// with its process group) and the result says `timedOut`.
    func wait(timeout: Duration) async -> ProcessResult {
        let deadline = ContinuousClock.now + timeout
        var timedOut = false
        while isRunning {
            if ContinuousClock.now >= deadline {
                timedOut = true
                kill(-pid, SIGKILL)
                kill(pid, SIGKILL)
                break
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        while isRunning { try? await Task.sleep(for: .milliseconds(5)) }
        // Drain the pipes (a grandchild holding them must not hang us).
        let drainDeadline = ContinuousClock.now + .seconds(2)
        while !(out.isFinished && err.isFinished) && ContinuousClock.now < drainDeadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let status = poll() ?? 0
        let (ended, _) = lock.withLock { (endedAt ?? ContinuousClock.now, 0) }
        let termination: ProcessResult.Termination = (status & 0x7f) == 0
            ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
        recordSanitizerReports()
        return ProcessResult(command: command, termination: termination, timedOut: timedOut,
                             stdout: out.text, stderr: err.text, duration: ended - started)
    }

    /// Kills the process and its group (SIGKILL) if it still runs; does not wait.
    func kill9() {
        if isRunning {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
        }
    }

    /// For a bluectl child that has ended: records an issue (failing the current
    /// test) if its stderr holds a sanitizer report. Once per child; called by
    /// `wait` and by the bus's teardown, so no test can miss it.
    func recordSanitizerReports() {
        guard runsBluectl, !isRunning else { return }
        let first = lock.withLock { () -> Bool in
            defer { sanitizerChecked = true }
            return !sanitizerChecked
        }
        guard first else { return }
        // the end of the report may still be in the pipe
        let drain = ContinuousClock.now + .seconds(2)
        while !err.isFinished && ContinuousClock.now < drain { usleep(5000) }
        let text = err.text
        let findings = SanitizerReports.findings(in: text)
        guard !findings.isEmpty else { return }
        Issue.record("""
            sanitizer report from `\(command)`: \(findings.prefix(5).joined(separator: " | "))
            --- its stderr ---
            \(text.suffix(8000))
            """)
    }

    /// Synchronous stop for teardown: SIGTERM, then SIGKILL (with its
    /// process group) after `grace`; reaps it.
    func stopNow(grace: TimeInterval = 1.0) {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(grace)
        while isRunning && Date() < deadline { usleep(5000) }
        if isRunning {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
            while isRunning { usleep(2000) }
        }
    }
}

/// Runs a command to completion with a hard timeout.
func runProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                timeout: Duration = .seconds(20)) async throws -> ProcessResult {
    let child = try ChildProcess(executable, arguments, environment: environment)
    return await child.wait(timeout: timeout)
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
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            dirs.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
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

// MARK: - Stand-in values

/// An adapter the stand-in creates at start-up.
struct AdapterSpec: Sendable {
    var name: String
    var address: String
    var alias: String
    var powered: Bool

    init(_ name: String, address: String, alias: String, powered: Bool = true) {
        self.name = name; self.address = address; self.alias = alias; self.powered = powered
    }

    static let hci0 = AdapterSpec("hci0", address: "00:AA:01:00:00:23", alias: "bus-tier-host")
}

/// A typed D-Bus value, rendered as busctl's argument syntax.
indirect enum BusValue: Sendable {
    case string(String)
    case objectPath(String)
    case bool(Bool)
    case byte(UInt8)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case bytes([UInt8])
    case strings([String])
    /// a{sv}
    case dict([(String, BusValue)])
    /// a{qv}
    case uint16Dict([(UInt16, BusValue)])

    var signature: String {
        switch self {
        case .string: "s"
        case .objectPath: "o"
        case .bool: "b"
        case .byte: "y"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .bytes: "ay"
        case .strings: "as"
        case .dict: "a{sv}"
        case .uint16Dict: "a{qv}"
        }
    }

    /// busctl's argument words for this value (without its signature).
    var words: [String] {
        switch self {
        case .string(let s), .objectPath(let s): [s]
        case .bool(let b): [b ? "true" : "false"]
        case .byte(let v): [String(v)]
        case .int16(let v): [String(v)]
        case .uint16(let v): [String(v)]
        case .int32(let v): [String(v)]
        case .uint32(let v): [String(v)]
        case .bytes(let b): [String(b.count)] + b.map { String($0) }
        case .strings(let a): [String(a.count)] + a
        case .dict(let entries):
            [String(entries.count)] + entries.flatMap { [$0.0, $0.1.signature] + $0.1.words }
        case .uint16Dict(let entries):
            [String(entries.count)] + entries.flatMap { [String($0.0), $0.1.signature] + $0.1.words }
        }
    }
}

/// Advertisement content of a simulated peripheral (Device1 property names).
enum AdField: Sendable {
    case addressType(String)
    case name(String)
    case rssi(Int16)
    case txPower(Int16)
    case uuids([String])
    case manufacturerData([UInt16: [UInt8]])
    case serviceData([String: [UInt8]])
    case flags([UInt8])
    case appearance(UInt16)
    case connectable(Bool)

    var entry: (String, BusValue) {
        switch self {
        case .addressType(let t): ("AddressType", .string(t))
        case .name(let n): ("Name", .string(n))
        case .rssi(let r): ("RSSI", .int16(r))
        case .txPower(let t): ("TxPower", .int16(t))
        case .uuids(let u): ("UUIDs", .strings(u))
        case .manufacturerData(let m):
            ("ManufacturerData", .uint16Dict(m.keys.sorted().map { ($0, .bytes(m[$0]!)) }))
        case .serviceData(let s):
            ("ServiceData", .dict(s.keys.sorted().map { ($0, .bytes(s[$0]!)) }))
        case .flags(let f): ("AdvertisingFlags", .bytes(f))
        case .appearance(let a): ("Appearance", .uint16(a))
        case .connectable(let c): ("Connectable", .bool(c))
        }
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
    static func start(standIn: Bool = true, adapters: [AdapterSpec] = [.hci0],
                      deny: [(interface: String, member: String)] = []) async throws -> PrivateBus {
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
                try await bus.startStandIn(adapters: adapters)
            } catch {
                bus.stop()
                throw error
            }
        }
        return bus
    }

    /// Starts the stand-in (again, after `stopStandIn`: as when bluetoothd restarts).
    func startStandIn(adapters: [AdapterSpec]) async throws {
        let params: [String: Any] = ["adapters": adapters.map {
            ["name": $0.name, "address": $0.address, "alias": $0.alias, "powered": $0.powered] as [String: Any]
        }]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: params), as: UTF8.self)
        let child = try ChildProcess(BusTier.python, [
            "-m", "dbusmock", "--system", "--template", BusTier.fixture("bluez_standin.py"),
            "--logfile", directory.appendingPathComponent("standin.log").path, "-p", json,
        ], environment: environment)
        lock.withLock { standIn = child }
        // Ready when the stand-in answers on org.bluez.
        let deadline = ContinuousClock.now + .seconds(15)
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

    // MARK: stand-in control (org.freedesktop.DBus.Mock on /)

    @discardableResult
    func mock(_ method: String, _ args: [BusValue] = [], timeout: Duration = .seconds(30)) async throws -> [JSONValue] {
        try await call("org.bluez", "/", "org.freedesktop.DBus.Mock", method, args, timeout: timeout)
    }

    @discardableResult
    func addAdapter(_ spec: AdapterSpec) async throws -> String {
        try await mock("AddAdapter", [.string(spec.name), .string(spec.address), .string(spec.alias), .bool(spec.powered)])
            .first?.string ?? ""
    }

    func removeAdapter(_ name: String) async throws {
        try await mock("RemoveAdapter", [.string(name)])
    }

    /// The adapter stops exporting `interface` (org.bluez.GattManager1 or org.bluez.LEAdvertisingManager1).
    func dropAdapterInterface(_ adapter: String, _ interface: String) async throws {
        _ = try await mock("DropAdapterInterface", [.string(adapter), .string(interface)])
    }

    func setPowered(_ adapter: String, _ powered: Bool) async throws {
        try await mock("SetAdapterPowered", [.string(adapter), .bool(powered)])
    }

    /// Registers a simulated peripheral; returns its (future) device path.
    @discardableResult
    func addAdvertiser(_ adapter: String, _ address: String, _ fields: [AdField]) async throws -> String {
        try await mock("AddAdvertiser", [.string(adapter), .string(address), .dict(fields.map(\.entry))])
            .first?.string ?? ""
    }

    /// The peripheral advertises changed data (`removed`: Device1 keys it no longer sends).
    func updateAdvertiser(_ adapter: String, _ address: String, _ fields: [AdField], removed: [String] = []) async throws {
        try await mock("UpdateAdvertiser", [.string(adapter), .string(address), .dict(fields.map(\.entry)), .strings(removed)])
    }

    func removeAdvertiser(_ adapter: String, _ address: String) async throws {
        try await mock("RemoveAdvertiser", [.string(adapter), .string(address)])
    }

    /// The dict of the last accepted SetDiscoveryFilter as busctl shows it:
    /// key → {"type": sig, "data": value}.
    func lastDiscoveryFilter(_ adapter: String = "hci0") async throws -> [String: JSONValue] {
        try await mock("GetLastDiscoveryFilter", [.string(adapter)]).first?.object ?? [:]
    }

    func discoveryFilterCallCount(_ adapter: String = "hci0") async throws -> Int {
        try await mock("GetDiscoveryFilterCallCount", [.string(adapter)]).first?.int ?? -1
    }

    /// Unique names of clients with a running discovery on the adapter.
    func discoverySessions(_ adapter: String = "hci0") async throws -> [String] {
        try await mock("GetDiscoverySessions", [.string(adapter)]).first?.strings ?? []
    }

    /// (event, client) pairs: SetDiscoveryFilter/StartDiscovery/StopDiscovery/ClientLeft/PoweredOff.
    func discoveryLog(_ adapter: String = "hci0") async throws -> [(event: String, client: String)] {
        (try await mock("GetDiscoveryLog", [.string(adapter)]).first?.array ?? []).compactMap {
            guard let e = $0[0]?.string, let c = $0[1]?.string else { return nil }
            return (e, c)
        }
    }

    /// false: report every advertiser whatever the discovery filters (as when
    /// another client scans unfiltered) — for testing bluectl's re-check.
    func setFilterEnforcement(_ adapter: String, _ enforce: Bool) async throws {
        try await mock("SetFilterEnforcement", [.string(adapter), .bool(enforce)])
    }

    /// Synthetic load (see the stand-in's EmitAdvertisementBurst); returns (devices added, updates sent).
    func emitAdvertisementBurst(_ adapter: String, devices: Int, updates: Int) async throws -> (added: Int, updates: Int) {
        let r = try await mock("EmitAdvertisementBurst", [.string(adapter), .uint32(UInt32(devices)), .uint32(UInt32(updates))],
                               timeout: .seconds(120))
        return (r.first?.int ?? -1, r.dropFirst().first?.int ?? -1)
    }

    @discardableResult
    func addGattService(_ adapter: String, _ address: String, uuid: String, primary: Bool = true) async throws -> String {
        try await mock("AddGattService", [.string(adapter), .string(address), .string(uuid), .bool(primary)]).first?.string ?? ""
    }

    @discardableResult
    func addGattCharacteristic(_ service: String, uuid: String, flags: [String], value: [UInt8]) async throws -> String {
        try await mock("AddGattCharacteristic", [.objectPath(service), .string(uuid), .strings(flags), .bytes(value)]).first?.string ?? ""
    }

    @discardableResult
    func addGattDescriptor(_ characteristic: String, uuid: String, flags: [String], value: [UInt8]) async throws -> String {
        try await mock("AddGattDescriptor", [.objectPath(characteristic), .string(uuid), .strings(flags), .bytes(value)]).first?.string ?? ""
    }

    @discardableResult
    func emitNotification(_ characteristic: String, _ value: [UInt8]) async throws -> Int {
        try await mock("EmitNotification", [.objectPath(characteristic), .bytes(value)]).first?.int ?? -1
    }

    func setGattValue(_ attribute: String, _ value: [UInt8]) async throws {
        try await mock("SetGattValue", [.objectPath(attribute), .bytes(value)])
    }

    /// Writes the peripheral received: (value hex, type, options).
    func gattWrites(_ attribute: String) async throws -> [(hex: String, type: String, options: JSONValue)] {
        (try await mock("GetGattWrites", [.objectPath(attribute)]).first?.array ?? []).compactMap { w in
            guard let bytes = w[0]?.array, let type = w[1]?.string else { return nil }
            let hex = bytes.compactMap(\.int).map { String(format: "%02x", $0) }.joined()
            return (hex, type, w[2] ?? .null)
        }
    }

    func dropConnection(_ device: String) async throws {
        try await mock("DropConnection", [.objectPath(device)])
    }

    /// Later calls of `method` on `path` fail with `errorName` ("" clears).
    func injectError(_ path: String, _ method: String, _ errorName: String, _ message: String = "") async throws {
        try await mock("InjectError", [.string(path), .string(method), .string(errorName), .string(message)])
    }

    /// The next `count` calls of `method` on `path` fail with `errorName`; later ones succeed.
    func injectError(_ path: String, _ method: String, _ errorName: String, _ message: String = "", times count: Int) async throws {
        try await mock("InjectErrorTimes", [.string(path), .string(method), .string(errorName), .string(message), .uint32(UInt32(count))])
    }

    /// BlueZ API methods called on `path`, in order (the stand-in's call log).
    func calls(_ path: String) async throws -> [String] {
        try await mock("GetCalls", [.string(path)]).first?.strings ?? []
    }

    /// How often `method` was called on `path`.
    func callCount(_ path: String, _ method: String) async throws -> Int {
        try await calls(path).filter { $0 == method }.count
    }

    /// Calls of ReadValue/WriteValue on `path` are never answered (until the device disconnects).
    func hang(_ path: String, _ method: String, _ hang: Bool = true) async throws {
        try await mock("HangMethod", [.string(path), .string(method), .bool(hang)])
    }

    /// Sets properties to any value (also wrongly typed ones) and removes others; one PropertiesChanged.
    func setProperties(_ path: String, _ interface: String, _ changed: [(String, BusValue)], removed: [String] = []) async throws {
        try await mock("SetProperties", [.string(path), .string(interface), .dict(changed), .strings(removed)])
    }

    /// How Device1.Pair on `device` asks the agent ("" = just works).
    func setPairing(_ device: String, _ method: String, _ value: UInt32 = 0) async throws {
        try await mock("SetPairing", [.objectPath(device), .string(method), .uint32(value)])
    }

    /// Agent calls Pair made: (method, device, outcome).
    func agentLog() async throws -> [(method: String, device: String, outcome: String)] {
        (try await mock("GetAgentLog").first?.array ?? []).compactMap {
            guard let m = $0[0]?.string, let d = $0[1]?.string, let o = $0[2]?.string else { return nil }
            return (m, d, o)
        }
    }

    /// Device1.Pair calls: (device, caller, agent owner, IO capability BlueZ would use).
    func pairLog() async throws -> [(device: String, caller: String, agentOwner: String, capability: String)] {
        (try await mock("GetPairLog").first?.array ?? []).compactMap {
            guard let d = $0[0]?.string, let c = $0[1]?.string, let a = $0[2]?.string, let k = $0[3]?.string else { return nil }
            return (d, c, a, k)
        }
    }

    /// PropertiesChanged(Value) signals `characteristic` has emitted (each notification
    /// once per registered StartNotify session, plus one per successful ReadValue).
    func valueSignalCount(_ characteristic: String) async throws -> Int {
        try await mock("GetValueSignalCount", [.objectPath(characteristic)]).first?.int ?? -1
    }

    /// Another (non-bluectl) client calls StartNotify / StopNotify on `characteristic`.
    func startNotify(_ characteristic: String, as client: String) async throws {
        try await mock("StartNotifyAs", [.objectPath(characteristic), .string(client)])
    }

    func stopNotify(_ characteristic: String, as client: String) async throws {
        try await mock("StopNotifyAs", [.objectPath(characteristic), .string(client)])
    }

    /// Another client reads `characteristic` (BlueZ emits PropertiesChanged(Value) for it).
    @discardableResult
    func readValue(_ characteristic: String, asOtherClient: Void = ()) async throws -> [Int] {
        (try await mock("ReadValueAs", [.objectPath(characteristic)]).first?.array ?? []).compactMap(\.int)
    }

    /// StartNotify sessions on `characteristic`: (client, registered).
    func notifyClients(_ characteristic: String) async throws -> [(client: String, registered: Bool)] {
        (try await mock("GetNotifyClients", [.objectPath(characteristic)]).first?.array ?? []).compactMap {
            guard let c = $0[0]?.string, let r = $0[1]?.bool else { return nil }
            return (c, r)
        }
    }

    // MARK: waiting

    /// Polls `check` until it returns true or the time is up.
    func eventually(timeout: Duration = .seconds(5), _ check: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try await check() { return true }
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// Runs `body` with a fresh private bus (stand-in with `adapters`, unless
/// `standIn` is false); tears everything down afterwards, also on failure
/// (then the stand-in's log is printed to help).
func withPrivateBus<T>(standIn: Bool = true, adapters: [AdapterSpec] = [.hci0],
                       deny: [(interface: String, member: String)] = [],
                       _ body: (PrivateBus) async throws -> T) async throws -> T {
    await BusSlots.shared.acquire()
    let bus: PrivateBus
    do {
        bus = try await PrivateBus.start(standIn: standIn, adapters: adapters, deny: deny)
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
