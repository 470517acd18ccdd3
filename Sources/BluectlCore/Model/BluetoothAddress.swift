// BluetoothAddress: a 48-bit Bluetooth device address (BD_ADDR), its text forms
// and BlueZ's device object-path element (`dev_AA_BB_CC_DD_EE_FF`).

/// A Bluetooth device address: six bytes, most significant first, as written
/// (`AA:BB:CC:DD:EE:FF` has `0xAA` first). Ordered by that byte order.
public struct BluetoothAddress: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The 48 bits in the low bits of a UInt64 (`AA:BB:CC:DD:EE:FF` is 0xAABB_CCDD_EEFF).
    public let uint64Value: UInt64

    /// Longest text `parse(_:)` looks at (UTF-8 bytes, before trimming surrounding whitespace).
    static let maxInputLength = 256

    /// `nil` if `value` has any of its top 16 bits set.
    public init?(uint64: UInt64) {
        guard uint64 >> 48 == 0 else { return nil }
        uint64Value = uint64
    }

    /// Exactly six bytes, most significant first (display order, not BlueZ's
    /// little-endian `bdaddr_t`); nil for any other count.
    public init?(bytes: some Collection<UInt8>) {
        var v: UInt64 = 0
        var n = 0
        for b in bytes {
            n += 1
            guard n <= 6 else { return nil }
            v = (v << 8) | UInt64(b)
        }
        guard n == 6 else { return nil }
        uint64Value = v
    }

    /// `AA:BB:CC:DD:EE:FF`, `aa:bb:cc:dd:ee:ff` (any case), `AA-BB-CC-DD-EE-FF`
    /// or `AABBCCDDEEFF`, with surrounding whitespace ignored; nil for anything else.
    public init?(_ text: String) {
        guard let a = try? Self.parse(text) else { return nil }
        self = a
    }

    /// BlueZ's device object-path element, `dev_AA_BB_CC_DD_EE_FF` (hex digits in any case);
    /// nil for anything else, including a whole object path.
    public init?(pathElement: String) {
        let u = pathElement.utf8
        guard u.count == 21 else { return nil }
        var bytes = u.makeIterator()
        for expected in "dev_".utf8 {
            guard bytes.next() == expected else { return nil }
        }
        guard let v = Self.scanGroups(&bytes, separator: UInt8(ascii: "_")) else { return nil }
        uint64Value = v
    }

    /// Parses an address given on a command line: `AA:BB:CC:DD:EE:FF` in any case, with `-`
    /// separators, or as twelve hex digits without any; surrounding spaces, tabs and line
    /// breaks are ignored.
    public static func parse(_ text: String) throws(BluetoothParseError) -> BluetoothAddress {
        let byteCount = text.utf8.count
        guard byteCount <= maxInputLength else {
            throw BluetoothParseError(.address, input: text, reason: "too long (\(byteCount) bytes); \(expectation)")
        }
        // The form BlueZ writes (the Address of every device a scan reports):
        // read where it lies, without the array and the trimming below.
        // Whatever this does not take goes the general way.
        if byteCount == 17, let v = text.utf8.withContiguousStorageIfAvailable({ bytes -> UInt64? in
            let sep = bytes[2]
            guard sep == UInt8(ascii: ":") || sep == UInt8(ascii: "-") else { return nil }
            var it = bytes.makeIterator()
            return scanGroups(&it, separator: sep)
        }) ?? nil {
            return BluetoothAddress(checkedValue: v)
        }
        let all = Array(text.utf8)
        var lo = 0, hi = all.count
        while lo < hi, isTrimmable(all[lo]) { lo += 1 }
        while hi > lo, isTrimmable(all[hi - 1]) { hi -= 1 }
        let body = all[lo..<hi]
        guard !body.isEmpty else {
            throw BluetoothParseError(.address, input: text, reason: "empty; \(expectation)")
        }
        var it = body.makeIterator()
        if body.count == 17 {
            let sep = body[body.startIndex + 2]
            if sep == UInt8(ascii: ":") || sep == UInt8(ascii: "-"), let v = scanGroups(&it, separator: sep) {
                return BluetoothAddress(checkedValue: v)
            }
        }
        if body.count == 12, let v = scanDigits(body) {
            return BluetoothAddress(checkedValue: v)
        }
        throw BluetoothParseError(.address, input: text, reason: diagnose(body, leadingScalars: lo))
    }

    /// `AA:BB:CC:DD:EE:FF`, upper case, as BlueZ writes it.
    public var description: String { format(separator: UInt8(ascii: ":")) }

    /// BlueZ's device object-path element: `dev_AA_BB_CC_DD_EE_FF`.
    public var pathElement: String { "dev_" + format(separator: UInt8(ascii: "_")) }

    /// The six bytes, most significant first.
    public var bytes: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: uint64Value >> (40 - 8 * UInt64($0))) }
    }

    public static func < (a: BluetoothAddress, b: BluetoothAddress) -> Bool {
        a.uint64Value < b.uint64Value
    }

    // MARK: - Internals

    private init(checkedValue: UInt64) { uint64Value = checkedValue }

    static let expectation = "expected six two-digit hex bytes such as AA:BB:CC:DD:EE:FF, AA-BB-CC-DD-EE-FF or AABBCCDDEEFF"

    private static func isTrimmable(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    /// Reads `XX<sep>XX<sep>XX<sep>XX<sep>XX<sep>XX` and nothing more from `it`.
    private static func scanGroups<I: IteratorProtocol<UInt8>>(_ it: inout I, separator: UInt8) -> UInt64? {
        var v: UInt64 = 0
        for i in 0..<6 {
            if i > 0 {
                guard it.next() == separator else { return nil }
            }
            guard let h = it.next().flatMap(hexValue), let l = it.next().flatMap(hexValue) else { return nil }
            v = (v << 8) | UInt64(h << 4 | l)
        }
        guard it.next() == nil else { return nil }
        return v
    }

    /// Twelve hex digits and nothing else (`AABBCCDDEEFF`: as printed on
    /// labels and by some tools).
    private static func scanDigits(_ body: ArraySlice<UInt8>) -> UInt64? {
        var v: UInt64 = 0
        for b in body {
            guard let digit = hexValue(b) else { return nil }
            v = v << 4 | UInt64(digit)
        }
        return v
    }

    /// Why `body` (the trimmed input, all of it UTF-8) is not an address.
    private static func diagnose(_ body: ArraySlice<UInt8>, leadingScalars: Int) -> String {
        // Walk the trimmed text as Unicode scalars, so characters are the user's; positions
        // (1-based) count the trimmed whitespace too, which is ASCII: one scalar a byte.
        let scalars = Array(String(decoding: body, as: UTF8.self).unicodeScalars)
        var separator: Unicode.Scalar? = nil
        for (i, s) in scalars.enumerated() {
            let position = leadingScalars + i + 1
            if i >= 17 {
                return "too long (\(scalars.count) characters); \(expectation)"
            }
            if i % 3 == 2 {
                guard s == ":" || s == "-" else {
                    if s.isASCII, hexValue(UInt8(s.value)) != nil {
                        return "expected \":\" or \"-\" at position \(position), found a hex digit; \(expectation)"
                    }
                    return "\(BluetoothParseError.quote(String(s))) at position \(position) is not a separator; \(expectation)"
                }
                if let sep = separator, sep != s {
                    return "mixes \":\" and \"-\" separators; \(expectation)"
                }
                separator = s
            } else {
                guard s.isASCII, hexValue(UInt8(s.value)) != nil else {
                    if s == ":" || s == "-" {
                        return "separator at position \(position) splits a byte; \(expectation)"
                    }
                    return "\(BluetoothParseError.quote(String(s))) at position \(position) is not a hex digit; \(expectation)"
                }
            }
        }
        return "too short (\(scalars.count) characters); \(expectation)"
    }

    /// Written into the string in place (a scan line shows an address per event).
    func format(separator: UInt8) -> String {
        let digits: StaticString = "0123456789ABCDEF"
        return digits.withUTF8Buffer { d in
            String(unsafeUninitializedCapacity: 17) { out in
                var at = 0
                for i in 0..<6 {
                    if i > 0 {
                        out[at] = separator
                        at += 1
                    }
                    let b = UInt8(truncatingIfNeeded: uint64Value >> (40 - 8 * UInt64(i)))
                    out[at] = d[Int(b >> 4)]
                    out[at + 1] = d[Int(b & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }
}
