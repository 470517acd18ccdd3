import Logging
import BluectlDBus

extension DBusError {
    /// The D-Bus error name and message of any failure, for state machines.
    var nameAndMessage: (String, String) {
        switch self {
        case .remote(let name, let message): return (name, message)
        case .timedOut: return ("org.freedesktop.DBus.Error.NoReply", "no reply")
        case .disconnected: return ("org.freedesktop.DBus.Error.Disconnected", "lost the connection to the system bus")
        default: return ("org.freedesktop.DBus.Error.Failed", description)
        }
    }
}

/// BluectlCore's diagnostics — every state-machine event and the actions it
/// produced, pairing and discovery steps — at `debug` level through swift-log,
/// label "bluectl". A program routes them with `LoggingSystem.bootstrap`
/// (before its first use of the library); bluectl prints them on stderr when
/// `BLUECTL_DEBUG` is set.
package enum Trace {
    package static let logger = Logger(label: "bluectl")

    package static func log(_ message: @autoclosure () -> String) {
        logger.debug("\(message())")
    }

    /// A state machine met an event no transition plans for in its state
    /// (it changed nothing): a bug, or BlueZ doing something new. At notice
    /// level, above the step-by-step trace.
    package static func unplanned(_ machine: String, _ what: String) {
        logger.notice("\(machine): unplanned event \(what)")
    }
}
