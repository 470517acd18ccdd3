/// One characteristic's AcquireNotify session: idle → acquiring → reading →
/// closed, or failed. BlueZ answers AcquireNotify with a socket and writes
/// each value to it instead of signalling it (docs/bluez-pitfalls.md, 7);
/// the loop watches the socket, and every value read from it is an event of
/// this machine. Closing the socket is how the session ends: bluetoothd then
/// turns notifications off, with no call to wait for. The socket closing
/// from bluetoothd's side (the device disconnected, or the session was
/// released) fails the session.
package struct AcquireNotifyStateMachine: StateMachine, Equatable {
    package enum State: Sendable, Equatable {
        case idle
        /// AcquireNotify sent.
        case acquiring
        /// The socket is ours and watched: values flow.
        case reading
        case closed
        case failed(NotifyFailure)
    }

    package enum Event: Sendable, Equatable {
        case start
        /// AcquireNotify answered with a socket.
        case acquired
        case acquireFailed(name: String, message: String)
        /// A value read from the socket.
        case value([UInt8])
        /// The socket reached its end (bluetoothd closed it).
        case socketClosed
        case stop
        case deviceDisconnected
        case characteristicRemoved
    }

    /// The actions both notification machines share (this one asks for
    /// the AcquireNotify call and the socket's watch and close).
    package typealias Action = NotifyAction

    /// The phases and the rules shared with StartNotify's machine.
    private var session = NotifySession()

    package init() {}

    package var state: State {
        switch session.phase {
        case .idle: return .idle
        case .opening: return .acquiring
        case .open: return .reading
        case .closing, .ended: return .closed   // no call ends it: closing the socket does
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
        // A value while reading (the session open): first.
        if case .value(let bytes) = event, let actions = session.deliverIfOpen(bytes) { return actions }
        switch (state, event) {
        case (.idle, .start):
            session.opening()
            return [.callAcquireNotify]

        case (.idle, .stop):
            session.end()
            return [.finish]

        case (.acquiring, .acquired):
            if session.opened() { return [.watchSocket, .reportStarted] }
            session.end()
            return [.closeSocket, .finish]

        case (.acquiring, .acquireFailed(let name, let message)):
            return fail(.bluez(name: name, message: message), closing: false)

        case (.acquiring, .stop):
            session.stopWhenOpened()
            return []

        case (.acquiring, .deviceDisconnected):
            return fail(.disconnected, closing: false)

        case (.acquiring, .characteristicRemoved):
            return fail(.removed, closing: false)

        case (.reading, .value(let bytes)):
            return session.deliver(bytes)

        case (.reading, .stop):
            session.end()
            return [.closeSocket, .finish]

        case (.reading, .socketClosed), (.reading, .deviceDisconnected):
            return fail(.disconnected, closing: true)

        case (.reading, .characteristicRemoved):
            return fail(.removed, closing: true)

        case (.closed, _), (.failed, _):
            // Documented ignore: a finished session ignores what is still in
            // flight (AcquireNotify's late answer: the driver does not keep its socket).
            return []

        case (.acquiring, .value), (.acquiring, .socketClosed):
            // Documented ignore: nothing is read before the socket is watched.
            return []

        default:
            return [.unplanned("\(state) + \(event)")]
        }
    }

    private mutating func fail(_ failure: NotifyFailure, closing: Bool) -> InlineList<Action> {
        session.fail(failure)
        return closing ? [.closeSocket, .fail(failure)] : [.fail(failure)]
    }
}

extension AcquireNotifyStateMachine: NotifyMachine {}

extension AcquireNotifyStateMachine.Event: NotifyEvent {}
