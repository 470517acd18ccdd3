import BluectlCore
import BluectlGateway
import Foundation
import Testing
@testable import BluectlCLI

/// Home Assistant's device configs when several gateways publish one device's
/// (`HomeAssistantDevices`, docs/gateway.md, "Home Assistant"): each carries the others'
/// components on, so the retained config holds every gateway's entities.
@Suite("gateway: Home Assistant device configs several gateways publish")
struct HomeAssistantDevicesTests {
    private let address = BluetoothAddress("C0:FF:EE:00:00:01")!
    private let node = "bluectl_c0ffee000001"

    /// What gateway `gateway` makes of a value of `uuid16`, with its source.
    private func made(_ uuid16: UInt16, _ bytes: [UInt8], gateway: String = "hall") throws
        -> (HomeAssistantDiscovery.Made, HomeAssistantDevices.Source) {
        let uuid = BluetoothUUID(uint16: uuid16)
        let decoded = try #require(CharacteristicDecoding.decode(uuid: uuid, bytes))
        let made = HomeAssistantDiscovery.gattConfigs(address, characteristic: uuid, decoded: decoded, topics: GatewayTopics(gateway: gateway))
        return (made, .gatt(GattValue(device: address, characteristic: uuid, bytes: bytes)))
    }

    /// A config's parts, parsed: the component ids, and the root's keys.
    private func parsed(_ config: [UInt8]?) throws -> (ids: [String], keys: [String], root: [String: Any]) {
        let bytes = try #require(config)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let components = try #require(root["components"] as? [String: Any])
        return (components.keys.sorted(), root.keys.sorted(), root)
    }

    @Test("One config per device: device, origin and components by id; a value of the same shape changes nothing; a new component does")
    func oneGateway() throws {
        var devices = HomeAssistantDevices()
        let (battery, source) = try made(0x2A19, [87])
        let publishes1 = devices.note(battery, from: source)
        #expect(publishes1, "new device")
        let publishes2 = devices.note(try made(0x2A19, [86]).0, from: source)
        #expect(!publishes2, "same components")
        let config = try parsed(devices.config(node))
        #expect(config.keys == ["components", "device", "origin"])
        #expect(config.ids == ["2a19_level_percent"])
        #expect((config.root["origin"] as? [String: Any])?["name"] as? String == "bluectl")
        let (heart, heartSource) = try made(0x2A37, [0x00, 72])
        let publishes3 = devices.note(heart, from: heartSource)
        #expect(publishes3)
        #expect(try parsed(devices.config(node)).ids == ["2a19_level_percent", "2a37_bpm"])
        #expect(devices.config("bluectl_000000000000") == nil)
    }

    @Test("A value with no numeric field makes no device")
    func nothingToGraph() throws {
        var devices = HomeAssistantDevices()
        let (location, source) = try made(0x2A38, [0x01])
        let publishes4 = devices.note(location, from: source)
        #expect(!publishes4)
        #expect(devices.config(node) == nil)
    }

    @Test("Two gateways publishing one device's config converge on the union of their components, whatever the order the broker keeps")
    func twoGateways() throws {
        var a = HomeAssistantDevices(), b = HomeAssistantDevices()
        let (battery, batterySource) = try made(0x2A19, [87], gateway: "a")
        let (heart, heartSource) = try made(0x2A37, [0x00, 72], gateway: "b")
        let publishes5 = a.note(battery, from: batterySource)
        #expect(publishes5)
        let publishes6 = b.note(heart, from: heartSource)
        #expect(publishes6)
        // Both publish; the broker keeps b's (the later) and sends it to both.
        var retained = try #require(b.config(node))
        let fromB = try #require(HomeAssistantDiscovery.components(ofDeviceConfig: retained))
        let publishes7 = a.heard(node, components: fromB)
        #expect(publishes7, "b's config lacks a's battery: a publishes again")
        let publishes8 = b.heard(node, components: fromB)
        #expect(!publishes8, "b's own config coming back")
        retained = try #require(a.config(node))
        #expect(try parsed(retained).ids == ["2a19_level_percent", "2a37_bpm"])
        let fromA = try #require(HomeAssistantDiscovery.components(ofDeviceConfig: retained))
        let publishes9 = a.heard(node, components: fromA)
        #expect(!publishes9)
        let publishes10 = b.heard(node, components: fromA)
        #expect(!publishes10, "a's config holds b's component: nothing to add")
        // b carries a's battery on from now: its next change keeps it.
        let thermometer = try made(0x2A1C, [0x00, 0x6C, 0x0E, 0x00, 0xFE], gateway: "b")
        let publishesAfterChange = b.note(thermometer.0, from: thermometer.1)
        #expect(publishesAfterChange)
        #expect(try parsed(b.config(node)).ids == ["2a19_level_percent", "2a1c_temperature", "2a37_bpm"])
        // The carried component is a's, as a made it.
        let componentsOfB = try #require(try parsed(b.config(node)).root["components"] as? [String: Any])
        let batteryFromB = componentsOfB["2a19_level_percent"] as? [String: Any]
        #expect(batteryFromB?["availability_topic"] as? String == "bluectl/a/status")
    }

