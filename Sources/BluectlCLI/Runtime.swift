import BluectlCore
import BluectlDBus
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Line-oriented standard output: every line is written whole and flushed,
/// so `bluectl … | consumer` sees each event as it happens. A closed pipe
/// (SIGPIPE is ignored) makes `write` return false instead of killing us.
public enum Output {
    public static func line(_ text: String) -> Bool {
        var text = text
        text.append("\n")
        return text.withUTF8 { writeAll(1, UnsafeRawBufferPointer($0)) }
    }

    /// write(2) until done; false on EPIPE or any other error.
    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        FileDescriptorIO.writeAll(fd, buffer)
    }

    public static func error(_ text: String) {
        var line = "bluectl: " + text + "\n"
        _ = line.withUTF8 { writeAll(2, UnsafeRawBufferPointer($0)) }
    }
}

/// Runs a command's work so that SIGINT and SIGTERM cancel it, let it clean
/// up (StopDiscovery, StopNotify, Disconnect of what it started), and then
/// end the process with 130 / 143 — within 2 s even if cleanup hangs.
public enum SignalScope {
    /// The first signal received (later ones are ignored while cleaning up).
    private static let received = Locked<Int32?>(nil)

    public static func run(_ work: @escaping @Sendable () async throws -> Void) async throws {
        signal(SIGPIPE, SIG_IGN)
        let task = Task { try await work() }
        var sources: [DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let first = received.withLock { value -> Bool in
                    guard value == nil else { return false }
                    value = number
                    return true
                }
                guard first else { return }
                task.cancel()
                DispatchQueue.global().asyncAfter(deadline: .now() + 2) {
                    Output.error("cleanup did not finish within 2 s")
                    _exit(128 + number)
                }
            }
            source.resume()
            sources.append(source)
        }
        defer { sources.forEach { $0.cancel() } }
        let outcome = await task.result
        if let number = received.withLock({ $0 }) {
            throw CLIFailure(number == SIGINT ? .interrupted : .terminated, "")
        }
        try outcome.get()
    }

    /// Whether a signal asked us to stop.
    public static var interrupted: Bool { received.withLock { $0 != nil } }
}

/// Runs `body` outside the current task's cancellation, for cleanup that
/// must happen after a cancel (StopDiscovery after Ctrl-C).
public func uncancellable<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
    await Task { await body() }.value
}
