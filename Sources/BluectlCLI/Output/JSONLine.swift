// JSONLine: one JSON object, written straight into a string, for JSON-lines output.

import BluectlCore

/// A JSON object built key by key, in insertion order, rendered on one line.
///
/// Strings (keys too) are escaped per RFC 8259 — `"`, `\` and every control character below
/// U+0020 — and beyond that, so that the line stays one line and harmless on a terminal,
/// DEL, C1 controls, U+2028/U+2029 and the other scalars `TextSafety` escapes are written as
/// `\uXXXX` (astral ones as surrogate pairs). The output is valid JSON whatever the strings
/// hold. Non-finite doubles are written as `null`. Keys are not checked for duplicates.
public struct JSONLine: Sendable, Equatable {
    /// The members so far, comma-separated, without the braces, as UTF-8:
    /// appending bytes costs a fraction of appending to a `String` (which
    /// re-checks its encoding and flags on every append), and a scan renders
    /// a line per advertisement.
    private var body: [UInt8] = []

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
        Self.appendInt(value, to: &body)
    }

    public mutating func add(_ key: String, _ value: Bool) {
        addKey(key)
        Self.appendASCII(value ? "true" : "false", to: &body)
    }

    /// NaN and infinities are written as `null`.
    public mutating func add(_ key: String, _ value: Double) {
        addKey(key)
        guard value.isFinite else {
            Self.appendASCII("null", to: &body)
            return
        }
        // Swift's shortest round-trip form ("0.1", "1.0", "-0.0", "1e-05", "1e+20") is valid JSON.
        body.append(contentsOf: value.description.utf8)
    }

    /// Bytes as a string of lowercase hex digits (`ByteFormats.hex`), written in place.
    public mutating func add(_ key: String, hex bytes: [UInt8]) {
        addKey(key)
        body.append(0x22)
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { d in
            for b in bytes {
                body.append(d[Int(b >> 4)])
                body.append(d[Int(b & 0x0F)])
            }
        }
        body.append(0x22)
    }

    public mutating func addNull(_ key: String) {
        addKey(key)
        Self.appendASCII("null", to: &body)
    }

    public mutating func add(_ key: String, strings: [String]) {
        addKey(key)
        body.append(0x5B)
        for (i, s) in strings.enumerated() {
            if i > 0 { body.append(0x2C) }
            Self.appendString(s, to: &body)
        }
        body.append(0x5D)
    }

    public mutating func add(_ key: String, ints: [Int]) {
        addKey(key)
        body.append(0x5B)
        for (i, v) in ints.enumerated() {
            if i > 0 { body.append(0x2C) }
            Self.appendInt(v, to: &body)
        }
        body.append(0x5D)
    }

    public mutating func add(_ key: String, object: JSONLine) {
        addKey(key)
        object.render(into: &body)
    }

    public mutating func add(_ key: String, objects: [JSONLine]) {
        addKey(key)
        body.append(0x5B)
        for (i, o) in objects.enumerated() {
            if i > 0 { body.append(0x2C) }
            o.render(into: &body)
        }
        body.append(0x5D)
    }

    /// An object of decoded fields (a characteristic's value, a beacon), in their order.
    public init(fields: [DecodedField]) {
        self.init()
        for field in fields { add(field.name, field.value) }
    }

    /// An object as `JSONInput.parse` gives it (a Home Assistant config another gateway
    /// published, carried on), its members in key order; whole numbers written as integers.
    init(parsed object: [String: Any]) {
        self.init()
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            addKey(key)
            Self.appendParsed(value, to: &body)
        }
    }

    private static func appendParsed(_ value: Any, to out: inout [UInt8]) {
        switch value {
        case let text as String:
            appendString(text, to: &out)
        case let flag as Bool:
            appendASCII(flag ? "true" : "false", to: &out)
        case let number as Double where number.isFinite:
            if number == number.rounded(), number.magnitude < 1e15 { appendInt(Int(number), to: &out) }
            else { out.append(contentsOf: number.description.utf8) }
        case let array as [Any]:
            out.append(0x5B)
            for (i, element) in array.enumerated() {
                if i > 0 { out.append(0x2C) }
                appendParsed(element, to: &out)
            }
            out.append(0x5D)
        case let object as [String: Any]:
            JSONLine(parsed: object).render(into: &out)
        default:
            appendASCII("null", to: &out)   // JSONInput.Null, and a non-finite number
        }
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
        String(decoding: renderedBytes(newline: false), as: UTF8.self)
    }

    /// The object as UTF-8, with a line break when `newline`: what an
    /// output queue takes without another copy into a `String`.
    public func renderedBytes(newline: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + 3)
        render(into: &out)
        if newline { out.append(0x0A) }
        return out
    }

    // MARK: - Internals

    private func render(into out: inout [UInt8]) {
        out.append(0x7B)
        out.append(contentsOf: body)
        out.append(0x7D)
    }

    /// `,"key":` (no comma before the first member).
    private mutating func addKey(_ key: String) {
        Self.appendString(key, to: &body, comma: !body.isEmpty, colon: true)
    }

    private static func appendASCII(_ text: StaticString, to out: inout [UInt8]) {
        text.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    /// Decimal digits without a `String` in between.
    private static func appendInt(_ value: Int, to out: inout [UInt8]) {
        if value < 0 { out.append(0x2D) }
        var magnitude = value.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var i = buffer.count
            repeat {
                i -= 1
                buffer[i] = 0x30 + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: buffer[i...])
        }
    }

    /// `s` as a JSON string, quotes included; a comma before it and a colon after
    /// it when asked (a key: `,"key":`).
    static func appendString(_ s: String, to out: inout [UInt8], comma: Bool = false, colon: Bool = false) {
        // Fast path: nothing to escape (the common case for keys, names and
        // hex): the string's own bytes, read where they lie (no copy of the
        // string, no check of its uniqueness) and appended in one go. A scan
        // line writes about twenty strings.
        let plain = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard isPlain(bytes) else { return false }
            appendQuoted(bytes, comma: comma, colon: colon, to: &out)
            return true
        }
        if plain != true {
            if comma { out.append(0x2C) }
            appendEscaped(s, to: &out)
            if colon { out.append(0x3A) }
        }
    }

    /// Nothing in `bytes` needs an escape: printable ASCII but `"` and `\`.
    private static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for b in bytes where b < 0x20 || b >= 0x7F || b == 0x22 || b == 0x5C { return false }
        return true
    }

    /// `bytes` in quotes, a comma before and a colon after when asked: put
    /// together on the stack and appended at once (one check of the
    /// array's room instead of four; a scan line has some twenty of these).
    private static func appendQuoted(_ bytes: UnsafeBufferPointer<UInt8>, comma: Bool, colon: Bool, to out: inout [UInt8]) {
        let count = bytes.count + 2 + (comma ? 1 : 0) + (colon ? 1 : 0)
        guard count <= 256 else {
            if comma { out.append(0x2C) }
            out.append(0x22)
            out.append(contentsOf: bytes)
            out.append(0x22)
            if colon { out.append(0x3A) }
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            var i = 0
            if comma { buffer[0] = 0x2C; i = 1 }
            buffer[i] = 0x22
            if let base = bytes.baseAddress { (buffer.baseAddress! + i + 1).initialize(from: base, count: bytes.count) }
            i += 1 + bytes.count
            buffer[i] = 0x22
            if colon { buffer[i + 1] = 0x3A }
            out.append(contentsOf: UnsafeBufferPointer(buffer))
        }
    }

    /// `s` as a JSON string, quotes included, each scalar escaped as needed.
    @inline(never)
    private static func appendEscaped(_ s: String, to out: inout [UInt8]) {
        out.append(0x22)
        for scalar in s.unicodeScalars {
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
            if let escape {
                out.append(contentsOf: escape.utf8)
            } else if let encoded = UTF8.encode(scalar) {
                out.append(contentsOf: encoded)
            }
        }
        out.append(0x22)
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
