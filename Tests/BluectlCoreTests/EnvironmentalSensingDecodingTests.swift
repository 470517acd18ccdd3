import Testing
@testable import BluectlCore

/// The Environmental Sensing characteristics CharacteristicDecoding knows, against the
/// GATT Specification Supplement's definitions (type, resolution, range, "value is not
/// known").
@Suite("Environmental Sensing characteristics")
struct EnvironmentalSensingDecodingTests {
    static func decode(_ uuid: UInt16, _ bytes: [UInt8]) -> DecodedCharacteristic? {
        CharacteristicDecoding.decode(uuid16: uuid, bytes)
    }

    static func one(_ name: String, _ value: DecodedFieldValue, _ summary: String) -> DecodedCharacteristic {
        DecodedCharacteristic(summary: summary, fields: [DecodedField(name: name, value: value)])
    }

    static let unknown = one("special", .string("unknown"), "unknown")

    @Test("Humidity 0x2A6F: uint16 in 0.01 %, 0…100.00, 0xFFFF not known, above 100.00 prohibited")
    func humidity() {
        #expect(Self.decode(0x2A6F, [0xD9, 0x12]) == Self.one("humidity_percent", .double(48.25), "48.25 %"))
        #expect(Self.decode(0x2A6F, [0x00, 0x00]) == Self.one("humidity_percent", .double(0), "0.00 %"))
        #expect(Self.decode(0x2A6F, [0x10, 0x27]) == Self.one("humidity_percent", .double(100), "100.00 %"))
        #expect(Self.decode(0x2A6F, [0xFF, 0xFF]) == Self.unknown)
        #expect(Self.decode(0x2A6F, [0x11, 0x27]) == nil)
        #expect(Self.decode(0x2A6F, [0x11]) == nil)
        #expect(Self.decode(0x2A6F, [0x11, 0x27, 0x00]) == nil)
    }

    @Test("Pressure 0x2A6D: uint32 in 0.1 Pa, shown in hPa")
    func pressure() {
        // 101325.3 Pa = 1013253 tenths = 0x000F7605
        #expect(Self.decode(0x2A6D, [0x05, 0x76, 0x0F, 0x00]) == Self.one("pressure_hpa", .double(1013.253), "1013.253 hPa"))
        #expect(Self.decode(0x2A6D, [0x05, 0x76, 0x0F]) == nil)
    }

    @Test("Temperature Celsius 0x2A1F (0.1 °C), Dew Point 0x2A7B (sint8 °C), UV Index 0x2A76, Irradiance 0x2A77 (0.1 W/m²)")
    func smallOnes() {
        #expect(Self.decode(0x2A1F, [0xF6, 0xFF]) == Self.one("celsius", .double(-1), "-1.0 °C"))
        #expect(Self.decode(0x2A7B, [0xFB]) == Self.one("celsius", .double(-5), "-5 °C"))
        #expect(Self.decode(0x2A76, [0x07]) == Self.one("uv_index", .int(7), "UV index 7"))
        #expect(Self.decode(0x2A77, [0xE8, 0x03]) == Self.one("irradiance_w_m2", .double(100), "100.0 W/m²"))
        #expect(Self.decode(0x2A7B, []) == nil)
        #expect(Self.decode(0x2A76, [0x07, 0x00]) == nil)
    }

    @Test("Illuminance 0x2AFB: uint24 in 0.01 lx, 0xFFFFFF not known; Elevation 0x2A6C: sint24 in 0.01 m")
    func threeByteOnes() {
        #expect(Self.decode(0x2AFB, [0x39, 0x30, 0x00]) == Self.one("illuminance_lux", .double(123.45), "123.45 lx"))
        #expect(Self.decode(0x2AFB, [0xFF, 0xFF, 0xFF]) == Self.unknown)
        #expect(Self.decode(0x2A6C, [0x9C, 0xFF, 0xFF]) == Self.one("elevation_m", .double(-1), "-1.00 m"))
        #expect(Self.decode(0x2A6C, [0x10, 0x27, 0x00]) == Self.one("elevation_m", .double(100), "100.00 m"))
        #expect(Self.decode(0x2AFB, [0x39, 0x30]) == nil)
    }

    @Test("canDecode knows every one of them")
    func canDecode() {
        for uuid: UInt16 in [0x2A6E, 0x2A1F, 0x2A6F, 0x2A6D, 0x2A7B, 0x2A76, 0x2A77, 0x2AFB, 0x2A6C] {
            #expect(CharacteristicDecoding.canDecode(uuid16: uuid), "\(uuid)")
        }
    }
}
