import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// bluectl's exit codes (documented in README.md), mostly from sysexits.h.
public enum ExitStatus: Int32, Sendable, CaseIterable {
    case success = 0
    /// A BlueZ operation failed for a reason not listed below (BlueZ's message is shown).
    case failure = 1
    /// Bad command-line input.
    case usage = 64
    /// A value from the user cannot be used (too long for the characteristic…).
    case dataError = 65
    /// The device, characteristic or descriptor asked for does not exist.
    case notFound = 68
    /// No system bus, no bluetoothd, no adapter, or the adapter is off.
    case unavailable = 69
    /// bluetoothd answered something its API does not allow.
    case software = 70
    /// The device disconnected in the middle of the operation.
    case ioError = 74
    /// BlueZ kept saying InProgress.
    case temporaryFailure = 75
    /// Not permitted / not authorized (bus policy or the device).
    case noPermission = 77
    /// A file of settings bluectl reads cannot be used: a keys or passkey file others can read, or one
    /// that is not a JSON object of addresses and keys (sysexits' EX_CONFIG).
    case config = 78
    /// Pairing failed its authentication: a wrong `--passkey` or `--pin`, or
    /// the device wanted one and none was given.
    case authenticationFailed = 79
    /// The --timeout ran out.
    case timeout = 124
    case interrupted = 130
    /// The reader of stdout went away (`bluectl subscribe … | head -1`): a quiet exit, like SIGPIPE's.
    case brokenPipe = 141
    case terminated = 143

    /// A few words for `--help` and the man page (README.md's table says more).
    public var brief: String {
        switch self {
        case .success: return "ok"
        case .failure: return "BlueZ reported a failure"
        case .usage: return "bad usage"
        case .dataError: return "unusable value"
        case .notFound: return "not found"
        case .unavailable: return "bus/bluetoothd/adapter unavailable"
        case .software: return "unexpected reply"
        case .ioError: return "disconnected"
        case .temporaryFailure: return "still in progress"
        case .noPermission: return "not permitted"
        case .config: return "unusable keys or passkey file"
        case .authenticationFailed: return "pairing authentication failed"
        case .timeout: return "timeout"
        case .interrupted: return "SIGINT"
        case .brokenPipe: return "stdout's reader went away"
        case .terminated: return "SIGTERM"
        }
    }

    /// Every exit code with its brief meaning, in one line: "0 ok, 1 …".
    public static var summary: String {
        allCases.map { "\($0.rawValue) \($0.brief)" }.joined(separator: ", ")
    }

    public init(_ error: BluetoothError) {
        switch error {
        case .busUnavailable, .bluetoothdNotRunning, .bluetoothdStopped, .noAdapter, .adapterNotFound, .adapterPoweredOff:
            self = .unavailable
        case .accessDenied, .notPermitted: self = .noPermission
        case .deviceNotFound, .attributeNotFound: self = .notFound
        // bluectl cancels work only at its own deadlines (a signal ends the
        // process through SignalScope), so a cancellation is a time-out.
        case .timeout, .cancelled: self = .timeout
        case .disconnected: self = .ioError
        case .inProgress: self = .temporaryFailure
        // NotReady: the adapter is off or not up yet (StartDiscovery on a
        // powered-off adapter): unavailable, as an adapter found off is.
        case .bluez(let name, _, _): self = name == Self.notReady ? .unavailable : .failure
        case .unexpected: self = .software
        case .invalidRequest, .ambiguous: self = .usage
        case .notSupported: self = .noPermission
        case .roleUnavailable: self = .unavailable
        case .valueTooLong: self = .dataError
        // Nothing listens on the PSM: the service is unavailable there (EX_UNAVAILABLE).
        case .channelRefused: self = .unavailable
        case .noResources: self = .temporaryFailure
        case .securityFailed: self = .noPermission
        case .authenticationFailed: self = .authenticationFailed
        }
    }

    static let notReady = "org.bluez.Error.NotReady"
}

/// A failure the CLI reports as one line on stderr with its exit status.
public struct CLIFailure: Error, Sendable {
    public var status: ExitStatus
    public var message: String

    public init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    /// `error` as bluectl reports it: its exit status, and its description
    /// with what to do where the user can do something (`--power-on`, the
    /// bus policy's groups).
    public init(_ error: BluetoothError) {
        switch error {
        case .adapterPoweredOff: self.init(.unavailable, "\(error) (try --power-on)")
        case .bluez(ExitStatus.notReady, _, _): self.init(.unavailable, "\(error); is the adapter powered? (try --power-on)")
        case .cancelled(let what): self.init(.timeout, "timed out: \(what)")
        case .authenticationFailed: self.init(.authenticationFailed, "\(error); give the device's passkey with --passkey (or its PIN with --pin)")
        case .accessDenied: self.init(.noPermission, "\(error). \(Self.permissionAdvice)")
        case .busUnavailable(let address, let reason): self.init(.unavailable, Self.busMessage(address: address, reason: reason))
        default: self.init(ExitStatus(error), error.description)
        }
    }

    /// "cannot connect to the system bus at ADDRESS: why", naming
    /// DBUS_SYSTEM_BUS_ADDRESS when the address came from it, and how an
    /// address is written when it was given a bare socket path.
    static func busMessage(address: String, reason: String, environment: String? = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }) -> String {
        let source = environment.map { $0.isEmpty ? "" : " (DBUS_SYSTEM_BUS_ADDRESS)" } ?? ""
        let hint = address.hasPrefix("/") && !address.contains(":") ? "; a socket's address is written unix:path=\(address)" : ""
        return "cannot connect to the system bus at \(address)\(source): \(reason)\(hint)"
    }

    /// What to do when the system bus's policy refuses bluectl (README.md, "Permissions").
    static let permissionAdvice = "the system bus lets only some users talk to bluetoothd here, typically root and the "
        + "bluetooth group (its policy: /usr/share/dbus-1/system.d/bluetooth.conf, and polkit's rules where the system uses "
        + "them): add yourself with `sudo usermod -aG bluetooth $USER` and log in again, or run as root"
}
