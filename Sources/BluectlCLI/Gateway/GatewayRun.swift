import BluectlCore
import BluectlGateway

/// A device's state as the gateway publishes it: exactly `scan --json`'s record
/// (`DeviceRecord`: its `rssi` is this gateway's) plus `gateway`, the id of the
/// gateway that heard it.
struct GatewayDeviceRecord: OutputRecord {
    let device: DeviceRecord
    let gateway: String

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        device.describe(into: &sink)
        sink.json("gateway", .string(gateway))
    }
}

/// What reaches the gateway's one owner task, from the scan (on the central's
/// loop), from Paho's threads (through `MQTTSession.events`) and from the scan's end.
enum GatewayInput: Sendable {
    case discovery(Discovery)
    case mqtt(MQTTSession.Event)
    case scan(GatewayScanEvent)
    /// Time to look at the watchdog (`GatewayRun.watchdogTicks`).
    case tick
    /// A GATT value, a GATT device's event or a command's outcome (GatewayGatt.swift).
    case gatt(GatewayMessage)
}

/// What the gateway's owner task decides, a pure value: which frames are new
/// (a repeat of a device's last frame, RSSI aside, is not published again), and
/// how many readings Paho's full buffer refused since they were last reported.
struct GatewayLedger: Sendable {
    private var lastFrames: [BluetoothAddress: DeviceInfo] = [:]
    /// Readings refused while the buffer was full, not yet published on the events topic.
    private(set) var unreportedDrops = 0
    /// Readings published (accepted by Paho: sent, or kept on disk to be sent).
    private(set) var accepted = 0
    /// Connections to the broker so far.
    var connections = 0
    /// When the connection was lost, until it is back.
    var lostAt: ContinuousClock.Instant?
    /// Home Assistant configs published by this run (retained: once is enough, until Home
    /// Assistant says it started again), by topic.
    private(set) var announced: [String: [UInt8]] = [:]

    /// Whether `topic`'s config is still to be published (and notes it as published).
    mutating func announces(_ topic: String, _ payload: [UInt8]) -> Bool {
        announced.updateValue(payload, forKey: topic) == nil
    }

    /// When each device's last reading was published (kept only with a minimum interval).
    private var lastPublished: [BluetoothAddress: ContinuousClock.Instant] = [:]

    /// Whether `device`'s frame is to be published (and notes it as published): it differs
    /// from the last one published, and `minInterval` (when given) has passed since that one.
    mutating func isNew(_ device: DeviceInfo, minInterval: Double? = nil, now: ContinuousClock.Instant = .now) -> Bool {
        var frame = device
        frame.rssi = nil
        if lastFrames[device.address] == frame { return false }
        if let minInterval {
            if let last = lastPublished[device.address], now - last < .milliseconds(Int64(minInterval * 1000)) { return false }
            lastPublished[device.address] = now
        }
        lastFrames[device.address] = frame
        return true
    }

    mutating func accepted(_ count: Int = 1) { accepted += count }

    /// A reading Paho refused (the buffer full): counted once. Its frame stays the device's
    /// last, so hearing it again does not count the same reading twice.
    mutating func dropped() {
        unreportedDrops += 1
    }

    /// `count` drops were reported (published on the events topic).
    mutating func reported(_ count: Int) { unreportedDrops -= count }
}

/// One gateway's run: scans `adapter`, publishes through `session`, until
/// cancelled (Ctrl-C, SIGTERM) or the scan fails; then stops the discovery and
/// closes the session (`offline`).
struct GatewayRun {
    let session: MQTTSession
    let topics: GatewayTopics
    let broker: BrokerAddress
    let central: CentralManager
    let adapter: AdapterInfo
    /// Publish Home Assistant's discovery configs for decoded readings.
    var homeAssistant = false
    /// Which advertisements are published, and each device's GATT work.
    var config = GatewayConfig()
    /// The stalled-scan watchdog's silence (nil: off; `ScanWatchdog`).
    var scanSilence: Duration? = .seconds(120)
    /// How the GATT devices connect (needed when the config has `devices`).
    var gattSettings: GatewayGattSettings?

