/// Ruuvi's data formats 5 (RAWv2) and 3 (RAWv1): manufacturer data of Ruuvi Innovations
/// (0x0499), all fields big-endian.
///
/// Source: Ruuvi's published specifications, ruuvi/ruuvi-sensor-protocols
/// `dataformat_05.md` (commit 4b3a507, 2020-03-30, with the minimum test vector corrected
/// for issue #30 in fbcdc2e, 2019-12-29) and `dataformat_03.md` (commit 7b41b16,
/// 2020-03-30). Layouts in docs/sensors.md.
///
/// Format 5 marks a field "not available" with its largest value (unsigned fields) or its
/// smallest (signed ones); such a field is `.notAvailable`, each field on its own. The
/// measurement sequence number is the reading's `packetID` (the specification's
/// de-duplication counter), nil when not available. Format 3 has no such markers; its
/// temperature is sign and magnitude, and a fraction above 99 (hundredths) is invalid.
/// Other data formats (2, 4, 6, E1, 8) are reported as unsupported.
enum RuuviDecoder: SensorFormatDecoder {
    static let format = SensorFormat.ruuvi
    /// Ruuvi Innovations' company identifier.
    static let company: UInt16 = 0x0499

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard let data = advertisement.manufacturerData[company] else { return nil }
        guard let version = data.first else { return .failure(error(.truncated, "no data format byte")) }
        let d = SensorBytes(data)
        switch version {
        case 5: return rawV2(d)
        case 3: return rawV1(d)
        default: return .failure(error(.unsupported, "data format \(version) (bluectl decodes 5 and 3)"))
        }
    }

    private static func error(_ kind: SensorDecodingError.Kind, _ detail: String) -> SensorDecodingError {
        SensorDecodingError(format, kind, detail)
    }

    /// Format 5: 24 bytes (a longer frame is refused: the specification fixes the length).
    private static func rawV2(_ d: SensorBytes) -> Result<SensorReading, SensorDecodingError> {
        guard d.count == 24 else {
            return .failure(error(d.count < 24 ? .truncated : .invalid, "data format 5 has 24 bytes, this frame \(d.count)"))
        }
        // A signed field times `step` × 10^`exponent`; its smallest value is "not available".
        func signed(_ i: Int, _ step: Int, _ exponent: Int) -> SensorValue {
            guard let raw = d.s16be(i), raw != Int16.min else { return .notAvailable }
            return .number(sensorDecimal(Int(raw) * step, exponent))
        }
        var m: [SensorMeasurement] = []
        m.append(SensorMeasurement(.temperature, signed(1, 5, -3)))
        let humidity = d.u16be(3) ?? .max
        m.append(SensorMeasurement(.humidity, humidity == .max ? .notAvailable : .number(sensorDecimal(Int(humidity) * 25, -4))))
        let pressure = d.u16be(5) ?? .max
        m.append(SensorMeasurement(.pressure, pressure == .max ? .notAvailable : .number(sensorDecimal(Int(pressure) + 50_000, -2))))
        m.append(SensorMeasurement(.accelerationX, signed(7, 1, -3)))
        m.append(SensorMeasurement(.accelerationY, signed(9, 1, -3)))
        m.append(SensorMeasurement(.accelerationZ, signed(11, 1, -3)))
        let power = d.u16be(13) ?? .max
        let millivolts = power >> 5, tx = power & 0x1F
        m.append(SensorMeasurement(.voltage, millivolts == 0x7FF ? .notAvailable : .number(sensorDecimal(Int(millivolts) + 1600, -3))))
        m.append(SensorMeasurement(.txPower, tx == 0x1F ? .notAvailable : .integer(Int(tx) * 2 - 40)))
        let movement = d.u8(15) ?? .max
        m.append(SensorMeasurement(.movementCounter, movement == .max ? .notAvailable : .integer(Int(movement))))
        let sequence = d.u16be(16) ?? .max
        return .success(SensorReading(format: format, model: "RuuviTag", packetID: sequence == .max ? nil : Int(sequence),
                                      measurements: m))
    }

    /// Format 3: 14 bytes.
    private static func rawV1(_ d: SensorBytes) -> Result<SensorReading, SensorDecodingError> {
        guard d.count == 14 else {
            return .failure(error(d.count < 14 ? .truncated : .invalid, "data format 3 has 14 bytes, this frame \(d.count)"))
        }
        let humidity = d.u8(1) ?? 0, whole = d.u8(2) ?? 0, fraction = d.u8(3) ?? 0
        guard fraction <= 99 else { return .failure(error(.invalid, "temperature fraction \(fraction) is over 99 hundredths")) }
        // Sign and magnitude: bit 7 is the sign, bits 6…0 the whole degrees.
        let hundredths = (Int(whole & 0x7F) * 100 + Int(fraction)) * (whole & 0x80 == 0 ? 1 : -1)
        func axis(_ i: Int) -> SensorValue { .number(sensorDecimal(Int(d.s16be(i) ?? 0), -3)) }
        let m = [
            SensorMeasurement(.humidity, .number(sensorDecimal(Int(humidity) * 5, -1))),
            SensorMeasurement(.temperature, .number(sensorDecimal(hundredths, -2))),
            SensorMeasurement(.pressure, .number(sensorDecimal(Int(d.u16be(4) ?? 0) + 50_000, -2))),
            SensorMeasurement(.accelerationX, axis(6)),
            SensorMeasurement(.accelerationY, axis(8)),
            SensorMeasurement(.accelerationZ, axis(10)),
            SensorMeasurement(.voltage, .number(sensorDecimal(Int(d.u16be(12) ?? 0), -3))),
        ]
        return .success(SensorReading(format: format, model: "RuuviTag", measurements: m))
    }
}
