import BluectlDBus

/// Resumes one waiting task once, from Paho's thread, the caller's or `close`'s time
/// limit, whichever fires first (a lock: two may fire at once). Fired before the waiter
/// is set (the limit passed already), it resumes the waiter as it is set.
final class OneShot: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, Never>?
        var fired = false
    }
    private let state = Locked(State())

    /// The ones whose pointer Paho holds (a disconnect's context) until it calls back:
    /// kept alive here rather than by a retain given to Paho, so that one Paho never calls
    /// back on (`close` gave up waiting) is still reachable, not a leak, when the process ends.
    /// Keyed by the pointer's address: looked up without touching what it points to.
    private static let heldForPaho = Locked<[UInt: OneShot]>([:])

    /// Keeps this alive for Paho; the pointer to give it as the context.
    func holdForPaho() -> UnsafeMutableRawPointer {
        let pointer = Unmanaged.passUnretained(self).toOpaque()
        Self.heldForPaho.withLock { $0[UInt(bitPattern: pointer)] = self }
        return pointer
    }

    /// The one behind `context`, no longer kept for Paho (Paho called back, or its call
    /// failed); nil when it was already let go.
    static func releasedByPaho(_ context: UnsafeMutableRawPointer?) -> OneShot? {
        heldForPaho.withLock { $0.removeValue(forKey: UInt(bitPattern: context)) }
    }

    func set(_ waiter: CheckedContinuation<Void, Never>) {
        let now = state.withLock { state -> Bool in
            if state.fired { return true }
            state.waiter = waiter
            return false
        }
        if now { waiter.resume() }
    }

    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.fired = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
