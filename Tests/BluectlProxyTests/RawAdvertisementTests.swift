// The AD structures rebuilt from BlueZ's parsed fields, byte for byte
// (Core Specification Supplement, Part A: the data types and their layout).
import BluectlCore
import BluectlDBus
import Testing
@testable import BluectlProxy

@Suite struct RawAdvertisementTests {
    func device() -> DeviceInfo {
        DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_02")!, properties: [:])
    }

    @Test func everyFieldInItsStructure() {
        var d = device()
        d.advertisingFlags = [0x06]
        d.name = "Thermo"
        d.serviceUUIDs = [BluetoothUUID(uint16: 0x180D), BluetoothUUID(uint32: 0x1234_5678),
                          try! BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e")]
        d.serviceData = [BluetoothUUID(uint16: 0xFCD2): [0x40, 0x02]]
        d.manufacturerData = [0x004C: [0x01, 0x02, 0x03]]
        d.txPower = -4
        d.appearance = 0x0341
        let expected: [UInt8] = [0x02, 0x01, 0x06]
            + [0x07, 0x09] + Array("Thermo".utf8)
            + [0x03, 0x03, 0x0D, 0x18]
            + [0x05, 0x05, 0x78, 0x56, 0x34, 0x12]
            + [0x11, 0x07, 0x9e, 0xca, 0xdc, 0x24, 0x0e, 0xe5, 0xa9, 0xe0, 0x93, 0xf3, 0xa3, 0xb5, 0x01, 0x00, 0x40, 0x6e]
            + [0x05, 0x16, 0xD2, 0xFC, 0x40, 0x02]
            + [0x06, 0xFF, 0x4C, 0x00, 0x01, 0x02, 0x03]
            + [0x02, 0x0A, 0xFC]
            + [0x03, 0x19, 0x41, 0x03]
        #expect(RawAdvertisement.data(for: d) == expected)
    }

    @Test func nothingKnownNothingWritten() {
        #expect(RawAdvertisement.data(for: device()).isEmpty)
    }

    @Test func oversizedEntryLeftOut() {
        var d = device()
        d.manufacturerData = [0x0001: [UInt8](repeating: 0, count: 253), 0x0002: [0x01]]
        // 253 + 2 company bytes do not fit one length byte; the other entry stays.
        #expect(RawAdvertisement.data(for: d) == [0x04, 0xFF, 0x02, 0x00, 0x01])
    }

    @Test func addressTypes() {
        #expect(RawAdvertisement.addressType(.random) == 1)
        #expect(RawAdvertisement.addressType(.public) == 0)
        #expect(RawAdvertisement.addressType(nil) == 0)
    }
}
