import Testing
@testable import BluectlCLI

@Suite struct TerminalSafeTests {
    @Test func printableTextIsKept() {
        #expect(TextSafety.terminalSafe("") == "")
        #expect(TextSafety.terminalSafe("Heart Rate Sensor") == "Heart Rate Sensor")
        #expect(TextSafety.terminalSafe("Café Ünïcødé — ok") == "Café Ünïcødé — ok")
        #expect(TextSafety.terminalSafe("日本語のデバイス") == "日本語のデバイス")
        #expect(TextSafety.terminalSafe("🙂👍🏽") == "🙂👍🏽")
        #expect(TextSafety.terminalSafe("👨‍👩‍👧") == "👨‍👩‍👧") // ZWJ sequence kept
        #expect(TextSafety.terminalSafe("e\u{301}") == "e\u{301}")
        #expect(TextSafety.terminalSafe("\u{FFFD}") == "\u{FFFD}")
        #expect(TextSafety.terminalSafe("quote\" and 'apostrophe'") == "quote\" and 'apostrophe'")
    }

    @Test func controlsAreEscaped() {
        #expect(TextSafety.terminalSafe("\u{1B}[2J\u{1B}]0;owned\u{7}") == "\\x1b[2J\\x1b]0;owned\\x07")
        #expect(TextSafety.terminalSafe("a\nb\rc\td") == "a\\x0ab\\x0dc\\x09d")
        #expect(TextSafety.terminalSafe("\u{0}") == "\\x00")
        #expect(TextSafety.terminalSafe("\u{7F}") == "\\x7f")
        #expect(TextSafety.terminalSafe("\u{80}\u{9B}31m\u{9F}") == "\\x80\\x9b31m\\x9f")
        #expect(TextSafety.terminalSafe("\u{A0}") == "\u{A0}") // no-break space prints
    }

    @Test func backslashIsEscapedSoEscapesAreUnambiguous() {
        #expect(TextSafety.terminalSafe("a\\b") == "a\\\\b")
        #expect(TextSafety.terminalSafe("\\x1b") == "\\\\x1b")
        #expect(TextSafety.terminalSafe("\\x1b") != TextSafety.terminalSafe("\u{1B}"))
    }

    @Test func invisibleAndReorderingScalarsAreEscaped() {
        #expect(TextSafety.terminalSafe("abc\u{202E}fed") == "abc\\u{202e}fed")  // right-to-left override
        #expect(TextSafety.terminalSafe("\u{2066}x\u{2069}") == "\\u{2066}x\\u{2069}")
        #expect(TextSafety.terminalSafe("a\u{200B}b") == "a\\u{200b}b")          // zero width space
        #expect(TextSafety.terminalSafe("\u{FEFF}") == "\\u{feff}")
        #expect(TextSafety.terminalSafe("a\u{2028}b\u{2029}") == "a\\u{2028}b\\u{2029}")
        #expect(TextSafety.terminalSafe("\u{E000}") == "\\u{e000}")               // private use
        #expect(TextSafety.terminalSafe("\u{10FFFF}") == "\\u{10ffff}")           // noncharacter
        #expect(TextSafety.terminalSafe("\u{E0041}") == "\\u{e0041}")             // tag character
        #expect(TextSafety.terminalSafe("\u{AD}") == "\\xad")                     // soft hyphen
    }

    @Test func resultNeverHoldsAControlCharacter() {
        var all = ""
        for v in UInt32(0)...0x2FF {
            all.unicodeScalars.append(Unicode.Scalar(v)!)
        }
        let safe = TextSafety.terminalSafe(all)
        #expect(!safe.unicodeScalars.contains { $0.properties.generalCategory == .control })
        #expect(safe.unicodeScalars.allSatisfy { !TextSafety.needsEscape($0) })
    }
}

@Suite struct EscapedForMessageTests {
    @Test func shortInput() {
        #expect(TextSafety.escapedForMessage("") == "")
        #expect(TextSafety.escapedForMessage("hci9") == "hci9")
        #expect(TextSafety.escapedForMessage("say \"hi\"") == "say \\\"hi\\\"")
        #expect(TextSafety.escapedForMessage("a\\b") == "a\\\\b")
        #expect(TextSafety.escapedForMessage("\u{1B}[31mred\n") == "\\x1b[31mred\\x0a")
        #expect(TextSafety.escapedForMessage("x\u{202E}y") == "x\\u{202e}y")
    }

    @Test func truncation() {
        let long = String(repeating: "a", count: 100)
        #expect(TextSafety.escapedForMessage(long) == String(repeating: "a", count: 64) + "…")
        #expect(TextSafety.escapedForMessage(String(repeating: "b", count: 64)) == String(repeating: "b", count: 64))
        #expect(TextSafety.escapedForMessage("abcdef", limit: 3) == "abc…")
        #expect(TextSafety.escapedForMessage("abc", limit: 3) == "abc")
        #expect(TextSafety.escapedForMessage("abc", limit: 0) == "…")
        #expect(TextSafety.escapedForMessage("", limit: 0) == "")
        #expect(TextSafety.escapedForMessage("abc", limit: -5) == "…")
        // The limit counts input scalars; escapes do not eat into it.
        #expect(TextSafety.escapedForMessage("\u{1B}\u{1B}\u{1B}", limit: 2) == "\\x1b\\x1b…")
        let huge = String(repeating: "\u{1B}", count: 1_000_000)
        #expect(TextSafety.escapedForMessage(huge) == String(repeating: "\\x1b", count: 64) + "…")
        // Zalgo: a single character of many scalars is still cut.
        let zalgo = "Z" + String(repeating: "\u{301}", count: 10_000)
        #expect(TextSafety.escapedForMessage(zalgo, limit: 4).unicodeScalars.count == 5)
    }

    @Test func edgesDoNotMergeWithQuotes() {
        #expect(TextSafety.escapedForMessage("\u{301}abc") == "\\u{301}abc")
        #expect(TextSafety.escapedForMessage("\u{200D}x") == "\\u{200d}x")
        #expect(TextSafety.escapedForMessage("é") == "é")
        let quoted = "\"" + TextSafety.escapedForMessage("\u{301}") + "\""
        #expect(quoted.count == 9)
    }
}
