#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// The one owner of a bus connection's state and of everything built on it
/// (BluectlCore's mirror of BlueZ, its state machines and their timers):
/// swift-nio's `EventLoop` in small.
///
/// Work reaches the loop as jobs (`execute`), run one at a time in the order
/// handed in; replies and signals are handled on it in bus order; timers
/// (`schedule`) fire on it. State that only the loop touches lives in a
/// `LoopBound` and needs no lock. Who runs the loop:
/// - a live connection: its I/O thread (`DBusConnection.connect`);
/// - an embedded connection (tests: `DBusConnection.embedded()`), and any
///   connection whose I/O thread has ended: whichever thread hands in a job
///   runs the queue there and then, one thread at a time (`driving`), as
///   swift-nio's `EmbeddedEventLoop` runs on its caller. Its clock is then
///   virtual and moves only when a test says (`advance(by:)`).
@usableFromInline package final class EventLoop: @unchecked Sendable {
    package typealias Job = @Sendable () -> Void

    /// How handed-in jobs get run.
    private enum Runner {
        /// A thread of its own runs them; `wake` interrupts its wait.
        case thread(wake: @Sendable () -> Void)
        /// The thread that hands a job in runs the queue (under `driving`).
        case callers
    }

    private struct Inbox {
        var jobs: [Job] = []
        var runner: Runner
    }

    /// The jobs handed in and who runs them: the one thing every thread
    /// touches (any thread may hand a job in), hence a lock. Held only to
    /// append or to take the whole queue.
    private let inbox: Locked<Inbox>
    /// Whether the inbox may hold jobs: set under its lock when one is handed
    /// in, cleared under it when the queue is taken. The loop looks here
    /// first, so that its turns (one per message, per timer, per wake-up)
    /// take the lock only when there is something to take; a job handed in
    /// just after the look is not missed: its hand-over then wakes the loop.
    private let mayHaveJobs = Atomic<Bool>(false)
    /// Taken by a caller running the queue itself (`Runner.callers`), so
    /// that only one thread at a time is the loop.
    private let driving = DriveLock()

    // Loop-only: touched by jobs, timers and the I/O thread's iteration.
    private var timers: [UInt64: Timer] = [:]
    private var nextTimer: UInt64 = 1
    /// The earliest deadline of `timers` once known (nil: none, or not known
    /// since a timer went): asked twice per turn of the loop.
    private var earliest: Earliest = .unknown
    /// The virtual clock's reading; nil: the real clock.
    private var virtualNow: ContinuousClock.Instant?
    private var watches: [UInt64: Watch] = [:]
    private var nextWatch: UInt64 = 1

    private struct Watch {
        var fd: Int32
        var events: WatchEvents
        var onReady: () -> Void
    }

    /// What a watch waits for (poll(2)'s events; an error or hang-up always counts).
    package struct WatchEvents: OptionSet, Sendable {
        package let rawValue: Int16
        package init(rawValue: Int16) { self.rawValue = rawValue }
        /// Something to read (POLLIN), or the end.
        package static let readable = WatchEvents(rawValue: Int16(POLLIN))
        /// Room to write, or a connect(2) finished (POLLOUT).
        package static let writable = WatchEvents(rawValue: Int16(POLLOUT))
    }

    /// A watched descriptor; pass it to `unwatch(_:)`.
    package struct WatchID: Hashable, Sendable {
        fileprivate let raw: UInt64
    }

    private struct Timer {
        var deadline: ContinuousClock.Instant
        var job: () -> Void
    }

    private enum Earliest {
        case unknown
        case known(ContinuousClock.Instant?)
    }

    /// A scheduled job; pass it to `cancel(_:)`.
    package struct TimerID: Hashable, Sendable {
        fileprivate let raw: UInt64
    }

    /// A loop run by a thread of its own, which `wake` interrupts.
    package init(wake: @escaping @Sendable () -> Void) {
        inbox = Locked(Inbox(runner: .thread(wake: wake)))
    }

    /// A loop run by the threads that hand it jobs, on a virtual clock.
    package init(embeddedAt start: ContinuousClock.Instant = .now) {
        inbox = Locked(Inbox(runner: .callers))
        virtualNow = start
    }

    // MARK: - Which thread is the loop

    @usableFromInline static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    @inlinable var identity: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Whether the calling thread is running this loop now (inlinable for
    /// `LoopBound.value`, which checks it on every access).
    @inlinable package var inLoop: Bool { pthread_getspecific(Self.currentKey) == identity }

    /// Traps in debug builds (tests) when called off the loop: the loop's
    /// own bookkeeping (timers, watches), whose callers are all in this file
    /// and the connection's.
    @inline(__always)
    package func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "touched off its event loop", file: file, line: line)
    }

    /// Traps in every build when called off the loop: the check behind
    /// `LoopBound`, whose values code of every layer reaches. One
    /// thread-local read and a compare (`pthread_getspecific`);
    /// docs/benchmarks.md has what it costs per notification.
    @inlinable @inline(__always)
    package func preconditionInLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inLoop, "touched off its event loop", file: file, line: line)
    }

    /// Runs `body` as the loop on this thread (re-entrant).
    private func asLoop<T>(_ body: () -> T) -> T {
        let previous = pthread_getspecific(Self.currentKey)
        pthread_setspecific(Self.currentKey, identity)
        defer { pthread_setspecific(Self.currentKey, previous) }
        return body()
    }

    // MARK: - Jobs

    /// Hands `job` to the loop; it runs after the jobs handed in before it.
    /// From the loop itself it runs after the current job.
    package func execute(_ job: @escaping Job) {
        let runner = inbox.withLock { inbox -> Runner in
            inbox.jobs.append(job)
            mayHaveJobs.store(true, ordering: .releasing)
            return inbox.runner
        }
        guard !inLoop else { return }   // the loop runs it after the current job
        switch runner {
        case .thread(let wake): wake()
        case .callers: drive()
        }
    }

    /// Runs `body` on the loop and returns its result, waiting for it from
    /// another thread (the loop never waits for another thread, so this
    /// cannot deadlock). For the few synchronous reads of the public API.
    package func sync<T>(_ body: @escaping @Sendable () -> T) -> T {
        if inLoop { return body() }
        let result = LoopAnswer<T>()
        execute { result.set(body()) }
        return result.wait()
    }

    /// Runs `body` on the loop; the async edge of every call into it.
    package func submit<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        let answer = HandOff<T>()
        execute { answer.settle(.success(body())) }
        return try! await answer.wait()   // settled with a success only
    }

    /// Whether jobs wait (the I/O thread then does not sleep in poll).
    package var hasJobs: Bool {
        mayHaveJobs.load(ordering: .acquiring) && inbox.withLock { !$0.jobs.isEmpty }
    }

    /// Runs every job handed in so far, and those they hand in. Loop only.
    package func runJobs() {
        assertInLoop()
        while mayHaveJobs.load(ordering: .acquiring) {
            // Taken whole (no copy of a shared buffer).
            let jobs = inbox.withLock { inbox -> [Job] in
                mayHaveJobs.store(false, ordering: .relaxed)
                if inbox.jobs.isEmpty { return [] }
                defer { inbox.jobs = [] }
                return inbox.jobs
            }
            if jobs.isEmpty { return }
            for job in jobs { job() }
        }
    }

    /// The caller becomes the loop for a while: runs the queue and the due
    /// timers. When another thread is the loop now, the job is left to it
    /// (it looks at the queue again after letting go), so handing in a job
    /// never waits: a stream's termination handler may hand one in from
    /// inside a task's cancellation, while the loop yields to that task.
    private func drive() {
        repeat {
            guard driving.tryLock() else { return }
            asLoop {
                runJobs()
                fireDueTimers()
            }
            driving.unlock()
        } while hasJobs
    }

    // MARK: - The I/O thread

    /// The calling thread is the loop from now on (the I/O thread, at its start).
    package func adoptCurrentThread() {
        pthread_setspecific(Self.currentKey, identity)
    }

    /// The I/O thread is ending: the jobs still queued, and every later
    /// one, run on the threads that hand them in.
    package func releaseThread() {
        inbox.withLock { $0.runner = .callers }
        pthread_setspecific(Self.currentKey, nil)
        drive()
    }

    // MARK: - Time

    /// The loop's clock now (virtual for an embedded loop). Loop only when virtual.
    package var now: ContinuousClock.Instant {
        if let virtualNow {
            assertInLoop()
            return virtualNow
        }
        return .now
    }

    /// Runs `job` on the loop once `now` has reached `deadline`. Loop only.
    @discardableResult
    package func schedule(at deadline: ContinuousClock.Instant, _ job: @escaping () -> Void) -> TimerID {
        assertInLoop()
        let id = nextTimer
        nextTimer += 1
        timers[id] = Timer(deadline: deadline, job: job)
        if case .known(let known) = earliest, known.map({ deadline < $0 }) ?? true { earliest = .known(deadline) }
        return TimerID(raw: id)
    }

    /// `schedule(at: now + delay)`.
    @discardableResult
    package func schedule(after delay: Duration, _ job: @escaping () -> Void) -> TimerID {
        schedule(at: now + delay, job)
    }

    /// Forgets a timer that has not fired (no effect once it has). Loop only.
    package func cancel(_ timer: TimerID) {
        assertInLoop()
        if timers.removeValue(forKey: timer.raw) != nil { earliest = .unknown }
    }

    /// Forgets every timer and watched descriptor: the connection they
    /// served is closed (they would only hold what they capture). Loop only.
    package func cancelAll() {
        assertInLoop()
        timers.removeAll()
        earliest = .unknown
        watches.removeAll()
    }

    /// The earliest deadline of a scheduled job. Loop only.
    package var nextDeadline: ContinuousClock.Instant? {
        assertInLoop()
        if case .known(let known) = earliest { return known }
        let found = timers.values.lazy.map(\.deadline).min()
        earliest = .known(found)
        return found
    }

    /// Runs the jobs whose deadline has passed, earliest first (those
    /// scheduled meanwhile too, when already due). Loop only.
    package func fireDueTimers() {
        assertInLoop()
        // Most turns have a call waiting and no timer due: look before building anything.
        while let next = nextDeadline, next <= now {
            let current = now
            let due = timers.filter { $0.value.deadline <= current }
                .sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
            if due.isEmpty { return }
            for (id, timer) in due where timers.removeValue(forKey: id) != nil {
                earliest = .unknown
                timer.job()
                runJobs()
            }
        }
    }

    // MARK: - Descriptors

    /// Calls `onReady` on the loop whenever `fd` is readable (or hung up,
    /// or failed), until `unwatch`; with `.writable`, whenever it has room
    /// to write (an L2CAP socket's connect(2) finishing, a full socket
    /// draining). The I/O thread waits for it in the same poll as the bus.
    /// Loop only.
    package func watch(_ fd: Int32, for events: WatchEvents = .readable, _ onReady: @escaping () -> Void) -> WatchID {
        assertInLoop()
        let id = nextWatch
        nextWatch += 1
        watches[id] = Watch(fd: fd, events: events, onReady: onReady)
        return WatchID(raw: id)
    }

    /// Stops watching (no effect when already stopped). Loop only.
    package func unwatch(_ id: WatchID) {
        assertInLoop()
        watches.removeValue(forKey: id.raw)
    }

    /// The descriptors watched now and what for, for the I/O thread's poll. Loop only.
    package var watched: [(id: WatchID, fd: Int32, events: WatchEvents)] {
        assertInLoop()
        return watches.map { (WatchID(raw: $0.key), $0.value.fd, $0.value.events) }
    }

    /// The I/O thread saw `id`'s descriptor ready. Loop only.
    package func descriptorReady(_ id: WatchID) {
        assertInLoop()
        watches[id.raw]?.onReady()
    }

    /// Moves a virtual clock forward by `duration`, firing each timer at
    /// its own deadline on the way (tests). From any thread but the loop's.
    package func advance(by duration: Duration) {
        precondition(virtualNow != nil, "advance(by:) needs an embedded loop")
        driving.lock()
        asLoop {
            runJobs()
            let target = virtualNow! + duration
            while let next = nextDeadline, next <= target {
                virtualNow = max(virtualNow!, next)
                fireDueTimers()
            }
            virtualNow = target
        }
        driving.unlock()
        drive()
    }
}

