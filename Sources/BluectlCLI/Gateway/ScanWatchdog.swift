/// The gateway's stalled-scan watchdog, a pure value: it notices that nothing was
/// heard for `silence` while scanning and says which recovery comes next.
///
/// A scan can stall behind bluetoothd's back: `Discovering` stays true while the
/// kernel's discovery stopped (theengs/gateway #264, bluez #1126), and nothing says
/// so but the silence. The ladder: restart the discovery; if that brings nothing
/// within another `silence`, power-cycle the adapter; after that only restarts, each
/// after a further `silence` (an empty room is silent too: one power cycle per silent
/// spell, not one every other period). Anything heard starts the ladder again.
struct ScanWatchdog: Sendable, Equatable {
    /// A recovery, in the order they are tried.
    enum Step: String, Sendable, Equatable {
        /// StopDiscovery, then StartDiscovery.
        case restartDiscovery = "restart_discovery"
        /// The adapter powered off and on, then StartDiscovery.
        case powerCycle = "power_cycle"
    }

    /// How long a scan may hear nothing before a recovery (nil: never).
    let silence: Duration?
    /// Since when nothing was heard (the last advertisement, the scan's start or the last recovery).
    private(set) var quietSince: ContinuousClock.Instant
    /// Whether a scan runs (no silence counts while bluetoothd or the adapter is away).
    private(set) var scanning = true
    /// Recoveries tried since something was last heard.
    private(set) var tried = 0

    init(silence: Duration?, now: ContinuousClock.Instant = .now) {
        self.silence = silence
        quietSince = now
    }

    /// An advertisement was heard: the ladder starts again.
    mutating func heard(at now: ContinuousClock.Instant) {
        quietSince = now
        tried = 0
    }

    /// The scan was lost (bluetoothd gone, the adapter off): silence is no stall until it resumes.
    mutating func paused() { scanning = false }

    /// A scan runs again (after a loss): the silence counts from `now`; the ladder is kept.
    mutating func resumed(at now: ContinuousClock.Instant) {
        scanning = true
        quietSince = now
    }

    /// The recovery due at `now`, if any (and notes it as tried: the next one is due a
    /// further `silence` later).
    mutating func check(at now: ContinuousClock.Instant) -> (step: Step, silent: Duration)? {
        guard scanning, let silence, now - quietSince >= silence else { return nil }
        let silent = now - quietSince
        tried += 1
        quietSince = now
        return (tried == 2 ? .powerCycle : .restartDiscovery, silent)
    }
}

extension Duration {
    /// In seconds, to a tenth: the gaps and silences the gateway's events report.
    var tenthsOfSeconds: Double {
        ((Double(components.seconds) + Double(components.attoseconds) / 1e18) * 10).rounded() / 10
    }
}
