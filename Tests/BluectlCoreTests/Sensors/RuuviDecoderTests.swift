import Testing
@testable import BluectlCore

/// Ruuvi formats 5 and 3 against the test vectors of ruuvi/ruuvi-sensor-protocols
/// (`dataformat_05.md` with the minimum vector of issue #30, `dataformat_03.md`): the
/// values are the specification's tables, not bluectl's output.
@Suite("Ruuvi RAWv2 and RAWv1: the specification's test vectors")
struct RuuviDecoderTests {
    static let address = BluetoothAddress("CB:B8:33:4C:88:4F")!

    static func decode(_ hex: String) throws -> Result<SensorReading, SensorDecodingError>? {
        let advertisement = SensorAdvertisement(address: address, manufacturerData: [0x0499: hex.isEmpty ? [] : try ByteFormats.parseHex(hex)])
        return RuuviDecoder.decode(advertisement, keys: SensorKeys())
    }

    static func reading(_ hex: String) throws -> SensorReading {
        guard case .success(let reading)? = try decode(hex) else { throw ReferenceError("\(hex) gives \(String(describing: try decode(hex)))") }
        return reading
    }

    static func number(_ reading: SensorReading, _ quantity: SensorQuantity) -> Double? {
        if case .number(let v)? = reading[quantity] { return v }
        return nil
    }

    @Test("Format 5, valid data: 24.3 °C, 100044 Pa, 53.49 %, 0.004/-0.004/1.036 g, 4 dBm, 2.977 V, movement 66, sequence 205")
    func rawV2Valid() throws {
        let r = try Self.reading("0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")
        #expect(r.format == .ruuvi && !r.encrypted)
        #expect(Self.number(r, .temperature) == 24.3)
        #expect(Self.number(r, .pressure) == 1000.44)
        #expect(Self.number(r, .humidity) == 53.49)
        #expect(Self.number(r, .accelerationX) == 0.004)
        #expect(Self.number(r, .accelerationY) == -0.004)
        #expect(Self.number(r, .accelerationZ) == 1.036)
        #expect(r[.txPower] == .integer(4))
        #expect(Self.number(r, .voltage) == 2.977)
        #expect(r[.movementCounter] == .integer(66))
        #expect(r.packetID == 205)
    }

    @Test("Format 5, maximum values: 163.835 °C, 115534 Pa, 163.835 %, 32.767 g, 20 dBm, 3.646 V, 254, 65534")
    func rawV2Maximum() throws {
        let r = try Self.reading("057FFFFFFEFFFE7FFF7FFF7FFFFFDEFEFFFECBB8334C884F")
        #expect(Self.number(r, .temperature) == 163.835)
        #expect(Self.number(r, .pressure) == 1155.34)
        #expect(Self.number(r, .humidity) == 163.835)
        for axis in [SensorQuantity.accelerationX, .accelerationY, .accelerationZ] {
            #expect(Self.number(r, axis) == 32.767)
        }
        #expect(r[.txPower] == .integer(20))
        #expect(Self.number(r, .voltage) == 3.646)
        #expect(r[.movementCounter] == .integer(254))
        #expect(r.packetID == 65534)
    }

    @Test("Format 5, minimum values (issue #30's vector): -163.835 °C, 50000 Pa, 0 %, -32.767 g, -40 dBm, 1.6 V, 0, 0")
    func rawV2Minimum() throws {
        let r = try Self.reading("058001000000008001800180010000000000CBB8334C884F")
        #expect(Self.number(r, .temperature) == -163.835)
        #expect(Self.number(r, .pressure) == 500)
        #expect(Self.number(r, .humidity) == 0)
        for axis in [SensorQuantity.accelerationX, .accelerationY, .accelerationZ] {
            #expect(Self.number(r, axis) == -32.767)
        }
        #expect(r[.txPower] == .integer(-40))
        #expect(Self.number(r, .voltage) == 1.6)
        #expect(r[.movementCounter] == .integer(0))
        #expect(r.packetID == 0)
    }

