import Testing
@testable import BluectlCore

/// Xiaomi MiBeacon: frames captured from devices (the test vectors of xiaomi-ble's
/// tests/test_parser.py at 509f516, 2026-07-20), and the object examples of Xiaomi's object
/// specification (MiEcosystem/miio_open `ble/03-米家BLE Object协议.md`).
@Suite("Xiaomi MiBeacon: captured frames and the specification's object examples")
struct XiaomiDecoderTests {
    static func decode(_ hex: String, _ address: String, key: String? = nil) throws -> Result<SensorReading, SensorDecodingError>? {
        let address = try #require(BluetoothAddress(address))
        let keys = try key.map { try SensorKeys(hex: [address.description: $0]) } ?? SensorKeys()
        let advertisement = SensorAdvertisement(address: address, serviceData: [XiaomiDecoder.service: try ByteFormats.parseHex(hex)])
        return XiaomiDecoder.decode(advertisement, keys: keys)
    }

    static func reading(_ hex: String, _ address: String, key: String? = nil) throws -> SensorReading {
        let result = try decode(hex, address, key: key)
        guard case .success(let reading)? = result else { throw ReferenceError("\(hex): \(String(describing: result))") }
        return reading
    }

    @Test("LYWSD03MMC, v3 plain, MAC included: object 0x100D, 27.2 °C and 49.0 %")
    func lywsd03mmcPlain() throws {
        let r = try Self.reading("50305b05034c94b438c1a40d10041001ea01", "A4:C1:38:B4:94:4C")
        #expect(r.model == "LYWSD03MMC" && !r.encrypted && r.packetID == 3 && r.counter == nil)
        #expect(r.measurements == [SensorMeasurement(.temperature, .number(27.2)), SensorMeasurement(.humidity, .number(49.0))])
    }

