#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CBluectlShim

/// The one place BluectlDBus closes a descriptor (libc's `close`, by a name
/// that no type member shadows).
@inline(__always)
func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }

/// Runs `body` on a new detached thread named `name` (at most 15 bytes show).
/// A pthread rather than Foundation's `Thread`, so that the executable links
/// FoundationEssentials only: full Foundation brings ICU and tens of thousands
/// of protocol conformances that every dynamic cast at start-up has to scan.
public func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }
    let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(&thread, nil, { raw in
        let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
        _ = bluectl_name_this_thread(String(box.name.utf8.prefix(15))!)
        box.body()
        return nil
    }, box)
    guard started == 0 else {
        // Out of threads: nothing sensible to run on; run here rather than drop the work.
        Unmanaged<Box>.fromOpaque(box).takeRetainedValue().body()
        return
    }
    pthread_detach(thread)
}

/// A shared library opened when first needed (`dlopen`) rather than by the loader at
/// every start: libcrypto and libmosquitto (MQTT) are used by a few commands only, and
/// loading them costs every command their relocations (1.7 MB resident for libcrypto
/// and libssl, docs/benchmarks.md).
package struct DynamicLibrary: @unchecked Sendable {
    // @unchecked: `handle` is dlopen's, never closed, and dlsym is thread-safe.
    private let handle: UnsafeMutableRawPointer
    /// The name it was opened by.
    package let soname: String

    /// Opens `soname` (its functions bound now, its symbols kept to itself); throws the
    /// loader's reason when it cannot be.
    package init(_ soname: String) throws(DynamicLibraryError) {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            throw DynamicLibraryError(text: dlerror().map { String(cString: $0) } ?? "cannot load \(soname)")
        }
        self.handle = handle
        self.soname = soname
    }

    /// The function `name` as `type` (a C function pointer type: the header's
    /// `__typeof__(&name)`, so that the two cannot disagree).
    package func function<Function>(_ name: String, as type: Function.Type) throws(DynamicLibraryError) -> Function {
        guard let address = dlsym(handle, name) else {
            throw DynamicLibraryError(text: "\(soname) has no \(name)")
        }
        return unsafeBitCast(address, to: Function.self)
    }
}

/// Why a library or one of its functions could not be loaded: the loader's words.
package struct DynamicLibraryError: Error, CustomStringConvertible {
    package let text: String
    package var description: String { text }
}

/// What the bus's I/O thread runs as it ends, before it says it has ended (`LibDBusWire`):
/// a library's per-thread state released (libcrypto's, registered by `LibCrypto`: sensor
/// advertisements are decrypted on that thread). Released by the thread's own exit, it
/// would be freed while the process may already be exiting (`close` waits only for the
/// thread's work), and LeakSanitizer reported libcrypto's per-thread error state (904
/// bytes) as leaked in that race.
package enum ThreadEnd {
    /// The hooks, added from any thread (a library opened at need) and run by the I/O
    /// thread: a lock, as both may happen at once.
    private static let hooks = Locked<[@Sendable () -> Void]>([])

    /// Adds `hook` to what each ending I/O thread runs.
    package static func add(_ hook: @escaping @Sendable () -> Void) {
        hooks.withLock { $0.append(hook) }
    }

    /// Runs the hooks on the calling thread.
    package static func run() {
        for hook in hooks.withLock({ $0 }) { hook() }
    }
}
