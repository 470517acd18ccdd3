import Testing
@testable import BluectlCore

private func reason(_ text: String) -> ByteFormatError.Reason? {
    do throws(ByteFormatError) {
        _ = try ByteFormats.parseHex(text)
        return nil
    } catch {
        return error.reason
    }
}

private func message(_ text: String) -> String? {
    do throws(ByteFormatError) {
        _ = try ByteFormats.parseHex(text)
        return nil
    } catch {
        return error.description
    }
}

@Suite struct ByteFormatsParseHexTests {
    @Test(arguments: [
        "0x0102", "0X0102", "0102", "01 02", "01:02", "0x01 0x02", "01-02", "01,02", "0x01, 0x02",
        " 0102 ", "\t01\n02\r\n", "01 : 02", "01  02", "0x01:0x02", "0x01-02", "0x0102 ",
    ])
    func acceptedFormsOfOneTwo(text: String) throws {
        #expect(try ByteFormats.parseHex(text) == [0x01, 0x02])
    }

    @Test func caseAndAllDigits() throws {
        #expect(try ByteFormats.parseHex("0123456789abcdefABCDEF") == [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xAB, 0xCD, 0xEF])
        #expect(try ByteFormats.parseHex("fF Ff") == [0xFF, 0xFF])
        #expect(try ByteFormats.parseHex("00") == [0x00])
        #expect(try ByteFormats.parseHex("0x00") == [0x00])
        #expect(try ByteFormats.parseHex("0x0000") == [0x00, 0x00])
        #expect(try ByteFormats.parseHex("0a:1b-2c 3d,4e") == [0x0A, 0x1B, 0x2C, 0x3D, 0x4E])
        #expect(try ByteFormats.parseHex("0x01020304 0x05") == [1, 2, 3, 4, 5])
        #expect(try ByteFormats.parseHex("0b01") == [0x0B, 0x01]) // hex digits, not a binary prefix
    }

    @Test func empty() {
        #expect(reason("") == .empty)
        #expect(reason("   ") == .empty)
        #expect(reason("\n\t") == .empty)
        #expect(message("") == "empty value; expected hex bytes such as 0102, 01:02 or \"0x01 0x02\"")
    }

    @Test func oddDigits() {
        #expect(reason("1") == .oddDigitCount(1, position: 1))
        #expect(reason("010") == .oddDigitCount(3, position: 1))
        #expect(reason("0x010") == .oddDigitCount(3, position: 3))
        #expect(reason("01 234") == .oddDigitCount(3, position: 4))
        #expect(reason("1 2") == .oddDigitCount(1, position: 1))
        #expect(reason("01:2") == .oddDigitCount(1, position: 4))
        #expect(reason("0x1 0x2") == .oddDigitCount(1, position: 3))
        #expect(message("0x123") == "invalid hex value \"0x123\": odd number of hex digits (3) starting at position 3; each byte takes two")
    }

    @Test func badCharacters() {
        #expect(reason("01g2") == .notHexDigit("g", position: 3))
        #expect(message("01g2") == "invalid hex value \"01g2\": \"g\" at position 3 is not a hex digit")
        #expect(reason("0x0x01") == .notHexDigit("x", position: 4))
        #expect(reason("00x1") == .notHexDigit("x", position: 3))
        #expect(reason("x01") == .notHexDigit("x", position: 1))
        #expect(reason("0o01") == .notHexDigit("o", position: 2))
        #expect(reason("01;02") == .notHexDigit(";", position: 3))
        #expect(reason("01.02") == .notHexDigit(".", position: 3))
        #expect(reason("01 02 é") == .notHexDigit("é", position: 7))
        #expect(reason("01é") == .notHexDigit("é", position: 3))
        #expect(reason("é01") == .notHexDigit("é", position: 1))
        #expect(reason("0\u{301}1") == .notHexDigit("\u{301}", position: 2))
        #expect(reason("０１") == .notHexDigit("０", position: 1))
        #expect(reason("01\u{00A0}02") == .notHexDigit("\u{00A0}", position: 3))
        #expect(reason("01\u{0}02") == .notHexDigit("\u{0}", position: 3))
        #expect(reason("🙂") == .notHexDigit("🙂", position: 1))
        #expect(reason("01🙂02") == .notHexDigit("🙂", position: 3))
        #expect(reason("-01") == .unexpectedSeparator("-", position: 1))
        #expect(reason("01::02") == .unexpectedSeparator(":", position: 4))
        #expect(reason("01 :, 02") == .unexpectedSeparator(",", position: 5))
        #expect(reason("01:") == .unexpectedSeparator(":", position: 3))
        #expect(reason("01 02 - ") == .unexpectedSeparator("-", position: 7))
        #expect(reason(":") == .unexpectedSeparator(":", position: 1))
        #expect(reason("0x") == .noDigitsAfterPrefix(position: 1))
        #expect(reason("01 0x 02") == .noDigitsAfterPrefix(position: 4))
        #expect(reason("01 0x:02") == .noDigitsAfterPrefix(position: 4))
        #expect(message("0x") == "invalid hex value \"0x\": no hex digits after \"0x\" at position 1")
        #expect(message("01::02") == "invalid hex value \"01::02\": unexpected \":\" at position 4; expected hex bytes such as 0102, 01:02 or \"0x01 0x02\"")
    }

