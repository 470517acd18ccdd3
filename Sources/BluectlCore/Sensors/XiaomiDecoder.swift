/// Xiaomi MiBeacon, versions 2 to 5: service data of 0xFE95 from Xiaomi's thermometers and
/// hygrometers, plain or (v4, v5) encrypted with the device's bindkey.
///
/// Sources: the frame layout and the objects 0x1004 (temperature), 0x1006 (humidity) and
/// 0x100A (battery) are Xiaomi's published MiBeacon and object specifications,
/// MiEcosystem/miio_open `ble/02-米家BLE MiBeacon协议.md` and `ble/03-米家BLE Object协议.md`
/// (2019-08-19). The encryption (AES-CCM, nonce of the reversed MAC, product id, frame
/// counter and 3-byte extended counter; associated data 0x11; 4-byte tag), the objects
/// 0x100D, 0x4801–0x4803, 0x4C01–0x4C03 and 0x4C08, and the product ids are
/// reverse-engineered, as xiaomi-ble 1.21.2 decodes them (Xiaomi's newer object list is
/// not public). Layout and differences with the references: docs/sensors.md.
///
/// What is decoded: frames of the thermometer and hygrometer products in `products`; other
/// products are `unsupported`, frames without an object are nil (a device announcing
/// itself), legacy v2/v3 encryption is `unsupported` (it has no tag, so a wrong key gives
/// garbage that cannot be told from data). The frame counter is the reading's `packetID`;
/// an encrypted frame's counter is the frame counter with the extended counter above it.
enum XiaomiDecoder: SensorFormatDecoder {
    static let format = SensorFormat.xiaomi
    /// Xiaomi's MiBeacon service.
    static let service = BluetoothUUID(uint16: 0xFE95)

