#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: `withLock` is the only way in.
///
/// bluectl's locks are this rather than the standard library's
/// `Synchronization.Mutex` because ThreadSanitizer cannot see the latter on
/// Linux (Swift 6.3: a futex in the uninstrumented runtime), so every access
/// it guards is reported as a race and real races would drown in the noise.
/// ThreadSanitizer intercepts pthread mutexes (`Scripts/test --sanitizers`).
public final class Locked<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: consuming sending Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock (not reentrant).
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// Reflection (`dump`, a test framework's failure report) shows a `Locked` as
/// such, without its value: reading the value outside the lock would be a
/// race, and the runtime traps copying a `~Copyable` value it cannot copy
/// (`dump` of a central reached `DBusConnection`'s state and crashed).
extension Locked: CustomReflectable where Value: ~Copyable {
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