    @Test("A device no gateway here made: its components are kept for when it does; a config removed (empty) is not put back")
    func heardFirstAndRemoved() throws {
        var a = HomeAssistantDevices(), b = HomeAssistantDevices()
        let (heart, heartSource) = try made(0x2A37, [0x00, 72], gateway: "b")
        _ = b.note(heart, from: heartSource)
        let configOfB = try #require(b.config(node))
        let fromB = try #require(HomeAssistantDiscovery.components(ofDeviceConfig: configOfB))
        let publishes11 = a.heard(node, components: fromB)
        #expect(!publishes11, "a has not made this device")
        let (battery, batterySource) = try made(0x2A19, [87], gateway: "a")
        let publishes12 = a.note(battery, from: batterySource)
        #expect(publishes12)
        #expect(try parsed(a.config(node)).ids == ["2a19_level_percent", "2a37_bpm"], "a's first config already carries b's")
        let publishes13 = a.heard(node, components: [:])
        #expect(!publishes13, "removed: not published again here")
        #expect(try parsed(a.config(node)).ids == ["2a19_level_percent"], "only a's own after the removal")
    }

    @Test("remake: the components made again, with the new options")
    func remake() throws {
        var devices = HomeAssistantDevices()
        let (battery, source) = try made(0x2A19, [87], gateway: "old")
        _ = devices.note(battery, from: source)
        devices.remake { source in
            guard case .gatt(let value) = source, let decoded = CharacteristicDecoding.decode(uuid: value.characteristic, value.bytes) else { return nil }
            return HomeAssistantDiscovery.gattConfigs(value.device, characteristic: value.characteristic, decoded: decoded,
                                                      topics: GatewayTopics(gateway: "new"))
        }
        let config = try parsed(devices.config(node))
        let components = try #require(config.root["components"] as? [String: Any])
        #expect((components["2a19_level_percent"] as? [String: Any])?["availability_topic"] as? String == "bluectl/new/status")
    }

    @Test("What is not a device config with components is nil; an empty payload is a removal; cmps is read too")
    func parsing() {
        #expect(HomeAssistantDiscovery.components(ofDeviceConfig: Array("not json".utf8)) == nil)
        #expect(HomeAssistantDiscovery.components(ofDeviceConfig: Array(#"{"device":{}}"#.utf8)) == nil)
        #expect(HomeAssistantDiscovery.components(ofDeviceConfig: [])?.isEmpty == true)
        let abbreviated = HomeAssistantDiscovery.components(ofDeviceConfig: Array(#"{"dev":{},"cmps":{"x":{"p":"sensor","n":[1,2.5,true,null,{"b":"c"}]}}}"#.utf8))
        #expect(abbreviated?["x"]?.render() == #"{"n":[1,2.5,true,null,{"b":"c"}],"p":"sensor"}"#)
        #expect(HomeAssistantDiscovery.node(ofDeviceTopic: "homeassistant/device/bluectl_c0ffee000001/config") == "bluectl_c0ffee000001")
        #expect(HomeAssistantDiscovery.node(ofDeviceTopic: "homeassistant/device/zigbee_1/config") == nil)
        #expect(HomeAssistantDiscovery.node(ofDeviceTopic: "homeassistant/sensor/bluectl_c0ffee000001/config") == nil)
    }
}
