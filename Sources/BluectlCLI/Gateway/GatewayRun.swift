import BluectlCore
import BluectlGateway
import Synchronization

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
/// loop), from the MQTT session (its `events`, and the times to service it) and from the
/// scan's end.
enum GatewayInput: Sendable {
    case discovery(Discovery)
    case mqtt(MQTTSession.Event)
    case scan(GatewayScanEvent)
    /// Time to look at the watchdog and the buffer (`GatewayRun.ticks`).
    case tick
    /// Time to service the MQTT session (`MQTTSession.serviceInterval`).
    case mqttService
    /// A GATT value, a GATT device's event or a command's outcome (GatewayGatt.swift).
    case gatt(GatewayMessage)
}

/// What the gateway's owner task decides, a pure value: how many of the messages
/// lost (`Loss`) are reported, the greeting of each connection, the Home
/// Assistant configs and the shared readings. (Which frames are new is decided before
/// the owner, on the scan's loop: `DiscoveryGate`.)
struct GatewayLedger: Sendable {
    /// Lost messages already reported on the events topic, by why they were lost.
    private var reportedLosses: [Loss: Int] = [:]
    /// Readings published (accepted by the session: sent, or kept on disk to be sent).
    private(set) var accepted = 0
    /// Connections to the broker so far.
    var connections = 0
    /// When the connection was lost, until it is back.
    var lostAt: ContinuousClock.Instant?
    /// What a connection has to publish once the buffer has room (into a full buffer it
    /// would push the oldest reading out): `online`, and for how long the broker was away
    /// (nil after the first connection).
    var greeting: Greeting?
    /// When `greetAndReport` last looked at the buffer (not at each of a backlog's
    /// acknowledgements).
    var bufferLookedAt: ContinuousClock.Instant?

    /// The birth and `reconnected` event of one connection (`greeting`).
    struct Greeting: Sendable {
        let away: Duration?
    }
    /// Home Assistant's device configs of this run (`--home-assistant`).
    var deviceConfigs = HomeAssistantDevices()

    /// The shape of each characteristic topic's last decoded value (`HomeAssistantDiscovery.gattShape`).
    private var gattShapes: [String: [String]] = [:]

    /// Whether the value on `topic` has another shape than the last one there (and notes it):
    /// only then can its Home Assistant configs differ.
    mutating func gattFieldsChanged(_ topic: String, _ shape: [String]) -> Bool {
        gattShapes.updateValue(shape, forKey: topic) != shape
    }

    /// Several gateways' shared state topics (`--home-assistant` in bluectl's layout), else nil.
    var shared: SharedReadings?

    mutating func accepted(_ count: Int = 1) { accepted += count }

    /// Why messages never reached the broker, each said with its own reason.
    enum Loss: CaseIterable, Sendable {
        /// The backlog was full: its oldest were dropped (`MQTTSession.droppedMessages`).
        case bufferFull
        /// Accepted messages that could not be sent: unreadable on disk, or refused by the
        /// MQTT client (`MQTTSession.lostMessages`).
        case unsendable

        /// How many were lost so far (the session's running count).
        func count(in session: MQTTSession) -> Int {
            switch self {
            case .bufferFull: session.droppedMessages
            case .unsendable: session.lostMessages
            }
        }

        /// The `reason` of the `dropped` event.
        var reason: String {
            switch self {
            case .bufferFull: "the buffer of messages waiting for the broker was full: the oldest were dropped"
            case .unsendable: "messages kept for the broker could not be sent (unreadable on disk, or refused as invalid)"
            }
        }
    }

    /// Of `total` messages lost for `loss` so far (the session's count), those not reported yet.
    func unreported(_ loss: Loss, of total: Int) -> Int { max(0, total - reportedLosses[loss, default: 0]) }

    /// `count` more messages lost for `loss` were reported (published on the events topic).
    mutating func reported(_ count: Int, _ loss: Loss) { reportedLosses[loss, default: 0] += count }
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
    /// Passive, active, or passive when offered (`--scan`).
    var scanMode = GatewayScanMode.auto

