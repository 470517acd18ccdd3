/// Everything that can go wrong talking D-Bus, as values a caller can match on.
///
/// Errors from the remote side keep their D-Bus name (`org.bluez.Error.*`)
/// and message so the CLI can map them to exit codes and show BlueZ's words.
public enum DBusError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An error reply: `name` such as `org.bluez.Error.Failed`, `message` the text that came with it.
    case remote(name: String, message: String)
    /// No reply within the call's timeout (our own timer, not the daemon's).
    case timedOut(method: String, seconds: Double)
    /// The connection to the bus is gone.
    case disconnected
    /// Could not connect to or register on the bus at `address`.
    case connectionFailed(address: String, reason: String)
    /// Something we refused to send because libdbus would abort or mangle it.
    case invalidArgument(String)
    /// A reply or signal whose arguments are not of the expected types.
    case unexpectedReply(String)

    public var description: String {
        switch self {
        case .remote(let name, let message):
            return message.isEmpty ? name : "\(name): \(message)"
        case .timedOut(let method, let seconds):
            return "no reply to \(method) within \(formatSeconds(seconds)) s"
        case .disconnected:
            return "the D-Bus connection was closed"
        case .connectionFailed(let address, let reason):
            return "cannot connect to the system bus at \(address): \(reason)"
        case .invalidArgument(let what):
            return "invalid D-Bus argument: \(what)"
        case .unexpectedReply(let what):
            return "unexpected reply: \(what)"
        }
    }

    /// The D-Bus error name when this is a remote error.
    public var remoteName: String? {
        if case .remote(let name, _) = self { return name }
        return nil
    }
}

func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
}
