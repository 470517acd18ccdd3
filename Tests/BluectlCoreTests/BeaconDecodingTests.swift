// Beacon frames, built from the public specifications:
// - iBeacon: Apple, "Proximity Beacon Specification", Release R1 (developer.apple.com/ibeacon):
//   manufacturer data of 0x004C = 02 15, proximity UUID (16), major (2, BE), minor (2, BE),
//   measured power (1, signed).
// - Eddystone: Google's protocol specification, github.com/google/eddystone
//   (eddystone-uid/README.md, eddystone-url/README.md, eddystone-tlm/tlm-plain.md,
//   eddystone-eid/README.md): service data of 0xFEAA.
// - AltBeacon: "AltBeacon Protocol Specification v1.0", github.com/AltBeacon/spec:
//   manufacturer data = BE AC, beacon ID (20, BE), reference RSSI (1), MFG RESERVED (1).
import BluectlDBus
import Testing
@testable import BluectlCore

private func hex(_ s: String) -> [UInt8] { try! ByteFormats.parseHex(s) }

/// A proximity UUID, major 1, minor 2 and measured power 0xC5 (-59 dBm) in the spec's layout
/// (values chosen for this test; the spec gives the layout, not a frame).
private let iBeaconData = hex("0215" + "e2c56db5dffb48d2b060d0f5a71096e0" + "0001" + "0002" + "c5")
/// The URL the Eddystone-URL spec uses as its example, `https://goo.gl/Aq18zF` (scheme code
/// 0x03 "https://"), at TX power 0xEE, which the spec reads as -18 dBm.
private let urlFrame: [UInt8] = [0x10, 0xEE, 0x03] + Array("goo.gl/Aq18zF".utf8)
/// The UID spec's example namespace (an elided version-4 UUID: 8b0ca750095477cb3e77),
/// instance 000000000001, TX power 0x12 (+18 dBm, the URL spec's other example), RFU 00 00.
private let uidFrame = hex("0012" + "8b0ca750095477cb3e77" + "000000000001" + "0000")
/// TLM version 0 (tlm-plain.md): 3000 mV, 25.5 °C (0x1980 in 8.8), 1234 advertisements,
/// 12345 × 0.1 s up.
private let tlmFrame = hex("2000" + "0bb8" + "1980" + "000004d2" + "00003039")
/// EID (eddystone-eid/README.md): TX power 0xEC (-20 dBm), an 8-byte ephemeral ID.
private let eidFrame = hex("30ec" + "0102030405060708")
/// AltBeacon as the reference implementation advertises it (android-beacon-library's
/// AltBeaconTest: BE AC, ID 2f234454-cf6d-4a0f-adf2-f4911ba9ffa6 0001 0002, reference RSSI
/// 0xC5 = -59 dBm, MFG RESERVED 00), under Radius Networks' company identifier (0x0118).
private let altBeaconData = hex("beac" + "2f234454cf6d4a0fadf2f4911ba9ffa6" + "00010002" + "c5" + "00")

private func fields(_ b: Beacon?) -> [String: DecodedFieldValue] {
    Dictionary((b?.fields ?? []).map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
}

@Suite struct IBeaconDecodingTests {
    @Test func decodes() throws {
        let b = try #require(BeaconDecoding.beacon(company: 0x004C, data: iBeaconData))
        #expect(b == .iBeacon(IBeacon(proximityUUID: try BluetoothUUID("e2c56db5-dffb-48d2-b060-d0f5a71096e0"),
                                      major: 1, minor: 2, measuredPower: -59)))
        #expect(b.kind == "ibeacon")
        #expect(b.fields.map(\.name) == ["uuid", "major", "minor", "measured_power"])
        #expect(fields(b)["uuid"] == .string("e2c56db5-dffb-48d2-b060-d0f5a71096e0"))
        #expect(fields(b)["measured_power"] == .int(-59))
        #expect(b.summary == "iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0 major 1 minor 2, -59 dBm at 1 m")
        #expect(BeaconDecoding.iBeacon(iBeaconData)?.manufacturerData == iBeaconData, "re-encodes to the same bytes")
        // big-endian major and minor
        let high = hex("0215" + String(repeating: "00", count: 16) + "ff01" + "8000" + "7f")
        #expect(BeaconDecoding.iBeacon(high).map { [Int($0.major), Int($0.minor), Int($0.measuredPower)] } == [0xFF01, 0x8000, 127])
    }

    @Test("malformed or not iBeacon: not decoded", arguments: [
        Array(iBeaconData.dropLast()),         // truncated
        iBeaconData + [0x00],                  // one byte too many
        [0x02, 0x16] + iBeaconData.dropFirst(2), // wrong length byte
        [0x12, 0x19] + iBeaconData.dropFirst(2), // another Apple type (not a beacon)
        [0x02], [],
    ] as [[UInt8]])
    func rejected(data: [UInt8]) {
        #expect(BeaconDecoding.beacon(company: 0x004C, data: data) == nil)
    }

    @Test func onlyUnderApple() {
        #expect(BeaconDecoding.beacon(company: 0x0059, data: iBeaconData) == nil)
    }
}

