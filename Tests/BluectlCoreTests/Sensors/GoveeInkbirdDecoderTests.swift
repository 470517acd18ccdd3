import Testing
@testable import BluectlCore

/// Govee and Inkbird hygrometers: no vendor publishes these layouts; the frames are built
/// from the layout govee-ble 1.5.2 and inkbird-ble 1.7.1 decode (docs/sensors.md).
@Suite("Govee and Inkbird hygrometers (reverse-engineered layouts)")
struct GoveeInkbirdDecoderTests {
    static let address = BluetoothAddress("A4:C1:38:5D:E1:2B")!

    static func decode(_ name: String?, _ company: UInt16, _ data: [UInt8]) -> Result<SensorReading, SensorDecodingError>? {
        SensorDecoders.decode(SensorAdvertisement(address: address, name: name, manufacturerData: [company: data]))
    }

    @Test("H5075: -12.3 °C and 45.6 % packed as 0x80 + 12 3456 (big-endian), battery 77 %")
    func h5075() {
        // 123 × 1000 + 456 = 123456 = 0x01E240, sign bit 0x800000.
        guard case .success(let r)? = Self.decode("GVH5075_E12B", 0xEC88, [0x00, 0x81, 0xE2, 0x40, 77, 0x00]) else {
            Issue.record("no reading"); return
        }
        #expect(r.format == .govee && r.model == "H5075")
        #expect(r.measurements == [SensorMeasurement(.temperature, .number(-12.3)), SensorMeasurement(.humidity, .number(45.6)),
                                   SensorMeasurement(.battery, .integer(77))])
    }

    @Test("H5075 error bit and out-of-range temperature: temperature and humidity not available, battery kept")
    func h5075NotAvailable() {
        guard case .success(let r)? = Self.decode("GVH5075_E12B", 0xEC88, [0x00, 0x03, 0x0D, 0x40, 0x80 | 61, 0x00]) else {
            Issue.record("no reading"); return
        }
        #expect(r.measurements == [SensorMeasurement(.temperature, .notAvailable), SensorMeasurement(.humidity, .notAvailable),
                                   SensorMeasurement(.battery, .integer(61))])
        guard case .success(let hot)? = Self.decode("GVH5075_E12B", 0xEC88, [0x00, 0x0F, 0x46, 0xE0, 50, 0x00]) else {  // 100.1 °C
            Issue.record("no reading"); return
        }
        #expect(hot[.temperature] == .notAvailable)
    }

    @Test("H5101 (6 bytes under company 0x0001), H5074 and H5179 (little-endian hundredths)")
    func otherModels() {
        guard case .success(let h5101)? = Self.decode("GVH5101_E12B", 0x0001, [0x01, 0x01, 0x03, 0x9E, 0xE8, 90]) else {
            Issue.record("H5101"); return
        }
        #expect(h5101.model == "H5101" && h5101[.temperature] == .number(23.7) && h5101[.humidity] == .number(28.8))
        guard case .success(let h5074)? = Self.decode("Govee_H5074_E12B", 0xEC88, [0x00, 0x29, 0x09, 0xD2, 0x04, 64, 0x02]) else {
            Issue.record("H5074"); return
        }
        #expect(h5074.measurements == [SensorMeasurement(.temperature, .number(23.45)), SensorMeasurement(.humidity, .number(12.34)),
                                       SensorMeasurement(.battery, .integer(64))])
        guard case .success(let h5179)? = Self.decode("Govee_H5179_E12B", 0x8801, [0x01, 0x00, 0x01, 0x01, 0x1A, 0xFA, 0x98, 0x08, 90]) else {
            Issue.record("H5179"); return
        }
        #expect(h5179[.temperature] == .number(-15.1) && h5179[.humidity] == .number(22.0))
    }

    @Test("IBS-TH (`sps`): temperature in the company id (0x0929 = 23.45 °C), 67.89 %, battery 99 %")
    func inkbird() {
        guard case .success(let r)? = Self.decode("sps", 0x0929, [0x85, 0x1A, 0x00, 0x31, 0x8B, 99, 0x08]) else {
            Issue.record("no reading"); return
        }
        #expect(r.format == .inkbird && r.model == "IBS-TH")
        #expect(r.measurements == [SensorMeasurement(.temperature, .number(23.45)), SensorMeasurement(.humidity, .number(67.89)),
                                   SensorMeasurement(.battery, .integer(99))])
        guard case .success(let p01b)? = Self.decode("tps", 0xFB2E, [0xFF, 0xFF, 0x00, 0x31, 0x8B, 80, 0x08]) else {
            Issue.record("no reading"); return
        }
        #expect(p01b.measurements == [SensorMeasurement(.temperature, .number(-12.34)), SensorMeasurement(.battery, .integer(80))])
        #expect(Self.decode("sps", 0x0929, [0x11, 0x27, 0x00, 0x31, 0x8B, 99, 0x08]).failureKind == .invalid)  // 100.01 %
        #expect(Self.decode("sps", 0x0929, [0x85, 0x1A, 0x00, 0x31, 0x8B, 101, 0x08]).failureKind == .invalid)
        let two = SensorAdvertisement(address: Self.address, name: "sps",
                                      manufacturerData: [0x0929: [0x85, 0x1A, 0, 0x31, 0x8B, 99, 8], 0x0930: [0x85, 0x1A, 0, 0x31, 0x8B, 99, 8]])
        #expect(SensorDecoders.decode(two).failureKind == .invalid)
    }

    @Test("The first look: every model the checks name holds H5 or V5; a name without one under a company not Govee's is not read")
    func firstLook() {
        let models = ["H5072", "H5075", "H5129", "H5108", "H5074", "H5179"] + GoveeDecoder.h5101Family
        for model in models { #expect(GoveeDecoder.namesModel("Govee_\(model)_E12B"), "\(model)") }
        for name in ["", "burst-00005", "5H", "h5075", "ATC_E12B"] { #expect(!GoveeDecoder.namesModel(name), "\(name)") }
        // The name decides under any company; without it, Govee's companies still do.
        guard case .success(let named)? = Self.decode("GVH5101_E12B", 0x1234, [0x01, 0x01, 0x03, 0x9E, 0xE8, 90]),
              case .success(let h5108)? = Self.decode("burst-00005", 0x0001, [0, 0, 0x01, 0x03, 0x9E, 0xE8, 90, 0]) else {
            Issue.record("no reading"); return
        }
        #expect(named.model == "H5101" && h5108.model == "H5108")
        #expect(Self.decode("burst-00005", 0x1234, [0x01, 0x01, 0x03, 0x9E, 0xE8, 90]).map { _ in true } == nil)
    }
}
