#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a central is doing, kept under a restore identifier (CoreBluetooth's
/// `CBCentralManagerOptionRestoreIdentifierKey`): a later process with the
/// same identifier learns the scan filter, the peripherals it was connecting
/// or connected to and the characteristics it was subscribed to, reports
/// them, and carries on.
struct CentralRestoreState: Codable, Equatable, Sendable {
    struct ScanFilter: Codable, Equatable, Sendable {
        var services: [String]
        var rssi: Int?
        var name: String?
        var duplicates: Bool
        var transport: String
        init(services: [String] = [], rssi: Int? = nil, name: String? = nil, duplicates: Bool = false, transport: String = "le") {
            self.services = services
            self.rssi = rssi
            self.name = name
            self.duplicates = duplicates
            self.transport = transport
        }
    }

    struct PeripheralEntry: Codable, Equatable, Sendable {
        /// As the user named it (address, path or name).
        var device: String
        /// The address once known.
        var address: String?
        /// `PeripheralState`'s raw value: connecting, connected, disconnected…
        var state: String
        init(device: String, address: String? = nil, state: String) {
            self.device = device
            self.address = address
            self.state = state
        }
    }

    struct Subscription: Codable, Equatable, Sendable {
        var device: String
        /// As the user named it (UUID, SIG name, path or handle:N).
        var characteristic: String
        var service: String?
        /// Whether notifications were on when this was saved.
        var notifying: Bool
        init(device: String, characteristic: String, service: String? = nil, notifying: Bool) {
            self.device = device
            self.characteristic = characteristic
            self.service = service
            self.notifying = notifying
        }
    }

    var version = 1
    /// The command that saved it ("subscribe", "scan").
    var command: String
    var adapter: String?
    var scan: ScanFilter?
    var peripherals: [PeripheralEntry]
    var subscriptions: [Subscription]
    /// Whether the process was still running when this was written (false:
    /// it ended normally; true in a file read later: it was killed).
    var running: Bool
    var pid: Int32
    /// ISO 8601, UTC.
    var saved: String

    init(command: String, adapter: String? = nil, scan: ScanFilter? = nil, peripherals: [PeripheralEntry] = [],
                subscriptions: [Subscription] = [], running: Bool = true, pid: Int32 = getpid(), saved: String = "") {
        self.command = command
        self.adapter = adapter
        self.scan = scan
        self.peripherals = peripherals
        self.subscriptions = subscriptions
        self.running = running
        self.pid = pid
        self.saved = saved
    }
}

enum RestoreStoreError: Error, Equatable, CustomStringConvertible {
    case invalidIdentifier(String)
    case unreadable(path: String, reason: String)
    case unwritable(path: String, reason: String)

    var description: String {
        switch self {
        case .invalidIdentifier(let id):
            return "invalid restore id \"\(id)\": use 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
        case .unreadable(let path, let reason): return "cannot read saved state \(path): \(reason)"
        case .unwritable(let path, let reason): return "cannot save state to \(path): \(reason)"
        }
    }
}

/// One restore identifier's file, `$XDG_STATE_HOME/bluectl/<id>.json`
/// (default `~/.local/state/bluectl/`). Every save writes a temporary file
/// in the same folder, fsyncs it and renames it over the old one, so the
/// file always holds one complete state — `kill -9` at any moment leaves
/// either the previous or the new one.
struct RestoreStore: Sendable {
    let identifier: String
    let path: String
    let directory: String

    init(identifier: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard Self.isValid(identifier) else { throw RestoreStoreError.invalidIdentifier(identifier) }
        self.identifier = identifier
        directory = Self.userStateDirectory(environment: environment)
        path = directory + "/" + identifier + ".json"
    }

    /// `$XDG_STATE_HOME/bluectl`, else `~/.local/state/bluectl`.
    static func userStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/bluectl" }
        return (environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/root") + "/.local/state/bluectl"
    }

    static func isValid(_ id: String) -> Bool {
        guard (1...64).contains(id.utf8.count), !id.hasPrefix(".") else { return false }
        return id.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2e || c == 0x5f || c == 0x2d
        }
    }

    /// The saved state, or nil when there is none.
    func load() throws -> CentralRestoreState? {
        guard let data = FileManager.default.contents(atPath: path) else {
            if FileManager.default.fileExists(atPath: path) {
                throw RestoreStoreError.unreadable(path: path, reason: "permission denied or not a file")
            }
            return nil
        }
        do {
            return try JSONDecoder().decode(CentralRestoreState.self, from: data)
        } catch {
            throw RestoreStoreError.unreadable(path: path, reason: "not a bluectl state file (\(error))")
        }
    }

    /// Writes `state` atomically (stamping `saved`).
    func save(_ state: CentralRestoreState) throws {
        var state = state
        state.saved = ValueText.timestamp()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data: Data
        do {
            data = try encoder.encode(state)
        } catch {
            throw RestoreStoreError.unwritable(path: path, reason: "\(error)")
        }
        try makeDirectory()
        let temporary = "\(directory)/.\(identifier).json.\(getpid()).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure(errno) }
        var ok = data.withUnsafeBytes { FileDescriptorIO.writeAll(fd, $0) }
        let writeErrno = errno
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary, path) == 0 else {
            let code = ok ? errno : writeErrno
            unlink(temporary)
            throw failure(code)
        }
        // The rename itself is durable once the folder is synced.
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
    }

    private func makeDirectory() throws {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw RestoreStoreError.unwritable(path: path, reason: "cannot create \(directory)")
        }
    }

    private func failure(_ code: Int32) -> RestoreStoreError {
        .unwritable(path: path, reason: String(cString: strerror(code)))
    }
}

/// write(2) helpers shared by the state store and the CLI's output.
enum FileDescriptorIO {
    /// Writes all of `buffer`, retrying on EINTR; false on any error (errno tells which).
    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }
}
