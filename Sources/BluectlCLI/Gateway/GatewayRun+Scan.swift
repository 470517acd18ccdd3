import ArgumentParser
import BluectlCore

/// How the gateway scans (`--scan`): passively through an advertisement monitor where bluetoothd
/// offers monitors and is a release they are proven with, else actively (docs/gateway.md, "The scan").
enum GatewayScanMode: String, ExpressibleByArgument, Sendable, CaseIterable {
    /// Passive where offered by a bluetoothd of `GatewayScanPlan.passiveProven`, else active, saying why.
    case auto
    /// StartDiscovery (active scanning: scan requests, so scan responses and names).
    case active
    /// An advertisement monitor only (fails when the adapter offers none).
    case passive
}

/// The scan the gateway starts: its patterns (nil: active) and the reason, said at start.
struct GatewayScanPlan: Sendable, Equatable {
    /// The monitor's patterns; nil for an active scan.
    let patterns: [AdvertisementPattern]?
    /// Why this scan, and what a passive one misses.
    let reason: String

    /// The patterns that let through every advertisement `config` admits, and what they cover:
    /// its services' data and first listed UUID, else its sensor formats', else every format the
    /// gateway decodes (a passive scan cannot ask for every advertisement).
    static func patterns(for config: GatewayConfig) -> (patterns: [AdvertisementPattern], covering: String) {
        if !config.services.isEmpty {
            let services = config.services.reduce(into: [BluetoothUUID]()) { if !$0.contains($1) { $0.append($1) } }
            var patterns = services.map(AdvertisementPattern.serviceData)
            for uuid in services {
                // the UUID first in an incomplete or complete list of its size
                let (incomplete, complete): (UInt8, UInt8) = uuid.uint16Value != nil ? (0x02, 0x03) : uuid.uint32Value != nil ? (0x04, 0x05) : (0x06, 0x07)
                let bytes = AdvertisementPattern.serviceData(uuid).bytes
                patterns += [incomplete, complete].compactMap { try? AdvertisementPattern(adType: $0, bytes: bytes) }
            }
            return (patterns, "the services' data, or the services first in their lists")
        }
        let formats = config.sensorFormats.isEmpty ? SensorFormat.allCases : SensorFormat.allCases.filter(config.sensorFormats.contains)
        let patterns = SensorFormat.advertisementPatterns(of: formats)
        let names = formats.map(\.rawValue).joined(separator: ", ")
        return (patterns, config.sensorFormats.isEmpty ? "the sensor formats the gateway decodes (\(names)): other advertisements are not heard"
                                                        : "the sensor formats \(names)")
    }

    /// Why `--scan passive` cannot be had with `config` (`tooManyPatterns`), said before anything
    /// starts; nil when it can.
    static func passiveRefusal(_ config: GatewayConfig) -> String? { tooManyPatterns(config).map { "--scan passive: \($0)" } }

    /// `config`'s services make more patterns than a monitor takes (three each); nil when they do not.
    static func tooManyPatterns(_ config: GatewayConfig) -> String? {
        let count = patterns(for: config).patterns.count
        guard count > AdvertisementMonitor.maxPatterns else { return nil }
        return "the config's services make \(count) patterns (three each), "
            + "more than an advertisement monitor takes (\(AdvertisementMonitor.maxPatterns): at most 5 services)"
    }

    /// Why `auto` scans actively for a config that names no services and no sensor formats.
    static let everyAdvertisement = "passive scanning is offered, but the config admits every advertisement (no advertisements.services "
        + "or advertisements.sensor_formats), and a monitor hears only what its patterns match; --scan passive hears the sensor formats only"

    /// The bluetoothd releases `auto` scans passively with: proven in the lab to take the gateway's
    /// monitor without aborting (its patterns spread over objects of at most 7) and to match service
    /// and manufacturer data (`extra_gateway_passive`, docs/advertisement-monitor.md). 5.69 and 5.70
    /// match neither (BlueZ fixed that in 5.71); later releases are untried.
    static let passiveProven: Set<String> = ["5.66"]

    /// Why `auto` scans actively where monitors are offered by a bluetoothd of `version`, not proven.
    static func passiveUnproven(_ version: String?) -> String {
        "passive scanning is offered, but "
            + (version.map { "bluetoothd \($0) is not" } ?? "this bluetoothd (its adapter's Modalias names no BlueZ release) may not be")
            + " one it is proven with (\(passiveProven.sorted().joined(separator: ", ")); 5.69 and 5.70 match no service or "
            + "manufacturer data); --scan passive asks for it"
    }

