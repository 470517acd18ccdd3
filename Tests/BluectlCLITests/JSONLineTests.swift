import Foundation
import Testing
import BluectlCore
@testable import BluectlCLI

/// Parses `text` with Foundation as one JSON object; nil if it is not valid JSON.
private func parse(_ text: String) -> [String: Any]? {
    guard let data = text.data(using: .utf8) else { return nil }
    return (try? JSONSerialization.jsonObject(with: data, options: [])) as? [String: Any]
}

private let hostile: [String] = [
    "", "plain", "quote\"inside", "back\\slash", "\\\"", "\"\\", "tab\there", "new\nline", "cr\rlf\n",
    "\u{0}nul", "\u{1}\u{2}\u{1F}", "\u{7F}del", "\u{80}\u{9B}c1", "esc\u{1B}[2J\u{1B}]0;title\u{7}",
    "\u{8}\u{C}", "line\u{2028}sep\u{2029}", "bidi\u{202E}txt", "zw\u{200B}sp", "\u{FEFF}bom",
    "é e\u{301} 日本 🙂 👨‍👩‍👧", "\u{E000}\u{F8FF}", "\u{10FFFF}", "\u{E0041}tag", "\u{FFFD}",
    "</script>", "{\"a\":1}", "]}\"", String(repeating: "\"\\\u{1B}", count: 1000),
    String(decoding: [0xFF, 0xFE, 0xC3, 0x28, 0xED, 0xA0, 0x80], as: UTF8.self),
]

@Suite struct JSONLineTests {
    @Test func emptyObject() {
        #expect(JSONLine().render() == "{}")
        #expect(JSONLine().isEmpty)
    }

    @Test func valuesInInsertionOrder() {
        var j = JSONLine()
        j.add("event", "read")
        j.add("rssi", -67)
        j.add("connected", true)
        j.add("paired", false)
        j.add("celsius", 23.5)
        j.addNull("name")
        j.add("uuids", strings: ["180d", "180f"])
        j.add("rr", ints: [800, 1000])
        #expect(j.render() == #"{"event":"read","rssi":-67,"connected":true,"paired":false,"celsius":23.5,"name":null,"uuids":["180d","180f"],"rr":[800,1000]}"#)
        #expect(!j.isEmpty)
    }

    @Test func nesting() {
        var inner = JSONLine()
        inner.add("bpm", 72)
        var empty = JSONLine()
        empty.add("x", strings: [])
        var j = JSONLine()
        j.add("decoded", object: inner)
        j.add("list", objects: [inner, JSONLine(), empty])
        j.add("none", objects: [])
        j.add("noints", ints: [])
        #expect(j.render() == #"{"decoded":{"bpm":72},"list":[{"bpm":72},{},{"x":[]}],"none":[],"noints":[]}"#)
        let parsed = parse(j.render())
        #expect((parsed?["decoded"] as? [String: Any])?["bpm"] as? Int == 72)
    }

    @Test func integers() {
        var j = JSONLine()
        j.add("min", Int.min)
        j.add("max", Int.max)
        j.add("zero", 0)
        #expect(j.render() == "{\"min\":\(Int.min),\"max\":\(Int.max),\"zero\":0}")
        #expect(parse(j.render()) != nil)
    }

    @Test func doubles() {
        let cases: [(Double, String)] = [
            (.nan, "null"), (.infinity, "null"), (-.infinity, "null"), (.signalingNaN, "null"),
            (0, "0.0"), (-0.0, "-0.0"), (1, "1.0"), (0.1, "0.1"), (36.5, "36.5"), (-40, "-40.0"),
            (1e-5, "1e-05"), (1e20, "1e+20"), (.greatestFiniteMagnitude, "1.7976931348623157e+308"),
            (.leastNonzeroMagnitude, "5e-324"),
        ]
        for (value, text) in cases {
            var j = JSONLine()
            j.add("v", value)
            #expect(j.render() == "{\"v\":\(text)}")
            let parsed = parse(j.render())
            #expect(parsed != nil, "\(text) is not valid JSON")
            if value.isFinite {
                #expect((parsed?["v"] as? NSNumber)?.doubleValue == value)
            } else {
                #expect(parsed?["v"] is NSNull)
            }
        }
    }

    @Test func escapes() {
        var j = JSONLine()
        j.add("s", "\"\\/\u{8}\u{C}\n\r\t\u{0}\u{1F}\u{7F}\u{9B}\u{2028}\u{2029}\u{202E}\u{1F642}\u{E0041}é")
        #expect(j.render() == #"{"s":"\"\\/\b\f\n\r\t\u0000\u001f\u007f\u009b\u2028\u2029\u202e🙂\udb40\udc41é"}"#)
    }

    @Test(arguments: hostile)
    func hostileStringsStayValidAndRoundTrip(text: String) throws {
        var j = JSONLine()
        j.add("name", text)
        j.add(text, 1)                      // as a key, too
        j.add("list", strings: [text, text])
        var inner = JSONLine()
        inner.add(text, text)
        j.add("inner", object: inner)
        let line = j.render()
        #expect(!line.contains("\n") && !line.contains("\r"))
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0 == "\u{2028}" || $0 == "\u{2029}" })
        let parsed = try #require(parse(line))
        #expect(parsed["name"] as? String == text)
        #expect(parsed["list"] as? [String] == [text, text])
        #expect((parsed["inner"] as? [String: Any])?[text] as? String == text)
        if text != "name" && text != "list" && text != "inner" {
            #expect(parsed[text] as? Int == 1)
        }
    }

    @Test func everyScalarRoundTrips() throws {
        var s = ""
        for v in UInt32(0)...0x3000 {
            if let scalar = Unicode.Scalar(v) { s.unicodeScalars.append(scalar) }
        }
        for v in [0xFFFE, 0xFFFF, 0x1F600, 0xE0001, 0xF0000, 0x10FFFF] as [UInt32] {
            s.unicodeScalars.append(Unicode.Scalar(v)!)
        }
        var j = JSONLine()
        j.add("all", s)
        let parsed = try #require(parse(j.render()))
        #expect(parsed["all"] as? String == s)
    }

    @Test func decodedFieldValues() {
        var j = JSONLine()
        j.add("a", DecodedFieldValue.int(87))
        j.add("b", DecodedFieldValue.double(36.5))
        j.add("c", DecodedFieldValue.string("Chest"))
        j.add("d", DecodedFieldValue.bool(true))
        j.add("e", DecodedFieldValue.intArray([800, 1000]))
        j.add("f", DecodedFieldValue.double(.nan))
        #expect(j.render() == #"{"a":87,"b":36.5,"c":"Chest","d":true,"e":[800,1000],"f":null}"#)
    }

    @Test func largeLinesRenderWhole() throws {
        var j = JSONLine()
        let big = String(repeating: "a\u{1B}\"", count: 200_000)
        for i in 0..<10_000 { j.add("k\(i)", i) }
        j.add("big", big)
        let line = j.render()
        let parsed = try #require(parse(line))
        #expect(parsed.count == 10_001)
        #expect(parsed["big"] as? String == big)
        #expect(parsed["k9999"] as? Int == 9999)
    }
}