    /// The thermometers and hygrometers: product id to model (xiaomi-ble 1.21.2's names).
    static let products: [UInt16: String] = [
        0x01AA: "LYWSDCGQ", 0x0347: "CGG1", 0x0387: "MHO-C401", 0x045B: "LYWSD02", 0x055B: "LYWSD03MMC",
        0x0576: "CGD1", 0x066F: "CGDK2", 0x06D3: "MHO-C303", 0x0B48: "CGG1-ENCRYPTED", 0x0C3C: "CGC1",
        0x1203: "XMWSDJ04MMC", 0x16E4: "LYWSD02MMC", 0x2542: "LYWSD02MMC", 0x2832: "MJWSD05MMC",
        0x4C47: "MJWSD05MMC", 0x4F59: "CGDK3", 0x55B5: "MJWSD06MMC", 0x5BEA: "MJWSD06MMC", 0x5DB1: "MBS17",
        0x78DB: "ESM787",
    ]

    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        guard let data = advertisement.serviceData[service] else { return nil }
        let d = SensorBytes(data)
        guard let control = d.u16le(0), let product = d.u16le(2), let frameCounter = d.u8(4) else {
            return .failure(error(.truncated, "a MiBeacon header has 5 bytes, this frame \(data.count)"))
        }
        let version = Int(control >> 12)
        guard control & 0x0080 == 0 else { return .failure(error(.unsupported, "a mesh frame")) }
        guard (2...5).contains(version) else { return .failure(error(.unsupported, "MiBeacon version \(version) (bluectl decodes 2 to 5)")) }
        var index = 5
        if control & 0x0010 != 0 {
            guard data.count >= index + 6 else { return .failure(error(.truncated, "the frame ends inside its MAC address")) }
            let frameAddress = BluetoothAddress(bytes: data[index ..< index + 6].reversed())
            guard frameAddress == advertisement.address else {
                return .failure(error(.invalid, "the frame's MAC \(frameAddress.map { "\($0)" } ?? "?") is not the advertiser's \(advertisement.address)"))
            }
            index += 6
        }
        guard let model = products[product] else {
            return .failure(error(.unsupported, "product \(sensorHex(product)) is not a thermometer bluectl decodes"))
        }
        if control & 0x0020 != 0 {
            guard let capability = d.u8(index) else { return .failure(error(.truncated, "the frame ends before its capability byte")) }
            // The I/O capability field (2 bytes in the specification, 1 in xiaomi-ble) appears only
            // before binding, in high-security devices' frames: not a thermometer's reading.
            guard capability & 0x20 == 0 else { return .failure(error(.unsupported, "a frame with an I/O capability field (sent before binding)")) }
            index += 1
        }
        guard control & 0x0040 != 0 else { return nil }
        let encrypted = control & 0x0008 != 0
        var payload: [UInt8]
        var counter: UInt32?
        if encrypted {
            guard version >= 4 else { return .failure(error(.unsupported, "MiBeacon v\(version) encryption (no authentication tag)")) }
            // Objects, then the 3-byte extended counter and the 4-byte tag.
            guard data.count >= index + 9 else { return .failure(error(.truncated, "an encrypted frame ends before its counter and tag")) }
            guard let key = keys[advertisement.address] else {
                return .failure(error(.noKey, "an encrypted frame and no bindkey for \(advertisement.address)"))
            }
            let extended = Array(data[data.count - 7 ..< data.count - 4])
            let nonce = advertisement.address.bytes.reversed() + Array(data[2 ..< 5]) + extended
            guard let plain = AESCCM.open(ciphertext: Array(data[index ..< data.count - 7]), tag: Array(data.suffix(4)),
                                          key: key, nonce: nonce, associatedData: [0x11]) else {
                return .failure(error(.authenticationFailed, "the tag does not authenticate the frame with the bindkey of \(advertisement.address)"))
            }
            payload = plain
            counter = UInt32(frameCounter) | UInt32(extended[0]) << 8 | UInt32(extended[1]) << 16 | UInt32(extended[2]) << 24
        } else {
            guard data.count >= index + 3 else { return .failure(error(.truncated, "the frame ends before its object")) }
            payload = Array(data[index...])
        }
        switch objects(payload, model: model) {
        case .failure(let failure): return .failure(failure)
        case .success(let measurements):
            return .success(SensorReading(format: format, model: model, encrypted: encrypted, packetID: Int(frameCounter),
                                          counter: counter, measurements: measurements))
        }
    }

    private static func error(_ kind: SensorDecodingError.Kind, _ detail: String) -> SensorDecodingError {
        SensorDecodingError(format, kind, detail)
    }

    /// The measurements of a payload's objects (2-byte id, 1-byte length, data). Objects a
    /// thermometer does not send are skipped; a payload with none bluectl knows fails.
    private static func objects(_ payload: [UInt8], model: String) -> Result<[SensorMeasurement], SensorDecodingError> {
        let p = SensorBytes(payload)
        var index = 0
        var measurements: [SensorMeasurement] = []
        var unknown: [UInt16] = []
        while index < payload.count {
            guard let id = p.u16le(index), let length = p.u8(index + 2) else {
                return .failure(error(.truncated, "\(payload.count - index) bytes left at byte \(index), an object header has 3"))
            }
            let start = index + 3, end = start + Int(length)
            guard end <= payload.count else {
                return .failure(error(.truncated, "object \(sensorHex(id)) needs \(length) bytes, \(payload.count - start) left"))
            }
            index = end
            guard length > 0 else { continue }
            switch object(id, SensorBytes(payload[start ..< end]), model: model) {
            case .some(.success(let found)): measurements += found
            case .some(.failure(let failure)): return .failure(failure)
            case nil: unknown.append(id)
            }
        }
        guard !measurements.isEmpty else {
            let ids = unknown.map(sensorHex).joined(separator: ", ")
            return .failure(error(.unknownObject, "object \(ids) is not one bluectl decodes for a thermometer"))
        }
        return .success(measurements)
    }

    /// One object's measurements; nil for an object id bluectl does not decode.
    private static func object(_ id: UInt16, _ o: SensorBytes, model: String) -> Result<[SensorMeasurement], SensorDecodingError>? {
        func sized(_ count: Int, _ make: () -> [SensorMeasurement]?) -> Result<[SensorMeasurement], SensorDecodingError> {
            guard o.count == count, let found = make() else {
                return .failure(error(.invalid, "object \(sensorHex(id)) has \(o.count) bytes, not \(count)"))
            }
            return .success(found)
        }
        func float(_ quantity: SensorQuantity) -> Result<[SensorMeasurement], SensorDecodingError> {
            guard o.count == 4 else { return sized(4) { nil } }
            guard let value = o.float32le(0) else {
                return .failure(error(.invalid, "object \(sensorHex(id)) is not a finite number"))
            }
            return .success([SensorMeasurement(quantity, .number(value))])
        }
        func percent(_ quantity: SensorQuantity) -> Result<[SensorMeasurement], SensorDecodingError> {
            sized(1) { o.u8(0).map { [SensorMeasurement(quantity, .integer(Int($0)))] } }
        }
        switch id {
        case 0x1004: return sized(2) { o.s16le(0).map { [SensorMeasurement(.temperature, .number(sensorDecimal($0, -1)))] } }
        case 0x1006: return sized(2) { o.u16le(0).map { [SensorMeasurement(.humidity, .number(sensorDecimal($0, -1)))] } }
        case 0x100A, 0x4803, 0x4C03: return percent(.battery)
        case 0x100D:
            return sized(4) {
                guard let t = o.s16le(0), let h = o.u16le(2) else { return nil }
                return [SensorMeasurement(.temperature, .number(sensorDecimal(t, -1))),
                        SensorMeasurement(.humidity, .number(sensorDecimal(h, -1)))]
            }
        case 0x4801, 0x4C01: return float(.temperature)
        case 0x4C08: return float(.humidity)
        case 0x4802, 0x4C02: return percent(.humidity)
        default: return nil
        }
    }
}
