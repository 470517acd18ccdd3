import Testing
@testable import BluectlCore

/// The pvvx and ATC1441 formats of the custom thermometer firmwares (service data of
/// 0x181A), built from the layouts of pvvx/ATC_MiThermometer's README and
/// src/custom_beacon.h; the encrypted frames are sealed here with AES-CCM and the nonce
/// the firmware's custom_beacon.c builds.
@Suite("pvvx and ATC1441 custom firmware formats")
struct CustomFirmwareDecoderTests {
    static let address = BluetoothAddress("A4:C1:38:2F:86:6C")!
    static let key: [UInt8] = Array(0x10 ..< 0x20)

    static func decode(_ data: [UInt8], keys: SensorKeys = SensorKeys()) -> Result<SensorReading, SensorDecodingError>? {
        SensorDecoders.decode(SensorAdvertisement(address: address, serviceData: [PvvxDecoder.service: data]), keys: keys)
    }

    /// A frame the firmware would send: counter, ciphertext, tag; nonce MAC (LSB first) + AD header + counter.
    static func seal(_ plain: [UInt8], counter: UInt8) -> [UInt8] {
        let length = UInt8(1 + plain.count + 4 + 3)
        let nonce = address.bytes.reversed() + [length, 0x16, 0x1A, 0x18, counter]
        let sealed = AESCCM.seal(plaintext: plain, key: key, nonce: nonce, tagLength: 4, associatedData: [0x11])!
        return [counter] + sealed.ciphertext + sealed.tag
    }

    @Test("pvvx custom: MAC, -12.34 °C, 56.78 %, 2.987 V, 67 %, counter 9, reed switch on")
    func pvvxPlain() throws {
        let frame: [UInt8] = Self.address.bytes.reversed() + [0x2E, 0xFB, 0x2E, 0x16, 0xAB, 0x0B, 67, 9, 0x01]
        guard case .success(let r)? = Self.decode(frame) else { Issue.record("\(String(describing: Self.decode(frame)))"); return }
        #expect(r.format == .pvvx && !r.encrypted && r.packetID == 9 && r.counter == nil)
        #expect(r.measurements == [
            SensorMeasurement(.temperature, .number(-12.34)), SensorMeasurement(.humidity, .number(56.78)),
            SensorMeasurement(.voltage, .number(2.987)), SensorMeasurement(.battery, .integer(67)),
            SensorMeasurement(.reedSwitch, .flag(true)), SensorMeasurement(.triggerOutput, .flag(false)),
        ])
    }

    @Test("pvvx encrypted: 21.5 °C, 40 %, 88 %, trigger on; wrong key and no key fail")
    func pvvxEncrypted() throws {
        let frame = Self.seal([0x66, 0x08, 0xA0, 0x0F, 88, 0x02], counter: 0x2A)
        let keys = try SensorKeys([Self.address: Self.key])
        guard case .success(let r)? = Self.decode(frame, keys: keys) else { Issue.record("\(String(describing: Self.decode(frame, keys: keys)))"); return }
        #expect(r.format == .pvvx && r.encrypted && r.packetID == 0x2A && r.counter == nil)
        #expect(r.measurements == [
            SensorMeasurement(.temperature, .number(21.5)), SensorMeasurement(.humidity, .number(40)),
            SensorMeasurement(.battery, .integer(88)), SensorMeasurement(.reedSwitch, .flag(false)),
            SensorMeasurement(.triggerOutput, .flag(true)),
        ])
        #expect(Self.decode(frame, keys: try SensorKeys([Self.address: [UInt8](repeating: 0, count: 16)])).failureKind == .authenticationFailed)
        #expect(Self.decode(frame).failureKind == .noKey)
    }

    @Test("ATC1441: MAC, -5.3 °C, 47 %, 81 %, 2.911 V, counter 200 (big-endian)")
    func atcPlain() throws {
        let frame: [UInt8] = Self.address.bytes + [0xFF, 0xCB, 47, 81, 0x0B, 0x5F, 200]
        guard case .success(let r)? = Self.decode(frame) else { Issue.record("\(String(describing: Self.decode(frame)))"); return }
        #expect(r.format == .atc1441 && !r.encrypted && r.packetID == 200)
        #expect(r.measurements == [
            SensorMeasurement(.temperature, .number(-5.3)), SensorMeasurement(.humidity, .integer(47)),
            SensorMeasurement(.battery, .integer(81)), SensorMeasurement(.voltage, .number(2.911)),
        ])
    }

    @Test("ATC1441 encrypted: byte 0 is 0.5 °C steps from -40 °C, byte 1 0.5 % steps, byte 2 battery and trigger")
    func atcEncrypted() throws {
        let frame = Self.seal([123, 91, 0x80 | 77], counter: 3)
        let keys = try SensorKeys([Self.address: Self.key])
        guard case .success(let r)? = Self.decode(frame, keys: keys) else { Issue.record("\(String(describing: Self.decode(frame, keys: keys)))"); return }
        #expect(r.format == .atc1441 && r.encrypted && r.packetID == 3)
        #expect(r.measurements == [
            SensorMeasurement(.temperature, .number(21.5)), SensorMeasurement(.humidity, .number(45.5)),
            SensorMeasurement(.battery, .integer(77)), SensorMeasurement(.triggerOutput, .flag(true)),
        ])
    }

    @Test("Other lengths of 0x181A service data are neither format (nil)", arguments: [0, 1, 7, 9, 10, 12, 14, 16, 20])
    func otherLengths(_ length: Int) {
        #expect(Self.decode([UInt8](repeating: 0x41, count: length)) == nil)
    }
}
