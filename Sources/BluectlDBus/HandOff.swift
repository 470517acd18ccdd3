/// One result handed from another thread to one waiting task, at most once:
/// a reply, a timeout and a cancellation may race, and the first to settle
/// wins (`settle` says whether it did).
///
/// The result crosses through this object's mutex, not through the
/// continuation: when the result comes before the waiting task has
/// suspended, Swift 6.3's runtime resumes it on the fast path of
/// `swift_continuation_await`, ordered by an atomic that ThreadSanitizer
/// cannot see (the runtime is not instrumented, and that path has no
/// annotation), so TSan reported the result's memory as a data race between
/// the thread that built it and the task that read it (the bus tier's
/// sanitizer check found one: a `GetAll` reply decoded by
/// `MessageCodec.readArray` on the bus thread and read in
/// `Peripheral.fetchDeviceProperties`). Taking the same mutex on both sides
/// makes the order visible, and costs one uncontended lock.
package final class HandOff<T: Sendable>: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, Never>?
        var result: Result<T, any Error>?
    }
    private let state = Locked(State())

    package init() {}

    /// Settles the hand-off with `result` unless it is settled already;
    /// returns whether this call settled it.
    @discardableResult
    package func settle(_ result: Result<T, any Error>) -> Bool {
        let (won, waiter) = state.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
            guard s.result == nil else { return (false, nil) }
            s.result = result
            defer { s.waiter = nil }
            return (true, s.waiter)
        }
        waiter?.resume()
        return won
    }

    /// The result, once settled (at once if it is already). One waiter only.
    package func wait() async throws -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let settled = state.withLock { s -> Bool in
                if s.result != nil { return true }
                s.waiter = continuation
                return false
            }
            if settled { continuation.resume() }
        }
        return try state.withLock { s -> Result<T, any Error> in
            guard let result = s.result else { preconditionFailure("HandOff resumed unsettled") }
            return result
        }.get()
    }

    /// Whether it is settled (a result waits, or was taken).
    package var isSettled: Bool { state.withLock { $0.result != nil } }

    /// Whether a task is suspended in `wait()` (tests use it to settle only then).
    var hasWaiterForTesting: Bool { state.withLock { $0.waiter != nil } }
}
