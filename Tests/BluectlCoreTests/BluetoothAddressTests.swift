import Testing
@testable import BluectlCore

private func failure(_ text: String) -> String? {
    do throws(BluetoothParseError) {
        _ = try BluetoothAddress.parse(text)
        return nil
    } catch {
        return error.description
    }
}

private let expectation = "expected six two-digit hex bytes such as AA:BB:CC:DD:EE:FF, AA-BB-CC-DD-EE-FF or AABBCCDDEEFF"

@Suite struct BluetoothAddressTests {
    @Test(arguments: [
        "00:AA:01:00:00:00", "00:aa:01:00:00:00", "00:Aa:01:00:00:00", "00-AA-01-00-00-00",
        "00-aa-01-00-00-00", " 00:AA:01:00:00:00", "00:AA:01:00:00:00\n", "\t00-AA-01-00-00-00\r\n",
    ])
    func acceptedForms(text: String) throws {
        let a = try BluetoothAddress.parse(text)
        #expect(a.description == "00:AA:01:00:00:00")
        #expect(a.uint64Value == 0x00AA_0100_0000)
        #expect(a.bytes == [0x00, 0xAA, 0x01, 0x00, 0x00, 0x00])
        #expect(BluetoothAddress(text) == a)
        #expect(a.pathElement == "dev_00_AA_01_00_00_00")
    }

    @Test func allHexDigits() throws {
        let a = try #require(BluetoothAddress("01:23:45:67:89:ab"))
        #expect(a.description == "01:23:45:67:89:AB")
        #expect(BluetoothAddress("CD:EF:cd:ef:00:FF")?.bytes == [0xCD, 0xEF, 0xCD, 0xEF, 0x00, 0xFF])
        #expect(BluetoothAddress("00:00:00:00:00:00")?.uint64Value == 0)
        #expect(BluetoothAddress("FF:FF:FF:FF:FF:FF")?.uint64Value == 0xFFFF_FFFF_FFFF)
    }

    @Test func bytes() {
        #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6])?.description == "01:02:03:04:05:06")
        #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6][...])?.bytes == [1, 2, 3, 4, 5, 6])
        #expect(BluetoothAddress(bytes: []) == nil)
        #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5]) == nil)
        #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6, 7]) == nil)
        #expect(BluetoothAddress(bytes: [UInt8](repeating: 0xFF, count: 100_000)) == nil)
    }

    @Test func uint64() {
        #expect(BluetoothAddress(uint64: 0xFFFF_FFFF_FFFF)?.description == "FF:FF:FF:FF:FF:FF")
        #expect(BluetoothAddress(uint64: 0x1_0000_0000_0000) == nil)
        #expect(BluetoothAddress(uint64: .max) == nil)
    }

    @Test func pathElementRoundTrip() throws {
        let a = try #require(BluetoothAddress("C0:FF:EE:12:34:56"))
        #expect(a.pathElement == "dev_C0_FF_EE_12_34_56")
        #expect(BluetoothAddress(pathElement: a.pathElement) == a)
        #expect(BluetoothAddress(pathElement: "dev_c0_ff_ee_12_34_56") == a)
    }

    @Test(arguments: [
        "", "dev_", "dev_C0_FF_EE_12_34", "dev_C0_FF_EE_12_34_56_", "dev_C0:FF:EE:12:34:56",
        "DEV_C0_FF_EE_12_34_56", "dev-C0_FF_EE_12_34_56", "/org/bluez/hci0/dev_C0_FF_EE_12_34_56",
        "C0_FF_EE_12_34_56", "dev_C0_FF_EE_12_34_5G", "dev_C0_FF_EE_12_34_567", "dev_C0_FF_EE_12_3456",
        "dev_C0_FF_EE_12_34_5\u{0}", "dev_C0_FF_EE_12_34_5é", "dev_C0_FF_EE_12_34_56\n", "hci0",
    ])
    func badPathElements(text: String) {
        #expect(BluetoothAddress(pathElement: text) == nil)
    }

