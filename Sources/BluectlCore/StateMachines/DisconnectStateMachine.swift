/// Disconnecting a peripheral: `Device1.Disconnect`, then waiting for the
/// link to be down — `Connected=false`, the device's removal or bluetoothd
/// leaving — and, because bluetoothd 5.66 does not always signal it, asking
/// bluetoothd every `pollInterval` after Disconnect's reply
/// (`BlueZ566.disconnectPollInterval`).
///
///     idle ──start(connected)──▶ disconnecting ──reply──▶ waiting ──Connected=false / polled false──▶ done
///       └─ start(not connected) ──▶ done          └─ error reply ──▶ failed
///     Connected=false, removal or bluetoothd gone in any pending state ──▶ done
///     timeout in any pending state ──▶ failed(timeout)
package struct DisconnectStateMachine: StateMachine, Equatable {
    package enum State: Sendable, Equatable {
        case idle
        /// Disconnect sent.
        case disconnecting
        /// Disconnect answered; the link is not reported down yet.
        case waiting
        case done
        case failed(DisconnectFailure)
    }

    package enum Event: Sendable, Equatable {
        /// Begin; `connected` is bluetoothd's `Connected` now.
        case start(connected: Bool)
        case disconnectSucceeded
        case disconnectFailed(name: String, message: String)
        /// `Device1.Connected` changed.
        case connectedChanged(Bool)
        /// The device object went (or bluetoothd with it): the link is down.
        case deviceGone
        case pollTimerFired
        /// bluetoothd's answer to `askConnected` (nil: no answer).
        case polled(connected: Bool?)
        case timeout
    }

    package enum Action: Sendable, Equatable {
        case callDisconnect
        /// Ask bluetoothd for `Device1.Connected` (GetAll); answer with `polled`.
        case askConnected
        /// Send `pollTimerFired` after the delay.
        case schedulePoll(after: Duration)
        /// The link is down: report success.
        case succeed
        case fail(DisconnectFailure)
        /// An event no transition plans for in this state: changes nothing;
        /// the driver reports it.
        case unplanned(String)
    }

    package private(set) var state: State = .idle
    package let pollInterval: Duration

    package init(pollInterval: Duration = BlueZ566.disconnectPollInterval) {
        self.pollInterval = pollInterval
    }

    package var isFinished: Bool {
        switch state {
        case .done, .failed: return true
        default: return false
        }
    }

    package mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.idle, .start(let connected)):
            guard connected else { return done() }
            state = .disconnecting
            return [.callDisconnect]

        case (.disconnecting, .disconnectSucceeded):
            state = .waiting
            return [.askConnected]

        case (.disconnecting, .disconnectFailed(let name, let message)):
            state = .failed(.bluez(name: name, message: message))
            return [.fail(.bluez(name: name, message: message))]

        case (.disconnecting, .connectedChanged(false)), (.waiting, .connectedChanged(false)),
             (.disconnecting, .deviceGone), (.waiting, .deviceGone), (.waiting, .polled(connected: false)):
            return done()

        case (.waiting, .polled):
            return [.schedulePoll(after: pollInterval)]

        case (.waiting, .pollTimerFired):
            return [.askConnected]

        case (.disconnecting, .timeout), (.waiting, .timeout):
            state = .failed(.timeout)
            return [.fail(.timeout)]

        case (.disconnecting, .connectedChanged(true)), (.waiting, .connectedChanged(true)):
            // Documented ignore: no news (still up); the wait goes on.
            return []

        case (.done, _), (.failed, _):
            // Documented ignore: finished; late replies, polls and timers change nothing.
            return []

        default:
            return [.unplanned("\(state) + \(event)")]
        }
    }

    private mutating func done() -> [Action] {
        state = .done
        return [.succeed]
    }
}

/// Why a disconnect did not complete.
package enum DisconnectFailure: Sendable, Equatable, CustomStringConvertible {
    case timeout
    case bluez(name: String, message: String)

    package var description: String {
        switch self {
        case .timeout: return "the link was still up when the time allowed ran out"
        case .bluez(let name, let message): return message.isEmpty ? name : "\(message) (\(name))"
        }
    }
}
