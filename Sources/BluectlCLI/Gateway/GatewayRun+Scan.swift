import BluectlCore

/// The gateway's scan as its events say it: how it scans, its losses and
/// resumptions, and the watchdog's recoveries (docs/gateway.md, "The scan").
extension GatewayRun {
    /// Says at start how the gateway scans, and why.
    func announceScanning() {
        // Passive scanning (AdvertisementMonitor1) is not built: bluetoothd 5.66 offers it only
        // with --experimental, and a passive scan gets no scan responses (no names).
        Output.error("gateway: scanning \(adapter.name) actively (StartDiscovery, duplicates on): passive scanning "
            + "through AdvertisementMonitor1 is not built (bluetoothd 5.66 offers it only with --experimental, "
            + "and a passive scan hears no scan responses)"
            + (scanSilence.map { "; the scan is restarted after \($0.tenthsOfSeconds) s without an advertisement" } ?? ""))
    }

    /// Publishes a scan event on the events topic and says it on stderr; keeps the watchdog in step.
    func handle(_ event: GatewayScanEvent, watchdog: inout ScanWatchdog) {
        var line = JSONLine()
        switch event {
        case .interrupted(let reason):
            watchdog.paused()
            line.add("event", "scan_interrupted")
            line.add("reason", reason)
            Output.error("gateway: scan interrupted: \(reason); scanning again when \(adapter.name) is back")
            ServiceNotifier.status("scan interrupted: \(reason)")
        case .resumed(let gap, let reason):
            watchdog.resumed(at: .now)
            line.add("event", "scan_resumed")
            line.add("gap_s", gap.tenthsOfSeconds)
            line.add("reason", reason)
            Output.error("gateway: scanning \(adapter.name) again after \(gap.tenthsOfSeconds) s (\(reason))")
            ServiceNotifier.status("publishing \(adapter.name)'s advertisements to \(broker) as \(topics.gateway)")
        case .recovered(let step, let silent, let error):
            watchdog.resumed(at: .now)
            line.add("event", "scan_recovery")
            line.add("action", step.rawValue)
            line.add("silent_s", silent.tenthsOfSeconds)
            if let error { line.add("error", error) }
            Output.error("gateway: scan recovery (\(step == .powerCycle ? "adapter power-cycled" : "discovery restarted")) "
                + (error.map { "failed: \($0)" } ?? "done"))
        case .failed:
            return
        }
        do { try session.publish(topics.events, line.renderedBytes(newline: false)) } catch { Output.error("gateway: \(error)") }
    }

    /// The watchdog found the scan silent: asks the scanner for `step` (its event follows when done).
    func recover(_ step: ScanWatchdog.Step, silent: Duration, scanner: GatewayScanner) {
        Output.error("gateway: no advertisement for \(silent.tenthsOfSeconds) s while scanning; "
            + (step == .powerCycle ? "power-cycling \(adapter.name)" : "restarting the discovery"))
        scanner.recover(step, silent: silent)
    }

    /// Calls `tick` often enough for the watchdog (a quarter of its silence) and for the buffer's
    /// report (`greetAndReport`): at least each second, until cancelled.
    static func ticks(_ silence: Duration?, tick: @Sendable () -> Void) async {
        let every = min(.seconds(1), (silence ?? .seconds(4)) / 4)
        while (try? await Task.sleep(for: every)) != nil { tick() }
    }
}
