// The seed corpus of FuzzParsers: one selector byte, then text.
import FuzzSupport

enum ParserSeeds {
    static let texts: [(Parser, String)] = [
        (.uuid, "180d"), (.uuid, "0x2A19"), (.uuid, "0000180d-0000-1000-8000-00805f9b34fb"),
        (.uuid, "12345678123456781234567812345678"), (.uuid, "heart_rate"), (.uuid, "battery_level"),
        (.uuid, "org.bluetooth.characteristic.battery_level"), (.uuid, " 0000FFFF "), (.uuid, "hart_rate"),
        (.hex, "0x0102"), (.hex, "01 02"), (.hex, "01:02-03,04"), (.hex, "0x01, 0x02"), (.hex, "0x"), (.hex, "012"),
        (.address, "AA:BB:CC:DD:EE:FF"), (.address, "aa-bb-cc-dd-ee-ff"), (.address, " 00:AA:01:00:00:23\n"),
        (.address, "AA:BB-CC:DD:EE:FF"), (.address, "AA:BB:CC:DD:EE:FG"),
        (.pathElement, "dev_AA_BB_CC_DD_EE_FF"), (.pathElement, "dev_aa_bb_cc_dd_ee_ff"),
        (.objectPath, "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"), (.objectPath, "/"), (.objectPath, "/a//b"),
        (.signature, "a{oa{sa{sv}}}"), (.signature, "(ayq)"), (.signature, "a{vs}"), (.signature, "aaaaay"),
        (.rawBytes, "\u{0}\u{1}\u{2}\u{3}\u{4}\u{5}"),
    ]

    static func all() -> [(name: String, bytes: [UInt8])] {
        texts.enumerated().map { i, seed in
            (name: "\(seed.0)-\(i)", bytes: [seed.0.rawValue] + Array(seed.1.utf8))
        }
    }
}
