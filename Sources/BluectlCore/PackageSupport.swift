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
