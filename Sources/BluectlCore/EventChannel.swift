import Logging
import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The inbox of a state-machine driver: bus replies, tree changes and timers
/// all become events here, handled one at a time in arrival order.
final class EventChannel<Event: Sendable>: Sendable {
    let stream: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let timers = Locked<[Task<Void, Never>]>([])

    init() {
        (stream, continuation) = AsyncStream<Event>.makeStream()
    }

    func send(_ event: Event) { continuation.yield(event) }

    /// Sends `event` after `delay` (unless closed first).
    func after(_ delay: Duration, _ event: Event) {
        let task = Task { [continuation] in
            try? await Task.sleep(for: delay)
            if !Task.isCancelled { continuation.yield(event) }
        }
        timers.withLock { $0.append(task) }
    }

    /// Feeds mirror changes through `map` until closed.
    func follow(_ changes: AsyncStream<BlueZObjectTree.Change>, _ map: @escaping @Sendable (BlueZObjectTree.Change) -> [Event]) {
        let task = Task { [continuation] in
            for await change in changes {
                for event in map(change) { continuation.yield(event) }
            }
        }
        timers.withLock { $0.append(task) }
    }

    func close() {
        continuation.finish()
        for task in timers.withLock({ $0 }) { task.cancel() }
    }
}

/// Runs `loop` in a task of its own (so that cancelling the caller does not
/// end the loop's event stream: it must still perform the machine's cleanup)
/// and sends `onCancel` to the channel when the caller is cancelled.
func runDriver<Event: Sendable, T: Sendable>(
    _ channel: EventChannel<Event>, onCancel: Event, _ loop: @escaping @Sendable () async throws -> T
) async throws -> T {
    let task = Task { try await loop() }
    return try await withTaskCancellationHandler {
        try await task.value
    } onCancel: {
        channel.send(onCancel)
    }
}

extension DBusError {
    /// The D-Bus error name and message of any failure, for state machines.
    var nameAndMessage: (String, String) {
        switch self {
        case .remote(let name, let message): return (name, message)
        case .timedOut: return ("org.freedesktop.DBus.Error.NoReply", "no reply")
        case .disconnected: return ("org.freedesktop.DBus.Error.Disconnected", "lost the connection to the system bus")
        default: return ("org.freedesktop.DBus.Error.Failed", description)
        }
    }
}

/// BluectlCore's diagnostics — every state-machine event and the actions it
/// produced, pairing and discovery steps — at `debug` level through swift-log,
/// label "bluectl". A program routes them with `LoggingSystem.bootstrap`
/// (before its first use of the library); bluectl prints them on stderr when
/// `BLUECTL_DEBUG` is set.
package enum Trace {
    package static let logger = Logger(label: "bluectl")

    package static func log(_ message: @autoclosure () -> String) {
        logger.debug("\(message())")
    }

    /// A state machine met an event no transition plans for in its state
    /// (it changed nothing): a bug, or BlueZ doing something new. At notice
    /// level, above the step-by-step trace.
    package static func unplanned(_ machine: String, _ what: String) {
        logger.notice("\(machine): unplanned event \(what)")
    }
}
