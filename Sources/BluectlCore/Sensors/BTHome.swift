/// BTHome v2: service data of 0xFCD2, a device information byte then objects (an id and
/// its value), plain or encrypted with AES-CCM.
///
/// Source: bthome.io/format and bthome.io/encryption (home-assistant/bthome.io, as of
/// 2026-04-30, commit 0cf388b). The objects: `BTHomeObjects`; the layout, the choices where
/// the spec is silent, and how this compares with Home Assistant's `bthome-ble`:
/// docs/sensors.md.
///
/// - Device information: bit 0 encrypted, bit 2 trigger-based, bits 5–7 the version (2).
///   Another version, or bit 1 (reserved; older receivers read it as "MAC included"), is
///   `unsupported`.
/// - Encrypted: the ciphertext, a 4-byte counter (little-endian), a 4-byte tag; the nonce is
///   the device's address (6 bytes, as written), the UUID little-endian (`d2 fc`), the device
///   information byte and the counter's bytes. A plain frame from a device whose key is
///   given fails authentication: anyone can send it under a copied address.
/// - Objects: an id bluectl does not know ends the decoding, the objects before it kept
///   (`SensorReading.partial`; the spec orders ids so that older receivers can); an object
///   that runs past the end fails the frame (`truncated`).
package enum BTHome: SensorFormatDecoder {
    package static let format = SensorFormat.bthome
    /// BTHome's service UUID.
    package static let serviceUUID = BluetoothUUID(uint16: 0xFCD2)

    package static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard let data = advertisement.serviceData[serviceUUID] else { return nil }
        do {
            var reading = try frame(data, address: advertisement.address, key: keys[advertisement.address])
            reading.model = model(named: advertisement.name)
            return .success(reading)
        } catch {
            return .failure(error)
        }
    }

    /// The reading of one frame of service data.
    static func frame(_ data: [UInt8], address: BluetoothAddress, key: [UInt8]?) throws(SensorDecodingError) -> SensorReading {
        guard let info = data.first else { throw failure(.truncated, "no device information byte") }
        let version = info >> 5
        guard version == 2 else {
            throw failure(.unsupported, "BTHome version \(version) (device information \(hex(info))); only version 2 is decoded")
        }
        guard info & 0x02 == 0 else {
            throw failure(.unsupported, "device information \(hex(info)) sets bit 1, reserved in v2")
        }
        guard info & 0x01 == 1 else {
            if key != nil {
                throw failure(.authenticationFailed, "not encrypted, though a key is given for \(address): not accepted (anyone can send it as \(address))")
            }
            return try objects(data[1...], encrypted: false, counter: nil, offset: 1)
        }
        guard data.count >= 9 else {
            throw failure(.truncated, "an encrypted frame has at least 9 bytes (information, counter, tag), this one \(data.count)")
        }
        guard let key else { throw failure(.noKey, "encrypted, and no key for \(address) (--keys)") }
        let counterBytes = Array(data[(data.count - 8)..<(data.count - 4)])
        let nonce = address.bytes + [0xD2, 0xFC, info] + counterBytes
        guard let plaintext = AESCCM.open(ciphertext: Array(data[1..<(data.count - 8)]), tag: Array(data.suffix(4)),
                                          key: key, nonce: nonce) else {
            throw failure(.authenticationFailed, "the tag does not match with the key of \(address): a wrong key, or an altered frame")
        }
        let counter = counterBytes.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return try objects(plaintext[...], encrypted: true, counter: counter, offset: nil)
    }

    /// The objects of a payload. `offset`: where the payload starts in the service data, for
    /// the messages (nil: a decrypted payload, counted from its start).
    private static func objects(_ payload: ArraySlice<UInt8>, encrypted: Bool, counter: UInt32?,
                                offset: Int?) throws(SensorDecodingError) -> SensorReading {
        var reading = SensorReading(format: format, encrypted: encrypted, counter: counter)
        reading.measurements.reserveCapacity(payload.count / 2)   // at most one per two bytes
        var index = payload.startIndex
        func position(_ i: Int) -> String {
            offset.map { "at byte \($0 + i - payload.startIndex)" } ?? "at byte \(i - payload.startIndex) of the decrypted objects"
        }
        while index < payload.endIndex {
            let at = index
            let id = payload[index]
            guard let object = BTHomeObjects.object(id) else {
                let problem = failure(.unknownObject, "object id \(hex(id)) \(position(at)) is not in bthome.io/format (2026-04-30); "
                                      + "\(reading.measurements.isEmpty ? "no object before it" : "the objects after it are not decoded")")
                guard !reading.measurements.isEmpty else { throw problem }
                reading.partial = reading.partial ?? problem
                return reading
            }
            var start = index + 1
            var length = object.length
            if object.hasLengthByte {
                guard start < payload.endIndex else {
                    throw failure(.truncated, "object \(hex(id)) (\(object.name)) \(position(at)) has no length byte")
                }
                let byte = Int(payload[start])
                length = object.encoding == .command ? 1 + (byte & 0x1F) : byte
                start += 1
            }
            guard payload.endIndex - start >= length else {
                throw failure(.truncated, "object \(hex(id)) (\(object.name)) \(position(at)) needs \(length) "
                              + "\(length == 1 ? "byte" : "bytes"), \(payload.endIndex - start) left")
            }
            let bytes = payload[start..<(start + length)]
            index = start + length
            do {
                try value(of: object, bytes, into: &reading)
            } catch {
                reading.partial = reading.partial ?? failure(error.kind, "object \(hex(id)) (\(object.name)) \(position(at)) \(error.detail)")
            }
        }
        return reading
    }

    /// Appends the measurement(s) `bytes` hold for `object` (or sets the packet id); throws
    /// for a value the spec does not allow, which is left out.
    private static func value(of object: BTHomeObject, _ bytes: ArraySlice<UInt8>, into reading: inout SensorReading) throws(SensorDecodingError) {
        func add(_ value: SensorValue, _ quantity: SensorQuantity = object.quantity) {
            reading.measurements.append(SensorMeasurement(quantity, value))
        }
        switch object.encoding {
        case .packetID:
            if reading.packetID == nil { reading.packetID = Int(bytes.first!) }
        case .number(let signed):
            add(.number(Double(integer(bytes, signed: signed) * object.numerator) / Double(object.denominator)))
        case .integer(let signed):
            add(.integer(Int(integer(bytes, signed: signed))))
        case .binary:
            let byte = bytes.first!
            guard byte <= 1 else { throw failure(.invalid, "holds \(byte); a binary sensor is 0 or 1") }
            add(.flag(byte == 1))
        case .button:
            add(.event(BTHomeObjects.eventName(bytes.first!, in: BTHomeObjects.buttonEvents)))
        case .dimmer:
            let event = bytes.first!
            add(.event(BTHomeObjects.eventName(event, in: BTHomeObjects.dimmerEvents), steps: event == 0 ? nil : Int(bytes.last!)))
        case .command:
            let opcode = bytes.first!
            let arguments = Array(bytes.dropFirst())
            let name = BTHomeObjects.eventName(opcode, in: BTHomeObjects.commandOpcodes)
            if (opcode == 0x03 || opcode == 0x04), arguments.count == 1 {
                add(.event(name, steps: Int(arguments[0])))
            } else {
                add(.event(name))
                if !arguments.isEmpty { add(.bytes(arguments), .commandArguments) }
            }
        case .text:
            guard let text = String(validating: bytes, as: UTF8.self) else { throw failure(.invalid, "is not UTF-8 text") }
            add(.text(text))
        case .raw:
            add(.bytes(Array(bytes)))
        case .firmwareVersion:
            add(.text(bytes.reversed().map { String($0) }.joined(separator: ".")))
        }
    }

    /// A little-endian integer of 1 to 4 bytes.
    private static func integer(_ bytes: ArraySlice<UInt8>, signed: Bool) -> Int64 {
        let unsigned = bytes.reversed().reduce(Int64(0)) { $0 << 8 | Int64($1) }
        let bits = Int64(bytes.count * 8)
        return signed && unsigned >= (1 << (bits - 1)) ? unsigned - (1 << bits) : unsigned
    }

    /// The model a device's advertised name says: Shelly's BLU devices advertise their model
    /// code (shelly-api-docs.shelly.cloud/docs-ble, "short device name"; the names
    /// Home Assistant's bthome-ble maps).
    static func model(named name: String?) -> String? {
        guard let name else { return nil }
        if name.hasPrefix("prst") { return "b-parasite" }
        return shellyModels[name]
    }

    private static let shellyModels: [String: String] = [
        "SBBT-002C": "Shelly BLU Button1", "SBBT-102C": "Shelly BLU Button1 ZB", "SBDW-002C": "Shelly BLU Door/Window",
        "SBMO-003Z": "Shelly BLU Motion", "SBHT-003C": "Shelly BLU H&T", "SBHT-203C": "Shelly BLU H&T ZB",
        "SBHT-103C": "Shelly BLU H&T Display ZB", "SBBT-004CEU": "Shelly BLU Wall Switch 4",
        "SBBT-004CUS": "Shelly BLU RC Button 4", "SBTR-001AEU": "Shelly BLU TRV",
    ]

    private static func failure(_ kind: SensorDecodingError.Kind, _ detail: String) -> SensorDecodingError {
        SensorDecodingError(format, kind, detail)
    }

    private static func hex(_ byte: UInt8) -> String {
        "0x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
    }
}
