/// One characteristic's notification session: idle → starting → notifying →
/// stopping → stopped, or idle → joined when another client already holds a
/// StartNotify session on the characteristic. bluetoothd 5.66 sends every
/// subscriber one Value signal per StartNotify client for each notification
/// (docs/notifications.md), so a second session would double every value:
/// joined, this client listens to the existing session and adds none; when
/// that session ends (Notifying false) it starts its own. Values count only
/// while notifying or joined; the device disconnecting fails the session
/// (after a StopNotify of a session of our own, so that BlueZ does not re-arm
/// it for this client on reconnect: docs/notifications.md).
package struct NotifyStateMachine: StateMachine, Equatable {
    package enum State: Sendable, Equatable {
        case idle
        /// StartNotify sent (the value listener is already in place: pitfall 4).
        case starting
        case notifying
        /// Listening to another client's session; nothing of ours registered.
        case joined
        /// StopNotify sent.
        case stopping
        case stopped
        case failed(NotifyFailure)
    }

    package enum Event: Sendable, Equatable {
        case start
        /// Start, sharing the session another client holds (Notifying was true).
        case join
        /// `Notifying` went false: the session this one shared has ended.
        case sharedSessionEnded
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

    package enum Action: Sendable, Equatable {
        case callStartNotify
        case reportStarted
        /// Tell the user that values may have been missed between the shared
        /// session's end and our own StartNotify.
        case reportTakingOver
        case deliver([UInt8])
        case callStopNotify
        /// Ended normally.
        case finish
        case fail(NotifyFailure)
        /// An event no transition plans for in this state: changes nothing;
        /// the driver reports it (a bug, or BlueZ doing something new).
        case unplanned(String)
    }

    package private(set) var state: State = .idle
    /// Values delivered.
    package private(set) var delivered = 0
    /// Stop asked while StartNotify was still pending.
    private var stopRequested = false

    package init() {}

    package var isFinished: Bool {
        switch state {
        case .stopped, .failed: return true
        default: return false
        }
    }

    /// Values are not traced one by one.
    package static func traces(_ event: Event) -> Bool {
        if case .value = event { return false }
        return true
    }

    package mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.idle, .start):
            state = .starting
            return [.callStartNotify]

        case (.idle, .join):
            state = .joined
            return [.reportStarted]

        case (.joined, .value(let bytes)):
            delivered += 1
            return [.deliver(bytes)]

        case (.joined, .sharedSessionEnded):
            state = .starting
            return [.reportTakingOver, .callStartNotify]

        case (.joined, .stop):
            state = .stopped
            return [.finish]

        case (.joined, .deviceDisconnected):
            state = .failed(.disconnected)
            return [.fail(.disconnected)]

        case (.joined, .characteristicRemoved):
            state = .failed(.removed)
            return [.fail(.removed)]

        case (_, .sharedSessionEnded):
            // Only a joined session waits for it; our own session ending
            // shows as a disconnect or a StopNotify reply.
            return []

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

        case (.stopped, _), (.failed, _):
            // Documented ignore: a finished session ignores what is still in
            // flight (values, StopNotify's reply after a failure, a stop).
            return []

        case (.starting, .value), (.stopping, .value):
            // Documented ignore: a value before StartNotify's reply (the
            // listener is up first, pitfall 4) or after the stop is not ours.
            return []

        case (.stopping, .stop):
            // Documented ignore: already stopping.
            return []

        default:
            return [.unplanned("\(state) + \(event)")]
        }
    }
}

package enum NotifyFailure: Sendable, Equatable, CustomStringConvertible {
    case disconnected
    case removed
    case bluez(name: String, message: String)

    package var description: String {
        switch self {
        case .disconnected: return "the device disconnected"
        case .removed: return "the characteristic disappeared (services changed or device removed)"
        case .bluez(let name, let message): return message.isEmpty ? name : "\(message) (\(name))"
        }
    }
}
