/// The ATC1441 custom firmware's format (atc1441/ATC_MiThermometer, also sent by pvvx's
/// firmware): service data of 0x181A, 13 bytes, big-endian; and the 8-byte encrypted variant
/// pvvx's firmware sends with a bindkey.
///
/// Source: the firmware's published layout, pvvx/ATC_MiThermometer `README.md` ("atc1441
/// format", 2026-05-15) and `src/custom_beacon.h`/`custom_beacon.c` (`adv_atc1441_t`, the
/// encrypted `adv_atc_enc_t`: temperature in 0.5 °C from -40 °C, humidity in 0.5 %, battery in
/// the low 7 bits and the trigger output in bit 7; 2025-04-15). Layout in
/// docs/sensors.md. The MAC of the plain frame (most significant byte first) is not
/// checked against the advertiser's address; the 1-byte counter is the `packetID` (see
/// `PvvxDecoder` for why it is not an encryption counter).
enum ATC1441Decoder: SensorFormatDecoder {
    static let format = SensorFormat.atc1441

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard let data = advertisement.serviceData[PvvxDecoder.service] else { return nil }
        let d = SensorBytes(data)
        switch data.count {
        case 13:
            guard let t = d.s16be(6), let h = d.u8(8), let battery = d.u8(9), let mv = d.u16be(10), let counter = d.u8(12) else { return nil }
            let m = [
                SensorMeasurement(.temperature, .number(sensorDecimal(t, -1))),
                SensorMeasurement(.humidity, .integer(Int(h))),
                SensorMeasurement(.battery, .integer(Int(battery))),
                SensorMeasurement(.voltage, .number(sensorDecimal(mv, -3))),
            ]
            return .success(SensorReading(format: format, packetID: Int(counter), measurements: m))
        case 8:
            switch CustomFirmwareCipher.open(data, address: advertisement.address, keys: keys, format: format) {
            case .failure(let failure): return .failure(failure)
            case .success(let plain):
                guard plain.count == 3 else { return nil }
                let m = [
                    SensorMeasurement(.temperature, .number(sensorDecimal(Int(plain[0]) * 5 - 400, -1))),
                    SensorMeasurement(.humidity, .number(sensorDecimal(Int(plain[1]) * 5, -1))),
                    SensorMeasurement(.battery, .integer(Int(plain[2] & 0x7F))),
                    SensorMeasurement(.triggerOutput, .flag(plain[2] & 0x80 != 0)),
                ]
                return .success(SensorReading(format: format, encrypted: true, packetID: Int(data[0]), measurements: m))
            }
        default:
            return nil
        }
    }
}
