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

/// For the command line and the tests, not the core (whose deadlines are
/// loop timers): runs `body` with a deadline: its value, or nil when time ran out first
/// (or the caller was cancelled). Returns at the deadline even when `body`
/// ignores cancellation (a thread blocked in write(2), a call that never
/// answers): `body` is cancelled and left to finish on its own — a task
/// group would wait for it.
package func firstValue<T: Sendable>(within timeout: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    let first = HandOff<T?>()
    let work = Task {
        first.settle(.success(await body()))
    }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        if first.settle(.success(nil)) { work.cancel() }
    }
    defer { timer.cancel() }
    return await withTaskCancellationHandler {
        (try? await first.wait()) ?? nil
    } onCancel: {
        if first.settle(.success(nil)) { work.cancel() }
    }
}
