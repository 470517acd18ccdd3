import BluectlCore
import BluectlGateway
import Foundation
import Testing
@testable import BluectlCLI

/// Home Assistant's device configs when several gateways publish one device's
/// (`HomeAssistantDevices`, docs/gateway.md, "Home Assistant"): nothing before the retained
/// configs had time to arrive, each gateway carries the others' components on, and a config
/// that lacks one is answered only if it still does a moment later.
@Suite("gateway: Home Assistant device configs several gateways publish")
struct HomeAssistantDevicesTests {
    private let address = BluetoothAddress("C0:FF:EE:00:00:01")!
    private let node = "bluectl_c0ffee000001"
    private let t0 = ContinuousClock.now

    private func at(_ seconds: Double) -> ContinuousClock.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

    /// What gateway `gateway` makes of a value of `uuid16`, with its source.
    private func made(_ uuid16: UInt16, _ bytes: [UInt8], gateway: String = "hall") throws
        -> (HomeAssistantDiscovery.Made, HomeAssistantDevices.Source) {
        let uuid = BluetoothUUID(uint16: uuid16)
        let decoded = try #require(CharacteristicDecoding.decode(uuid: uuid, bytes))
        let made = HomeAssistantDiscovery.gattComponents(address, characteristic: uuid, decoded: decoded, topics: GatewayTopics(gateway: gateway))
        return (made, .gatt(GattValue(device: address, characteristic: uuid, bytes: bytes)))
    }

    /// A gateway connected at t0 whose retained configs have settled at t0 + 1 s, having made `values`.
    private func settled(_ values: [(UInt16, [UInt8])], gateway: String) throws -> HomeAssistantDevices {
        var devices = HomeAssistantDevices()
        for (uuid16, bytes) in values {
            let (made, source) = try made(uuid16, bytes, gateway: gateway)
            _ = devices.note(made, from: source)
        }
        devices.connected(now: at(0))
        _ = devices.due(now: at(1))
        return devices
    }

    /// A config's parts, parsed: the component ids, and the root.
    private func parsed(_ config: [UInt8]?) throws -> (ids: [String], keys: [String], root: [String: Any]) {
        let bytes = try #require(config)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let components = try #require(root["components"] as? [String: Any])
        return (components.keys.sorted(), root.keys.sorted(), root)
    }

    /// `devices`' config of the device as the broker hands it back (parsed as a gateway reads it).
    private func heard(_ devices: HomeAssistantDevices) throws -> (components: [String: JSONLine], object: JSONLine?) {
        let config = try #require(devices.config(node))
        return try #require(HomeAssistantDiscovery.parse(deviceConfig: config))
    }

    @Test("Nothing before the first connection's retained configs had a second; then every device at once; later changes at once")
    func settling() throws {
        var devices = HomeAssistantDevices()
        let (battery, source) = try made(0x2A19, [87])
        let beforeConnection = devices.note(battery, from: source)
        #expect(!beforeConnection, "not settled: noted, not published")
        #expect(devices.due(now: at(5)).isEmpty, "not connected yet")
        devices.connected(now: at(10))
        #expect(devices.due(now: at(10.5)).isEmpty, "the retained configs may still be arriving")
        #expect(devices.due(now: at(11)) == [node])
        #expect(devices.due(now: at(12)).isEmpty, "once")
        let config = try parsed(devices.config(node))
        #expect(config.keys == ["components", "device", "origin"])
        #expect(config.ids == ["2a19_level_percent"])
        #expect((config.root["origin"] as? [String: Any])?["name"] as? String == "bluectl")
        let sameShape = devices.note(try made(0x2A19, [86]).0, from: source)
        #expect(!sameShape, "the same components")
        let (heart, heartSource) = try made(0x2A37, [0x00, 72])
        let newComponent = devices.note(heart, from: heartSource)
        #expect(newComponent)
        #expect(try parsed(devices.config(node)).ids == ["2a19_level_percent", "2a37_bpm"])
        #expect(devices.config("bluectl_000000000000") == nil)
    }

