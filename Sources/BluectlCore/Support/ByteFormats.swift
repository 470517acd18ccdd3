// ByteFormats: hex values given on the command line, and the ways bluectl shows bytes.

/// Parsing and formatting of byte values.
public enum ByteFormats {
    /// Parses a value to write, given on the command line.
    ///
    /// The value is one or more groups of hex digits (any case), each optionally prefixed by
    /// `0x`/`0X` and holding an even number of digits; groups are separated by spaces, tabs or
    /// line breaks and/or one `:`, `-` or `,`. Surrounding whitespace is ignored.
    /// `0x0102`, `0102`, `01 02`, `01:02`, `01-02`, `0x01 0x02`, `0x01, 0x02` all give `[1, 2]`.
    /// There is no length limit; the work is linear in the input.
    public static func parseHex(_ text: String) throws(ByteFormatError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count / 2)

        // Where we are between groups.
        enum State {
            case start          // before the first group: whitespace only
            case afterGroup     // whitespace, one separator, or the end
            case afterSeparator // whitespace or a group; the end is an error
        }
        var state = State.start
        var position = 0          // 1-based position of `s`, in Unicode scalars
        var groupStart = 0        // position of the current group's first digit (or 0x)
        var digitStart = 0        // position of the current group's first digit
        var digits = 0            // digits in the current group
        var pending: UInt8 = 0    // high nibble awaiting its low one
        var inGroup = false
        var separatorPosition = 0
        var separator: Unicode.Scalar = ":"

        var scalars = text.unicodeScalars.makeIterator()
        var lookahead: Unicode.Scalar? = scalars.next()

        func endGroup() throws(ByteFormatError) {
            if digits == 0 {
                throw ByteFormatError(input: text, reason: .noDigitsAfterPrefix(position: groupStart))
            }
            if digits % 2 != 0 {
                throw ByteFormatError(input: text, reason: .oddDigitCount(digits, position: digitStart))
            }
            inGroup = false
            state = .afterGroup
        }