    func run() async throws {
        let (inputs, feed) = AsyncStream<GatewayInput>.makeStream()
        var options = ScanOptions()
        options.duplicates = true
        options.decodesSensors = true
        options.services = config.services
        // Each discovery is looked at on the central's loop (`DiscoveryGate`: filters, repeats)
        // and only what is published is handed over; rendering and publishing (the session's log,
        // the message log, is written per message) happen on this task, not on the loop.
        // The scan is kept going through bluetoothd's restarts and the adapter's power
        // cycles (GatewayScanner); only its first start fails the gateway.
        // What is held back still proves the scan alive: `heldBack` tells the watchdog at the
        // next tick (an atomic: the loop sets it, the owner takes it; neither waits).
        let gate = central.loopBound(DiscoveryGate(config: config))
        let heldBack = Atomic<Bool>(false)
        let (scanner, plan) = try await startScanning(options, onDiscovery: { discovery in
            if gate.value.admits(discovery) {
                feed.yield(.discovery(discovery))
            } else {
                heldBack.store(true, ordering: .relaxed)
            }
        }, report: { feed.yield(.scan($0)) })
        announceScanning(plan)
        let session = self.session
        // Once the loop below has ended (stopped, or the scan failed), what still comes
        // for MQTT goes through `late`, handled before the session closes: the GATT
        // devices' messages (the answers of writes under way at the stop, their last
        // events) are published, commands from MQTT refused (the gateway is stopping).
        // After `late` too has ended, a command that comes before the session closes (the broker
        // has acknowledged it) can only be said on stderr.
        let (late, lateFeed) = AsyncStream<GatewayInput>.makeStream()
        let topics = self.topics
        let hand: @Sendable (GatewayInput) -> Void = { input in
            guard case .terminated = feed.yield(input), case .terminated = lateFeed.yield(input) else { return }
            switch input {
            case .gatt(let message):
                Output.error("gateway: a message for \(message.topic) came after the session closed; not published")
            case .mqtt(.message(let topic, _)) where topics.command(topic) != nil:
                Output.error("gateway: a command on \(topic) came as the gateway stopped; not answered")
            default:
                break
            }
        }
        let mqttEvents = Task { for await event in session.events { hand(.mqtt(event)) } }
        let helpers = [
            Task { [central] in await ServiceNotifier.runWatchdog(central: central) },
            Task { [scanSilence, sharesReadings] in
                await Self.ticks(scanSilence, atMost: sharesReadings ? SharedReadings.tick : .seconds(1)) { feed.yield(.tick) }
            },
            Task {
                while (try? await Task.sleep(for: MQTTSession.serviceInterval)) != nil {
                    if session.serviceIsDue { feed.yield(.mqttService) }
                }
            },
        ]
        do {
            try session.start()
        } catch {
            Output.error("gateway: \(error); readings are kept until the broker can be reached")
        }
        let gatt = config.devices.isEmpty ? nil : gattSettings.map { settings in
            GatewayGatt(config: config, central: central, adapter: adapter, settings: settings, topics: topics) { hand(.gatt($0)) }
        }
        ServiceNotifier.ready(status: "publishing \(adapter.name)'s advertisements to \(broker) as \(topics.gateway)")
        var ledger = GatewayLedger()
        if sharesReadings { ledger.shared = SharedReadings(me: topics.gateway) }
        var watchdog = ScanWatchdog(silence: scanSilence)
        var failure: (any Error)?
        for await input in inputs {
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
                // Ends the loop once what is already queued has been handled (nothing dropped).
                failure = error
                feed.finish()
            case .scan(let event):
                handle(event, watchdog: &watchdog)
            case .mqttService:
                session.service()
            case .tick:
                if heldBack.exchange(false, ordering: .relaxed) { watchdog.heard(at: .now) }
                if let (step, silent) = watchdog.check(at: .now) { recover(step, silent: silent, scanner: scanner) }
                drain()
                shareDue(ledger: &ledger)
                announceDue(ledger: &ledger)
                greetAndReport(&ledger)
            }
        }
        helpers.forEach { $0.cancel() }
        ServiceNotifier.stopping(status: "stopping")
        feed.finish()
        if let gatt {
            // The GATT devices' stop (a write under way, the disconnects: up to a second) with
            // the session serviced meanwhile, so that a command that comes then is read, and
            // answered below (refused: the gateway is stopping) rather than left unread.
            let hurry = SignalScope.interrupted
            let stopped = Atomic<Bool>(false)
            let stop = Task {
                await gatt.stop(hurry: hurry)
                stopped.store(true, ordering: .releasing)
            }
            while !stopped.load(ordering: .acquiring) {
                session.service()
                // Not cancelled with the run (a stop's last steps run in a cancelled task, and
                // must not spin): at most one interval past the GATT devices' stop.
                await Task { try? await Task.sleep(for: MQTTSession.serviceInterval) }.value
            }
            await stop.value
        }
        lateFeed.finish()
        // `late` has ended: this takes what it holds without waiting (also in a cancelled task).
        for await input in late {
            switch input {
            case .gatt(let message):
                publish(message, ledger: &ledger)
            case .mqtt(.message(let topic, let payload)):
                refuse(topic, payload, "the gateway is stopping", ledger: &ledger)
            default:
                continue
            }
        }
        // The scan's stop (StopDiscovery, a second at most) and the session's close (`offline`,
        // half a second) at once: together they fit SignalScope's 2 s better.
        async let scanStopped: Void = scanner.stop()
        await session.close(timeout: .milliseconds(500))
        await mqttEvents.value   // the session's events end as it closes
        await scanStopped
        if let failure { throw failure }
    }

    private func publish(_ discovery: Discovery, ledger: inout GatewayLedger) {
        let reading = try? discovery.sensor?.get()
        if homeAssistant, let reading { announce(.sensor(discovery.device, reading), ledger: &ledger) }
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
            Output.error("gateway: \(error)")
        }
        if let reading { share(discovery.device.address.description, reading, payload, ledger: &ledger) }
    }

    /// Once connected and the buffer has room: the connection's greeting (`online`, and
    /// `reconnected` after the readings buffered meanwhile: the backlog goes out in order), then
    /// the messages lost since the last report, one `dropped` event per cause (`Loss`: the
    /// full buffer's oldest, those that could not be sent). With no room (the backlog not yet sent)
    /// both wait for a delivery, which the session is asked to report: publishing them would
    /// push out a reading, and the buffer would never be seen with room to report that drop.
    /// Looks at most twice a second (`bufferLookedAt`) unless `now`; the ticks bring it back.
    private func greetAndReport(_ ledger: inout GatewayLedger, now: Bool = false) {
        let at = ContinuousClock.now
        guard session.isConnected, now || ledger.bufferLookedAt.map({ at - $0 >= .milliseconds(500) }) ?? true else { return }
        ledger.bufferLookedAt = at
        guard session.hasRoom else { return session.reportNextDelivery() }
        if let greeting = ledger.greeting {
            try? session.publish(topics.status, Array("online".utf8), retained: true)
            if let away = greeting.away {
                var line = JSONLine()
                line.add("event", "reconnected")
                line.add("away_s", away.tenthsOfSeconds)
                try? session.publish(topics.events, line.renderedBytes(newline: false))
            }
            ledger.greeting = nil
        }
        for loss in GatewayLedger.Loss.allCases {
            let count = ledger.unreported(loss, of: loss.count(in: session))
            guard count > 0 else { continue }
            guard session.hasRoom else { return session.reportNextDelivery() }
            var line = JSONLine()
            line.add("event", "dropped")
            line.add("count", count)
            line.add("reason", loss.reason)
            if (try? session.publish(topics.events, line.renderedBytes(newline: false))) != nil { ledger.reported(count, loss) }
        }
    }

    /// Moves what waits in the session's backlog on to the connection, as far as its window takes
    /// (`MQTTSession.drain`): at each connection and delivery, and at each tick.
    private func drain() {
        do { try session.drain() } catch { Output.error("gateway: \(error)") }
    }

    private func handle(_ event: MQTTSession.Event, ledger: inout GatewayLedger) {
        switch event {
        case .connected:
            ledger.connections += 1
            Output.error("gateway: \(ledger.connections > 1 ? "reconnected" : "connected") to \(broker)")
            ServiceNotifier.status("connected to \(broker)")
            subscribe()
            ledger.shared?.connected()
            ledger.deviceConfigs.connected()
            ledger.greeting = .init(away: ledger.lostAt.map { ContinuousClock.now - $0 })
            ledger.lostAt = nil
            drain()
            greetAndReport(&ledger, now: true)
        case .delivered:
            drain()
            greetAndReport(&ledger)
        case .connectionLost(let reason):
            ledger.lostAt = ledger.lostAt ?? .now
            ledger.deviceConfigs.disconnected()
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
