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