    @Test func orderingFollowsBytes() throws {
        let list = ["FF:00:00:00:00:00", "00:00:00:00:00:01", "00:00:00:00:01:00", "00:00:00:00:00:00"]
            .compactMap { BluetoothAddress($0) }
        #expect(list.sorted().map(\.description) == [
            "00:00:00:00:00:00", "00:00:00:00:00:01", "00:00:00:00:01:00", "FF:00:00:00:00:00",
        ])
        #expect(Set(["aa:bb:cc:dd:ee:ff", "AA-BB-CC-DD-EE-FF", "aabbccDDEEFF", " AABBCCDDEEFF\n"].compactMap { BluetoothAddress($0) }).count == 1)
        #expect(BluetoothAddress("AABBCCDDEEFF")?.description == "AA:BB:CC:DD:EE:FF")
    }

    @Test func errorMessages() {
        #expect(failure("") == "invalid Bluetooth address \"\": empty; \(expectation)")
        #expect(failure("  \t") == "invalid Bluetooth address \"  \\t\": empty; \(expectation)")
        #expect(failure("AA:BB:CC:DD:EE") == "invalid Bluetooth address \"AA:BB:CC:DD:EE\": too short (14 characters); \(expectation)")
        #expect(failure("AA:BB:CC:DD:EE:FF:00") == "invalid Bluetooth address \"AA:BB:CC:DD:EE:FF:00\": too long (20 characters); \(expectation)")
        #expect(failure("AA:BB:CC:DD:EG:FF") == "invalid Bluetooth address \"AA:BB:CC:DD:EG:FF\": \"G\" at position 14 is not a hex digit; \(expectation)")
        #expect(failure(" AA:BB:CC:DD:EG:FF") == "invalid Bluetooth address \" AA:BB:CC:DD:EG:FF\": \"G\" at position 15 is not a hex digit; \(expectation)")
        #expect(failure("AA:BB-CC:DD:EE:FF") == "invalid Bluetooth address \"AA:BB-CC:DD:EE:FF\": mixes \":\" and \"-\" separators; \(expectation)")
        #expect(failure("AABBCCDDEEF") == "invalid Bluetooth address \"AABBCCDDEEF\": expected \":\" or \"-\" at position 3, found a hex digit; \(expectation)")
        #expect(failure("AABBCCDDEEFG") == "invalid Bluetooth address \"AABBCCDDEEFG\": expected \":\" or \"-\" at position 3, found a hex digit; \(expectation)")
        #expect(failure("AA_BB_CC_DD_EE_FF") == "invalid Bluetooth address \"AA_BB_CC_DD_EE_FF\": \"_\" at position 3 is not a separator; \(expectation)")
        #expect(failure("A:BB:CC:DD:EE:FF0") == "invalid Bluetooth address \"A:BB:CC:DD:EE:FF0\": separator at position 2 splits a byte; \(expectation)")
        #expect(failure("AA:BB:CC:DD:EE:F\u{1B}") == "invalid Bluetooth address \"AA:BB:CC:DD:EE:F\\u{1B}\": \"\\u{1B}\" at position 17 is not a hex digit; \(expectation)")
    }

    @Test func hostileInputIsQuotedOnOneLine() throws {
        let escape = try #require(failure("\u{1B}[2J\u{1B}]0;pwned\u{7}\n"))
        #expect(!escape.contains("\u{1B}") && !escape.contains("\n") && !escape.contains("\u{7}"))
        #expect(escape.hasPrefix("invalid Bluetooth address \"\\u{1B}[2J\\u{1B}]0;pwned\\u{7}\\n\": "))

        let huge = String(repeating: "A", count: 1_000_000)
        let message = try #require(failure(huge))
        #expect(message.count < 300)
        #expect(message.contains("too long (1000000 bytes)"))
        #expect(message.contains(String(repeating: "A", count: 64) + "…\""))
    }

    @Test(arguments: [
        "AA:BB:CC:DD:EE:FF:", ":AA:BB:CC:DD:EE:F", "AA::BB:CC:DD:EE:F", "AA:BB:CC:DD:EE:F",
        "ＡＡ:BB:CC:DD:EE:FF", "AA:BB:CC:DD:EE:FＦ", "AA:BB:CC:DD:EE:٠٠", "AA BB CC DD EE FF",
        "0xAA:BB:CC:DD:EE:FF", "AA:BB:CC:DD:EE:FF\u{0}", "\u{0}", "AA.BB.CC.DD.EE.FF",
        "AA:BB:CC:DD:EE:-F", "-AA-BB-CC-DD-EE-F", "AA\u{301}:BB:CC:DD:EE:FF", "dev_AA_BB_CC_DD_EE_FF",
        "AA:BB:CC:DD:EE:FF AA:BB:CC:DD:EE:FF", "\u{FEFF}AA:BB:CC:DD:EE:FF", "AA:BB:CC:DD:EE:FF\u{00A0}",
        "🙂🙂🙂🙂🙂", "AA:BB:CC:DD:EE:F🙂",
    ])
    func rejected(text: String) throws {
        #expect(BluetoothAddress(text) == nil)
        let message = try #require(failure(text))
        #expect(message.hasPrefix("invalid Bluetooth address \""))
        #expect(message.hasSuffix(expectation))
        #expect(!message.contains("\n") && !message.contains("\u{0}"))
    }
}