@Suite struct EddystoneDecodingTests {
    @Test func url() throws {
        let b = try #require(BeaconDecoding.beacon(service: BeaconDecoding.eddystoneService, data: urlFrame))
        #expect(b == .eddystoneURL(EddystoneURL(txPower: -18, url: "https://goo.gl/Aq18zF")))
        #expect(b.summary == "Eddystone-URL https://goo.gl/Aq18zF, -18 dBm at 0 m")
        #expect(b.fields == [DecodedField(name: "url", value: .string("https://goo.gl/Aq18zF")),
                             DecodedField(name: "tx_power", value: .int(-18))])
    }

    /// Every scheme prefix and expansion code of eddystone-url/README.md.
    @Test func urlExpansions() {
        func url(_ bytes: [UInt8]) -> String? {
            guard case .eddystoneURL(let u) = BeaconDecoding.eddystone([0x10, 0x12] + bytes) else { return nil }
            return u.url
        }
        #expect(url([0x00] + Array("example".utf8) + [0x07]) == "http://www.example.com")
        #expect(url([0x01] + Array("google".utf8) + [0x00] + Array("x".utf8)) == "https://www.google.com/x")
        #expect(url([0x02] + Array("a".utf8) + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06]) == "http://a.org/.edu/.net/.info/.biz/.gov/")
        #expect(url([0x03] + Array("b".utf8) + [0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d]) == "https://b.org.edu.net.info.biz.gov")
        #expect(url([0x03]) == "https://", "an empty URL body is allowed (length 0-17)")
        #expect(url([0x03] + Array(repeating: UInt8(ascii: "a"), count: 17)) == "https://" + String(repeating: "a", count: 17))
        #expect(url([0x02] + Array("~!".utf8)) == "http://~!", "0x21 and 0x7E are the ends of the printable range")
    }

    @Test("malformed URL frames: not decoded", arguments: [
        [0x10, 0xEE],                                  // no scheme
        [0x10, 0xEE, 0x04] + Array("a".utf8),          // scheme 4 is not defined
        [0x10, 0xEE, 0x03, 0x0E],                      // reserved expansion codes 0x0e…0x20
        [0x10, 0xEE, 0x03, 0x20],
        [0x10, 0xEE, 0x03, 0x7F],                      // and 0x7f…0xff
        [0x10, 0xEE, 0x03, 0xFF],
        [0x10, 0xEE, 0x03] + Array(repeating: UInt8(ascii: "a"), count: 18), // URL longer than 17
    ] as [[UInt8]])
    func urlRejected(frame: [UInt8]) {
        #expect(BeaconDecoding.eddystone(frame) == nil)
    }

    @Test func uid() throws {
        let b = try #require(BeaconDecoding.eddystone(uidFrame))
        #expect(b.kind == "eddystone_uid")
        #expect(fields(b)["namespace"] == .string("8b0ca750095477cb3e77"))
        #expect(fields(b)["instance"] == .string("000000000001"))
        #expect(fields(b)["tx_power"] == .int(18))
        #expect(b.summary == "Eddystone-UID 8b0ca750095477cb3e77 000000000001, 18 dBm at 0 m")
        guard case .eddystoneUID(let uid) = b else { return }
        #expect(uid.serviceData == uidFrame, "re-encodes to the same bytes")
        // Implementations that leave out the two reserved bytes (the spec's length 0x15) decode the same.
        #expect(BeaconDecoding.eddystone(Array(uidFrame.dropLast(2))) == b)
    }

    @Test func tlm() throws {
        let b = try #require(BeaconDecoding.eddystone(tlmFrame))
        #expect(b == .eddystoneTLM(EddystoneTLM(batteryMillivolts: 3000, temperature: 25.5, advertisementCount: 1234, uptimeTenths: 12345)))
        #expect(b.fields.map(\.name) == ["version", "battery_mv", "temperature_c", "adv_count", "uptime_s"])
        #expect(fields(b)["uptime_s"] == .double(1234.5))
        #expect(b.summary == "Eddystone-TLM 3000 mV, 25.5 °C, adv count 1234, up 1234.5 s")
        guard case .eddystoneTLM(let t) = b else { return }
        #expect(t.serviceData == tlmFrame, "re-encodes to the same bytes")
        // Battery 0 and temperature 0x8000 mean "not measured"; 0xff80 is -0.5 °C.
        let unmeasured = try #require(BeaconDecoding.eddystone(hex("2000" + "0000" + "8000" + "00000001" + "00000000")))
        #expect(unmeasured.fields.map(\.name) == ["version", "adv_count", "uptime_s"])
        #expect(unmeasured.summary == "Eddystone-TLM adv count 1, up 0.0 s")
        let cold = BeaconDecoding.eddystone(hex("2000" + "0001" + "ff80" + "00000000" + "ffffffff"))
        #expect(fields(cold)["temperature_c"] == .double(-0.5))
        #expect(fields(cold)["uptime_s"] == .double(429496729.5))
    }

    @Test func eid() throws {
        let b = try #require(BeaconDecoding.eddystone(eidFrame))
        #expect(b == .eddystoneEID(EddystoneEID(txPower: -20, ephemeralID: [1, 2, 3, 4, 5, 6, 7, 8])))
        #expect(fields(b)["eid"] == .string("0102030405060708"))
        #expect(b.summary == "Eddystone-EID 0102030405060708, -20 dBm at 0 m")
    }

    @Test("truncated, overlong, encrypted or unknown frames: not decoded", arguments: [
        [], [0x00], [0x10], [0x20], [0x30],
        Array(uidFrame.prefix(17)), Array(uidFrame.prefix(19)), uidFrame + [0],   // UID: 18 or 20 only
        Array(tlmFrame.dropLast()), tlmFrame + [0],                               // TLM: 14 only
        hex("2001" + String(repeating: "ab", count: 16)),                         // encrypted TLM (version 1)
        hex("2001" + "0bb8" + "1980" + "000004d2" + "00003039"),                  // unknown TLM version
        Array(eidFrame.dropLast()), eidFrame + [0],                               // EID: 10 only
        hex("40ee01020304"),                                                      // frame type 0x40 (not defined)
    ] as [[UInt8]])
    func rejected(frame: [UInt8]) {
        #expect(BeaconDecoding.eddystone(frame) == nil)
    }

    @Test func onlyUnderFEAA() {
        #expect(BeaconDecoding.beacon(service: BluetoothUUID(uint16: 0xFEAB), data: urlFrame) == nil)
    }
}

