// Child processes of the bus tier: posix_spawn'd with a clean signal state,
// their output collected, reaped by pid, run to completion with a time limit.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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

    /// Its stderr, once, for the sanitizer check (SanitizerReports.swift): nil
    /// unless bluectl runs in it and it has ended, and after the first call.
    /// The end of a report may still be in the pipe: waits for its end (2 s at most).
    func stderrForSanitizerCheck() -> String? {
        guard runsBluectl, !isRunning else { return nil }
        let first = lock.withLock { () -> Bool in
            defer { sanitizerChecked = true }
            return !sanitizerChecked
        }
        guard first else { return nil }
        let drain = ContinuousClock.now + .seconds(2)
        while !err.isFinished && ContinuousClock.now < drain { usleep(5000) }
        return err.text
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
