import BluectlDBus

// What the rest of this package (the CLI, the tests) needs from BluectlDBus
// that is not D-Bus: the lock and the thread starter every layer uses. Named
// here with `package` access so that nothing above BluectlCore imports the
// D-Bus layer, and nothing of it reaches BluectlCore's public API.

/// BluectlDBus's `Locked` (a value behind a pthread mutex, which
/// ThreadSanitizer can see), for the CLI's few shared values.
package typealias Locked<Value: ~Copyable> = BluectlDBus.Locked<Value>

/// Runs `body` on a new detached thread named `name` (BluectlDBus's `startThread`).
package func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    BluectlDBus.startThread(name: name, body)
}

extension BlueZ {
    /// Whether `text` is a valid D-Bus object path (a DEVICE may be given as
    /// BlueZ's path of it).
    package static func isObjectPath(_ text: String) -> Bool { ObjectPath(text) != nil }
}

/// BluectlDBus's `HandOff`: one result handed to one waiting task (`l2cap`'s
/// stdin end, settled on the loop and awaited by the copying).
package typealias HandOff<T: Sendable> = BluectlDBus.HandOff<T>

/// BluectlDBus's `LoopBound`: a value only one event loop touches.
package typealias LoopBound<Value> = BluectlDBus.LoopBound<Value>

extension CentralManager {
    /// A value only this central's event loop touches: the command line's
    /// state that BlueZ's values update where they arrive (a `subscribe`
    /// job's count and end), with no lock.
    package func loopBound<Value>(_ value: Value) -> LoopBound<Value> {
        LoopBound(value, loop: mirror.loop)
    }

    /// Runs `body` on this central's event loop and hands its result back,
    /// with no thread blocked (`EventLoop.submit`): for async code that
    /// reads or changes loop-bound state, or reads several things of the
    /// library at one moment (its synchronous getters run inline there).
    package func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await mirror.loop.submit(body)
    }

    /// Hands `body` to this central's event loop without waiting: from any
    /// thread, including where waiting is not allowed (a writer thread, a
    /// sink on the loop itself).
    package func onLoopSoon(_ body: @escaping @Sendable () -> Void) {
        mirror.loop.execute(body)
    }

    /// Calls `onReadable` on this central's event loop whenever `fd` is
    /// readable (or at its end), until `unwatch(_:)`: the loop's poll waits
    /// for it beside the bus, so reading it (what is there) never blocks and
    /// needs no thread. On the loop only.
    package func watch(_ fd: Int32, _ onReadable: @escaping () -> Void) -> LoopWatch {
        mirror.loop.watch(fd, onReadable)
    }

    /// Stops watching (no effect when already stopped). On the loop only.
    package func unwatch(_ watch: LoopWatch) {
        mirror.loop.unwatch(watch)
    }

    /// Waits until `peripheral` is in BlueZ's tree on a powered adapter,
    /// bluetoothd running (tested now and at each change of the mirror, no
    /// polling), at most `timeout`; false when time ran out or the caller
    /// was cancelled. For a connect to try again after BlueZ dropped the
    /// device, or bluetoothd restarted, while a scan is running: a restarted
    /// bluetoothd shows its stored devices before the adapter is powered,
    /// and a Connect then would fail (NotReady).
    package func waitUntilConnectable(_ peripheral: Peripheral, timeout: Duration) async -> Bool {
        guard timeout > .zero, let adapter = peripheral.path.parent else { return false }
        let device = peripheral.path
        return await mirror.waitUntil(timeout: timeout) { tree, bluetoothdRunning in
            bluetoothdRunning && tree.properties(device, BlueZ.deviceInterface) != nil
                && tree.properties(adapter, BlueZ.adapterInterface)?["Powered"]?.bool == true
        }
    }

    /// Returns once the discoveries `findDevice` started are stopped and
    /// answered (the last finder out does not wait for it): the command
    /// line's clean-up, so that bluectl stops what it started.
    package func settleFinding() async {
        await finding.settle()
    }
}

/// A descriptor an event loop watches (`CentralManager.watch(_:_:)`).
package typealias LoopWatch = EventLoop.WatchID

/// A point in time work must be done by: the one way the command line (and
/// the tests) bound work in time. The library's own deadlines are loop
/// timers; this is for tasks.
///
/// `run` returns at the deadline even when the work ignores cancellation (a
/// thread blocked in write(2), a call that never answers): the work is
/// cancelled and left to end on its own, where a task group would wait for
/// it. `shielded` work does not see its caller's cancellation (the clean-up
/// after Ctrl-C must still send StopNotify), only the deadline.
package struct Deadline: Sendable {
    /// When time is up.
    package let end: ContinuousClock.Instant

    /// `duration` from now.
    package init(after duration: Duration) { end = .now + duration }

    /// `seconds` from now.
    package init(seconds: Double) { self.init(after: .milliseconds(Int64(seconds * 1000))) }

    /// A deadline that does not come (a year away: what bounds the work is something else).
    package static var none: Deadline { Deadline(after: .seconds(31_536_000)) }

    /// The time left (zero once passed).
    package var remaining: Duration { max(.zero, end - .now) }

    /// `body`'s value, or nil when the deadline passed first, or the
    /// caller was cancelled (unless `shielded`); then `body` is cancelled.
    package func run<T: Sendable>(shielded: Bool = false, _ body: @escaping @Sendable () async -> T) async -> T? {
        let first = HandOff<T>()
        let work = Task {
            first.settle(.success(await body()))
        }
        let timer = Task { [end] in
            try? await Task.sleep(until: end, clock: .continuous)
            if first.settle(.failure(CancellationError())) { work.cancel() }
        }
        defer { timer.cancel() }
        let value: T
        do {
            if shielded {
                value = try await first.wait()
            } else {
                value = try await withTaskCancellationHandler {
                    try await first.wait()
                } onCancel: {
                    if first.settle(.failure(CancellationError())) { work.cancel() }
                }
            }
        } catch {
            return nil   // time ran out (or the caller was cancelled): `work` ends on its own
        }
        // `body` answered: let its task end too (at once), so that nothing it
        // captured outlives this call (a process about to exit must hold no
        // task that still references what it was working on).
        _ = await work.value
        return value
    }

    /// `body`'s value, or `expired` thrown when the deadline passes first
    /// (the caller's cancellation ends it with `CancellationError`).
    package func run<T: Sendable>(orThrow expired: @autoclosure () -> any Error,
                                  _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let outcome = await run { () async -> Result<T, any Error> in
            do { return .success(try await body()) } catch { return .failure(error) }
        }
        guard let outcome else { throw Task.isCancelled ? CancellationError() : expired() }
        return try outcome.get()
    }
}
