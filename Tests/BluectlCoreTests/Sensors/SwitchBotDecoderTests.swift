import Testing
@testable import BluectlCore

/// SwitchBot meters, from OpenWonderLabs/SwitchBotAPI-BLE's published layout
/// (devicetypes/meter.md) and its Outdoor Meter sample advertisement.
@Suite("SwitchBot Meter, Meter Plus and Outdoor Meter")
struct SwitchBotDecoderTests {
    static let address = BluetoothAddress("D4:1D:8A:03:27:B5")!
    static let fd3d = BluetoothUUID(uint16: 0xFD3D)

    static func decode(service: [UInt8], uuid: BluetoothUUID = fd3d, manufacturer: [UInt8]? = nil) -> Result<SensorReading, SensorDecodingError>? {
        var ad = SensorAdvertisement(address: address, serviceData: [uuid: service])
        if let manufacturer { ad.manufacturerData[0x0969] = manufacturer }
        return SwitchBotDecoder.decode(ad, keys: SensorKeys())
    }

    @Test("The published Outdoor Meter sample: 22.2 °C, 55 %, battery 100 %")
    func outdoorSample() throws {
        let manufacturer = Self.address.bytes + (try ByteFormats.parseHex("360302963700"))
        guard case .success(let r)? = Self.decode(service: [0x77, 0x00, 0x64], manufacturer: manufacturer) else {
            Issue.record("no reading"); return
        }
        #expect(r.model == "Outdoor Meter")
        #expect(r.measurements == [SensorMeasurement(.temperature, .number(22.2)), SensorMeasurement(.humidity, .integer(55)),
                                   SensorMeasurement(.battery, .integer(100))])
    }

    @Test("Meter ('T'), service data only: -7.5 °C (sign bit clear), 61 %, 89 %; the same under the old UUID 0x0D00")
    func meter() {
        let service: [UInt8] = [0x54, 0x00, 89, 0x05, 0x07, 61 | 0x80]
        for uuid in [Self.fd3d, BluetoothUUID(uint16: 0x0D00)] {
            guard case .success(let r)? = Self.decode(service: service, uuid: uuid) else { Issue.record("no reading"); continue }
            #expect(r.model == "Meter")
            #expect(r.measurements == [SensorMeasurement(.temperature, .number(-7.5)), SensorMeasurement(.humidity, .integer(61)),
                                       SensorMeasurement(.battery, .integer(89))])
        }
    }

    @Test("Meter Plus: the manufacturer data's temperature wins over the service data's")
    func meterPlusManufacturer() {
        let manufacturer = Self.address.bytes + [0x36, 0x03, 0x01, 0x98, 40, 0x00]
        guard case .success(let r)? = Self.decode(service: [0x69, 0x00, 50, 0x00, 0x80, 10], manufacturer: manufacturer) else {
            Issue.record("no reading"); return
        }
        #expect(r.model == "Meter Plus")
        #expect(r[.temperature] == .number(24.1) && r[.humidity] == .integer(40))
    }

    @Test("Tenths over 9 are invalid; a Bot is not a meter (nil); 2 bytes carry nothing (truncated)")
    func failures() {
        #expect(Self.decode(service: [0x54, 0x00, 50, 0x0C, 0x94, 40]).failureKind == .invalid)
        #expect(Self.decode(service: [0x48, 0x10, 0x61]) == nil)
        #expect(Self.decode(service: [0x54, 0x00]).failureKind == .truncated)
    }
}
