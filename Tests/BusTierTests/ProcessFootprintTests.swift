import Foundation
import Testing

/// What every bluectl process sets for its own memory at start (`MemoryFootprint`), seen
/// from outside in a running command's /proc/PID/status. That it is made before any
/// other thread starts (`Bluectl.prepareProcess` in main) is not visible there: strace
/// shows it (docs/benchmarks.md).
@Suite("A running bluectl's memory settings (bus tier)", .timeLimit(.minutes(2)))
struct ProcessFootprintTests {
    @Test("a running scan has transparent huge pages turned off (THP_enabled: 0)")
    func noTransparentHugePages() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let scan = try bus.startBluectl(["scan", "--json", "--duplicates", "--timeout", "20"])
            #expect(await scan.waitForStdoutLines(1, timeout: .seconds(10)), "\(scan.stderr)")
            let status = try String(contentsOfFile: "/proc/\(scan.pid)/status", encoding: .utf8)
            let line = status.split(separator: "\n").first { $0.hasPrefix("THP_enabled:") }
            #expect(line.map { $0.split(separator: "\t").last } == "0", "\(status)")
            scan.signal(SIGINT)
            let r = await scan.wait(timeout: .seconds(10))
            #expect(r.exitCode == 130, "\(r)")
        }
    }
}
