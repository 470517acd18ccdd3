/// Inkbird's IBS-TH (advertised name `sps`) and IBS-TH2 / IBS-P01B (`tps`) hygrometers: the
/// temperature in the company identifier of their manufacturer data, the rest in its 7 bytes.
///
/// Source: none published by Inkbird. Reverse-engineered, as inkbird-ble 1.7.1 decodes it:
/// temperature the company identifier read as a signed 16-bit number in hundredths of a
/// degree, humidity bytes 0…1 (little-endian hundredths), battery byte 5. A humidity above
/// 100 % or a battery above 100 % marks a corrupt frame (inkbird-ble drops it; here it is
/// `invalid`); an IBS-TH2 that sends humidity 0 or 0xFFFF has no humidity sensor (the
/// IBS-P01B) and the reading has none. Layout in docs/sensors.md.
///
/// Because the company identifier changes with the temperature, BlueZ may hold several
/// manufacturer data entries for one device; when more than one is left (ignoring company
/// 2, as inkbird-ble does) which one is current is unknown and the frame is `invalid`.
enum InkbirdDecoder: SensorFormatDecoder {
    static let format = SensorFormat.inkbird
    /// Advertised name (lowercased) to model.
    static let models = ["sps": "IBS-TH", "tps": "IBS-TH2"]

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        // Three letters first: a scan decodes every advertisement, and lowercasing a name allocates.
        guard let name = advertisement.name, name.utf8.count == 3, let model = models[name.lowercased()],
              !advertisement.manufacturerData.isEmpty else { return nil }
        var entries = advertisement.manufacturerData
        if entries.count > 1 { entries[2] = nil }
        guard entries.count == 1, let (company, data) = entries.first else {
            return .failure(error(.invalid, "\(entries.count) manufacturer data entries: which one is current is unknown"))
        }
        guard data.count == 7 else { return .failure(error(.invalid, "manufacturer data of \(data.count) bytes, not 7")) }
        let d = SensorBytes(data)
        guard let humidity = d.u16le(0), let battery = d.u8(5) else { return nil }
        let hasHumidity = model == "IBS-TH" || (humidity != 0 && humidity != 0xFFFF)
        if hasHumidity, humidity > 10_000 { return .failure(error(.invalid, "humidity \(sensorDecimal(humidity, -2)) % is over 100 %")) }
        guard battery <= 100 else { return .failure(error(.invalid, "battery \(battery) % is over 100 %")) }
        var m = [SensorMeasurement(.temperature, .number(sensorDecimal(Int16(bitPattern: company), -2)))]
        if hasHumidity { m.append(SensorMeasurement(.humidity, .number(sensorDecimal(humidity, -2)))) }
        m.append(SensorMeasurement(.battery, .integer(Int(battery))))
        return .success(SensorReading(format: format, model: model, measurements: m))
    }

    private static func error(_ kind: SensorDecodingError.Kind, _ detail: String) -> SensorDecodingError {
        SensorDecodingError(format, kind, detail)
    }
}