    @Test func hostileCharactersAreEscapedInMessages() throws {
        let m = try #require(message("01\u{1B}[31m02"))
        #expect(m == "invalid hex value \"01\\u{1B}[31m02\": \"\\u{1B}\" at position 3 is not a hex digit")
        let n = try #require(message("01\n02\u{202E}"))
        #expect(!n.contains("\n") && !n.contains("\u{202E}"))
        #expect(n.contains("\"\\u{202E}\" at position 6"))
    }

    @Test func hugeInputParsesWholeAndMessagesStayShort() throws {
        let count = 2_000_000
        let text = String(repeating: "ab", count: count)
        let bytes = try ByteFormats.parseHex(text)
        #expect(bytes.count == count)
        #expect(bytes.allSatisfy { $0 == 0xAB })

        let spaced = String(repeating: "0x12 ", count: 200_000)
        #expect(try ByteFormats.parseHex(spaced).count == 200_000)

        let bad = String(repeating: "ab", count: 500_000) + "z"
        #expect(reason(bad) == .notHexDigit("z", position: 1_000_001))
        let m = try #require(message(bad))
        #expect(m.count < 200)
        #expect(m.contains("…\""))
    }
}

@Suite struct ByteFormatsOutputTests {
    @Test func hex() {
        #expect(ByteFormats.hex([0x0A, 0x1B]) == "0a1b")
        #expect(ByteFormats.hex([]) == "")
        #expect(ByteFormats.hex([0x00, 0xFF, 0x80, 0x7F]) == "00ff807f")
        #expect(ByteFormats.hex([UInt8](0...255)).count == 512)
        #expect(ByteFormats.hex([UInt8]([1, 2, 3])[1...]) == "0203")
        #expect(ByteFormats.hex(AnyCollection([0xDE, 0xAD] as [UInt8])) == "dead")
    }

    @Test func hexSpaced() {
        #expect(ByteFormats.hexSpaced([0x0A, 0x1B]) == "0a 1b")
        #expect(ByteFormats.hexSpaced([0x0A]) == "0a")
        #expect(ByteFormats.hexSpaced([]) == "")
        #expect(ByteFormats.hexSpaced([0x00, 0xFF, 0x10]) == "00 ff 10")
    }

    @Test func roundTrips() throws {
        let all = [UInt8](0...255)
        #expect(try ByteFormats.parseHex(ByteFormats.hex(all)) == all)
        #expect(try ByteFormats.parseHex(ByteFormats.hexSpaced(all)) == all)
    }

    @Test func hexDump() {
        #expect(ByteFormats.hexDump([0x0A, 0x1B, 0x41, 0x42]) == "0a 1b 41 42  |..AB|")
        #expect(ByteFormats.hexDump([]) == "(empty)")
        #expect(ByteFormats.hexDump([0x20, 0x7E, 0x7F, 0x1F, 0x80, 0xFF]) == "20 7e 7f 1f 80 ff  | ~....|")
        #expect(ByteFormats.hexDump(Array("Hi!".utf8)) == "48 69 21  |Hi!|")
        // Control bytes never reach the terminal, and it stays one line.
        let dump = ByteFormats.hexDump([0x1B, 0x5B, 0x32, 0x4A, 0x0A, 0x0D, 0x07, 0x9B])
        #expect(dump == "1b 5b 32 4a 0a 0d 07 9b  |.[2J....|")
        // 0xC3 0xA9 is é in UTF-8: shown as two dots, not as a character.
        #expect(ByteFormats.hexDump([0xC3, 0xA9]) == "c3 a9  |..|")
    }

    @Test func utf8Text() {
        #expect(ByteFormats.utf8Text(Array("Heart Rate".utf8)) == "Heart Rate")
        #expect(ByteFormats.utf8Text([0xC3, 0xA9]) == "é")
        #expect(ByteFormats.utf8Text([]) == "")
        #expect(ByteFormats.utf8Text([0x41, 0xFF, 0x42]) == "A\u{FFFD}B")
        #expect(ByteFormats.utf8Text([0xC3]) == "\u{FFFD}")                    // truncated sequence
        #expect(ByteFormats.utf8Text([0xED, 0xA0, 0x80]).unicodeScalars.allSatisfy { $0 == "\u{FFFD}" }) // surrogate
        #expect(ByteFormats.utf8Text([0xC0, 0x80]).unicodeScalars.allSatisfy { $0 == "\u{FFFD}" })       // overlong NUL
        #expect(ByteFormats.utf8Text([0xF4, 0x90, 0x80, 0x80]).unicodeScalars.allSatisfy { $0 == "\u{FFFD}" }) // > U+10FFFF
        #expect(ByteFormats.utf8Text([0x00, 0x1B]) == "\u{0}\u{1B}")           // kept: escaping is the caller's
        #expect(ByteFormats.utf8Text([0xF0, 0x9F, 0x99, 0x82]) == "🙂")
        let all = ByteFormats.utf8Text([UInt8](0...255))
        #expect(all.unicodeScalars.filter { $0 == "\u{FFFD}" }.count == 128)
    }
}
