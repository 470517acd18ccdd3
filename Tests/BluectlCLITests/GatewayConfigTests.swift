import BluectlCore
import BluectlDBus
import BluectlGateway
import Testing
@testable import BluectlCLI

/// `bluectl gateway`'s pure parts: the --broker URL, the --config file's schema and its
/// filters, and which frames the gateway publishes (docs/gateway.md).
@Suite("gateway: broker URL, config file, what is published")
struct GatewayConfigTests {
    @Test("--broker: mqtt:// and mqtts://, default ports, IPv6 in brackets; the session's URI")
    func brokerURLs() throws {
        let plain = try BrokerAddress("mqtt://broker.lan")
        #expect((plain.host, plain.port, plain.tls, plain.sessionURI) == ("broker.lan", 1883, false, "tcp://broker.lan:1883"))
        let tls = try BrokerAddress("MQTTS://10.0.0.2:8884/")
        #expect((tls.host, tls.port, tls.tls, tls.sessionURI, tls.description) == ("10.0.0.2", 8884, true, "ssl://10.0.0.2:8884", "mqtts://10.0.0.2:8884"))
        let six = try BrokerAddress("mqtt://[::1]:1884")
        #expect((six.host, six.port, six.sessionURI) == ("::1", 1884, "tcp://[::1]:1884"))
        for bad in ["tcp://h", "mqtt://", "mqtt://h:0", "mqtt://h:x", "mqtt://u@h", "mqtt://h/topic", "mqtt://[::1", "mqtt://h h", "mqtt://a:1:2"] {
            #expect(throws: BrokerAddressError.self, "\(bad)") { try BrokerAddress(bad) }
        }
    }