/// A loop-only value (swift-nio's `NIOLoopBound`): no lock, because only
/// its loop ever touches it; every access checks that, in release builds
/// too (a value touched off its loop is a data race, which must trap rather
/// than corrupt BlueZ's state quietly).
///
/// Public, with an inlinable accessor, only so that the modules above get
/// `value` specialized and inlined: Swift 6.3 does neither across modules
/// for a `package` generic class, even `@inlinable`, and each access was then
/// an unspecialized generic coroutine (docs/benchmarks.md, "the
/// notification path per value"). It is not part of the library's promise; only this package
/// can make one (its initializer is `package`).
public final class LoopBound<Value>: @unchecked Sendable {
    @usableFromInline package let loop: EventLoop
    @usableFromInline var stored: Value

    package init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        stored = value
    }

    /// The value; from the loop only.
    @inlinable public var value: Value {
        _read {
            loop.preconditionInLoop()
            yield stored
        }
        _modify {
            loop.preconditionInLoop()
            yield &stored
        }
    }
}

/// A pthread mutex that can be tried: who runs a callers-run loop now.
private final class DriveLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }
    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
}

/// The answer `EventLoop.sync` waits for: a semaphore, not a lock guarding
/// state (the value is written once, before the post, and read after the wait).
private final class LoopAnswer<T>: @unchecked Sendable {
    private var value: T?
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init() { sem_init(semaphore, 0, 0) }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func set(_ answer: T) {
        value = answer
        sem_post(semaphore)
    }

    func wait() -> T {
        while sem_wait(semaphore) != 0 {}
        return value!
    }
}
