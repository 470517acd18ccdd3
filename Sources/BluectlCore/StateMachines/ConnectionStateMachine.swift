/// Connecting to a peripheral the way BlueZ really behaves (5.66's error
/// replies, delays and missing signals: `BlueZ566`). A pure value: the driver (`CentralManager.connect`)
/// feeds it events and performs the actions it returns; tests do the same
/// with no bus.
///
///     disconnected ──start──▶ connecting(1) ──reply ok──▶ connected
///                                  │  ▲
///      abort-by-local (Failed) ────┤  └──── Connected=false ◀── waitingForDisconnect(n)
///      InProgress ─────────────────┤  └──── retry timer ◀────── retryDelay(n)
///      profile-unavailable, other, │
///      out of attempts ────────────┴──▶ failed
///     timeout / cancel in any pending state ──▶ disconnecting ──▶ failed / cancelled
///     bluetoothd stopped in any pending state ──▶ failed (nothing left to undo)
package struct ConnectionStateMachine: StateMachine, Equatable {
    package enum State: Sendable, Equatable {
        case disconnected
        /// `Device1.Connect` sent; `attempt` counts from 1.
        case connecting(attempt: Int)
        /// BlueZ aborted the connection it had made: wait for `Connected=false` before retrying.
        case waitingForDisconnect(attempt: Int)
        /// BlueZ said InProgress: retry after a short delay.
        case retryDelay(attempt: Int)
        /// Connect succeeded but `Connected` is not true yet (bluetoothd can
        /// answer before it emits the property, and 5.66 sometimes never
        /// does): wait for it, asking bluetoothd every `pollInterval`.
        case awaitingConnected(attempt: Int)
        case connected
        /// `Device1.Disconnect` sent to cancel (timeout or cancel).
        case disconnecting(then: Outcome)
        case failed(ConnectionFailure)
        case cancelled
    }

    /// How a disconnect started by the machine ends.
    package enum Outcome: Sendable, Equatable {
        case fail(ConnectionFailure)
        case cancel
    }

    package enum Event: Sendable, Equatable {
        /// Begin; `alreadyConnected` is `Device1.Connected` now.
        case start(alreadyConnected: Bool)
        case connectSucceeded
        /// An error reply to Connect: its D-Bus name and message.
        case connectFailed(name: String, message: String)
        /// `Device1.Connected` changed.
        case connectedChanged(Bool)
        case retryTimerFired
        /// The device object disappeared (InterfacesRemoved).
        case deviceRemoved
        /// bluetoothd left the bus (stopped or crashed): its objects and the
        /// pending Connect are gone with it.
        case bluetoothdStopped
        /// The overall deadline passed.
        case timeout
        /// The caller gave up (cancelPeripheralConnection, Ctrl-C).
        case cancel
        /// The reply to the Disconnect the machine asked for (success or not).
        case disconnectFinished
        /// Time to ask bluetoothd again (`schedulePoll`).
        case pollTimerFired
        /// bluetoothd's answer to `askConnected`: `Device1.Connected` (nil: no answer).
        case polled(connected: Bool?)
    }

    package enum Action: Sendable, Equatable {
        case callConnect
        case scheduleRetry(after: Duration)
        case callDisconnect
        /// Ask bluetoothd for `Device1.Connected` (GetAll); answer with `polled`.
        case askConnected
        /// Send `pollTimerFired` after the delay.
        case schedulePoll(after: Duration)
        /// The peripheral is connected: report success.
        case succeed
        case fail(ConnectionFailure)
        /// Cancelled by the caller: report it.
        case reportCancelled
        /// An event no transition plans for in this state: changes nothing;
        /// the driver reports it.
        case unplanned(String)
    }

    package private(set) var state: State = .disconnected
    /// The last `Device1.Connected` seen.
    package private(set) var deviceConnected = false
    package let maxAttempts: Int
    package let retryDelay: Duration
    package let pollInterval: Duration

    /// `maxAttempts` ≥ 1 counts the first attempt.
    package init(maxAttempts: Int = 3, retryDelay: Duration = BlueZ566.connectRetryDelay,
                 pollInterval: Duration = BlueZ566.connectPollInterval) {
        self.maxAttempts = max(1, maxAttempts)
        self.retryDelay = retryDelay
        self.pollInterval = pollInterval
    }

    package var isFinished: Bool {
        switch state {
        case .connected, .failed, .cancelled: return true
        default: return false
        }
    }

    package mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.disconnected, .start(let already)):
            deviceConnected = already
            if already {
                state = .connected
                return [.succeed]
            }
            state = .connecting(attempt: 1)
            return [.callConnect]

        case (.connecting(let attempt), .connectSucceeded):
            guard deviceConnected else {
                state = .awaitingConnected(attempt: attempt)
                return [.askConnected]
            }
            state = .connected
            return [.succeed]

        case (.awaitingConnected, .polled(let connected)):
            guard connected == true else { return [.schedulePoll(after: pollInterval)] }
            deviceConnected = true
            state = .connected
            return [.succeed]

        case (.awaitingConnected, .pollTimerFired):
            return [.askConnected]

        case (.connecting(let attempt), .connectFailed(let name, let message)):
            return connectFailed(attempt: attempt, name: name, message: message)

        case (_, .connectedChanged(let value)):
            deviceConnected = value
            if case .waitingForDisconnect(let attempt) = state, !value {
                state = .connecting(attempt: attempt + 1)
                return [.callConnect]
            }
            if case .awaitingConnected = state, value {
                state = .connected
                return [.succeed]
            }
            if case .connected = state, !value {
                // Lost after success: no longer this machine's business, but keep the state true.
                state = .disconnected
            }
            return []

        case (.retryDelay(let attempt), .retryTimerFired):
            state = .connecting(attempt: attempt + 1)
            return [.callConnect]

        case (.connecting, .deviceRemoved), (.waitingForDisconnect, .deviceRemoved), (.retryDelay, .deviceRemoved),
             (.awaitingConnected, .deviceRemoved):
            state = .failed(.deviceRemoved)
            return [.fail(.deviceRemoved)]

        case (.connecting, .bluetoothdStopped), (.waitingForDisconnect, .bluetoothdStopped),
             (.retryDelay, .bluetoothdStopped), (.awaitingConnected, .bluetoothdStopped):
            // Nothing to undo: the connection, if any, went with bluetoothd.
            state = .failed(.bluetoothdStopped)
            return [.fail(.bluetoothdStopped)]

        case (.connecting, .timeout), (.waitingForDisconnect, .timeout), (.retryDelay, .timeout),
             (.awaitingConnected, .timeout):
            state = .disconnecting(then: .fail(.timeout))
            return [.callDisconnect]

        case (.connecting, .cancel), (.waitingForDisconnect, .cancel), (.retryDelay, .cancel),
             (.awaitingConnected, .cancel), (.connected, .cancel):
            state = .disconnecting(then: .cancel)
            return [.callDisconnect]

        case (.disconnecting(let then), .disconnectFinished), (.disconnecting(let then), .bluetoothdStopped):
            // (bluetoothd gone: no reply will come; report why we were disconnecting)
            switch then {
            case .fail(let failure):
                state = .failed(failure)
                return [.fail(failure)]
            case .cancel:
                state = .cancelled
                return [.reportCancelled]
            }

        case (.disconnecting(let then), .timeout):
            // The Disconnect itself hangs: report without waiting further.
            switch then {
            case .fail(let failure):
                state = .failed(failure)
                return [.fail(failure)]
            case .cancel:
                state = .cancelled
                return [.reportCancelled]
            }

        case (.connected, _), (.failed, _), (.cancelled, _), (.disconnected, _):
            // Documented ignore: finished (or the link lost after success,
            // see connectedChanged); late replies and timers change nothing.
            return []

        case (.disconnecting, .connectSucceeded), (.disconnecting, .connectFailed), (.disconnecting, .retryTimerFired),
             (.disconnecting, .deviceRemoved), (.disconnecting, .cancel), (.disconnecting, .polled),
             (.disconnecting, .pollTimerFired):
            // Documented ignore: the Connect's reply, a retry timer or a poll
            // after the machine gave up, the device going or a second cancel
            // while the Disconnect is out (its reply, or a time-out, ends it).
            return []

        default:
            return [.unplanned("\(state) + \(event)")]
        }
    }

    private mutating func connectFailed(attempt: Int, name: String, message: String) -> [Action] {
        let retriesLeft = attempt < maxAttempts
        switch BlueZ566.connectError(name: name, message: message) {
        case .alreadyConnected:
            guard deviceConnected else {
                state = .awaitingConnected(attempt: attempt)
                return [.askConnected]
            }
            state = .connected
            return [.succeed]
        case .abortedByLocal:
            guard retriesLeft else {
                state = .failed(.abortedByLocal(attempts: attempt))
                return [.fail(.abortedByLocal(attempts: attempt))]
            }
            if deviceConnected {
                state = .waitingForDisconnect(attempt: attempt)
                return []
            }
            state = .connecting(attempt: attempt + 1)
            return [.callConnect]
        case .inProgress:
            guard retriesLeft else {
                state = .failed(.inProgress(attempts: attempt))
                return [.fail(.inProgress(attempts: attempt))]
            }
            state = .retryDelay(attempt: attempt)
            return [.scheduleRetry(after: retryDelay)]
        case .dualMode:
            state = .failed(.dualMode(message: message))
            return [.fail(.dualMode(message: message))]
        case .deviceGone:
            // As if the removal had been seen first: what it means to the caller is the same.
            state = .failed(.deviceRemoved)
            return [.fail(.deviceRemoved)]
        case .noSlot:
            // Trying again at once finds the controller as full: not retried.
            state = .failed(.noSlot(message: message))
            return [.fail(.noSlot(message: message))]
        case .other:
            let failure = ConnectionFailure.bluez(name: name, message: message)
            state = .failed(failure)
            return [.fail(failure)]
        }
    }
}