    /// The plan for `mode` on an adapter that offers monitors unless `unavailable` says why not,
    /// served by bluetoothd `bluezVersion` (`AdapterInfo.bluezVersion`).
    static func choose(_ mode: GatewayScanMode, config: GatewayConfig, unavailable: String?, bluezVersion: String? = nil) -> GatewayScanPlan {
        switch mode {
        case .active: return GatewayScanPlan(patterns: nil, reason: "--scan active")
        case .auto:
            if let unavailable { return GatewayScanPlan(patterns: nil, reason: unavailable) }
            // A monitor hears only what its patterns match: without services or sensor formats
            // the config admits every advertisement (the gateway's default), which it cannot.
            guard !config.services.isEmpty || !config.sensorFormats.isEmpty else {
                return GatewayScanPlan(patterns: nil, reason: everyAdvertisement)
            }
            guard let version = bluezVersion, passiveProven.contains(version) else {
                return GatewayScanPlan(patterns: nil, reason: passiveUnproven(bluezVersion))
            }
            if let tooMany = tooManyPatterns(config) { return GatewayScanPlan(patterns: nil, reason: "passive scanning is offered, but \(tooMany)") }
            return passive(config, why: "bluetoothd \(version) offers advertisement monitors and is proven with them; ")
        case .passive: return passive(config, why: "")
        }
    }

    /// The passive plan for `config`; `why` leads its reason.
    private static func passive(_ config: GatewayConfig, why: String) -> GatewayScanPlan {
        let (patterns, covering) = Self.patterns(for: config)
        return GatewayScanPlan(patterns: patterns, reason: "\(why)\(patterns.count) pattern\(patterns.count == 1 ? "" : "s"): \(covering); "
            + "no scan requests, so no scan responses (names sent only there are not heard)")
    }
}

/// The gateway's scan as its events say it: how it scans, its losses and
/// resumptions, and the watchdog's recoveries (docs/gateway.md, "The scan").
extension GatewayRun {
    /// Starts the scan as the plan for `scanMode` says (`GatewayScanPlan.choose`).
    func startScanning(_ base: ScanOptions, onDiscovery: @escaping ScanSession.DiscoverySink,
                       report: @escaping @Sendable (GatewayScanEvent) -> Void) async throws -> (GatewayScanner, GatewayScanPlan) {
        let plan = GatewayScanPlan.choose(scanMode, config: config, unavailable: central.advertisementMonitorUnavailability(adapter: adapter),
                                          bluezVersion: adapter.bluezVersion)
        var options = base
        options.passive = plan.patterns
        let started: Result<GatewayScanner, BluetoothError>
        do {
            started = .success(try await GatewayScanner.start(central: central, adapter: adapter, options: options,
                                                              onDiscovery: onDiscovery, report: report))
        } catch {
            started = .failure(error)
        }
        switch started {
        case .success(let scanner):
            return (scanner, plan)
        case .failure(let error) where scanMode == .auto && plan.patterns != nil:
            // Passive was `auto`'s choice, not the user's: a monitor bluetoothd refuses or
            // releases (or dies on) leaves the gateway scanning actively, saying why.
            var active = base
            active.passive = nil
            let scanner = try await GatewayScanner.start(central: central, adapter: adapter, options: active,
                                                         onDiscovery: onDiscovery, report: report)
            return (scanner, GatewayScanPlan(patterns: nil, reason: "passive scanning failed at start (\(error)), so active"))
        case .failure(let error):
            throw error
        }
    }

    /// Says at start how the gateway scans, and why.
    func announceScanning(_ plan: GatewayScanPlan) {
        let how = plan.patterns == nil ? "actively (StartDiscovery, duplicates on)" : "passively (AdvertisementMonitor1)"
        Output.error("gateway: scanning \(adapter.name) \(how): \(plan.reason)"
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
    /// report (`greetAndReport`): at least every `atMost` (the shared readings held back want
    /// more than each second), until cancelled.
    static func ticks(_ silence: Duration?, atMost: Duration = .seconds(1), tick: @Sendable () -> Void) async {
        let every = min(atMost, (silence ?? .seconds(4)) / 4)
        while (try? await Task.sleep(for: every)) != nil { tick() }
    }
}
