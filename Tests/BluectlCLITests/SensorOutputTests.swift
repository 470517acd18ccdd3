import BluectlCore
import BluectlDBus
import Testing
@testable import BluectlCLI

/// scan's `sensor` and `sensor_error` (docs/output.md "Sensors"): one description in
/// DeviceRecord, rendered as JSON members and the text's summary, and the live view's.
@Suite("Sensor readings in scan's output")
struct SensorOutputTests {
    static let device = DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")!, properties: PropertyMap([
        "Address": .string("AA:BB:CC:DD:EE:FF"), "AddressType": .string("random"), "Name": .string("DIY"),
    ]))

    static let reading = SensorReading(format: .bthome, encrypted: true, packetID: 9, counter: 7, measurements: [
        SensorMeasurement(.temperature, .number(21.5)), SensorMeasurement(.temperature, .number(-3)),
        SensorMeasurement(.count, .integer(4)), SensorMeasurement(.door, .flag(true)),
        SensorMeasurement(.dimmer, .event("rotate_left", steps: 3)), SensorMeasurement(.button, .event("none")),
        SensorMeasurement(.text, .text("hi\u{1B}")), SensorMeasurement(.raw, .bytes([0xAB])),
        SensorMeasurement(.humidity, .notAvailable),
    ], partial: SensorDecodingError(.bthome, .unknownObject, "object id 0x66 at byte 20 is not in bthome.io/format"))

    @Test("JSON: every kind of value, repeated keys, steps, null, and the partial frame's sensor_error")
    func json() {
        let record = DeviceRecord(device: Self.device, adapter: "hci0", event: "discovered", sensor: .success(Self.reading))
        #expect(record.json() == """
            {"event":"discovered","adapter":"hci0","address":"AA:BB:CC:DD:EE:FF","address_type":"random","name":"DIY",\
            "sensor":{"format":"bthome","encrypted":true,"packet_id":9,"counter":7,"temperature_c":21.5,"temperature_c_2":-3.0,\
            "count":4,"door":true,"dimmer":"rotate_left","dimmer_steps":3,"button":"none","text":"hi\\u001b","raw":"ab",\
            "humidity_percent":null},\
            "sensor_error":{"format":"bthome","kind":"unknown_object","reason":"object id 0x66 at byte 20 is not in bthome.io/format"},\
            "connected":false,"paired":false,"path":"/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"}
            """)
    }

    @Test("Text: the summary after the name, terminal-safe, encrypted said; a failure's line instead")
    func text() {
        let record = DeviceRecord(device: Self.device, adapter: "hci0", event: "discovered", sensor: .success(Self.reading))
        #expect(record.textParts.line() == "NEW  AA:BB:CC:DD:EE:FF  random  - dBm  \"DIY\"  sensor 21.5 °C -3 °C count 4 door yes "
                + "dimmer rotate_left 3 button none text \"hi\\x1b\" raw ab n/a % (encrypted)  sensor error BTHome v2: unknown object: "
                + "object id 0x66 at byte 20 is not in bthome.io/format")
        let failed = DeviceRecord(device: Self.device, adapter: "hci0", event: "discovered",
                                  sensor: .failure(SensorDecodingError(.bthome, .noKey, "encrypted, and no key for AA:BB:CC:DD:EE:FF (--keys)")))
        #expect(failed.textParts.line() == "NEW  AA:BB:CC:DD:EE:FF  random  - dBm  \"DIY\"  sensor error BTHome v2: no key: "
                + "encrypted, and no key for AA:BB:CC:DD:EE:FF (--keys)")
        #expect(failed.json().contains("\"sensor_error\":{\"format\":\"bthome\",\"kind\":\"no_key\""))
        #expect(!failed.json().contains("\"sensor\":"))
    }

    @Test("The live view's summary column: the reading, or why there is none, before the beacon or services")
    func liveSummary() {
        let plain = SensorReading(format: .bthome, measurements: [SensorMeasurement(.temperature, .number(21.5)),
                                                                  SensorMeasurement(.humidity, .number(48)),
                                                                  SensorMeasurement(.voltage, .number(3))])
        #expect(LiveScanTable.summary(of: Self.device, sensor: .success(plain)) == "21.5 °C 48 % 3 V")
        #expect(LiveScanTable.summary(of: Self.device, sensor: .failure(SensorDecodingError(.bthome, .truncated, "x")))
                == "BTHome v2: truncated: x")
        #expect(LiveScanTable.summary(of: Self.device, sensor: .success(SensorReading(format: .bthome))) == "(no measurements)")
    }
}