    @Test("Disconnected, or a connection not settled: a change waits, and goes out once the next connection settled")
    func disconnected() throws {
        var devices = try settled([(0x2A19, [87])], gateway: "hall")
        devices.disconnected()
        let (heart, heartSource) = try made(0x2A37, [0x00, 72])
        let whileAway = devices.note(heart, from: heartSource)
        #expect(!whileAway, "not published while disconnected (the session would send it before the next connection's retained configs are read)")
        #expect(devices.due(now: at(5)).isEmpty)
        devices.connected(now: at(10))
        devices.disconnected()   // lost before it settled
        devices.connected(now: at(12))
        #expect(devices.due(now: at(12.5)).isEmpty, "each connection's retained configs get their second")
        #expect(devices.due(now: at(13)) == [node], "the change made while away")
        #expect(devices.due(now: at(14)).isEmpty)
        devices.connected(now: at(20))   // again, nothing changed meanwhile: nothing to publish
        #expect(devices.due(now: at(21)).isEmpty)
        let settledAgain = devices.note(try made(0x2A1C, [0x00, 0x6C, 0x0E, 0x00, 0xFE]).0,
                                        from: .gatt(GattValue(device: address, characteristic: BluetoothUUID(uint16: 0x2A1C), bytes: [])))
        #expect(settledAgain)
    }

    @Test("A value with no numeric field makes no device")
    func nothingToGraph() throws {
        var devices = try settled([], gateway: "hall")
        let (location, source) = try made(0x2A38, [0x01])
        let published = devices.note(location, from: source)
        #expect(!published)
        #expect(devices.config(node) == nil)
    }

    @Test("Two gateways converge on the union of their components, whichever config the broker keeps last")
    func twoGateways() throws {
        for bFirst in [true, false] {
            var a = try settled([(0x2A19, [87])], gateway: "a"), b = try settled([(0x2A37, [0x00, 72])], gateway: "b")
            // Both published; the broker keeps one, and each gateway hears both, the kept one last.
            let (fromA, fromB) = (try heard(a), try heard(b))
            for (first, last) in bFirst ? [(fromA, fromB)] : [(fromB, fromA)] {
                a.heard(node, first, now: at(2)); b.heard(node, first, now: at(2))
                a.heard(node, last, now: at(2)); b.heard(node, last, now: at(2))
            }
            // The kept config lacks the other's component, which both know of now: both answer, with the union.
            #expect(a.due(now: at(3)) == [node] && b.due(now: at(3)) == [node])
            #expect(try parsed(a.config(node)).ids == ["2a19_level_percent", "2a37_bpm"])
            #expect(try parsed(b.config(node)).ids == ["2a19_level_percent", "2a37_bpm"])
            let answer = try #require(bFirst ? a.config(node) : b.config(node))
            let union = try #require(HomeAssistantDiscovery.parse(deviceConfig: answer))
            a.heard(node, union, now: at(4)); b.heard(node, union, now: at(4))
            #expect(a.due(now: at(6)).isEmpty && b.due(now: at(6)).isEmpty, "the union is on the broker: nothing to add")
            // Each carries the other's component on, as the other made it.
            let carriedByB = try #require(try parsed(b.config(node)).root["components"] as? [String: Any])
            #expect((carriedByB["2a19_level_percent"] as? [String: Any])?["availability_topic"] as? String == "bluectl/a/status")
            let carriedByA = try #require(try parsed(a.config(node)).root["components"] as? [String: Any])
            #expect((carriedByA["2a37_bpm"] as? [String: Any])?["availability_topic"] as? String == "bluectl/b/status")
        }
    }

    @Test("An out-of-date config (this gateway's own, coming back after a newer one) is not answered when the newer one follows within the hold")
    func outOfDateEcho() throws {
        var devices = try settled([(0x2A19, [87])], gateway: "hall")
        let first = try heard(devices)
        let (heart, heartSource) = try made(0x2A37, [0x00, 72])
        let published = devices.note(heart, from: heartSource)
        #expect(published)
        let second = try heard(devices)
        devices.heard(node, first, now: at(2))   // lacks 2a37_bpm
        devices.heard(node, second, now: at(2.3))
        #expect(devices.due(now: at(3.5)).isEmpty)
        devices.heard(node, first, now: at(4))   // another gateway's out-of-date one, kept last
        #expect(devices.due(now: at(5)) == [node])
    }