        while let s = lookahead {
            lookahead = scalars.next()
            position += 1
            let v = s.value
            let nibble: UInt8? = switch v {
            case 0x30...0x39: UInt8(v - 0x30)
            case 0x61...0x66: UInt8(v - 0x61 + 10)
            case 0x41...0x46: UInt8(v - 0x41 + 10)
            default: nil
            }
            if let nibble {
                if !inGroup {
                    // A new group (a digit right after a group's digits continues that group).
                    inGroup = true
                    groupStart = position
                    digits = 0
                    // A group may start with 0x / 0X.
                    if v == 0x30, let next = lookahead, next == "x" || next == "X" {
                        lookahead = scalars.next()
                        position += 1
                        digitStart = position + 1
                        continue
                    }
                    digitStart = position
                }
                if digits % 2 == 0 {
                    pending = nibble << 4
                } else {
                    out.append(pending | nibble)
                }
                digits += 1
                continue
            }
            if inGroup {
                switch s {
                case " ", "\t", "\n", "\r", ":", "-", ",": try endGroup()
                default: throw ByteFormatError(input: text, reason: .notHexDigit(s, position: position))
                }
            }
            switch s {
            case " ", "\t", "\n", "\r":
                continue
            case ":", "-", ",":
                guard state == .afterGroup else {
                    throw ByteFormatError(input: text, reason: .unexpectedSeparator(s, position: position))
                }
                state = .afterSeparator
                separator = s
                separatorPosition = position
            default:
                throw ByteFormatError(input: text, reason: .notHexDigit(s, position: position))
            }
        }
        if inGroup { try endGroup() }
        switch state {
        case .start:
            throw ByteFormatError(input: text, reason: .empty)
        case .afterSeparator:
            throw ByteFormatError(input: text, reason: .unexpectedSeparator(separator, position: separatorPosition))
        case .afterGroup:
            return out
        }
    }

    /// Lowercase hex, no separators: `0a1b`. Empty for no bytes.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        hex(bytes, separator: nil)
    }

    /// Lowercase hex, bytes separated by one space: `0a 1b`. Empty for no bytes.
    public static func hexSpaced(_ bytes: some Collection<UInt8>) -> String {
        hex(bytes, separator: 0x20)
    }

    /// One line for a terminal: spaced hex, two spaces, then the bytes as ASCII between bars,
    /// every byte outside 0x20...0x7E shown as `.`: `0a 1b 41 42  |..AB|`.
    /// `(empty)` for no bytes.
    public static func hexDump(_ bytes: some Collection<UInt8>) -> String {
        if bytes.isEmpty { return "(empty)" }
        var ascii: [UInt8] = []
        ascii.reserveCapacity(bytes.underestimatedCount + 3)
        ascii.append(contentsOf: [0x20, 0x20, UInt8(ascii: "|")])
        for b in bytes {
            ascii.append((0x20...0x7E).contains(b) ? b : UInt8(ascii: "."))
        }
        ascii.append(UInt8(ascii: "|"))
        return hexSpaced(bytes) + String(decoding: ascii, as: UTF8.self)
    }

    /// The bytes as UTF-8 text; each ill-formed sequence becomes U+FFFD. Nothing is escaped:
    /// make it safe before showing it on a terminal.
    public static func utf8Text(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ bytes: some Collection<UInt8>, separator: UInt8?) -> String {
        // Callers in other modules reach this unspecialized: an array's
        // (every value's) is read as one buffer, not byte by byte through
        // the generic iterator (2,300 instructions for 4 bytes).
        if let text = bytes.withContiguousStorageIfAvailable({ hex(buffer: $0, separator: separator) }) { return text }
        return hex(buffer: bytes, separator: separator)
    }

    private static func hex(buffer bytes: some Collection<UInt8>, separator: UInt8?) -> String {
        let count = bytes.count
        guard count > 0 else { return "" }
        let width = separator == nil ? 2 : 3
        let capacity = count * width
        let digits: StaticString = "0123456789abcdef"
        return digits.withUTF8Buffer { d in
            String(unsafeUninitializedCapacity: capacity) { buffer in
                var i = 0
                for b in bytes {
                    // A collection whose iteration disagrees with its count must not overrun.
                    guard i + width <= buffer.count else { break }
                    if let separator, i > 0 {
                        buffer[i] = separator
                        i += 1
                    }
                    buffer[i] = d[Int(b >> 4)]
                    buffer[i + 1] = d[Int(b & 0x0F)]
                    i += 2
                }
                return i
            }
        }
    }
}

/// Why a hex value given on the command line was rejected. Its description is one line.
public struct ByteFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong; positions are 1-based and count Unicode scalars (characters, for ASCII).
    public enum Reason: Equatable, Sendable {
        /// No hex digits at all (empty or only whitespace).
        case empty
        /// A group had this odd number of digits, the first at `position`.
        case oddDigitCount(Int, position: Int)
        /// A character that is neither a hex digit nor allowed at this place as a separator.
        case notHexDigit(Unicode.Scalar, position: Int)
        /// `:`, `-` or `,` where no group precedes it or none follows it.
        case unexpectedSeparator(Unicode.Scalar, position: Int)
        /// `0x` with no digits after it, at `position`.
        case noDigitsAfterPrefix(position: Int)
    }

    /// The text as given.
    public let input: String
    /// What is wrong with it.
    public let reason: Reason

    /// An error for `input` with `reason`.
    public init(input: String, reason: Reason) {
        self.input = input
        self.reason = reason
    }

    static let expectation = "expected hex bytes such as 0102, 01:02 or \"0x01 0x02\""

    public var description: String {
        let quoted = BluetoothParseError.quote(input)
        switch reason {
        case .empty:
            return "empty value; \(Self.expectation)"
        case let .oddDigitCount(n, position):
            return "invalid hex value \(quoted): odd number of hex digits (\(n)) starting at position \(position); each byte takes two"
        case let .notHexDigit(s, position):
            return "invalid hex value \(quoted): \(BluetoothParseError.quote(String(s))) at position \(position) is not a hex digit"
        case let .unexpectedSeparator(s, position):
            return "invalid hex value \(quoted): unexpected \(BluetoothParseError.quote(String(s))) at position \(position); \(Self.expectation)"
        case let .noDigitsAfterPrefix(position):
            return "invalid hex value \(quoted): no hex digits after \"0x\" at position \(position)"
        }
    }
}