    @Test("Format 5, invalid values: every field not available (null), no packet id")
    func rawV2Invalid() throws {
        let r = try Self.reading("058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF")
        #expect(r.measurements.count == 9)
        for m in r.measurements { #expect(m.value == .notAvailable, "\(m.quantity)") }
        #expect(r.packetID == nil)
    }

    @Test("Format 5 field examples of the specification: +2.255 °C, -2.255 °C, 25.025 %, 101325 Pa")
    func rawV2Examples() throws {
        let base = "05" + "0000" + "0000" + "0000" + "000000000000" + "0000" + "00" + "0000" + "CBB8334C884F"
        func with(_ offset: Int, _ hex: String) -> String {
            var s = Array(base)
            s.replaceSubrange(offset * 2 ..< offset * 2 + hex.count, with: Array(hex))
            return String(s)
        }
        #expect(Self.number(try Self.reading(with(1, "01C3")), .temperature) == 2.255)
        #expect(Self.number(try Self.reading(with(1, "FE3D")), .temperature) == -2.255)
        #expect(Self.number(try Self.reading(with(3, "271A")), .humidity) == 25.025)
        #expect(Self.number(try Self.reading(with(5, "C87D")), .pressure) == 1013.25)
    }

    @Test("Format 3, valid data: 26.3 °C, 102766 Pa, 20.5 %, -1/-1.726/0.714 g, 2.899 V")
    func rawV1Valid() throws {
        let r = try Self.reading("03291A1ECE1EFC18F94202CA0B53")
        #expect(Self.number(r, .temperature) == 26.3)
        #expect(Self.number(r, .pressure) == 1027.66)
        #expect(Self.number(r, .humidity) == 20.5)
        #expect(Self.number(r, .accelerationX) == -1)
        #expect(Self.number(r, .accelerationY) == -1.726)
        #expect(Self.number(r, .accelerationZ) == 0.714)
        #expect(Self.number(r, .voltage) == 2.899)
        #expect(r.packetID == nil)
    }

    @Test("Format 3, maximum and minimum values: ±127.99 °C, 115535/50000 Pa, 127.5/0 %, ±32.767 g, 65.535/0 V")
    func rawV1Extremes() throws {
        let max = try Self.reading("03FF7F63FFFF7FFF7FFF7FFFFFFF")
        #expect(Self.number(max, .temperature) == 127.99)
        #expect(Self.number(max, .pressure) == 1155.35)
        #expect(Self.number(max, .humidity) == 127.5)
        #expect(Self.number(max, .accelerationZ) == 32.767)
        #expect(Self.number(max, .voltage) == 65.535)
        let min = try Self.reading("0300FF6300008001800180010000")
        #expect(Self.number(min, .temperature) == -127.99)
        #expect(Self.number(min, .pressure) == 500)
        #expect(Self.number(min, .humidity) == 0)
        #expect(Self.number(min, .accelerationX) == -32.767)
        #expect(Self.number(min, .voltage) == 0)
    }

    @Test("Format 3 temperature examples: 0x8145 is -1.69 °C, 0x0145 is +1.69 °C")
    func rawV1Examples() throws {
        #expect(Self.number(try Self.reading("03008145CE1EFC18F94202CA0B53"), .temperature) == -1.69)
        #expect(Self.number(try Self.reading("03000145CE1EFC18F94202CA0B53"), .temperature) == 1.69)
    }

    @Test("Frames that give no reading say why", arguments: [
        ("0512FC5394C37C0004FFFC040CAC364200CDCBB8334C88", SensorDecodingError.Kind.truncated),
        ("0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F00", .invalid),
        ("03291A1ECE1EFC18F94202CA0B", .truncated),
        ("03291A64CE1EFC18F94202CA0B53", .invalid),
        ("", .truncated),
        ("04", .unsupported),
    ])
    func failures(_ hex: String, _ kind: SensorDecodingError.Kind) throws {
        guard case .failure(let error)? = try Self.decode(hex) else {
            Issue.record("\(hex): \(String(describing: try Self.decode(hex)))")
            return
        }
        #expect(error.kind == kind, "\(error)")
        #expect(error.format == .ruuvi)
    }

    @Test("No Ruuvi manufacturer data: not this format (nil)")
    func notRuuvi() {
        let other = SensorAdvertisement(address: Self.address, manufacturerData: [0x004C: [0x05, 0x12]])
        #expect(RuuviDecoder.decode(other, keys: SensorKeys()) == nil)
    }
}