/// Why a connection could not be made.
package enum ConnectionFailure: Sendable, Equatable, CustomStringConvertible {
    /// `le-connection-abort-by-local` on every attempt.
    case abortedByLocal(attempts: Int)
    /// `InProgress` on every attempt.
    case inProgress(attempts: Int)
    /// `br-connection-profile-unavailable`: BlueZ tried BR/EDR.
    case dualMode(message: String)
    /// The controller refused one more connection: no free connection slot
    /// (`le-connection-concurrent-connection-limit`, from HCI's Connection
    /// Limit Exceeded; `le-connection-memory-allocation`, from Memory
    /// Capacity Exceeded). Many controllers hold 5 to 7 LE links.
    case noSlot(message: String)
    case deviceRemoved
    /// bluetoothd stopped (or crashed) in the middle.
    case bluetoothdStopped
    case timeout
    case bluez(name: String, message: String)

    package var description: String {
        switch self {
        case .abortedByLocal(let attempts):
            return "the connection was aborted locally (le-connection-abort-by-local) \(attempts) time\(attempts == 1 ? "" : "s")"
        case .inProgress(let attempts):
            return "another connection attempt is in progress (InProgress after \(attempts) attempt\(attempts == 1 ? "" : "s"))"
        case .dualMode(let message):
            return "BlueZ tried a BR/EDR (classic) connection: the device looks dual-mode (\(message)); connect over LE or remove the device and scan with --transport le"
        case .noSlot(let message):
            return "the adapter refused another connection: no free connection slot (\(message)); disconnect another device or use another adapter"
        case .deviceRemoved:
            return "the device disappeared from BlueZ while connecting"
        case .bluetoothdStopped:
            return "bluetoothd stopped while connecting"
        case .timeout:
            return "no connection within the time allowed"
        case .bluez(let name, let message):
            return message.isEmpty ? name : "\(message) (\(name))"
        }
    }
}

/// The kinds of Connect error replies that need different handling
/// (`BlueZ566.connectError(name:message:)` tells them apart).
enum ConnectError: Equatable {
    case alreadyConnected, abortedByLocal, inProgress, dualMode, noSlot, other
    /// The device's object is no longer on the bus (`UnknownObject`): BlueZ
    /// removed it, its InterfacesRemoved not yet mirrored when Connect went out.
    case deviceGone
}
