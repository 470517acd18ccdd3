import BluectlDBus

/// Everything that can go wrong in BluectlCore, one case per kind of failure
/// for a caller to switch on, with its facts as associated values. Each
/// description is one line in terms a user can act on (the CLI maps the
/// cases to its documented exit codes). Which failures may pass by
/// themselves: `ReconnectPolicy.isRecoverable(_:afterSuccess:)`.
public enum BluetoothError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No system bus at `address`.
    case busUnavailable(address: String, reason: String)
    /// org.bluez is not on the bus.
    case bluetoothdNotRunning
    /// bluetoothd left the bus (stopped or crashed) during what is named.
    case bluetoothdStopped(String)
    /// The bus policy refused us.
    case accessDenied(String)
    /// No adapter at all.
    case noAdapter
    /// The adapter asked for does not exist.
    case adapterNotFound(String)
    /// The adapter exists but is powered off (or rfkill'd).
    case adapterPoweredOff(String)
    /// A device could not be found (not in BlueZ's tree and not seen while scanning).
    case deviceNotFound(String)
    /// Nothing answered or happened within the time allowed.
    case timeout(String)
    /// The calling task was cancelled during what is named (not a timeout:
    /// the caller gave up).
    case cancelled(String)
    /// The peer (or the bus) went away in the middle of an operation.
    case disconnected(String)
    /// BlueZ said NotPermitted / NotAuthorized / AuthenticationRejected /
    /// AuthenticationCanceled: the device or an agent said no.
    case notPermitted(name: String, message: String)
    /// Pairing failed its authentication (BlueZ's AuthenticationFailed during
    /// what is named): a wrong passkey or PIN, or the device wanted one and
    /// the agent could give none. Unlike `notPermitted`, nobody refused:
    /// the two sides did not agree.
    case authenticationFailed(String)
    /// BlueZ kept answering InProgress.
    case inProgress(String)
    /// Any other error reply from BlueZ, by name, with its message.
    case bluez(name: String, message: String, operation: String)
    /// A reply that is not what BlueZ's API documents.
    case unexpected(String)
    /// The request itself cannot be carried out (a selector that cannot be
    /// parsed, an ambiguous name, wrong properties…).
    case invalidRequest(String)
    /// No service, characteristic or descriptor (`kind`) matches `what`;
    /// `existing` lists what the device has.
    case attributeNotFound(kind: String, what: String, existing: [String])
    /// More than one attribute has this UUID; name one by path or handle.
    case ambiguous(kind: String, what: String, candidates: [String])
    /// The attribute's flags do not allow the operation (no call was made).
    case notSupported(String)
    /// bluetoothd offers no interface for what is asked on this adapter: no
    /// GattManager1 (serving GATT) or LEAdvertisingManager1 (advertising);
    /// no call was made. Unlike `notSupported`, it is the adapter (or
    /// bluetoothd's build) that lacks the role, not the request.
    case roleUnavailable(String)
    /// The value is longer than the write allows.
    case valueTooLong(length: Int, limit: Int, type: WriteType)
    /// The device refused the L2CAP channel: nothing listens on its PSM, or
    /// it refused for want of resources or of security (the kernel reports
    /// every refusal alike, ECONNREFUSED).
    case channelRefused(String)
    /// Something needed ran out: the kernel's memory or descriptors, every
    /// dynamic PSM in use, or the fixed PSM asked for taken by another socket.
    case noResources(String)
    /// The link's security could not be brought to what an L2CAP channel
    /// asked for: pairing failed or was refused, or its key lacks the MITM
    /// protection `authenticated` needs.
    case securityFailed(String)

    public var description: String {
        switch self {
        case .busUnavailable(let address, let reason):
            return "cannot connect to the system bus at \(address): \(reason)"
        case .bluetoothdNotRunning:
            return "bluetoothd is not running (org.bluez is not on the system bus)"
        case .bluetoothdStopped(let during):
            return "bluetoothd stopped (exited or crashed) while \(during)"
        case .accessDenied(let message):
            return "access denied by the bus policy: \(message)"
        case .noAdapter:
            return "no Bluetooth adapter found"
        case .adapterNotFound(let name):
            return "adapter \(name) not found"
        case .adapterPoweredOff(let name):
            return "adapter \(name) is powered off"
        case .deviceNotFound(let what):
            return "device \(what) not found"
        case .timeout(let what):
            return "timed out: \(what)"
        case .cancelled(let what):
            return "cancelled: \(what)"
        case .disconnected(let what):
            return "disconnected: \(what)"
        case .notPermitted(let name, let message):
            return message.isEmpty ? "not permitted (\(name))" : "not permitted: \(message) (\(name))"
        case .inProgress(let what):
            return "operation still in progress after retries: \(what)"
        case .authenticationFailed(let what):
            return "\(what) failed authentication: a wrong passkey or PIN, or the device wanted one and none was given "
                + "(org.bluez.Error.AuthenticationFailed)"
        case .bluez(let name, let message, let operation):
            return "\(operation) failed: \(message.isEmpty ? name : "\(message) (\(name))")"
        case .unexpected(let what):
            return "unexpected reply from bluetoothd: \(what)"
        case .invalidRequest(let what):
            return what
        case .attributeNotFound(let kind, let what, let existing):
            let list = existing.isEmpty ? "none" : existing.joined(separator: ", ")
            return "\(kind) \(what) not found; the device has: \(list)"
        case .ambiguous(let kind, let what, let candidates):
            return "\(kind) \(what) is ambiguous (\(candidates.count) match); name one by path or handle: \(candidates.joined(separator: ", "))"
        case .notSupported(let what), .roleUnavailable(let what), .channelRefused(let what), .noResources(let what),
             .securityFailed(let what):
            return what
        case .valueTooLong(let length, let limit, let type):
            let how = type == .withResponse ? "with response" : "without response"
            return "value of \(length) bytes is longer than the write limit of \(limit) bytes (\(how))"
        }
    }

    /// The D-Bus error name BlueZ answered with, when the failure is its answer.
    public var bluezErrorName: String? {
        switch self {
        case .notPermitted(let name, _), .bluez(let name, _, _): return name
        case .authenticationFailed: return "org.bluez.Error.AuthenticationFailed"
        default: return nil
        }
    }

    /// Translates a D-Bus failure of `operation` ("read battery_level", …).
    package init(_ error: DBusError, operation: String) {
        switch error {
        case .connectionFailed(let address, let reason):
            self = .busUnavailable(address: address, reason: reason)
        case .timedOut:
            self = .timeout(operation)
        case .disconnected:
            self = .disconnected("lost the connection to the system bus during \(operation)")
        case .invalidArgument(let what):
            self = .invalidRequest(what)
        case .unexpectedReply(let what):
            self = .unexpected(what)
        case .remote(let name, let message):
            // libdbus ends its own messages with a newline ("Method … doesn't exist\n"): descriptions are one line.
            let message = message.trimmingWhitespace(newlines: true)
            switch name {
            case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
                self = .bluetoothdNotRunning
            case "org.freedesktop.DBus.Error.AccessDenied":
                self = .accessDenied(message)
            case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout",
                 "org.freedesktop.DBus.Error.TimedOut":
                self = .timeout(operation)
            case "org.bluez.Error.AuthenticationFailed":
                self = .authenticationFailed(operation)
            case "org.bluez.Error.NotPermitted", "org.bluez.Error.NotAuthorized", "org.bluez.Error.AuthenticationRejected",
                 "org.bluez.Error.AuthenticationCanceled":
                self = .notPermitted(name: name, message: message)
            case "org.bluez.Error.InProgress":
                self = .inProgress(operation)
            default:
                self = .bluez(name: name, message: message, operation: operation)
            }
        }
    }

    /// For any error thrown below the core: D-Bus errors are translated,
    /// core errors pass through.
    public static func from(_ error: any Error, operation: String) -> BluetoothError {
        if let error = error as? BluetoothError { return error }
        if let error = error as? DBusError { return BluetoothError(error, operation: operation) }
        if error is CancellationError { return .cancelled(operation) }
        return .unexpected("\(error)")
    }
}
