/// When to try again after a failure, and how long to wait first: the policy
/// behind `bluectl subscribe --reconnect`, for any program that keeps a
/// device connected through the device going away, the adapter powering off
/// and bluetoothd restarting.
///
/// ```swift
/// let policy = ReconnectPolicy()
/// var attempt = 1
/// while true {
///     do {
///         try await keepLogging()   // connect, subscribe, print values
///         attempt = 1
///     } catch where policy.isRecoverable(error, afterSuccess: true) {
///         attempt += 1
///         try await Task.sleep(for: policy.delay(beforeAttempt: attempt))
///     }
/// }
/// ```
public struct ReconnectPolicy: Sendable, Equatable {
    /// The wait before the second attempt.
    public var initialDelay: Duration
    /// The longest wait between attempts (each wait doubles up to this).
    public var maximumDelay: Duration

    /// A policy waiting `initialDelay`, then twice as long each time up to
    /// `maximumDelay` (by default 0.5 s, 1 s, 2 s, 4 s, 5 s, 5 s, …).
    public init(initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(5)) {
        self.initialDelay = initialDelay
        self.maximumDelay = max(initialDelay, maximumDelay)
    }

    /// The wait before attempt number `attempt` (the first attempt, 1, waits nothing).
    public func delay(beforeAttempt attempt: Int) -> Duration {
        guard attempt > 1 else { return .zero }
        var delay = initialDelay
        for _ in 0..<min(attempt - 2, 32) where delay < maximumDelay { delay *= 2 }
        return min(delay, maximumDelay)
    }

    /// Whether `error` can pass by itself, so trying again makes sense: the
    /// device out of range or disconnecting, a timeout, the adapter off or
    /// gone, bluetoothd stopped or busy, BlueZ refusing for now. Not: no
    /// access to the bus, a request BlueZ can never grant (not permitted,
    /// invalid, not supported by the attribute), the caller's own
    /// cancellation, a bug. A characteristic not found is recoverable only
    /// `afterSuccess` (it was there before: BlueZ is re-resolving the
    /// services); the first time, it is a wrong name.
    public func isRecoverable(_ error: any Error, afterSuccess: Bool) -> Bool {
        switch error {
        case let error as BluetoothError:
            switch error {
            case .disconnected, .timeout, .deviceNotFound, .adapterPoweredOff, .adapterNotFound, .noAdapter,
                 .bluetoothdNotRunning, .bluetoothdStopped, .inProgress, .bluez, .noResources:
                return true
            case .attributeNotFound:
                return afterSuccess
            case .busUnavailable, .accessDenied, .notPermitted, .unexpected, .invalidRequest, .cancelled,
                 .ambiguous, .notSupported, .roleUnavailable, .valueTooLong, .channelRefused, .securityFailed, .authenticationFailed:
                return false
            }
        default:
            return false
        }
    }
}
