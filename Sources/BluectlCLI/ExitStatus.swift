import BluectlCore

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
    /// A file of settings bluectl reads cannot be used: a keys file others can read, or one
    /// that is not a JSON object of addresses and keys (sysexits' EX_CONFIG).
    case config = 78
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
        case .config: return "unusable keys file"
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
        case .bluez: self = .failure
        case .unexpected: self = .software
        case .invalidRequest, .ambiguous: self = .usage
        case .notSupported: self = .noPermission
        case .valueTooLong: self = .dataError
        }
    }
}

/// A failure the CLI reports as one line on stderr with its exit status.
public struct CLIFailure: Error, Sendable {
    public var status: ExitStatus
    public var message: String

    public init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    public init(_ error: BluetoothError) {
        switch error {
        case .adapterPoweredOff: self.init(.unavailable, "\(error) (try --power-on)")
        case .cancelled(let what): self.init(.timeout, "timed out: \(what)")
        default: self.init(ExitStatus(error), error.description)
        }
    }
}
