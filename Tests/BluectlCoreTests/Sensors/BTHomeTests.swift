import Testing
@testable import BluectlCore

/// BTHome v2 against the frames its specification publishes (bthome.io/format and
/// bthome.io/encryption, 2026-04-30) and bthome-ble's own encryption tests; the reference
/// comparison across the whole format is Tests/SensorReference/gen_bthome.py.
@Suite("BTHome v2 decoder")
struct BTHomeTests {
    static let address = BluetoothAddress("54:48:E6:8F:80:A5")!
    static let key = try! ByteFormats.parseHex("231d39c1d7cc1ab1aee224cd096db932")

    static func decode(_ hex: String, key: [UInt8]? = nil, address: BluetoothAddress = address, name: String? = nil)
        -> Result<SensorReading, SensorDecodingError>? {
        let keys = key.map { try! SensorKeys([address: $0]) } ?? SensorKeys()
        let data = hex.isEmpty ? [] : try! ByteFormats.parseHex(hex)
        return SensorDecoders.decode(SensorAdvertisement(address: address, name: name, serviceData: [BTHome.serviceUUID: data]),
                                     keys: keys)
    }

    static func reading(_ hex: String, key: [UInt8]? = nil, name: String? = nil) throws -> SensorReading {
        try #require(decode(hex, key: key, name: name)).get()
    }

