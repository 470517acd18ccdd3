/// SwitchBot's Meter, Meter Plus and Outdoor Meter: service data of 0xFD3D (0x0D00 before
/// firmware Meter V2.7) and manufacturer data of Woan Technology (0x0969).
///
/// Source: OpenWonderLabs/SwitchBotAPI-BLE `devicetypes/meter.md` (2023-06-12; the Outdoor
/// Meter's section is marked "unofficial and community provided" there) and its
/// `README.md` (device types; the UUID change, written there as bytes "0x000d", which BlueZ
/// reports as 0x0D00), decoded as PySwitchbot 3.1.0 decodes them. Layout in
/// docs/sensors.md.
///
/// The service data's first byte (bits 6…0) is the device type: 'T' Meter, 'i' Meter Plus,
/// 'w' Outdoor Meter (lowercase in add mode, uppercase otherwise for the Meter); other types
/// are other SwitchBot devices (nil). Byte 2 is the battery; the temperature and humidity
/// are 3 bytes: bytes 8…10 of the manufacturer data when it has them (newer firmware, the
/// Outdoor Meter), else bytes 3…5 of the service data. Temperature: byte 0 bits 3…0 the
/// tenths (0…9), byte 1 bit 7 the sign (1 above zero) and bits 6…0 the degrees; humidity:
/// byte 2 bits 6…0 (bit 7 says the display shows °F, which does not change the value).
enum SwitchBotDecoder: SensorFormatDecoder {
    static let format = SensorFormat.switchbot
    /// The service data UUIDs, current first.
    static let services = [BluetoothUUID(uint16: 0xFD3D), BluetoothUUID(uint16: 0x0D00)]
    /// Woan Technology's company identifier.
    static let company: UInt16 = 0x0969

    /// Device type (bits 6…0 of the first byte) to model.
    static let models: [UInt8: String] = [
        UInt8(ascii: "T"): "Meter", UInt8(ascii: "t"): "Meter",
        UInt8(ascii: "i"): "Meter Plus", UInt8(ascii: "I"): "Meter Plus",
        UInt8(ascii: "w"): "Outdoor Meter", UInt8(ascii: "W"): "Outdoor Meter",
    ]

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard let data = services.lazy.compactMap({ advertisement.serviceData[$0] }).first,
              let type = data.first, let model = models[type & 0x7F] else { return nil }
        var m: [SensorMeasurement] = []
        var source: SensorBytes?
        if let manufacturer = advertisement.manufacturerData[company], manufacturer.count >= 11 {
            source = SensorBytes(manufacturer[8 ..< 11])
        } else if data.count >= 6 {
            source = SensorBytes(data[3 ..< 6])
        }
        if let t = source, let tenths = t.u8(0), let whole = t.u8(1), let humidity = t.u8(2) {
            let decimal = tenths & 0x0F
            guard decimal <= 9 else {
                return .failure(SensorDecodingError(format, .invalid, "temperature tenths \(decimal) (0…9 allowed)"))
            }
            let value = (Int(whole & 0x7F) * 10 + Int(decimal)) * (whole & 0x80 != 0 ? 1 : -1)
            m.append(SensorMeasurement(.temperature, .number(sensorDecimal(value, -1))))
            m.append(SensorMeasurement(.humidity, .integer(Int(humidity & 0x7F))))
        }
        if data.count >= 3 {
            m.append(SensorMeasurement(.battery, .integer(Int(data[2] & 0x7F))))
        }
        guard !m.isEmpty else {
            return .failure(SensorDecodingError(format, .truncated, "service data of \(data.count) bytes and no temperature in manufacturer data"))
        }
        return .success(SensorReading(format: format, model: model, measurements: m))
    }
}
