// What the gateway's owner task does for Home Assistant: the discovery configs, and the
// shared state topics several gateways feed (SharedReadings; docs/gateway.md, "Home Assistant").

import BluectlCore
import BluectlGateway

extension SharedReadings {
    /// How often the owner task looks at the readings held back (`GatewayRun.ticks`).
    static let tick = Duration.milliseconds(250)
}

extension GatewayRun {
    /// Whether this gateway feeds the shared state topics: `--home-assistant` in bluectl's layout.
    var sharesReadings: Bool { homeAssistant && topics.layout == .bluectl }

    /// Publishes the Home Assistant config of the device `source` (a reading's measurements, a
    /// GATT value's numeric fields) is of, when what it makes is new to this run or changed (retained).
    func announce(_ source: HomeAssistantDevices.Source, ledger: inout GatewayLedger) {
        guard let made = make(source, gateways: availability(ledger)) else { return }
        announce(made, from: source, ledger: &ledger)
    }

    /// Publishes the config of the device `made` is of, when it is new to this run or changed.
    func announce(_ made: HomeAssistantDiscovery.Made, from source: HomeAssistantDevices.Source, ledger: inout GatewayLedger) {
        guard ledger.deviceConfigs.note(made, from: source) else { return }
        publishConfig(made.node, ledger: ledger)
    }

    /// Publishes every device config of this run again, made anew: Home Assistant said it started
    /// (it may have lost them), or the gateways changed (their availability).
    /// Not while the connection's retained configs may still be arriving, nor while disconnected
    /// (`HomeAssistantDevices.due` publishes them all then).
    func announceAgain(ledger: inout GatewayLedger) {
        let gateways = availability(ledger)
        ledger.deviceConfigs.remake { make($0, gateways: gateways) }
        guard ledger.deviceConfigs.isSettled else {
            ledger.deviceConfigs.pendAll()
            return
        }
        for node in ledger.deviceConfigs.devices.keys.sorted() { publishConfig(node, ledger: ledger) }
    }

    /// The device configs due (`HomeAssistantDevices.due`): at a connection's settling, those made
    /// or changed meanwhile, and a config on the broker that still lacks a component this gateway knows of.
    func announceDue(ledger: inout GatewayLedger) {
        guard homeAssistant, session.isConnected else { return }
        for node in ledger.deviceConfigs.due() { publishConfig(node, ledger: ledger) }
    }

    /// A device config on the broker (another gateway's, or this one's coming back): noted
    /// (`HomeAssistantDevices.heard`: this gateway's answers it later if it lacks a component
    /// this one knows of). False for any other topic.
    func receivedDeviceConfig(_ topic: String, _ payload: [UInt8], ledger: inout GatewayLedger) -> Bool {
        guard homeAssistant, let node = HomeAssistantDiscovery.node(ofDeviceTopic: topic) else { return false }
        let config = HomeAssistantDiscovery.parse(deviceConfig: payload)
        if config == nil, ledger.deviceConfigs.devices[node] == nil {
            Output.error("gateway: \(topic) holds no device config with components; its entities are not carried on")
        }
        ledger.deviceConfigs.heard(node, config)
        return true
    }

    /// The gateways whose status makes a shared device available: those known, else this one.
    private func availability(_ ledger: GatewayLedger) -> [String] {
        ledger.shared?.availability ?? [topics.gateway]
    }

    private func make(_ source: HomeAssistantDevices.Source, gateways: [String]) -> HomeAssistantDiscovery.Made? {
        switch source {
        case .sensor(let device, let reading):
            HomeAssistantDiscovery.components(device: device, reading: reading, topics: topics, gateways: gateways)
        case .gatt(let value):
            CharacteristicDecoding.decode(uuid: value.characteristic, value.bytes).map { make(value, decoded: $0) }
        }
    }

    /// What a GATT value, decoded, makes of its device's config.
    func make(_ value: GattValue, decoded: DecodedCharacteristic) -> HomeAssistantDiscovery.Made {
        HomeAssistantDiscovery.gattComponents(value.device, characteristic: value.characteristic, decoded: decoded, topics: topics)
    }

    private func publishConfig(_ node: String, ledger: GatewayLedger) {
        guard let config = ledger.deviceConfigs.config(node) else { return }
        publishRetained(HomeAssistantDiscovery.deviceTopic(node), config)
    }

    /// `reading`'s record (`payload`, as published on this gateway's topic) on the device's shared
    /// topic, unless it is already there or held back (`SharedReadings.heard`). Not while the
    /// connection is lost: a gateway cut from the broker cannot see what the others published,
    /// and its buffered copies, sent later, would put an old state back on the retained topic
    /// (before the first connection, a reading with a packet id waits for it: the newest per device).
    func share(_ address: String, _ reading: SensorReading, _ payload: [UInt8], ledger: inout GatewayLedger) {
        guard session.isConnected || ledger.connections == 0,
              let shared = ledger.shared?.heard(address, packetID: reading.packetID, payload: payload) else { return }
        for payload in shared { publishRetained(GatewayTopics.sharedDevice(address), payload) }
    }

    /// The held readings whose turn came and that no other gateway published meanwhile (looked
    /// at only while connected: they wait for the connection).
    func shareDue(ledger: inout GatewayLedger) {
        guard session.isConnected, let due = ledger.shared?.due(), !due.isEmpty else { return }
        for (address, payload) in due { publishRetained(GatewayTopics.sharedDevice(address), payload) }
    }

    /// A message on a shared topic or a gateway's status: noted (a status new or gone publishes
    /// the configs again with the new availability). False for any other topic.
    func receivedShared(_ topic: String, _ payload: [UInt8], ledger: inout GatewayLedger) -> Bool {
        guard ledger.shared != nil else { return false }
        if let gateway = GatewayTopics.statusGateway(topic) {
            if ledger.shared?.status(of: gateway, payload) == true, homeAssistant { announceAgain(ledger: &ledger) }
            return true
        }
        guard GatewayTopics.isSharedDevice(topic) else { return false }
        ledger.shared?.arrived(payload)
        return true
    }

    private func publishRetained(_ topic: String, _ payload: [UInt8]) {
        do { try session.publish(topic, payload, retained: true) } catch { Output.error("gateway: \(error)") }
    }
}