    static func error(_ hex: String, key: [UInt8]? = nil) throws -> SensorDecodingError {
        guard case .failure(let error) = try #require(decode(hex, key: key)) else {
            Issue.record("\(hex) decoded")
            throw ReferenceError("decoded")
        }
        return error
    }

    @Test("bthome.io/format's advertisement: 25.00 °C, 50.55 %")
    func formatExample() throws {
        let reading = try Self.reading("4002c40903bf13")
        #expect(reading.format == .bthome)
        #expect(!reading.encrypted)
        #expect(reading.measurements == [SensorMeasurement(.temperature, .number(25)), SensorMeasurement(.humidity, .number(50.55))])
        #expect(reading.summary == "25 °C 50.55 %")
    }

    /// Every example of bthome.io/format's tables, with the result it publishes.
    static let published: [(String, SensorQuantity, SensorValue)] = [
        ("518756", .acceleration, .number(22.151)), ("630057D0FF", .acceleration, .number(-3.123456)),
        ("0161", .battery, .number(97)), ("6001", .channel, .integer(1)), ("12E204", .co2, .number(1250)),
        ("56E803", .conductivity, .number(1000)), ("0960", .count, .integer(96)), ("3D0960", .count, .integer(24585)),
        ("3E2A2C0960", .count, .integer(1_611_213_866)), ("59EA", .count, .integer(-22)), ("5AEAEA", .count, .integer(-5398)),
        ("5BEA0234EA", .count, .integer(-365_690_134)), ("434E34", .current, .number(13.39)), ("5D02EA", .current, .number(-5.63)),
        ("08CA06", .dewPoint, .number(17.38)), ("5E9F8C", .direction, .number(359.99)), ("400C00", .distanceMillimetres, .number(12)),
        ("414E00", .distanceMetres, .number(7.8)), ("424E3400", .duration, .number(13.39)), ("4d12138a14", .energy, .number(344_593.17)),
        ("0A138A14", .energy, .number(1346.067)), ("4B138A14", .gas, .number(1346.067)), ("4C41018A01", .gas, .number(25821.505)),
        ("528756", .gyroscope, .number(22.151)), ("03BF13", .humidity, .number(50.55)), ("2E23", .humidity, .number(35)),
        ("05138A14", .illuminance, .number(13460.67)), ("6402", .lightLevel, .integer(2)), ("065E1F", .massKilograms, .number(80.3)),
        ("073E1D", .massPounds, .number(74.86)), ("14020C", .moisture, .number(30.74)), ("2F23", .moisture, .number(35)),
        ("0D120C", .pm25, .number(3090)), ("0E021C", .pm10, .number(7170)), ("0B021B00", .power, .number(69.14)),
        ("5C02FBFFFF", .power, .number(-12.78)), ("5FA00F", .precipitation, .number(400)), ("04138A01", .pressure, .number(1008.83)),
        ("540C48656C6C6F20576F726C6421", .raw, .bytes(Array("Hello World!".utf8))), ("3F020C", .rotation, .number(307.4)),
        ("61AC0D", .rotationalSpeed, .number(3500)), ("6503", .settingsRevision, .integer(3)), ("444E34", .speed, .number(133.9)),
        ("624099DFFF", .speed, .number(-2.123456)), ("57EA", .temperature, .number(-22)), ("58EA", .temperature, .number(-7.7)),
        ("451101", .temperature, .number(27.3)), ("02CA09", .temperature, .number(25.06)),
        ("530C48656C6C6F20576F726C6421", .text, .text("Hello World!")), ("505d396164", .timestamp, .integer(1_684_093_277)),
        ("133301", .tvoc, .number(307)), ("0C020C", .voltage, .number(3.074)), ("4A020C", .voltage, .number(307.4)),
        ("4E87562A01", .volumeLitres, .number(19551.879)), ("478756", .volumeLitres, .number(2215.1)),
        ("48DC87", .volumeMillilitres, .number(34780)), ("5587562A01", .volumeStorage, .number(19551.879)),
        ("49DC87", .volumeFlowRate, .number(34.78)), ("4632", .uvIndex, .number(5)), ("4F87562A01", .water, .number(19551.879)),
        ("1501", .batteryLow, .flag(true)), ("1700", .carbonMonoxide, .flag(false)), ("1A00", .door, .flag(false)),
        ("1F01", .lock, .flag(true)), ("2001", .wet, .flag(true)), ("2100", .motion, .flag(false)), ("1001", .powerOn, .flag(true)),
        ("2D01", .window, .flag(true)), ("3A01", .button, .event("press")), ("3A80", .button, .event("hold_press")),
        ("3B0002", .command, .event("toggle")), ("3B010305", .command, .event("step_up", steps: 5)),
        ("3C0103", .dimmer, .event("rotate_left", steps: 3)), ("3C020A", .dimmer, .event("rotate_right", steps: 10)),
        ("F00100", .deviceTypeID, .integer(1)), ("F100010204", .firmwareVersion, .text("4.2.1.0")),
        ("F2000106", .firmwareVersion, .text("6.1.0")),
    ]

    @Test("Every example of bthome.io/format gives its published result", arguments: 0..<published.count)
    func publishedExample(_ index: Int) throws {
        let (hex, quantity, value) = Self.published[index]
        let reading = try Self.reading("40" + hex)
        #expect(reading.measurements == [SensorMeasurement(quantity, value)], "\(hex)")
    }

    @Test("The packet id is the reading's packetID, not a measurement")
    func packetID() throws {
        let reading = try Self.reading("40000901640209c4")
        #expect(reading.packetID == 9)
        #expect(reading.measurements.map(\.quantity) == [.battery, .temperature])
        #expect(try Self.reading("4002c409").packetID == nil)
    }

    @Test("Repeated objects keep their order; JSON names them key, key_2, …")
    func repeated() throws {
        let reading = try Self.reading("4002c40902f6ff4511013a003a01")
        #expect(reading.keyedMeasurements.map(\.key) == ["temperature_c", "temperature_c_2", "temperature_c_3", "button", "button_2"])
        #expect(reading.keyedMeasurements.map(\.value) == [.number(25), .number(-0.1), .number(27.3), .event("none"), .event("press")])
    }

    @Test("bthome.io/encryption's example frame decrypts to 25.06 °C, 50.55 %, counter 1122867")
    func encryptionExample() throws {
        let reading = try Self.reading("41e445f3c9962b332211006c7c4519", key: Self.key)
        #expect(reading.encrypted)
        #expect(reading.counter == 1_122_867)
        #expect(reading.measurements == [SensorMeasurement(.temperature, .number(25.06)), SensorMeasurement(.humidity, .number(50.55))])
    }

    @Test("bthome-ble's encryption tests: counter bytes 00112233, the frame AESCCM.seal builds, and motion")
    func bthomeBLEExamples() throws {
        // tests/test_v2_encryption.py (Bluetooth-Devices/bthome-ble, 2025-09-14): the published frame…
        let frame = "41a47266c95f730011223378237214"
        let reading = try Self.reading(frame, key: Self.key)
        #expect(reading.counter == 0x3322_1100)
        #expect(reading[.temperature] == .number(25.06))
        // … is what libcrypto seals with the nonce bthome.io/encryption defines.
        let nonce = Self.address.bytes + [0xD2, 0xFC, 0x41, 0x00, 0x11, 0x22, 0x33]
        let sealed = try #require(AESCCM.seal(plaintext: try ByteFormats.parseHex("02CA0903BF13"), key: Self.key, nonce: nonce, tagLength: 4))
        #expect("41" + ByteFormats.hex(sealed.ciphertext) + "00112233" + ByteFormats.hex(sealed.tag) == frame)
        #expect(try Self.reading("4187b90011223372b0231f", key: Self.key).measurements == [SensorMeasurement(.motion, .flag(true))])
    }

    @Test("Encrypted frames: a wrong key, no key, an altered byte, too short, a plain frame from a keyed device")
    func encryptionFailures() throws {
        var wrong = Self.key
        wrong[15] ^= 1
        #expect(try Self.error("41e445f3c9962b332211006c7c4519", key: wrong).kind == .authenticationFailed)
        #expect(try Self.error("41e445f3c9962b332211006c7c4519").kind == .noKey)
        #expect(try Self.error("41e445f3c9962b332211006c7c4518", key: Self.key).kind == .authenticationFailed)
        #expect(try Self.error("41e445f3c9962b33", key: Self.key).kind == .truncated)
        #expect(try Self.error("4002c40903bf13", key: Self.key).kind == .authenticationFailed)
    }

    @Test("Frames the decoder refuses, each with its kind and where")
    func refusals() throws {
        #expect(try Self.error("").kind == .truncated)
        #expect(try Self.error("6002c409").kind == .unsupported)
        #expect(try Self.error("42a5808fe6485402c409").kind == .unsupported)
        let truncated = try Self.error("4003bf1302c4")
        #expect(truncated.kind == .truncated)
        #expect(truncated.detail == "object 0x02 (temperature) at byte 4 needs 2 bytes, 1 left")
        #expect(truncated.description == "BTHome v2: truncated: object 0x02 (temperature) at byte 4 needs 2 bytes, 1 left")
        #expect(try Self.error("4053").kind == .truncated)
        #expect(try Self.error("40660102").kind == .unknownObject)
    }

    @Test("An unknown object id ends the frame with the objects before it kept; a bad value is left out")
    func partial() throws {
        let unknown = try Self.reading("4002c409660102")
        #expect(unknown.measurements == [SensorMeasurement(.temperature, .number(25))])
        #expect(unknown.partial?.kind == .unknownObject)
        #expect(unknown.partial?.detail.hasPrefix("object id 0x66 at byte 4") == true)
        let notUTF8 = try Self.reading("4002c40953029fff03bf13")
        #expect(notUTF8.measurements.map(\.quantity) == [.temperature, .humidity])
        #expect(notUTF8.partial?.kind == .invalid)
        let binary = try Self.reading("40210202c409")
        #expect(binary.measurements.map(\.quantity) == [.temperature])
        #expect(binary.partial?.detail == "object 0x21 (motion) at byte 1 holds 2; a binary sensor is 0 or 1")
    }

    @Test("Events the spec does not name show as hex; None as none; command arguments kept")
    func events() throws {
        #expect(try Self.reading("403a07")[.button] == .event("0x07"))
        #expect(try Self.reading("403a00")[.button] == .event("none"))
        #expect(try Self.reading("403c0000")[.dimmer] == .event("none"))
        let command = try Self.reading("403b0202abcd")
        #expect(command.measurements == [SensorMeasurement(.command, .event("toggle")), SensorMeasurement(.commandArguments, .bytes([0xAB, 0xCD]))])
    }

    @Test("Shelly BLU devices' names give the model")
    func model() throws {
        #expect(try Self.reading("44000c01642e3245d200", name: "SBHT-003C").model == "Shelly BLU H&T")
        #expect(try Self.reading("4002c409", name: "DIY-sensor").model == nil)
    }

    @Test("Other formats' service data and other UUIDs are not BTHome's")
    func notBTHome() {
        let advertisement = SensorAdvertisement(address: Self.address, serviceData: [BluetoothUUID(uint16: 0x181C): [0x40, 0x02, 0xC4, 0x09]])
        #expect(BTHome.decode(advertisement, keys: SensorKeys()) == nil)
    }
}
