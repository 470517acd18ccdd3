/// The pvvx custom firmware's "custom" format (ATC_MiThermometer by pvvx, for the
/// LYWSD03MMC and other Telink thermometers): service data of 0x181A, 15 bytes, little-endian;
/// and its encrypted variant, 11 bytes, AES-CCM with the device's bindkey.
///
/// Source: the firmware's published layout, pvvx/ATC_MiThermometer `README.md` ("Custom
/// format", 2026-05-15) and `src/custom_beacon.h`/`custom_beacon.c` (the encrypted
/// structures and their nonce, 2025-04-15). Layout in docs/sensors.md.
///
/// The plain frame carries the device's MAC (least significant byte first), which is not
/// checked against the advertiser's address (the firmware may advertise from another).
/// The encrypted frame's nonce is the advertiser's address (least significant byte first)
/// and the frame's own AD header (length, 0x16, 0x181A) with its 1-byte counter: the
/// counter is the reading's `packetID` only, not an encryption `counter` (it wraps every 256
/// frames, so "lower than the last" would reject a healthy device).
enum PvvxDecoder: SensorFormatDecoder {
    static let format = SensorFormat.pvvx
    /// Environmental Sensing: the service both firmware formats advertise under.
    static let service = BluetoothUUID(uint16: 0x181A)

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard let data = advertisement.serviceData[service] else { return nil }
        let d = SensorBytes(data)
        switch data.count {
        case 15:
            guard let t = d.s16le(6), let h = d.u16le(8), let mv = d.u16le(10), let battery = d.u8(12),
                  let counter = d.u8(13), let flags = d.u8(14) else { return nil }
            let m = [
                SensorMeasurement(.temperature, .number(sensorDecimal(t, -2))),
                SensorMeasurement(.humidity, .number(sensorDecimal(h, -2))),
                SensorMeasurement(.voltage, .number(sensorDecimal(mv, -3))),
                SensorMeasurement(.battery, .integer(Int(battery))),
            ] + flagMeasurements(flags)
            return .success(SensorReading(format: format, packetID: Int(counter), measurements: m))
        case 11:
            switch CustomFirmwareCipher.open(data, address: advertisement.address, keys: keys, format: format) {
            case .failure(let failure): return .failure(failure)
            case .success(let plain):
                let p = SensorBytes(plain)
                guard let t = p.s16le(0), let h = p.u16le(2), let battery = p.u8(4), let flags = p.u8(5) else { return nil }
                let m = [
                    SensorMeasurement(.temperature, .number(sensorDecimal(t, -2))),
                    SensorMeasurement(.humidity, .number(sensorDecimal(h, -2))),
                    SensorMeasurement(.battery, .integer(Int(battery))),
                ] + flagMeasurements(flags)
                return .success(SensorReading(format: format, encrypted: true, packetID: Int(data[0]), measurements: m))
            }
        default:
            return nil
        }
    }

    /// The flags byte: bit 0 the reed switch input, bit 1 the trigger output pin (bits 2-4,
    /// the trigger's configuration and events, are not decoded).
    private static func flagMeasurements(_ flags: UInt8) -> [SensorMeasurement] {
        [SensorMeasurement(.reedSwitch, .flag(flags & 0x01 != 0)), SensorMeasurement(.triggerOutput, .flag(flags & 0x02 != 0))]
    }
}

/// The AES-CCM of the pvvx firmware's encrypted custom and ATC1441 frames (service data of
/// 0x181A: a 1-byte counter, the ciphertext, a 4-byte tag).
enum CustomFirmwareCipher {
    /// The plaintext of `data`, or the failure to report (no key, tag that does not authenticate).
    static func open(_ data: [UInt8], address: BluetoothAddress, keys: SensorKeys,
                     format: SensorFormat) -> Result<[UInt8], SensorDecodingError> {
        guard let key = keys[address] else {
            return .failure(SensorDecodingError(format, .noKey, "an encrypted frame and no key for \(address)"))
        }
        // The nonce: the MAC (least significant byte first), then the frame's AD header as sent
        // (length, type 0x16, UUID 0x181A little-endian) and its counter.
        let nonce = Array(address.bytes.reversed()) + [UInt8(data.count + 3), 0x16, 0x1A, 0x18, data[0]]
        guard let plain = AESCCM.open(ciphertext: Array(data[1 ..< data.count - 4]), tag: Array(data.suffix(4)),
                                      key: key, nonce: nonce, associatedData: [0x11]) else {
            return .failure(SensorDecodingError(format, .authenticationFailed, "the tag does not authenticate the frame with the key of \(address)"))
        }
        return .success(plain)
    }
}
