import BluectlCore
import CSystemd
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// systemd integration for a `Type=notify` unit (see Scripts/systemd/):
/// READY=1 once the work is running, STATUS= lines as it changes, and
/// WATCHDOG=1 pings while the process still gets answers over the bus.
/// Outside systemd (no `NOTIFY_SOCKET`) every call does nothing.
enum ServiceNotifier {
    static var underSystemd: Bool { getenv("NOTIFY_SOCKET") != nil }

    static func ready(status: String) {
        send("READY=1\nSTATUS=\(oneLine(status))")
    }

    static func status(_ status: String) {
        send("STATUS=\(oneLine(status))")
    }

    static func stopping(status: String) {
        send("STOPPING=1\nSTATUS=\(oneLine(status))")
    }

    /// When the unit has `WatchdogSec=`, pings at half that interval, each
    /// time only after a round trip to the bus daemon succeeded — so a
    /// stuck I/O thread or a dead bus connection stops the pings and
    /// systemd restarts us. Runs until the calling task is cancelled;
    /// returns at once when there is no watchdog.
    static func runWatchdog(central: CentralManager) async {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return }
        let interval = Duration.microseconds(Int64(clamping: usec / 2))
        while !Task.isCancelled {
            if await central.busResponds(within: interval) { send("WATCHDOG=1") }
            try? await Task.sleep(for: interval)
        }
    }

    private static func send(_ state: String) {
        guard underSystemd else { return }
        _ = sd_notify(0, state)
    }

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