    @Test("LYWSDCGQ, v2 plain: two objects, 18.0 °C and 66.1 % (0x100D), battery 59 % (0x100A)")
    func lywsdcgqTwoObjects() throws {
        let r = try Self.reading("5020aa01a3bf2e3b342d580d1004b40095020a10013b", "58:2D:34:3B:2E:BF")
        #expect(r.model == "LYWSDCGQ")
        #expect(r.measurements == [SensorMeasurement(.temperature, .number(18.0)), SensorMeasurement(.humidity, .number(66.1)),
                                   SensorMeasurement(.battery, .integer(59))])
    }

    @Test("LYWSD03MMC, v5 encrypted with MAC: humidity 46.7 % (object 0x1006 = 467); counter = extended counter 0x000026, frame counter 0x50")
    func lywsd03mmcEncrypted() throws {
        let hex = "58585b0550f4830238c1a495ef58763c26000097e2abb5"
        let r = try Self.reading(hex, "A4:C1:38:02:83:F4", key: "e9ea895fac7cca6d30532432a516f3a8")
        #expect(r.encrypted && r.model == "LYWSD03MMC")
        #expect(r.measurements == [SensorMeasurement(.humidity, .number(46.7))])
        #expect(r.packetID == 0x50)
        #expect(r.counter == 0x0000_2650)
        // The same frame with another key, with no key, and with one bit of its tag changed.
        let wrong = try Self.decode(hex, "A4:C1:38:02:83:F4", key: "00112233445566778899aabbccddeeff")
        #expect(wrong.failureKind == .authenticationFailed)
        #expect(try Self.decode(hex, "A4:C1:38:02:83:F4").failureKind == .noKey)
        let flipped = String(hex.dropLast()) + "4"
        #expect(try Self.decode(flipped, "A4:C1:38:02:83:F4", key: "e9ea895fac7cca6d30532432a516f3a8").failureKind == .authenticationFailed)
    }

    @Test("XMWSDJ04MMC, v5 encrypted: float humidity object 0x4C08 of 45.0 %")
    func xmwsdj04mmcEncrypted() throws {
        let r = try Self.reading("48590312a41b776e7c96add7000000f2bf545b", "2C:11:65:25:70:04", key: "b2cf9a553d53571b5657defd582d676e")
        #expect(r.model == "XMWSDJ04MMC" && r.encrypted && r.counter == 0xA4)
        #expect(r.measurements == [SensorMeasurement(.humidity, .number(45.0))])
    }

    @Test("The object specification's examples: 1A 01 is 28.2 °C, 346 is 34.6 %, battery 0…100")
    func specificationExamples() throws {
        // v3 plain frames of a LYWSDCGQ (product 0x01AA) without MAC (frame control 0x3040).
        let t = try Self.reading("4030aa0101" + "041002" + "1a01", "58:2D:34:3B:2E:BF")
        #expect(t.measurements == [SensorMeasurement(.temperature, .number(28.2))])
        let h = try Self.reading("4030aa0102" + "061002" + "5a01", "58:2D:34:3B:2E:BF")
        #expect(h.measurements == [SensorMeasurement(.humidity, .number(34.6))])
        let b = try Self.reading("4030aa0103" + "0a1001" + "64", "58:2D:34:3B:2E:BF")
        #expect(b.measurements == [SensorMeasurement(.battery, .integer(100))])
        let negative = try Self.reading("4030aa0104" + "041002" + "9cff", "58:2D:34:3B:2E:BF")
        #expect(negative.measurements == [SensorMeasurement(.temperature, .number(-10.0))])
    }

    @Test("Frames that give no reading say why, or are not readings at all", arguments: [
        ("4030aa01", "truncated"),                          // header of 4 bytes
        ("4030999901041002" + "1a01", "unsupported"),       // product 0x9999
        ("c030aa0101041002" + "1a01", "unsupported"),       // mesh bit
        ("4010aa0101041002" + "1a01", "unsupported"),       // version 1
        ("4060aa0101041002" + "1a01", "unsupported"),       // version 6
        ("4830aa0101041002" + "1a01000000", "unsupported"), // v3 encrypted (no tag)
        ("4030aa0101041003" + "1a01", "truncated"),         // object runs past the end
        ("4030aa0101041002" + "1a0100", "truncated"),       // a byte after the object
        ("4030aa0101041003" + "1a0100", "invalid"),         // temperature of 3 bytes
        ("4030aa0101144c01" + "01", "unknown_object"),      // only an object bluectl does not decode
        ("6030aa0101" + "28" + "00041002" + "1a01", "unsupported"),  // I/O capability
        ("0030aa0101", "nil"),                              // no object: a device announcing itself
    ])
    func failures(_ hex: String, _ kind: String) throws {
        let result = try Self.decode(hex, "58:2D:34:3B:2E:BF")
        #expect((result.failureKind?.rawValue ?? (result == nil ? "nil" : "reading")) == kind, "\(String(describing: result))")
    }

    @Test("A MAC in the frame that is not the advertiser's: invalid")
    func macMismatch() throws {
        let result = try Self.decode("5030aa0101bf2e3b342d58041002" + "1a01", "11:22:33:44:55:66")
        #expect(result.failureKind == .invalid)
    }

    @Test("SensorDecoder refuses an encrypted frame whose counter is lower than one accepted from the device")
    func counterGoesBack() throws {
        let address = try #require(BluetoothAddress("A4:C1:38:02:83:F4"))
        var decoder = SensorDecoder(keys: try SensorKeys(hex: [address.description: "e9ea895fac7cca6d30532432a516f3a8"]))
        let frame = try ByteFormats.parseHex("58585b0550f4830238c1a495ef58763c26000097e2abb5")
        let ad = SensorAdvertisement(address: address, serviceData: [XiaomiDecoder.service: frame])
        guard case .success = decoder.decode(ad) else { Issue.record("first frame refused"); return }
        guard case .success = decoder.decode(ad) else { Issue.record("the same counter again is a repeat, not a step back"); return }
        // A frame with a lower counter: encrypt one with frame counter 0x4f and the same extended counter.
        let nonce = address.bytes.reversed() + [0x5b, 0x05, 0x4f, 0x26, 0x00, 0x00]
        let key = try ByteFormats.parseHex("e9ea895fac7cca6d30532432a516f3a8")
        let sealed = try #require(AESCCM.seal(plaintext: [0x06, 0x10, 0x02, 0xd3, 0x01], key: key, nonce: nonce, tagLength: 4,
                                              associatedData: [0x11]))
        let older = [0x58, 0x58, 0x5b, 0x05, 0x4f] + address.bytes.reversed() + sealed.ciphertext + [0x26, 0x00, 0x00] + sealed.tag
        let result = decoder.decode(SensorAdvertisement(address: address, serviceData: [XiaomiDecoder.service: older]))
        #expect(result.failureKind == .counterWentBack, "\(String(describing: result))")
    }
}

extension Optional where Wrapped == Result<SensorReading, SensorDecodingError> {
    /// The failure's kind, nil for a reading or no result.
    var failureKind: SensorDecodingError.Kind? {
        if case .failure(let error)? = self { return error.kind }
        return nil
    }
}