@Suite struct AltBeaconDecodingTests {
    @Test func decodes() throws {
        let b = try #require(BeaconDecoding.beacon(company: 0x0118, data: altBeaconData))
        #expect(b.kind == "altbeacon")
        #expect(b.fields == [
            DecodedField(name: "company", value: .int(0x0118)),
            DecodedField(name: "id", value: .string("2f234454cf6d4a0fadf2f4911ba9ffa600010002")),
            DecodedField(name: "reference_rssi", value: .int(-59)),
            DecodedField(name: "mfg_reserved", value: .int(0)),
        ])
        #expect(b.summary == "AltBeacon 2f234454cf6d4a0fadf2f4911ba9ffa600010002, -59 dBm at 1 m")
        #expect(BeaconDecoding.altBeacon(company: 0x0118, altBeaconData)?.manufacturerData == altBeaconData)
        // Any company may send one, Apple too (it is not an iBeacon).
        #expect(BeaconDecoding.beacon(company: 0x004C, data: altBeaconData)?.kind == "altbeacon")
    }

    @Test("malformed: not decoded", arguments: [
        Array(altBeaconData.dropLast()), altBeaconData + [0], [0xAC, 0xBE] + altBeaconData.dropFirst(2), [0xBE, 0xAC], [],
    ] as [[UInt8]])
    func rejected(data: [UInt8]) {
        #expect(BeaconDecoding.beacon(company: 0x0118, data: data) == nil)
    }
}

@Suite struct DeviceBeaconTests {
    @Test func beaconsOfADevice() {
        let device = DeviceInfo(path: Fixture.device(), properties: [
            "ManufacturerData": .dictionary(key: DBusSignature("q")!, value: .variant, [
                DBusDictEntry(.uint16(0xffff), .variant(.bytes([1, 2]))),
                DBusDictEntry(.uint16(0x004C), .variant(.bytes(iBeaconData))),
            ]),
            "ServiceData": .dictionary(key: .string, value: .variant, [
                DBusDictEntry(.string("0000feaa-0000-1000-8000-00805f9b34fb"), .variant(.bytes(urlFrame))),
                DBusDictEntry(.string("0000180f-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0x64]))),
            ]),
        ])
        #expect(BeaconDecoding.beacons(in: device).map(\.kind) == ["ibeacon", "eddystone_url"])
        #expect(BeaconDecoding.summary(of: device)
                == "iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0 major 1 minor 2, -59 dBm at 1 m; Eddystone-URL https://goo.gl/Aq18zF, -18 dBm at 0 m")
        #expect(BeaconDecoding.summary(of: DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties())) == nil)
    }

}