    @Test("A component carried from a third gateway is answered for too; a removed config is not; an unreadable one is written over")
    func carriedRemovedUnreadable() throws {
        var a = try settled([(0x2A19, [87])], gateway: "a")
        let b = try settled([(0x2A37, [0x00, 72])], gateway: "b")
        let fromB = try heard(b)
        a.heard(node, fromB, now: at(2))
        #expect(a.due(now: at(3)) == [node], "b's config lacks a's battery")
        // The union was published; then a third config without b's heart rate: a carries it, so a answers.
        let (battery, _) = try made(0x2A19, [87], gateway: "c")
        let withoutHeart = (components: Dictionary(uniqueKeysWithValues: battery.components.map { ($0.id, $0.options) }), object: JSONLine?.none)
        a.heard(node, try heard(a), now: at(4))
        a.heard(node, withoutHeart, now: at(5))
        #expect(a.due(now: at(6)) == [node])
        #expect(try parsed(a.config(node)).ids == ["2a19_level_percent", "2a37_bpm"])
        // Removed (an empty retained payload): not answered, and b's component no longer carried.
        a.heard(node, ([:], nil), now: at(7))
        #expect(a.due(now: at(9)).isEmpty)
        #expect(try parsed(a.config(node)).ids == ["2a19_level_percent"])
        // Not a config bluectl can read: written over.
        a.heard(node, nil, now: at(10))
        #expect(a.due(now: at(11)) == [node])
    }

    @Test("A device's object: a GATT-only gateway publishes another's that names a model, until it is removed; remake brings new options")
    func objectAndRemake() throws {
        var gatt = try settled([(0x2A19, [87])], gateway: "old")
        var fromAdverts = JSONLine()
        fromAdverts.add("identifiers", strings: [node])
        fromAdverts.add("name", "thermometer")
        fromAdverts.add("model", "bthome")
        let config = HomeAssistantDiscovery.deviceConfig(device: fromAdverts, components: [("temperature_c", JSONLine())])
        let before = try #require(try parsed(gatt.config(node)).root["device"] as? [String: Any])
        #expect(before["model"] == nil && before["name"] as? String == "C0:FF:EE:00:00:01", "\(before)")
        let heard = try #require(HomeAssistantDiscovery.parse(deviceConfig: config))
        gatt.heard(node, heard, now: at(2))
        let device = try #require(try parsed(gatt.config(node)).root["device"] as? [String: Any])
        #expect(device["model"] as? String == "bthome" && device["name"] as? String == "thermometer", "\(device)")
        gatt.heard(node, ([:], nil), now: at(3))   // removed: no longer carried
        let afterRemoval = try #require(try parsed(gatt.config(node)).root["device"] as? [String: Any])
        #expect(afterRemoval["model"] == nil, "\(afterRemoval)")
        gatt.remake { source in
            guard case .gatt(let value) = source, let decoded = CharacteristicDecoding.decode(uuid: value.characteristic, value.bytes) else { return nil }
            return HomeAssistantDiscovery.gattComponents(value.device, characteristic: value.characteristic, decoded: decoded,
                                                      topics: GatewayTopics(gateway: "new"))
        }
        let components = try #require(try parsed(gatt.config(node)).root["components"] as? [String: Any])
        #expect((components["2a19_level_percent"] as? [String: Any])?["availability_topic"] as? String == "bluectl/new/status")
    }

    @Test("What is not a device config with components is nil; an empty payload is a removal; cmps and dev are read too")
    func parsing() {
        #expect(HomeAssistantDiscovery.parse(deviceConfig: Array("not json".utf8)) == nil)
        #expect(HomeAssistantDiscovery.parse(deviceConfig: Array(#"{"device":{}}"#.utf8)) == nil)
        #expect(HomeAssistantDiscovery.parse(deviceConfig: [])?.components.isEmpty == true)
        let abbreviated = HomeAssistantDiscovery.parse(deviceConfig: Array(#"{"dev":{"ids":["x"],"mdl":"m"},"cmps":{"x":{"p":"sensor","n":[1,2.5,true,null,{"b":"c"}]}}}"#.utf8))
        #expect(abbreviated?.components["x"]?.render() == #"{"n":[1,2.5,true,null,{"b":"c"}],"p":"sensor"}"#)
        #expect(abbreviated?.object?.render() == #"{"ids":["x"],"mdl":"m"}"#)
        #expect(HomeAssistantDiscovery.parse(deviceConfig: Array(#"{"device":{"name":"n"},"components":{}}"#.utf8))?.object == nil, "no model: not carried")
        #expect(HomeAssistantDiscovery.node(ofDeviceTopic: "homeassistant/device/bluectl_c0ffee000001/config") == "bluectl_c0ffee000001")
        #expect(HomeAssistantDiscovery.node(ofDeviceTopic: "homeassistant/device/zigbee_1/config") == nil)
        #expect(HomeAssistantDiscovery.node(ofDeviceTopic: "homeassistant/sensor/bluectl_c0ffee000001/config") == nil)
    }
}
