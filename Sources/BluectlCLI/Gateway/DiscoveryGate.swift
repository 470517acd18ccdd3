import BluectlCore

/// Which discoveries the gateway publishes, a pure value: the config's filters, and not a
/// repeat of a device's last frame handed on (RSSI aside), nor one sooner than the
/// config's minimum interval. It runs where the scan hands discoveries over, on the
/// central's loop (a `LoopBound` in `GatewayRun.run`), so that the owner task, a thread
/// hop away, is woken only for what it publishes: the gateway's CPU goes mostly to
/// hand-offs between threads (docs/benchmarks.md), and much of what a scan hears near
/// people (phones, other devices, repeats) is not published.
struct DiscoveryGate: Sendable {
    let config: GatewayConfig
    private var lastFrames: [BluetoothAddress: DeviceInfo] = [:]
    /// When each device's last reading was published (kept only with a minimum interval).
    private var lastPublished: [BluetoothAddress: ContinuousClock.Instant] = [:]

    init(config: GatewayConfig) { self.config = config }

    /// Whether `discovery` is to be published (and notes it as handed on).
    mutating func admits(_ discovery: Discovery, now: ContinuousClock.Instant = .now) -> Bool {
        config.admits(discovery.device, sensor: discovery.sensor) && isNew(discovery.device, now: now)
    }

    /// Whether `device`'s frame differs from the last one published, and `minInterval` (when
    /// given) has passed since that one; notes it as handed on when so.
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
}
