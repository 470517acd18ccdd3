// busctl's text output as JSON values.

import Foundation

// MARK: - busctl's text output

/// Parses busctl's (non-JSON) output: "SIGNATURE value…", strings C-quoted,
/// arrays as a count then the elements, variants as "sig value", structs
/// flat. busctl --json cannot print dicts with non-string keys (a{qv}:
/// ManufacturerData) — it fails without a message — hence this parser.
/// Values come out as JSONValue: arrays → .array (ay too), dicts → .object
/// (keys as decimal text for integer keys), structs → .array, variants →
/// {"type": sig, "data": value} (the shape busctl --json uses).
enum BusctlText {
    static func parse(_ text: String) throws -> (signature: String, values: [JSONValue]) {
        var tokens = try tokenize(text)[...]
        guard let sig = tokens.popFirst() else { return ("", []) }
        var values: [JSONValue] = []
        for type in try splitTypes(sig) {
            values.append(try value(type, &tokens))
        }
        guard tokens.isEmpty else { throw BusTierError("busctl output: trailing tokens in \(text.debugDescription)") }
        return (sig, values)
    }

    private static func tokenize(_ text: String) throws -> [String] {
        var tokens: [String] = []
        var chars = Array(text.unicodeScalars)[...]
        while let c = chars.first {
            if c == " " || c == "\n" || c == "\t" || c == "\r" { chars.removeFirst(); continue }
            if c == "\"" {
                chars.removeFirst()
                var bytes: [UInt8] = []
                var closed = false
                while let d = chars.popFirst() {
                    if d == "\"" { closed = true; break }
                    if d != "\\" { bytes += Array(String(d).utf8); continue }
                    guard let e = chars.popFirst() else { break }
                    switch e {
                    case "n": bytes.append(0x0a)
                    case "t": bytes.append(0x09)
                    case "r": bytes.append(0x0d)
                    case "a": bytes.append(0x07)
                    case "b": bytes.append(0x08)
                    case "f": bytes.append(0x0c)
                    case "v": bytes.append(0x0b)
                    case "x":
                        var hex = ""
                        while hex.count < 2, let h = chars.first, h.properties.isASCIIHexDigit { hex.unicodeScalars.append(h); chars.removeFirst() }
                        bytes.append(UInt8(hex, radix: 16) ?? 0)
                    case "0"..."7":
                        var oct = String(e)
                        while oct.count < 3, let o = chars.first, ("0"..."7").contains(o) { oct.unicodeScalars.append(o); chars.removeFirst() }
                        bytes.append(UInt8(oct, radix: 8) ?? 0)
                    default: bytes += Array(String(e).utf8)
                    }
                }
                guard closed else { throw BusTierError("busctl output: unterminated string in \(text.debugDescription)") }
                tokens.append(String(decoding: bytes, as: UTF8.self))
            } else {
                var word = ""
                while let d = chars.first, d != " " && d != "\n" && d != "\t" && d != "\r" { word.unicodeScalars.append(d); chars.removeFirst() }
                tokens.append(word)
            }
        }
        return tokens
    }

    /// Splits a signature into its complete types.
    static func splitTypes(_ sig: String) throws -> [String] {
        var out: [String] = []
        var rest = Substring(sig)
        while !rest.isEmpty {
            let n = try completeTypeLength(rest)
            out.append(String(rest.prefix(n)))
            rest = rest.dropFirst(n)
        }
        return out
    }

    private static func completeTypeLength(_ sig: Substring) throws -> Int {
        guard let c = sig.first else { throw BusTierError("empty signature") }
        switch c {
        case "a": return 1 + (try completeTypeLength(sig.dropFirst()))
        case "(", "{":
            let close: Character = c == "(" ? ")" : "}"
            var n = 1
            var rest = sig.dropFirst()
            while let d = rest.first, d != close {
                let m = try completeTypeLength(rest)
                n += m
                rest = rest.dropFirst(m)
            }
            guard rest.first == close else { throw BusTierError("bad signature \(sig)") }
            return n + 1
        default: return 1
        }
    }

    private static func value(_ type: String, _ tokens: inout ArraySlice<String>) throws -> JSONValue {
        func next() throws -> String {
            guard let t = tokens.popFirst() else { throw BusTierError("busctl output ended early (\(type))") }
            return t
        }
        switch type.first {
        case "s", "o", "g": return .string(try next())
        case "b": return .bool(try next() == "true")
        case "y", "n", "q", "i", "u", "x", "t", "h":
            let t = try next()
            guard let v = Int64(t) ?? UInt64(t).map({ Int64(bitPattern: $0) }) else { throw BusTierError("not an integer: \(t)") }
            return .int(v)
        case "d":
            let t = try next()
            return .double(Double(t) ?? .nan)
        case "v":
            let sig = try next()
            return .object(["type": .string(sig), "data": try value(sig, &tokens)])
        case "(":
            let inner = String(type.dropFirst().dropLast())
            return .array(try splitTypes(inner).map { try value($0, &tokens) })
        case "a":
            let count = Int(try next()) ?? 0
            let elem = String(type.dropFirst())
            if elem.first == "{" {
                let kv = try splitTypes(String(elem.dropFirst().dropLast()))
                guard kv.count == 2 else { throw BusTierError("bad dict signature \(type)") }
                var dict: [String: JSONValue] = [:]
                for _ in 0..<count {
                    let k = try value(kv[0], &tokens)
                    let key = k.string ?? k.int.map(String.init) ?? k.description
                    dict[key] = try value(kv[1], &tokens)
                }
                return .object(dict)
            }
            return .array(try (0..<count).map { _ in try value(elem, &tokens) })
        default:
            throw BusTierError("unsupported type \(type) in busctl output")
        }
    }
}
