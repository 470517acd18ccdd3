/// Govee's hygrometers: H5072, H5075 (and H5129), H5101, H5102, H5177 and the others of
/// their layout (H5100, H5103, H5104, H5105, H5108, H5110, H5174, GV5179), H5074 and H5179.
/// Manufacturer data; the company identifier is not Govee's own (0xEC88, 0x0001, 0x8801 or
/// any other), so the model is told by the advertised name.
///
/// Source: none published by Govee. Reverse-engineered, as govee-ble 1.5.2 decodes it
/// (which took it from bleparser): the same checks in the same order, so that a frame one
/// of govee-ble's other models claims first is left alone here too (nil). Layout in
/// docs/sensors.md.
///
/// The H5072/H5075 and H5101 layouts pack temperature and humidity into 3 big-endian bytes
/// (bit 23 the sign; the rest is tenths of a degree × 1000 + tenths of a percent) and a
/// battery byte whose bit 7 is an error flag; with the flag set, or a temperature outside
/// -40…100 °C, temperature and humidity are not available (null) and the battery stays.
/// The H5074 and H5179 send little-endian hundredths.
enum GoveeDecoder: SensorFormatDecoder {
    static let format = SensorFormat.govee
    /// Apple's company identifier: never a Govee frame (govee-ble skips it too).
    static let apple: UInt16 = 0x004C
    /// The models of the H5101 layout, in govee-ble's order (the first in the name wins).
    static let h5101Family = ["H5100", "H5101", "H5102", "H5103", "H5104", "H5105", "H5174", "H5177", "H5110", "GV5179"]

    /// The company identifiers `decode(company:_:name:)` reads a frame by without a model in the name.
    static let companies: Set<UInt16> = [0xEC88, 0x0001, 0x8801]

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard !advertisement.manufacturerData.isEmpty else { return nil }
        let name = advertisement.name ?? ""
        // Most advertisers are not Govee's: told in one pass over the name, before the
        // checks below look for some twenty models in it per entry (a scan decodes every
        // advertisement).
        guard Self.namesModel(name) || advertisement.manufacturerData.keys.contains(where: companies.contains) else {
            return nil
        }
        for company in advertisement.manufacturerData.keys.sorted() where company != apple {
            if let reading = decode(company: company, advertisement.manufacturerData[company] ?? [], name: name) {
                return .success(reading)
            }
        }
        return nil
    }

    /// One manufacturer data entry, through govee-ble's checks in its order.
    static func decode(company: UInt16, _ entry: [UInt8], name text: String) -> SensorReading? {
        let name = ModelName(text)
        var data = entry
        // Some firmware glues its 25-byte name record to the end of the data.
        if data.count > 25, data.containsSequence(Array("INTELLI_ROCKS".utf8)) { data.removeLast(25) }
        let presencePrefix = data.starts(with: [0xEC, 0x00, 0x01, 0x01]) || data.starts(with: [0xEC, 0x00, 0x02, 0x01])
        if data.count == 6, presencePrefix, name.has("H5127") || company == 0x8803 || company == 0x8843 {
            return nil  // the H5127 presence sensor
        }
        if data.count == 6, ["H5072", "H5075", "H5129"].contains(where: name.has) || company == 0xEC88 {
            return packed(SensorBytes(data[1 ..< 5]), model: ["H5072", "H5075", "H5129"].first(where: name.has))
        }
        if data.count == 8, ["GV5112", "H5112", "5140"].contains(where: name.has) {
            return nil  // probe thermometers and the CO2 monitor
        }
        if data.count == 6 || data.count == 8,
           name.has("H5108") || h5101Family.contains(where: name.has) || (company == 0x0001 && data.count == 8) {
            let model = name.has("H5108") || data.count == 8 ? "H5108" : h5101Family.first(where: name.has)
            return packed(SensorBytes(data[2 ..< 6]), model: model)
        }
        if data.count == 7, name.has("H5074") || company == 0xEC88 {
            return littleEndian(SensorBytes(data[1 ..< 6]), model: "H5074")
        }
        if data.count == 9 {
            if company == 0xEC88 || company == 0x0001 || ["H5051", "H5052", "H5071", "H5178", "B5178"].contains(where: name.has) {
                return nil  // other models' 9-byte frames, which govee-ble checks first
            }
            if name.has("H5179") || company == 0x8801 {
                return littleEndian(SensorBytes(data[4 ..< 9]), model: "H5179")
            }
        }
        return nil
    }

    /// Whether `name` may name a model `decode(company:_:name:)` gives a reading for: each of
    /// those holds "H5" or "V5" ("GV5179"). Without one, and without a company of
    /// `companies`, every path there ends in nil.
    static func namesModel(_ name: String) -> Bool {
        var previous: UInt8 = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: "5"), previous == UInt8(ascii: "H") || previous == UInt8(ascii: "V") { return true }
            previous = byte
        }
        return false
    }

    /// 3 bytes of packed temperature and humidity, then the battery and error flag.
    private static func packed(_ d: SensorBytes, model: String?) -> SensorReading? {
        guard let packed = d.unsigned(0, 3, bigEndian: true), let last = d.u8(3) else { return nil }
        let magnitude = Int(packed & 0x7F_FFFF)
        let tenths = (magnitude / 1000) * (packed & 0x80_0000 != 0 ? -1 : 1)
        let usable = last & 0x80 == 0 && (-400...1000).contains(tenths)
        let m = [
            SensorMeasurement(.temperature, usable ? .number(sensorDecimal(tenths, -1)) : .notAvailable),
            SensorMeasurement(.humidity, usable ? .number(sensorDecimal(magnitude % 1000, -1)) : .notAvailable),
            SensorMeasurement(.battery, .integer(Int(last & 0x7F))),
        ]
        return SensorReading(format: format, model: model, measurements: m)
    }

    /// Little-endian hundredths: temperature (signed), humidity, then the battery.
    private static func littleEndian(_ d: SensorBytes, model: String) -> SensorReading? {
        guard let t = d.s16le(0), let h = d.u16le(2), let battery = d.u8(4) else { return nil }
        let m = [
            SensorMeasurement(.temperature, .number(sensorDecimal(t, -2))),
            SensorMeasurement(.humidity, .number(sensorDecimal(h, -2))),
            SensorMeasurement(.battery, .integer(Int(battery))),
        ]
        return SensorReading(format: format, model: model, measurements: m)
    }
}

/// The advertised name's bytes, searched for the models' ASCII markers byte by byte:
/// String's Unicode-aware `contains` cost about a microsecond a marker, and an
/// 8-byte manufacturer data entry of any device meets up to fourteen of them
/// (the scan burst's decoding went from 1.03 to 2.09 times the CPU per event).
private struct ModelName {
    let bytes: [UInt8]
    init(_ name: String) { bytes = Array(name.utf8) }

    func has(_ marker: String) -> Bool {
        let m = marker.utf8
        guard let first = m.first, m.count <= bytes.count else { return false }
        for i in 0 ... bytes.count - m.count where bytes[i] == first {
            if bytes[i ..< i + m.count].elementsEqual(m) { return true }
        }
        return false
    }
}

private extension Array where Element == UInt8 {
    func containsSequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        return (0 ... count - needle.count).contains { self[$0 ..< $0 + needle.count].elementsEqual(needle) }
    }
}
