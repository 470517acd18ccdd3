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

    /// The actions both notification machines share (this one asks for
    /// the StartNotify and StopNotify calls and the take-over report).
    package typealias Action = NotifyAction

    /// The phases and the rules shared with AcquireNotify's machine.
    private var session = NotifySession()
    /// Listening to another client's session (the session is open, nothing of ours registered).
    private var joinedOther = false

    package init() {}

    package var state: State {
        switch session.phase {
        case .idle: return .idle
        case .opening: return .starting
        case .open: return joinedOther ? .joined : .notifying
        case .closing: return .stopping
        case .ended: return .stopped
        case .failed(let failure): return .failed(failure)
        }
    }

    /// Values delivered.
    package var delivered: Int { session.delivered }

    package var isFinished: Bool { session.isFinished }

    /// Values are not traced one by one.
    package static func traces(_ event: Event) -> Bool {
        if case .value = event { return false }
        return true
    }

    package mutating func handle(_ event: Event) -> InlineList<Action> {
        // A value while notifying or joined (the session open): first.
        if case .value(let bytes) = event, let actions = session.deliverIfOpen(bytes) { return actions }
        switch (state, event) {
        case (.idle, .start):
            session.opening()
            return [.callStartNotify]

        case (.idle, .join):
            joinedOther = true
            session.joined()
            return [.reportStarted]

        case (.joined, .value(let bytes)), (.notifying, .value(let bytes)):
            return session.deliver(bytes)

        case (.joined, .sharedSessionEnded):
            joinedOther = false
            session.opening()
            return [.reportTakingOver, .callStartNotify]

        case (.joined, .stop):
            session.end()
            return [.finish]

        case (.joined, .deviceDisconnected):
            session.fail(.disconnected)
            return [.fail(.disconnected)]

        case (.joined, .characteristicRemoved):
            session.fail(.removed)
            return [.fail(.removed)]

        case (_, .sharedSessionEnded):
            // Only a joined session waits for it; our own session ending
            // shows as a disconnect or a StopNotify reply.
            return []

        case (.starting, .startSucceeded):
            if session.opened() { return [.reportStarted] }
            session.closing()
            return [.callStopNotify]

        case (.starting, .startFailed(let name, let message)):
            let failure = NotifyFailure.bluez(name: name, message: message)
            session.fail(failure)
            return [.fail(failure)]

        case (.idle, .stop):
            session.end()
            return [.finish]

        case (.starting, .stop):
            session.stopWhenOpened()
            return []

        case (.notifying, .stop):
            session.closing()
            return [.callStopNotify]

        case (.stopping, .stopFinished):
            session.end()
            return [.finish]

        case (.starting, .deviceDisconnected), (.notifying, .deviceDisconnected):
            session.fail(.disconnected)
            return [.callStopNotify, .fail(.disconnected)]

        case (.starting, .characteristicRemoved), (.notifying, .characteristicRemoved):
            session.fail(.removed)
            return [.fail(.removed)]

        case (.stopping, .deviceDisconnected), (.stopping, .characteristicRemoved):
            session.end()
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

extension NotifyStateMachine: NotifyMachine {}

extension NotifyStateMachine.Event: NotifyEvent {}
