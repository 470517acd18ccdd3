/// Polls `check` every `interval` until it returns true (then true) or `timeout` has
/// passed (then false, after one last look). The one way the bus tier waits for another
/// process's progress: the caller asserts on the result, so a wait that runs out fails
/// the test where it waited.
func eventually(timeout: Duration = .seconds(5), every interval: Duration = .milliseconds(50),
                _ check: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await check() { return true }
        if ContinuousClock.now >= deadline { return false }
        try await Task.sleep(for: interval)
    }
}
