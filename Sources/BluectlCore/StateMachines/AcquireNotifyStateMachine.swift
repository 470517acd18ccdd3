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

    package enum Action: Sendable, Equatable {
        case callAcquireNotify
        /// Watch the socket for values.
        case watchSocket
        case reportStarted
        case deliver([UInt8])
        /// Stop watching and close the socket.
        case closeSocket
        /// Ended normally.
        case finish
        case fail(NotifyFailure)
        /// An event no transition plans for in this state: changes nothing;
        /// the driver reports it.
        case unplanned(String)
    }

    package private(set) var state: State = .idle
    /// Values delivered.
    package private(set) var delivered = 0
    /// Stop asked while AcquireNotify was still pending.
    private var stopRequested = false

    package init() {}

    package var isFinished: Bool {
        switch state {
        case .closed, .failed: return true
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
            state = .acquiring
            return [.callAcquireNotify]

        case (.idle, .stop):
            state = .closed
            return [.finish]

        case (.acquiring, .acquired):
            if stopRequested {
                state = .closed
                return [.closeSocket, .finish]
            }
            state = .reading
            return [.watchSocket, .reportStarted]

        case (.acquiring, .acquireFailed(let name, let message)):
            return fail(.bluez(name: name, message: message), closing: false)

        case (.acquiring, .stop):
            stopRequested = true
            return []

        case (.acquiring, .deviceDisconnected):
            return fail(.disconnected, closing: false)

        case (.acquiring, .characteristicRemoved):
            return fail(.removed, closing: false)

        case (.reading, .value(let bytes)):
            delivered += 1
            return [.deliver(bytes)]

        case (.reading, .stop):
            state = .closed
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

    private mutating func fail(_ failure: NotifyFailure, closing: Bool) -> [Action] {
        state = .failed(failure)
        return closing ? [.closeSocket, .fail(failure)] : [.fail(failure)]
    }
}
