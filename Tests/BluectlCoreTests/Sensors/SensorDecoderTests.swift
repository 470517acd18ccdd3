import Testing
@testable import BluectlCore

/// Two stand-in formats, each reading its own service UUID's first byte as a count: enough to
/// see which entry of a device that alternates formats `SensorDecoder` decodes.
private enum FirstFormat: SensorFormatDecoder {
    static let format = SensorFormat.pvvx
    static let uuid = BluetoothUUID(uint16: 0x181A)
    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        advertisement.serviceData[uuid].map { .success(SensorReading(format: format, measurements: [SensorMeasurement(.count, .integer(Int($0.first ?? 0)))])) }
    }
}

private enum SecondFormat: SensorFormatDecoder {
    static let format = SensorFormat.xiaomi
    static let uuid = BluetoothUUID(uint16: 0xFE95)
    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>? {
        advertisement.serviceData[uuid].map { .success(SensorReading(format: format, measurements: [SensorMeasurement(.count, .integer(Int($0.first ?? 0)))])) }
    }
}

@Suite("SensorDecoder: counters of encrypted frames, devices that alternate formats")
struct SensorDecoderTests {
    static let address = BluetoothAddress("A4:C1:38:00:00:01")!
    static let key = try! ByteFormats.parseHex("231d39c1d7cc1ab1aee224cd096db932")

    /// A BTHome frame encrypted for `address` with `counter`, holding `payload`.
    static func encrypted(_ payload: [UInt8], counter: UInt32) -> SensorAdvertisement {
        let counterBytes = (0..<4).map { UInt8(truncatingIfNeeded: counter >> (8 * UInt32($0))) }
        let nonce = address.bytes + [0xD2, 0xFC, 0x41] + counterBytes
        let sealed = AESCCM.seal(plaintext: payload, key: key, nonce: nonce, tagLength: 4)!
        return SensorAdvertisement(address: address, serviceData: [BTHome.serviceUUID: [0x41] + sealed.ciphertext + counterBytes + sealed.tag])
    }

    @Test("A counter that repeats is accepted; one that goes back is reported, until forgetCounter")
    func counters() throws {
        var decoder = SensorDecoder(keys: try SensorKeys([Self.address: Self.key]))
        #expect(try decoder.decode(Self.encrypted([0x02, 0xC4, 0x09], counter: 200))?.get().counter == 200)
        #expect(try decoder.decode(Self.encrypted([0x02, 0xC5, 0x09], counter: 200))?.get().counter == 200)
        #expect(try decoder.decode(Self.encrypted([0x02, 0xC6, 0x09], counter: 201))?.get().counter == 201)
        guard case .failure(let error)? = decoder.decode(Self.encrypted([0x02, 0xC7, 0x09], counter: 5)) else {
            Issue.record("a counter that went back was accepted")
            return
        }
        #expect(error.kind == .counterWentBack)
        #expect(error.detail == "counter 5 is lower than 201, already accepted from A4:C1:38:00:00:01")
        // a frame that fails is not accepted: the last counter stays 201
        #expect(try decoder.decode(Self.encrypted([0x02, 0xC8, 0x09], counter: 201))?.get().counter == 201)
        decoder.forgetCounter(of: Self.address)
        #expect(try decoder.decode(Self.encrypted([0x02, 0xC9, 0x09], counter: 5))?.get().counter == 5)
    }

    @Test("Counters are per device: another device's lower counter is its own")
    func countersPerDevice() throws {
        let other = BluetoothAddress("A4:C1:38:00:00:02")!
        var decoder = SensorDecoder(keys: try SensorKeys([Self.address: Self.key, other: Self.key]))
        _ = decoder.decode(Self.encrypted([0x02, 0xC4, 0x09], counter: 900))
        var frame = Self.encrypted([0x02, 0xC4, 0x09], counter: 1)
        frame.address = other
        // the nonce holds the address: sealed for `address`, this frame does not authenticate as `other`'s
        guard case .failure(let error)? = decoder.decode(frame) else { Issue.record("authenticated"); return }
        #expect(error.kind == .authenticationFailed)
    }

    @Test("A device with several formats' entries: the entry that changed is decoded; else the table's order")
    func alternatingFormats() throws {
        var decoder = SensorDecoder(keys: SensorKeys(), decoders: [FirstFormat.self, SecondFormat.self])
        func seen(_ first: UInt8, _ second: UInt8) -> SensorReading? {
            try? decoder.decode(SensorAdvertisement(address: Self.address,
                                                    serviceData: [FirstFormat.uuid: [first], SecondFormat.uuid: [second]]))?.get()
        }
        // first sighting: the table's order
        #expect(seen(1, 1)?.format == .pvvx)
        // the second format's frame arrived: its entry changed
        let second = seen(1, 2)
        #expect(second?.format == .xiaomi)
        #expect(second?[.count] == .integer(2))
        // then the first's
        let first = seen(3, 2)
        #expect(first?.format == .pvvx)
        #expect(first?[.count] == .integer(3))
        // the second's again
        #expect(seen(3, 4)?.format == .xiaomi)
        // nothing changed (another property did): the table's order
        #expect(seen(3, 4)?.format == .pvvx)
    }

    @Test("A changed entry of no sensor format leaves the decoding to the other entries")
    func changedEntryOfNoFormat() throws {
        var decoder = SensorDecoder(keys: SensorKeys(), decoders: [SecondFormat.self])
        let other = BluetoothUUID(uint16: 0x9999)
        func seen(_ byte: UInt8) -> SensorReading? {
            try? decoder.decode(SensorAdvertisement(address: Self.address, serviceData: [other: [byte], SecondFormat.uuid: [7]]))?.get()
        }
        #expect(seen(1)?[.count] == .integer(7))
        #expect(seen(2)?[.count] == .integer(7))
    }
}