    @Test("A config with every member parses into its filters and each device's GATT work")
    func fullConfig() throws {
        let config = try GatewayConfig.parse(Array("""
            {"advertisements": {"addresses": ["a4:c1:38:00:00:27"], "services": ["fcd2", "heart_rate"],
                                "sensor_formats": ["bthome", "xiaomi"], "min_interval": 2.5},
             "devices": {"00:AA:01:00:00:00": {"subscribe": ["2a37"], "read": [{"characteristic": "battery_level", "every": 60}],
                                                "writable": ["2a39"]}}}
            """.utf8))
        let sensor = try #require(BluetoothAddress("A4:C1:38:00:00:27"))
        let device = try #require(BluetoothAddress("00:AA:01:00:00:00"))
        #expect(config.addresses == [sensor])
        #expect(config.services == [try BluetoothUUID("fcd2", kind: .service), try BluetoothUUID("180d", kind: .service)])
        #expect(config.sensorFormats == [.bthome, .xiaomi])
        #expect(config.minInterval == 2.5)
        #expect(config.devices[device] == GatewayConfig.DeviceWork(
            subscribe: [try BluetoothUUID("2a37", kind: .characteristic)],
            read: [.init(characteristic: try BluetoothUUID("2a19", kind: .characteristic), every: 60)],
            writable: [try BluetoothUUID("2a39", kind: .characteristic)]))
        #expect(try GatewayConfig.parse(Array("{}".utf8)) == GatewayConfig())
    }

    @Test("Each problem names its JSON path", arguments: [
        ("[]", "expected an object"),
        ("{\"advertisment\": {}}", "unknown key \"advertisment\" (expected advertisements, devices)"),
        ("{\"advertisements\": {\"addresses\": [\"A4:C1:38:00:00:27\", \"zz\"]}}",
         "advertisements.addresses[1]: \"zz\" is not a Bluetooth address (AA:BB:CC:DD:EE:FF)"),
        ("{\"advertisements\": {\"services\": \"fcd2\"}}", "advertisements.services: expected an array"),
        ("{\"advertisements\": {\"sensor_formats\": [\"bthome2\"]}}", "advertisements.sensor_formats[0]: unknown sensor format \"bthome2\""),
        ("{\"advertisements\": {\"min_interval\": -1}}", "advertisements.min_interval: expected a positive number of seconds"),
        ("{\"advertisements\": {\"min_interval\": true}}", "advertisements.min_interval: expected a positive number of seconds"),
        ("{\"devices\": []}", "devices: expected an object of addresses"),
        ("{\"devices\": {\"nope\": {}}}", "devices.nope: \"nope\" is not a Bluetooth address"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"read\": [{\"characteristic\": \"2a19\"}]}}}", "devices.00:AA:01:00:00:00.read[0].every: missing"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"writable\": [\"zz\"]}}}", "devices.00:AA:01:00:00:00.writable[0]: "),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {}}}", "devices.00:AA:01:00:00:00: nothing to do (expected subscribe, read or writable)"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"subscribe\": [\"2a37\", \"heart_rate_measurement\"]}}}",
         "devices.00:AA:01:00:00:00.subscribe[1]: 2a37 (Heart Rate Measurement) is listed twice"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"read\": [{\"characteristic\": \"2a19\", \"every\": 5}, {\"characteristic\": \"2a19\", \"every\": 9}]}}}",
         "devices.00:AA:01:00:00:00.read[1].characteristic: 2a19 (Battery Level) is listed twice"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"read\": [{\"characteristic\": \"2a19\", \"every\": 0}]}}}",
         "devices.00:AA:01:00:00:00.read[0].every: expected a positive number of seconds"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"read\": [{\"characteristic\": \"2a19\", \"every\": 5, \"once\": true}]}}}",
         "devices.00:AA:01:00:00:00.read[0]: unknown key \"once\""),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"writable\": \"2a39\"}}}", "devices.00:AA:01:00:00:00.writable: expected an array"),
        ("{\"devices\": {\"00:AA:01:00:00:00\": {\"notify\": [\"2a37\"]}}}", "devices.00:AA:01:00:00:00: unknown key \"notify\""),
        ("{", "not valid JSON"),
    ])
    func problems(_ text: String, _ expected: String) {
        do {
            _ = try GatewayConfig.parse(Array(text.utf8))
            Issue.record("\(text) was accepted")
        } catch {
            #expect("\(error)".hasPrefix(expected), "\(text): \(error)")
        }
    }

    static func device(_ address: String, temperature: UInt8 = 1) -> DeviceInfo {
        let device = DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_"))!, properties: PropertyMap([
            "Address": .string(address), "RSSI": .int16(-60),
            "ServiceData": .dictionary(key: .string, value: .variant, [
                DBusDictEntry(.string("0000fcd2-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0x40, 0x02, temperature, 0x09]))),
            ]),
        ]))
        return device
    }

    @Test("admits: every filter must hold; a sensor format matches a reading or a frame that gives none")
    func admits() throws {
        var config = GatewayConfig()
        let reading = SensorReading(format: .bthome, measurements: [SensorMeasurement(.temperature, .number(21))])
        let failure = SensorDecodingError(.xiaomi, .noKey, "no key")
        #expect(config.admits(Self.device("AA:BB:CC:DD:EE:01"), sensor: nil))
        config.sensorFormats = [.bthome]
        #expect(config.admits(Self.device("AA:BB:CC:DD:EE:01"), sensor: .success(reading)))
        #expect(!config.admits(Self.device("AA:BB:CC:DD:EE:01"), sensor: .failure(failure)))
        #expect(!config.admits(Self.device("AA:BB:CC:DD:EE:01"), sensor: nil))
        config.addresses = [try #require(BluetoothAddress("AA:BB:CC:DD:EE:02"))]
        #expect(!config.admits(Self.device("AA:BB:CC:DD:EE:01"), sensor: .success(reading)))
        #expect(config.admits(Self.device("AA:BB:CC:DD:EE:02"), sensor: .success(reading)))
    }

    @Test("Published: a frame that differs (RSSI aside); with a minimum interval, not before it has passed; drops reported once")
    func ledger() {
        var gate = DiscoveryGate(config: GatewayConfig())
        let first = Self.device("AA:BB:CC:DD:EE:01", temperature: 1)
        var louder = first
        louder.rssi = -40
        let second = Self.device("AA:BB:CC:DD:EE:01", temperature: 2)
        let seen = [gate.isNew(first), gate.isNew(louder), gate.isNew(second), gate.isNew(first)]
        #expect(seen == [true, false, true, true])
        var config = GatewayConfig()
        config.minInterval = 10
        var limitedGate = DiscoveryGate(config: config)
        let start = ContinuousClock.now
        let timed = [limitedGate.isNew(first, now: start), limitedGate.isNew(second, now: start + .seconds(9)),
                     limitedGate.isNew(second, now: start + .seconds(10))]
        #expect(timed == [true, false, true])
        // losses: the session's running totals; each report publishes only what is new since
        // the last, for its own reason
        var limited = GatewayLedger()
        let first3 = limited.unreported(.bufferFull, of: 3)
        limited.reported(first3, .bufferFull)
        #expect([first3, limited.unreported(.bufferFull, of: 3), limited.unreported(.bufferFull, of: 5),
                 limited.unreported(.unsendable, of: 3)] == [3, 0, 2, 3])
        limited.reported(1, .unsendable)
        #expect([limited.unreported(.unsendable, of: 3), limited.unreported(.bufferFull, of: 5)] == [2, 2])
    }

    @Test("A write command's payload: hex as write takes it, or {value|utf8, id}; anything else refused with the reason", arguments: [
        ("0102", [0x01, 0x02], nil),
        (" 01 02\n", [0x01, 0x02], nil),
        ("{\"value\": \"0x0a0b\", \"id\": \"r1\"}", [0x0a, 0x0b], "r1"),
        ("{\"utf8\": \"Hi\"}", [0x48, 0x69], nil),
    ] as [(String, [UInt8], String?)])
    func writeCommand(_ payload: String, _ bytes: [UInt8], _ id: String?) {
        #expect(GatewayWriteCommand.parse(Array(payload.utf8)) == .success(GatewayWriteCommand(bytes: bytes, id: id)))
    }

    @Test("Bad command payloads are refused, never sent", arguments: [
        ("", "an empty payload"),
        ("zz", "invalid value: "),
        ("{\"value\": 12}", "value: expected a string of hex digits"),
        ("{\"value\": \"01\", \"utf8\": \"a\"}", "expected exactly one of value (hex) and utf8"),
        ("{\"hex\": \"01\"}", "unknown key \"hex\" (expected value, utf8, id)"),
        ("{\"id\": 5, \"value\": \"01\"}", "id: expected a string"),
        ("{\"value\": ", "not valid JSON"),
        ("[1]", "invalid value: "),
        ("{\"utf8\": \"\(String(repeating: "x", count: 513))\"}", "the value is over 512 bytes"),
    ])
    func badWriteCommand(_ payload: String, _ reason: String) {
        guard case .failure(let refusal) = GatewayWriteCommand.parse(Array(payload.utf8)) else {
            Issue.record("\(payload) was accepted")
            return
        }
        #expect(refusal.text.hasPrefix(reason), "\(payload): \(refusal.text)")
    }

    @Test("Command topics: bluectl/ID/devices/MAC/gatt/UUID/write of this gateway only; the result next to it")
    func commandTopics() {
        let topics = GatewayTopics(gateway: "hall")
        #expect(topics.gattCommands == "bluectl/hall/devices/+/gatt/+/write")
        #expect(topics.command("bluectl/hall/devices/00:AA:01:00:00:00/gatt/2a39/write")! == ("00:AA:01:00:00:00", "2a39"))
        #expect(topics.command("bluectl/kitchen/devices/00:AA:01:00:00:00/gatt/2a39/write") == nil)
        #expect(topics.command("bluectl/hall/devices/00:AA:01:00:00:00/gatt/2a39") == nil)
        #expect(topics.command("bluectl/hall/devices/00:AA:01:00:00:00/gatt/2a39/write/x") == nil)
        #expect(topics.result("00:AA:01:00:00:00", "2a39") == "bluectl/hall/devices/00:AA:01:00:00:00/gatt/2a39/result")
        #expect(topics.gatt("00:AA:01:00:00:00", "2a37") == "bluectl/hall/devices/00:AA:01:00:00:00/gatt/2a37")
    }
}
