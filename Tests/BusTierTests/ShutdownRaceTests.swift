import Foundation
import Testing

/// Regression: `scan --count` hung now and then after printing everything
/// (about 1 run in 25 on a busy machine). The I/O thread held the mirror's
/// lock while yielding a change to a task that was being cancelled, and the
/// cancellation (holding the task's status lock) wanted the mirror's lock to
/// remove its listener. Many short runs make the race likely to show.
@Suite("Shutdown races (bus tier)")
struct ShutdownRaceTests {
    @Test("100 × scan --count 2 against 3 advertisers: every run ends by itself")
    func scanCountNeverHangs() async throws {
        try await withPrivateBus { bus in
            for i in 1...3 {
                try await bus.addAdvertiser("hci0", "00:11:22:33:44:0\(i)", [.name("dev\(i)"), .rssi(-50)])
            }
            for n in 0..<100 {
                let r = try await bus.runBluectl(["scan", "--json", "--count", "2", "--timeout", "30"], timeout: .seconds(15))
                guard r.exitCode == 0, r.stdoutLines.count == 2 else {
                    Issue.record("run \(n): \(r)")
                    return
                }
            }
        }
    }
}