    func run() async throws {
        let (inputs, feed) = AsyncStream<GatewayInput>.makeStream()
        var options = ScanOptions()
        options.duplicates = true
        options.decodesSensors = true
        options.services = config.services
        // Each discovery is handed over on the central's loop; rendering and publishing
        // (Paho writes a file per message) happen on this task, not on the loop.
        // The scan is kept going through bluetoothd's restarts and the adapter's power
        // cycles (GatewayScanner); only its first start fails the gateway.
        let scanner = try await GatewayScanner.start(central: central, adapter: adapter, options: options,
                                                     onDiscovery: { feed.yield(.discovery($0)) }, report: { feed.yield(.scan($0)) })
        announceScanning()
        let session = self.session
        let helpers = [
            Task { for await event in session.events { feed.yield(.mqtt(event)) } },
            Task { [central] in await ServiceNotifier.runWatchdog(central: central) },
            Task { [scanSilence] in await Self.watchdogTicks(scanSilence) { feed.yield(.tick) } },
        ]
        do {
            try session.start()
        } catch {
            Output.error("gateway: \(error); readings are kept until the broker can be reached")
        }
        let gatt = config.devices.isEmpty ? nil : gattSettings.map { settings in
            GatewayGatt(config: config, central: central, adapter: adapter, settings: settings, topics: topics) { feed.yield(.gatt($0)) }
        }
        ServiceNotifier.ready(status: "publishing \(adapter.name)'s advertisements to \(broker) as \(topics.gateway)")
        var ledger = GatewayLedger()
        var watchdog = ScanWatchdog(silence: scanSilence)
        var failure: (any Error)?
        loop: for await input in inputs {
            switch input {
            case .discovery(let discovery):
                watchdog.heard(at: .now)
                publish(discovery, ledger: &ledger)
            case .mqtt(.message(let topic, let payload)):
                received(topic, payload, gatt: gatt, ledger: &ledger)
            case .mqtt(let event):
                handle(event, ledger: &ledger)
            case .gatt(let message):
                publish(message, ledger: &ledger)
            case .scan(.failed(let error)):
                failure = error
                break loop
            case .scan(let event):
                handle(event, watchdog: &watchdog)
            case .tick:
                if let (step, silent) = watchdog.check(at: .now) { recover(step, silent: silent, scanner: scanner) }
            }
        }
        helpers.forEach { $0.cancel() }
        ServiceNotifier.stopping(status: "stopping")
        await gatt?.stop(hurry: SignalScope.interrupted)
        await scanner.stop()
        await session.close(timeout: .milliseconds(500))
        if let failure { throw failure }
    }

    private func publish(_ discovery: Discovery, ledger: inout GatewayLedger) {
        guard config.admits(discovery.device, sensor: discovery.sensor), ledger.isNew(discovery.device, minInterval: config.minInterval) else { return }
        if homeAssistant, let reading = try? discovery.sensor?.get() {
            for config in HomeAssistantDiscovery.configs(device: discovery.device, reading: reading, topics: topics)
            where ledger.announces(config.topic, config.payload) {
                do { try session.publish(config.topic, config.payload, retained: true) } catch { Output.error("gateway: \(error)") }
            }
        }
        let record: any OutputRecord = switch topics.layout {
        case .bluectl:
            GatewayDeviceRecord(
                device: DeviceRecord(device: discovery.device, adapter: adapter.name, event: discovery.kind.rawValue, sensor: discovery.sensor),
                gateway: topics.gateway)
        case .theengs:
            TheengsRecord(device: discovery.device, reading: try? discovery.sensor?.get())
        }
        let payload = record.jsonObject(capacity: 512).renderedBytes(newline: false)
        do {
            try session.publish(topics.device(discovery.device.address.description), payload, retained: true)
            ledger.accepted()
        } catch {
            if error.isBufferFull {
                ledger.dropped()
            } else {
                Output.error("gateway: \(error)")
            }
        }
    }

    /// Publishes the count of readings the full buffer refused, once connected; a refusal
    /// (the buffer still full) keeps the count for the next try, at the next delivery.
    private func reportDrops(_ ledger: inout GatewayLedger) {
        let drops = ledger.unreportedDrops
        guard drops > 0, session.isConnected else { return }
        var line = JSONLine()
        line.add("event", "dropped")
        line.add("count", drops)
        line.add("reason", "the buffer of readings waiting for the broker was full")
        if (try? session.publish(topics.events, line.renderedBytes(newline: false))) != nil { ledger.reported(drops) }
    }

    private func handle(_ event: MQTTSession.Event, ledger: inout GatewayLedger) {
        switch event {
        case .connected:
            ledger.connections += 1
            Output.error("gateway: \(ledger.connections > 1 ? "reconnected" : "connected") to \(broker)")
            ServiceNotifier.status("connected to \(broker)")
            try? session.publish(topics.status, Array("online".utf8), retained: true)
            subscribe()
            if let lostAt = ledger.lostAt {
                // After the readings buffered meanwhile (Paho sends in order).
                let away = ContinuousClock.now - lostAt
                var line = JSONLine()
                line.add("event", "reconnected")
                line.add("away_s", away.tenthsOfSeconds)
                try? session.publish(topics.events, line.renderedBytes(newline: false))
                ledger.lostAt = nil
            }
            reportDrops(&ledger)
        case .delivered:
            reportDrops(&ledger)
        case .connectionLost(let reason):
            ledger.lostAt = ledger.lostAt ?? .now
            Output.error("gateway: \(reason) to \(broker); buffering")
            ServiceNotifier.status("broker \(broker) unreachable: buffering")
        case .connectFailed(let reason):
            Output.error("gateway: cannot connect to \(broker): \(reason); retrying, buffering meanwhile")
            ServiceNotifier.status("broker \(broker) unreachable: buffering")
        case .message:
            break   // routed by `run` (`received`)
        }
    }
}
