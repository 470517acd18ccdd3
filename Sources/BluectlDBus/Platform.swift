#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one place BluectlDBus closes a descriptor (libc's `close`, by a name
/// that no type member shadows).
@inline(__always)
func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }
