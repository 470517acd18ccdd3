// JSONLine: one JSON object, written straight into a string, for JSON-lines output.

import BluectlCore

/// A JSON object built key by key, in insertion order, rendered on one line.
///
/// Strings (keys too) are escaped per RFC 8259 — `"`, `\` and every control character below
/// U+0020 — and beyond that, so that the line stays one line and harmless on a terminal,
/// DEL, C1 controls, U+2028/U+2029 and the other scalars `TextSafety` escapes are written as
/// `\uXXXX` (astral ones as surrogate pairs). The output is valid JSON whatever the strings
/// hold. Non-finite doubles are written as `null`. Keys are not checked for duplicates.
public struct JSONLine: Sendable {
    /// The members so far, comma-separated, without the braces.
    private var body = ""

    public init() {}

    /// Room for `capacity` bytes up front: a line that grows from empty is
    /// copied four or five times on its way to a scan line's 250 bytes.
    public init(capacity: Int) {
        body.reserveCapacity(capacity)
    }

    /// Whether nothing has been added.
    public var isEmpty: Bool { body.isEmpty }

    public mutating func add(_ key: String, _ value: String) {
        addKey(key)
        Self.appendString(value, to: &body)
    }

    /// An address as its text, "AA:BB:CC:DD:EE:FF".
    public mutating func add(_ key: String, _ value: BluetoothAddress) {
        add(key, value.description)
    }

    /// A named value (an address type, a transport) as its name.
    public mutating func add<Name: RawRepresentable<String>>(_ key: String, _ value: Name) {
        add(key, value.rawValue)
    }

    public mutating func add(_ key: String, _ value: Int) {
        addKey(key)
        body += String(value)
    }

    public mutating func add(_ key: String, _ value: Bool) {
        addKey(key)
        body += value ? "true" : "false"
    }

    /// NaN and infinities are written as `null`.
    public mutating func add(_ key: String, _ value: Double) {
        addKey(key)
        Self.appendDouble(value, to: &body)
    }

    public mutating func addNull(_ key: String) {
        addKey(key)
        body += "null"
    }

    public mutating func add(_ key: String, strings: [String]) {
        addKey(key)
        body += "["
        for (i, s) in strings.enumerated() {
            if i > 0 { body += "," }
            Self.appendString(s, to: &body)
        }
        body += "]"
    }

    public mutating func add(_ key: String, ints: [Int]) {
        addKey(key)
        body += "["
        for (i, v) in ints.enumerated() {
            if i > 0 { body += "," }
            body += String(v)
        }
        body += "]"
    }

    public mutating func add(_ key: String, object: JSONLine) {
        addKey(key)
        object.render(into: &body)
    }

    public mutating func add(_ key: String, objects: [JSONLine]) {
        addKey(key)
        body += "["
        for (i, o) in objects.enumerated() {
            if i > 0 { body += "," }
            o.render(into: &body)
        }
        body += "]"
    }

    /// An object of decoded fields (a characteristic's value, a beacon), in their order.
    public init(fields: [DecodedField]) {
        self.init()
        for field in fields { add(field.name, field.value) }
    }

    /// A value decoded from a characteristic.
    public mutating func add(_ key: String, _ value: DecodedFieldValue) {
        switch value {
        case let .int(v): add(key, v)
        case let .double(v): add(key, v)
        case let .string(v): add(key, v)
        case let .bool(v): add(key, v)
        case let .intArray(v): add(key, ints: v)
        }
    }

    /// The object on one line, without a line break: `{"a":1,"b":"x"}`.
    public func render() -> String {
        var out = ""
        out.reserveCapacity(body.utf8.count + 2)
        render(into: &out)
        return out
    }

    // MARK: - Internals

    private func render(into out: inout String) {
        out += "{"
        out += body
        out += "}"
    }

    private mutating func addKey(_ key: String) {
        if !body.isEmpty { body += "," }
        Self.appendString(key, to: &body)
        body += ":"
    }

    static func appendDouble(_ value: Double, to out: inout String) {
        guard value.isFinite else {
            out += "null"
            return
        }
        // Swift's shortest round-trip form ("0.1", "1.0", "-0.0", "1e-05", "1e+20") is valid JSON.
        out += value.description
    }

    /// `s` as a JSON string, quotes included.
    static func appendString(_ s: String, to out: inout String) {
        out += "\""
        // Fast path: nothing to escape (the common case for names and hex).
        var text = s
        let plain = text.withUTF8 { bytes in  // a contiguous scan: the generic UTF8View walk was 5 % of a scan's CPU
            bytes.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }
        }
        if plain {
            out += s
            out += "\""
            return
        }
        let scalars = s.unicodeScalars
        var runStart = scalars.startIndex
        var i = scalars.startIndex
        while i < scalars.endIndex {
            let scalar = scalars[i]
            let escape: String? = switch scalar.value {
            case 0x22: "\\\""
            case 0x5C: "\\\\"
            case 0x08: "\\b"
            case 0x0C: "\\f"
            case 0x0A: "\\n"
            case 0x0D: "\\r"
            case 0x09: "\\t"
            case 0x20..<0x7F: nil
            default: TextSafety.needsEscape(scalar) ? unicodeEscape(scalar) : nil
            }
            let next = scalars.index(after: i)
            if let escape {
                if runStart < i { out += Substring(scalars[runStart..<i]) }
                out += escape
                runStart = next
            }
            i = next
        }
        if runStart < scalars.endIndex { out += Substring(scalars[runStart...]) }
        out += "\""
    }

    /// `\uXXXX`, or a surrogate pair of them beyond the BMP.
    private static func unicodeEscape(_ scalar: Unicode.Scalar) -> String {
        let v = scalar.value
        if v > 0xFFFF {
            let u = v - 0x10000
            return hex4(0xD800 + (u >> 10)) + hex4(0xDC00 + (u & 0x3FF))
        }
        return hex4(v)
    }

    private static func hex4(_ v: UInt32) -> String {
        let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]
        var s = "\\u"
        for shift in stride(from: 12, through: 0, by: -4) {
            s.append(digits[Int((v >> UInt32(shift)) & 0xF)])
        }
        return s
    }
}
