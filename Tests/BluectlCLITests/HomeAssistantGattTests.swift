import BluectlCore
import BluectlGateway
import Foundation
import Testing
@testable import BluectlCLI

/// Home Assistant configs of GATT values (`HomeAssistantDiscovery.gattComponents`, docs/gateway.md,
/// "Home Assistant"): which decoded fields become entities, with what unit and name.
@Suite("gateway: Home Assistant configs of decoded GATT values")
struct HomeAssistantGattTests {
    private let address = BluetoothAddress("C0:FF:EE:00:00:01")!
    private let topics = GatewayTopics(gateway: "hall")

    /// The components of `bytes` read from `uuid16`, parsed: id → JSON object; and the device object.
    private func made(_ uuid16: UInt16, _ bytes: [UInt8], topics: GatewayTopics? = nil) throws -> (components: [String: [String: Any]], device: [String: Any]) {
        let uuid = BluetoothUUID(uint16: uuid16)
        let decoded = try #require(CharacteristicDecoding.decode(uuid: uuid, bytes))
        let made = HomeAssistantDiscovery.gattComponents(address, characteristic: uuid, decoded: decoded, topics: topics ?? self.topics)
        #expect(made.node == "bluectl_c0ffee000001")
        var out: [String: [String: Any]] = [:]
        for component in made.components {
            out[component.id] = try #require(try JSONSerialization.jsonObject(with: Data(component.options.renderedBytes(newline: false))) as? [String: Any])
        }
        let device = try #require(try JSONSerialization.jsonObject(with: Data(made.device.renderedBytes(newline: false))) as? [String: Any])
        return (out, device)
    }

    private func configs(_ uuid16: UInt16, _ bytes: [UInt8], topics: GatewayTopics? = nil) throws -> [String: [String: Any]] {
        try made(uuid16, bytes, topics: topics).components
    }

    @Test("Battery Level: one battery entity in %, named by the characteristic, on this gateway's characteristic topic")
    func batteryLevel() throws {
        let all = try configs(0x2A19, [87])
        let config = try #require(all["2a19_level_percent"], "\(all.keys)")
        #expect(all.count == 1)
        #expect(config["platform"] as? String == "sensor")
        #expect(config["unique_id"] as? String == "bluectl_c0ffee000001_2a19_level_percent")
        #expect(config["name"] as? String == "Battery Level")
        #expect(config["device_class"] as? String == "battery")
        #expect(config["unit_of_measurement"] as? String == "%")
        #expect(config["state_topic"] as? String == "bluectl/hall/devices/C0:FF:EE:00:00:01/gatt/2a19")
        #expect(config["value_template"] as? String == "{{ value_json.decoded.level_percent }}")
        #expect(config["availability_topic"] as? String == "bluectl/hall/status")
        let device = try made(0x2A19, [87]).device
        #expect(device["identifiers"] as? [String] == ["bluectl_c0ffee000001"])
        #expect(device["name"] as? String == "C0:FF:EE:00:00:01")
        #expect(device["via_device"] == nil, "bluectl's layout: no via_device")
    }

    @Test("Temperature Measurement in Fahrenheit: °F; its text and timestamp fields are no entities")
    func fahrenheit() throws {
        // flags 0x03: Fahrenheit, time stamp; 98.6 (mantissa 986, exponent -1); 2026-11-27 13:30:00
        let all = try configs(0x2A1C, [0x03, 0xDA, 0x03, 0x00, 0xFF, 0xEA, 0x07, 11, 27, 13, 30, 0])
        #expect(Array(all.keys) == ["2a1c_temperature"])
        #expect(all.values.first?["unit_of_measurement"] as? String == "°F")
        #expect(all.values.first?["device_class"] as? String == "temperature")
    }

    @Test("Heart rate with energy expended: bpm is an entity, energy, contact and RR intervals are not; Theengs' layout adds via_device")
    func heartRate() throws {
        // flags 0x18: uint8 bpm, energy expended, RR intervals
        let theengs = try made(0x2A37, [0x18, 72, 0x10, 0x00, 0x00, 0x04], topics: GatewayTopics(gateway: "hall", layout: .theengs))
        let all = theengs.components
        let config = try #require(all["2a37_bpm"], "\(all.keys)")
        #expect(all.count == 1)
        #expect(config["unit_of_measurement"] as? String == "bpm")
        #expect(config["device_class"] == nil)
        #expect(theengs.device["via_device"] as? String == "bluectl_gateway_hall")
    }

    @Test("Values of one shape (field names, the unit a value names) share their configs: another value, same shape; °F after °C, another; a ledger makes configs again only then")
    func shapes() throws {
        func shape(_ uuid16: UInt16, _ bytes: [UInt8]) throws -> [String] {
            HomeAssistantDiscovery.gattShape(try #require(CharacteristicDecoding.decode(uuid: BluetoothUUID(uint16: uuid16), bytes)))
        }
        let celsius = try shape(0x2A1C, [0x00, 0x6C, 0x0E, 0x00, 0xFE]), celsius2 = try shape(0x2A1C, [0x00, 0x70, 0x0E, 0x00, 0xFE])
        let fahrenheit = try shape(0x2A1C, [0x01, 0xDA, 0x03, 0x00, 0xFF])
        #expect(celsius == celsius2)
        #expect(celsius != fahrenheit)
        #expect(try shape(0x2A37, [0x00, 72]) != shape(0x2A37, [0x08, 72, 0x10, 0x00]), "energy expended present or not")
        var ledger = GatewayLedger()
        let changes = [ledger.gattFieldsChanged("t", celsius), ledger.gattFieldsChanged("t", celsius2),
                       ledger.gattFieldsChanged("t", fahrenheit), ledger.gattFieldsChanged("u", celsius)]
        #expect(changes == [true, false, true, true], "new, same shape, °F, another topic")
    }

    @Test("A value with no numeric field Home Assistant can graph makes no config")
    func none() throws {
        #expect(try configs(0x2A38, [0x01]).isEmpty)     // body sensor location: text
        #expect(try configs(0x2A29, Array("ACME".utf8)).isEmpty)   // manufacturer name
    }
}
