import BluectlCore
import Synchronization

/// Which discoveries the gateway publishes, a pure value: the config's filters, and not a
/// repeat of a device's last frame published (RSSI aside), nor one sooner than the
/// config's minimum interval. It runs where the scan hands discoveries over, on the
/// central's loop (`DiscoveryGate.OnLoop`), so that the owner task, a thread hop away,
/// is woken only for what it publishes: the hop costs more than the publishing
/// (docs/benchmarks.md), and most of what a scan hears near people (phones, other
/// devices' repeats) is not published.
struct DiscoveryGate: Sendable {
    let config: GatewayConfig
    private var lastFrames: [BluetoothAddress: DeviceInfo] = [:]
    /// When each device's last reading was published (kept only with a minimum interval).
    private var lastPublished: [BluetoothAddress: ContinuousClock.Instant] = [:]

    init(config: GatewayConfig) { self.config = config }

    /// Whether `discovery` is to be published (and notes it as published).
    mutating func admits(_ discovery: Discovery, now: ContinuousClock.Instant = .now) -> Bool {
        config.admits(discovery.device, sensor: discovery.sensor) && isNew(discovery.device, now: now)
    }

    /// Whether `device`'s frame differs from the last one published, and `minInterval` (when
    /// given) has passed since that one; notes it as published when so.
    mutating func isNew(_ device: DeviceInfo, now: ContinuousClock.Instant = .now) -> Bool {
        var frame = device
        frame.rssi = nil
        if lastFrames[device.address] == frame { return false }
        if let minInterval = config.minInterval {
            if let last = lastPublished[device.address], now - last < .milliseconds(Int64(minInterval * 1000)) { return false }
            lastPublished[device.address] = now
        }
        lastFrames[device.address] = frame
        return true
    }

    /// The gate where the scan's sink runs, and a count of what it kept back, for the
    /// stalled-scan watchdog (anything heard proves the scan alive).
    final class OnLoop: @unchecked Sendable {
        // @unchecked: `gate` is used only by `pass`, which the scan's sink calls on the
        // central's loop, one discovery at a time; `heldBack` is an atomic: the loop counts,
        // the owner task reads it at its ticks.
        private var gate: DiscoveryGate
        /// Discoveries heard and not handed over, since the start.
        let heldBack = Atomic<Int>(0)

        init(_ gate: DiscoveryGate) { self.gate = gate }

        /// Whether `discovery` goes on to the owner; counted in `heldBack` when not.
        func pass(_ discovery: Discovery) -> Bool {
            if gate.admits(discovery) { return true }
            heldBack.add(1, ordering: .relaxed)
            return false
        }
    }
}
