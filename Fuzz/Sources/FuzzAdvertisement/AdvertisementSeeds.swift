// The seed corpus of FuzzAdvertisement: well-formed values of each decoded
// characteristic, and advertisements like the ones BlueZ reports.
import FuzzSupport
@testable import BluectlDBus

enum AdvertisementSeeds {
    static let characteristics: [(String, UInt16, [UInt8])] = [
        ("battery-level", 0x2A19, [0x5c]),
        ("heart-rate-uint8", 0x2A37, [0x06, 0x48]),
        ("heart-rate-full", 0x2A37, [0x1f, 0x48, 0x00, 0x10, 0x00, 0x00, 0x04, 0x10, 0x04]),
        ("body-sensor-location", 0x2A38, [0x01]),
        ("temperature-measurement", 0x2A1C, [0x06, 0x72, 0x0e, 0x00, 0xfe, 0xe9, 0x07, 0x0b, 0x16, 0x05, 0x19, 0x16, 0x02]),
        ("temperature", 0x2A6E, [0x2a, 0x0e]),
        ("device-name", 0x2A00, Array("bluectl\u{0}\u{0}".utf8)),
    ]

    /// Beacon mode (FuzzAdvertisement.beaconFrame): kind, company identifier, data; frames
    /// as in BeaconDecodingTests (layouts of the iBeacon, Eddystone and AltBeacon specs).
    static let beacons: [(String, UInt8, UInt16, [UInt8])] = [
        ("ibeacon", 0, 0x004C, [0x02, 0x15, 0xe2, 0xc5, 0x6d, 0xb5, 0xdf, 0xfb, 0x48, 0xd2, 0xb0, 0x60, 0xd0, 0xf5, 0xa7, 0x10,
                                0x96, 0xe0, 0x00, 0x01, 0x00, 0x02, 0xc5]),
        ("altbeacon", 1, 0x0118, [0xbe, 0xac, 0x2f, 0x23, 0x44, 0x54, 0xcf, 0x6d, 0x4a, 0x0f, 0xad, 0xf2, 0xf4, 0x91, 0x1b, 0xa9,
                                  0xff, 0xa6, 0x00, 0x01, 0x00, 0x02, 0xc5, 0x00]),
        ("eddystone-uid", 2, 0xFEAA, [0x00, 0x12, 0x8b, 0x0c, 0xa7, 0x50, 0x09, 0x54, 0x77, 0xcb, 0x3e, 0x77,
                                      0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]),
        ("eddystone-url", 2, 0xFEAA, [0x10, 0xee, 0x03] + Array("goo.gl/Aq18zF".utf8)),
        ("eddystone-url-expansions", 2, 0xFEAA, [0x10, 0x12, 0x01] + Array("example".utf8) + [0x00, 0x61, 0x0d]),
        ("eddystone-tlm", 2, 0xFEAA, [0x20, 0x00, 0x0b, 0xb8, 0x19, 0x80, 0x00, 0x00, 0x04, 0xd2, 0x00, 0x00, 0x30, 0x39]),
        ("eddystone-eid", 2, 0xFEAA, [0x30, 0xec, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
    ]

    static let advertisements: [(String, [(String, DBusValue)])] = [
        ("heart-rate-sensor", [
            ("Address", .string("AA:BB:CC:DD:EE:00")), ("AddressType", .string("random")),
            ("Name", .string("HR")), ("RSSI", .int16(-60)), ("TxPower", .int16(4)),
            ("UUIDs", .stringArray(["0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"])),
            ("ManufacturerData", .dictionary(key: DBusSignature("q")!, value: .variant, [
                DBusDictEntry(.uint16(0xffff), .variant(.bytes([0, 1, 2, 3]))),
            ])),
            ("ServiceData", .dictionary(key: .string, value: .variant, [
                DBusDictEntry(.string("00009999-0000-1000-8000-00805f9b34fb"), .variant(.bytes([0, 1, 2, 3, 4]))),
            ])),
            ("AdvertisingFlags", .bytes([0x06])), ("Appearance", .uint16(0x0340)),
        ]),
        ("alias-only", [("Alias", .string("AA-BB-CC-DD-EE-00")), ("Connected", .boolean(true))]),
    ]

    static func all() -> [(name: String, bytes: [UInt8])] {
        let values = characteristics.map { name, uuid, value in
            (name: "characteristic-" + name,
             bytes: [0, UInt8(decodable.firstIndex(of: uuid)!)] + value)
        }
        let adverts = advertisements.map { name, properties in
            var w = ValueSeedWriter()
            w.output.byte(1) // advertisement mode
            w.output.byte(0) // path: .../dev_AA_BB_CC_DD_EE_0
            writeMap(properties, &w)
            w.output.bytes([0, 0, 0, 0, 0]) // scan options: none
            writeMap([("RSSI", .int16(-42))], &w) // PropertiesChanged
            w.output.bytes([1, UInt8(deviceProperties.firstIndex { $0.0 == "TxPower" }!)]) // invalidated
            // The generator must read back exactly these properties.
            var g = ValueGenerator(FuzzInput(w.output.bytes), maxDepth: 4)
            _ = (g.input.byte(), g.input.byte())
            let back = propertyMap(&g).map { ($0.key.string!, $0.value) }
            precondition(back.elementsEqual(properties.map { ($0.0, DBusValue.variant($0.1)) }, by: ==),
                         "seed \(name) does not read back")
            return (name: "advertisement-" + name, bytes: w.output.bytes)
        }
        let frames = beacons.map { name, kind, company, data in
            (name: "beacon-" + name, bytes: [0, 0xE0 + kind, UInt8(company & 0xFF), UInt8(company >> 8)] + data)
        }
        return values + adverts + frames
    }

    private static func writeMap(_ properties: [(String, DBusValue)], _ w: inout ValueSeedWriter) {
        w.output.byte(UInt8(properties.count))
        for (key, value) in properties {
            w.output.byte(UInt8(deviceProperties.firstIndex { $0.0 == key }!))
            w.output.byte(0) // BlueZ's type
            w.value(value)
        }
    }
}
