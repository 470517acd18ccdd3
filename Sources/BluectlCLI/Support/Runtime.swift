import BluectlCore
import CBluectlShim
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What keeps bluectl's anonymous memory to what it uses, set once at start (a long-running
/// `bluectl gateway` or `subscribe` on a small machine holds every page it was given):
/// - glibc's malloc, limited to two arenas. glibc gives a thread that finds the arenas in use
///   an arena of its own (up to eight per core), and each keeps the pages it touched;
///   bluectl's threads (the loop, the task pool, the output writer, an MQTT connection
///   attempt's) are few and allocate little, so the extra arenas were only resident memory:
///   `bluectl gateway` in the lab held 4.0 MB of anonymous memory with glibc's default and
///   2.3 MB with one or two arenas, the same messages a second (docs/benchmarks.md). A
///   `MALLOC_ARENA_MAX` in the environment is the user's, and wins.
/// - No transparent huge pages (`PR_SET_THP_DISABLE`). Where the kernel gives them to every
///   process (`enabled` = `always`, as in Debian's kernel and the lab), a thread's stack or an
///   arena that spans an aligned 2 MB range can be backed by one 2 MB page when a few KB are
///   used: `bluectl gateway`'s mappings in the lab showed such a page in a malloc arena in one
///   run, and three on thread stacks (6 MB of 25 MB resident) in another (docs/benchmarks.md).
///   bluectl has no large heap for huge pages to speed up. Made before any thread starts
///   (`Bluectl.prepareProcess`): a page given earlier stays. Children inherit the setting;
///   bluectl starts none.
enum MemoryFootprint {
    static func limit() {
        #if canImport(Glibc)
        if getenv("MALLOC_ARENA_MAX") == nil { _ = mallopt(M_ARENA_MAX, 2) }
        _ = bluectl_disable_transparent_huge_pages()
        #endif
    }
}

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
    /// The first signal received (0: none; later ones are ignored while
    /// cleaning up). Written once by the signal source, read by any task:
    /// an atomic, the one value the command line shares between threads
    /// besides the output queue's hand-off.
    private static let received = Atomic<Int32>(0)

    public static func run(_ work: @escaping @Sendable () async throws -> Void) async throws {
        signal(SIGPIPE, SIG_IGN)
        let task = Task { try await work() }
        // Dispatch only for its signal sources: a signal arrives on a
        // Dispatch thread, which cancels the work and starts the 2 s limit.
        var sources: [DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                guard received.compareExchange(expected: 0, desired: number, ordering: .acquiringAndReleasing).exchanged else { return }
                task.cancel()
                // A thread of its own: the limit must hold even when every task is stuck.
                startThread(name: "bluectl-signal-limit") {
                    usleep(2_000_000)
                    Output.error("cleanup did not finish within 2 s")
                    terminate(128 + number)
                }
            }
            source.resume()
            sources.append(source)
        }
        defer { sources.forEach { $0.cancel() } }
        let outcome = await task.result
        let number = received.load(ordering: .acquiring)
        if number != 0 {
            throw CLIFailure(number == SIGINT ? .interrupted : .terminated, "")
        }
        try outcome.get()
    }

    /// Whether a signal asked us to stop.
    public static var interrupted: Bool { received.load(ordering: .acquiring) != 0 }
}

/// Ends the process now with `status`: `_exit`, because other threads (the
/// bus thread, a writer) may still run and `exit` would run static
/// destructors under them. But `_exit` also skips LeakSanitizer's check, so
/// when bluectl is built with it (`Scripts/test --sanitizers`) the check runs
/// first, and a leak on an error path is reported on stderr like any other
/// (the bus tier fails a test on a child's sanitizer report). In other
/// builds the symbol is absent and this is `_exit`.
func terminate(_ status: Int32) -> Never {
    if let check = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__lsan_do_recoverable_leak_check") {
        typealias LeakCheck = @convention(c) () -> Int32
        _ = unsafeBitCast(check, to: LeakCheck.self)()
    }
    _exit(status)
}

