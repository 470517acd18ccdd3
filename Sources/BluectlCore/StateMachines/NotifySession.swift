/// What StartNotify's and AcquireNotify's machines (`NotifyStateMachine`,
/// `AcquireNotifyStateMachine`) share: a session's phases and the rules that
/// do not depend on how BlueZ is asked for the values. Values count, and are
/// delivered, only while the session is open (one before it is the listener
/// being up first, pitfall 4; one after it is not ours); a stop asked while
/// the session is being opened waits for BlueZ's answer; a finished session
/// (ended or failed) ignores whatever is still in flight. Each machine keeps
/// its own table of (state, event) pairs and its own names for the phases.
package struct NotifySession: Sendable, Equatable {
    package enum Phase: Sendable, Equatable {
        case idle
        /// The call that opens the session (StartNotify, AcquireNotify) is out.
        case opening
        /// Values flow.
        case open
        /// The call that ends it (StopNotify) is out.
        case closing
        case ended
        case failed(NotifyFailure)
    }

    package private(set) var phase: Phase = .idle
    /// Values delivered.
    package private(set) var delivered = 0
    /// Stop asked while the session was being opened.
    private var stopRequested = false

    package init() {}

    package var isFinished: Bool {
        switch phase {
        case .ended, .failed: return true
        default: return false
        }
    }

    /// The opening call is out.
    mutating func opening() { phase = .opening }

    /// A stop while the opening call is out: acted on at its answer.
    mutating func stopWhenOpened() { stopRequested = true }

    /// The opening call succeeded: true when the session is now open, false
    /// when a stop came meanwhile (the machine then ends it at once).
    mutating func opened() -> Bool {
        if stopRequested { return false }
        phase = .open
        return true
    }

    /// Open without a call of ours (joining another client's session).
    mutating func joined() { phase = .open }

    mutating func closing() { phase = .closing }
    mutating func end() { phase = .ended }
    mutating func fail(_ failure: NotifyFailure) { phase = .failed(failure) }

    /// A value of the open session: counted, and the one action that
    /// delivers it (inline: no allocation per value).
    mutating func deliver(_ bytes: [UInt8]) -> InlineList<NotifyAction> {
        delivered += 1
        return InlineList(.deliver(bytes))
    }

    /// `deliver` when the session is open (nil otherwise): both machines
    /// take this first, the per-value case, before building their state
    /// and the pair of it and the event they switch on (copies of both).
    mutating func deliverIfOpen(_ bytes: [UInt8]) -> InlineList<NotifyAction>? {
        guard case .open = phase else { return nil }
        return deliver(bytes)
    }
}

/// What either notification machine asks the engine (`NotifyEngine`) to do.
/// The first five mean the same for both and the engine performs them
/// alike; StartNotify's machine also asks for the StartNotify and StopNotify
/// calls and the take-over report, AcquireNotify's for the AcquireNotify
/// call and the socket's watch and close.
package enum NotifyAction: Sendable, Equatable {
    case reportStarted
    case deliver([UInt8])
    /// Ended normally.
    case finish
    case fail(NotifyFailure)
    /// An event no transition plans for in this state: changes nothing; the
    /// driver reports it (a bug, or BlueZ doing something new).
    case unplanned(String)
    // StartNotify's
    case callStartNotify
    /// Tell the user that values may have been missed between the shared
    /// session's end and our own StartNotify.
    case reportTakingOver
    case callStopNotify
    // AcquireNotify's
    case callAcquireNotify
    /// Watch the socket for values.
    case watchSocket
    /// Stop watching and close the socket.
    case closeSocket
}

/// The events both notification machines have, which the engine sends
/// the same way (each machine's enum cases are these requirements).
package protocol NotifyEvent: Sendable {
    /// Open a session of our own (StartNotify, AcquireNotify).
    static var start: Self { get }
    static var stop: Self { get }
    static func value(_ bytes: [UInt8]) -> Self
    static var deviceDisconnected: Self { get }
    static var characteristicRemoved: Self { get }
}

/// A notification machine as the engine (`NotifyEngine.run`) runs it.
package protocol NotifyMachine: StateMachine where Event: NotifyEvent, Action == NotifyAction, Actions == InlineList<NotifyAction> {
    init()
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
