// What the gateway's owner task does with GATT messages and with what MQTT sends it.

import BluectlCore
import BluectlGateway

extension GatewayRun {
    /// Home Assistant's own status topic: `online` when it (re)starts.
    static let homeAssistantStatus = "homeassistant/status"

    /// The topics to take messages from: the GATT command topics (when the config has
    /// devices) and, with `--home-assistant`, Home Assistant's status and the device configs
    /// (`receivedDeviceConfig`). At each connection.
    func subscribe() {
        var filters: [String] = []
        if gattSettings != nil, !config.devices.isEmpty { filters.append(topics.gattCommands) }
        if homeAssistant { filters += [Self.homeAssistantStatus, HomeAssistantDiscovery.deviceTopics] }
        if sharesReadings { filters += [GatewayTopics.sharedDevices, GatewayTopics.statuses] }
        guard !filters.isEmpty else { return }
        do { try session.subscribe(filters) } catch { Output.error("gateway: \(error)") }
    }

    /// A GATT value, device event or command outcome: published, counted as readings are.
    /// With `--home-assistant`, a value's numeric fields get their configs first (made only
    /// when the value's fields differ from the last value's of that characteristic).
    func publish(_ message: GatewayMessage, ledger: inout GatewayLedger) {
        if homeAssistant, let value = message.value,
           let decoded = CharacteristicDecoding.decode(uuid: value.characteristic, value.bytes),
           ledger.gattFieldsChanged(message.topic, HomeAssistantDiscovery.gattShape(decoded)) {
            announce(make(value, decoded: decoded), from: .gatt(value), ledger: &ledger)
        }
        do {
            try session.publish(message.topic, message.payload)
            ledger.accepted()
        } catch {
            Output.error("gateway: \(error)")
        }
    }

    /// A message MQTT sent: a command for a GATT device, or Home Assistant saying it
    /// started (its discovery configs are published again: it may have lost them).
    func received(_ topic: String, _ payload: [UInt8], gatt: GatewayGatt?, ledger: inout GatewayLedger) {
        if topic == Self.homeAssistantStatus {
            guard homeAssistant, payload == Array("online".utf8) else { return }
            announceAgain(ledger: &ledger)
            return
        }
        if receivedShared(topic, payload, ledger: &ledger) || receivedDeviceConfig(topic, payload, ledger: &ledger) { return }
        // (A persistent session may still hold the command topics of a run that had devices.)
        guard let gatt else { return refuse(topic, payload, "this gateway has no GATT devices", ledger: &ledger) }
        guard case let (device, characteristic)? = topics.command(topic) else { return }
        gatt.command(device: device, characteristic: characteristic, payload: payload)
    }

    /// Answers a message on a command topic (any other is ignored) `refused` for `reason`,
    /// with the command's id when its payload has one: the gateway takes no commands (it has
    /// no GATT devices, or it is stopping).
    func refuse(_ topic: String, _ payload: [UInt8], _ reason: String, ledger: inout GatewayLedger) {
        guard case let (device, characteristic)? = topics.command(topic) else { return }
        let id = try? GatewayWriteCommand.parse(payload).get().id
        publish(GatewayCommandResult(outcome: .refused(reason), id: id ?? nil).message(topics.result(device, characteristic)), ledger: &ledger)
    }
}
