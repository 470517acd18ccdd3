/// One characteristic's notification session: idle → starting → notifying →
/// stopping → stopped. Values count only while notifying; the device
/// disconnecting fails the session (after a StopNotify, so that BlueZ does
/// not re-arm it for this client on reconnect: NOTES.md, pitfall 6).
public struct NotifyStateMachine: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case idle
        /// StartNotify sent (the value listener is already in place: pitfall 4).
        case starting
        case notifying
        /// StopNotify sent.
        case stopping
        case stopped
        case failed(NotifyFailure)
    }

    public enum Event: Sendable, Equatable {
        case start
        case startSucceeded
        case startFailed(name: String, message: String)
        /// A `Value` PropertiesChanged of the characteristic.
        case value([UInt8])
        case stop
        /// The reply (or error) to StopNotify.
        case stopFinished
        case deviceDisconnected
        case characteristicRemoved
    }

    public enum Action: Sendable, Equatable {
        case callStartNotify
        case reportStarted
        case deliver([UInt8])
        case callStopNotify
        /// Ended normally.
        case finish
        case fail(NotifyFailure)
    }

    public private(set) var state: State = .idle
    /// Values delivered.
    public private(set) var delivered = 0
    /// Stop asked while StartNotify was still pending.
    private var stopRequested = false

    public init() {}

    public var isFinished: Bool {
        switch state {
        case .stopped, .failed: return true
        default: return false
        }
    }

    public mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.idle, .start):
            state = .starting
            return [.callStartNotify]

        case (.starting, .startSucceeded):
            if stopRequested {
                state = .stopping
                return [.callStopNotify]
            }
            state = .notifying
            return [.reportStarted]

        case (.starting, .startFailed(let name, let message)):
            let failure = NotifyFailure.bluez(name: name, message: message)
            state = .failed(failure)
            return [.fail(failure)]

        case (.notifying, .value(let bytes)):
            delivered += 1
            return [.deliver(bytes)]

        case (.idle, .stop):
            state = .stopped
            return [.finish]

        case (.starting, .stop):
            stopRequested = true
            return []

        case (.notifying, .stop):
            state = .stopping
            return [.callStopNotify]

        case (.stopping, .stopFinished):
            state = .stopped
            return [.finish]

        case (.starting, .deviceDisconnected), (.notifying, .deviceDisconnected):
            state = .failed(.disconnected)
            return [.callStopNotify, .fail(.disconnected)]

        case (.starting, .characteristicRemoved), (.notifying, .characteristicRemoved):
            state = .failed(.removed)
            return [.fail(.removed)]

        case (.stopping, .deviceDisconnected), (.stopping, .characteristicRemoved):
            state = .stopped
            return [.finish]

        default:
            // Values before StartNotify's reply or after a stop, late replies…
            return []
        }
    }
}

public enum NotifyFailure: Sendable, Equatable, CustomStringConvertible {
    case disconnected
    case removed
    case bluez(name: String, message: String)

    public var description: String {
        switch self {
        case .disconnected: return "the device disconnected"
        case .removed: return "the characteristic disappeared (services changed or device removed)"
        case .bluez(let name, let message): return message.isEmpty ? name : "\(message) (\(name))"
        }
    }
}
