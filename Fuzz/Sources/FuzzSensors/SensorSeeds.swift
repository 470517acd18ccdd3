// The seed corpus of FuzzSensors, in its input layout: published frames where a format has
// them (BTHome: bthome.io/format and /encryption; Ruuvi: docs.ruuvi.com's RAWv2 and RAWv1
// examples), else frames laid out as the formats' documents describe (pvvx, ATC1441,
// MiBeacon, SwitchBot), for the fuzzer to start from.
import FuzzSupport

enum SensorSeeds {
    /// Advertisement mode: (name, advertised name, key mode: nil none / true the key / false another, entries (kind, bytes)).
    static let advertisements: [(String, String?, Bool?, [(UInt8, [UInt8])])] = [
        ("bthome-format-example", "DIY-sensor", nil, [(0, hex("4002c40903bf13"))]),
        ("bthome-every-kind", nil, nil, [(0, hex("4000090161020ac9035e1f2101" + "3a013c0103" + "3b010305" + "530248695402abcd"
                                             + "505d396164" + "f00100f100010204" + "5ce8ffffff" + "630057d0ff"))]),
        ("bthome-encryption-example", nil, true, [(0, hex("41e445f3c9962b332211006c7c4519"))]),
        ("bthome-wrong-key", nil, false, [(0, hex("41e445f3c9962b332211006c7c4519"))]),
        ("bthome-unknown-object", nil, nil, [(0, hex("4002c409660102"))]),
        ("bthome-shelly-ht", "SBHT-003C", nil, [(0, hex("44000c01642e3245d200"))]),
        ("ruuvi-rawv2-valid", nil, nil, [(1, hex("0512fc5394c37c0004fffc040cac364200cdcbb8334c884f"))]),
        ("ruuvi-rawv1", nil, nil, [(1, hex("03291a1ece1efc18f94202ca0b53"))]),
        ("pvvx-custom", "ATC_8F80A5", nil, [(2, hex("a5808fe64854" + "3408" + "9c13" + "6e0b" + "55" + "0a" + "04"))]),
        ("atc1441", "ATC_8F80A5", nil, [(2, hex("5448e68f80a5" + "00e8" + "32" + "55" + "0b6e" + "0a"))]),
        ("xiaomi-mibeacon", "LYWSD03MMC", nil, [(4, hex("5020aa01f1a5808fe64854" + "0d1004" + "d2003002"))]),
        ("switchbot-meter", "WoSensorTH", nil, [(6, hex("540064")), (3, hex("c0c3a8f2a8c00a9719" + "2c00"))]),
        ("pvvx-alternating", "ATC_8F80A5", nil, [(0, hex("4000aa0164020a0903e813")), (2, hex("a5808fe648543408" + "9c136e0b550a04"))]),
    ]

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static func all() -> [(name: String, bytes: [UInt8])] {
        let adverts = advertisements.map { name, advertised, keyMode, entries -> (name: String, bytes: [UInt8]) in
            var out = FuzzOutput()
            out.byte(0)
            out.lengthPrefixed(Array((advertised ?? "").utf8))
            switch keyMode {
            case nil: out.byte(0)
            case true?: out.bytes([1, 1])
            case false?: out.bytes([1, 0] + [UInt8](repeating: 0x42, count: 16))
            }
            for (kind, bytes) in entries {
                out.byte(kind)
                out.lengthPrefixed(bytes)
            }
            return (name: "advertisement-" + name, bytes: out.bytes)
        }
        // sealed mode: a counter, then BTHome objects
        let sealed: [(name: String, bytes: [UInt8])] = [
            ("sealed-temperature-humidity", [1, 0x33, 0x22, 0x11, 0x00] + hex("02ca0903bf13")),
            ("sealed-every-kind", [1, 0, 0, 0, 1] + hex("00050161021001" + "3a02" + "3c0205" + "53036162635401ff" + "f2000106")),
        ]
        return adverts + sealed
    }
}
