import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// A file that holds a secret (a keys file, a passkey): read only when no one
/// but its owner may read or write it, as ssh refuses such a private key.
enum PrivateFile {
    /// The bytes of `path`, which `what` names in errors ("the keys file"):
    /// exit 64 when it cannot be opened or read, 78 (`ExitStatus.config`)
    /// when others than its owner may read or write it.
    static func read(_ path: String, what: String) throws(CLIFailure) -> [UInt8] {
        let shown = TextSafety.escapedForMessage(path, limit: 1024)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CLIFailure(.usage, "cannot read \(what) \(shown): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw CLIFailure(.usage, "cannot read \(what) \(shown): \(String(cString: strerror(errno)))") }
        let mode = status.st_mode & 0o777
        if mode & 0o077 != 0 {
            throw CLIFailure(.config, "\(what) \(shown) may be read by others than its owner (mode \(String(mode, radix: 8))): "
                             + "not used; chmod 600 \(shown)")
        }
        switch WriteCommand.readAll(fd) {
        case .success(let bytes): return bytes
        case .failure(let reason): throw CLIFailure(.usage, "cannot read \(what) \(shown): \(reason.text)")
        }
    }
}
