// TextSafety: text from devices and users, made safe to show on a terminal.

/// Escaping for text bluectl did not write itself: device names, values decoded from
/// devices, and bad input echoed in error messages.
///
/// Escaped (so no escape sequence, line break or invisible text reaches the terminal):
/// - C0 controls, DEL and C1 controls, as `\x1b`, `\x7f`, `\x9b`;
/// - other scalars that do not print: format characters such as bidirectional overrides and
///   zero-width spaces (but not the joiners U+200C and U+200D that emoji sequences use), line and
///   paragraph separators, private-use and unassigned code points, as `\u{202e}`;
/// - the backslash, as `\\`, so that every escape is unambiguous.
///
/// Everything else, printable Unicode included, is kept as is.
public enum TextSafety {
    /// `s` with control and other non-printing scalars escaped, for one line of a terminal.
    public static func terminalSafe(_ s: String) -> String {
        // Fast path: printable ASCII without a backslash is returned as is.
        if s.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) {
            return s
        }
        var out = ""
        out.reserveCapacity(s.utf8.count + 16)
        for scalar in s.unicodeScalars {
            appendEscaped(scalar, to: &out)
        }
        return out
    }

    /// `s` escaped as `terminalSafe` does, between double quotes: a name a device or adapter
    /// gave, in the text output (shown as given: a `"` in it stays, unlike `escapedForMessage`).
    static func quoted(_ s: String) -> String { "\"" + terminalSafe(s) + "\"" }

    /// A whole message as one line: line breaks and tabs become spaces, other
    /// C0/C1 controls and DEL are escaped (text already escaped stays as it is).
    /// BlueZ's error messages are not ours: a multi-line one must not break
    /// the one-line-per-error contract.
    public static func oneLine(_ s: String) -> String {
        if s.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) && !s.unicodeScalars.contains(where: { (0x80...0x9F).contains($0.value) }) {
            return s
        }
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar.value {
            case 0x0A, 0x0D, 0x09: if !out.hasSuffix(" ") { out.append(" ") }
            case 0x00..<0x20, 0x7F, 0x80...0x9F: appendCodePoint(scalar, to: &out)
            default: out.unicodeScalars.append(scalar)
            }
        }
        while out.hasSuffix(" ") { out.removeLast() }
        return out
    }

    /// `s` for echoing in a one-line error message, typically between double quotes: escaped as
    /// `terminalSafe` does, `"` escaped as `\"` too, and so is a first scalar that would merge
    /// with a character before it (a combining mark) or a last one that would merge with one
    /// after it. Only the first `limit` Unicode scalars are kept; if there were more, `…` follows.
    public static func escapedForMessage(_ s: String, limit: Int = 64) -> String {
        let limit = max(0, limit)
        var kept: [Unicode.Scalar] = []
        var truncated = false
        for scalar in s.unicodeScalars {
            if kept.count == limit {
                truncated = true
                break
            }
            kept.append(scalar)
        }
        var out = ""
        out.reserveCapacity(kept.count + 8)
        for (i, scalar) in kept.enumerated() {
            if scalar == "\"" {
                out += "\\\""
            } else if (i == 0 && joins("\"", scalar)) || (i == kept.count - 1 && joins(scalar, "\"")) {
                appendCodePoint(scalar, to: &out)
            } else {
                appendEscaped(scalar, to: &out)
            }
        }
        if truncated { out += "…" }
        return out
    }

    /// Whether `scalar` is escaped rather than shown (the backslash aside).
    /// Whether `s` holds a control character (C0, DEL, C1): text a name given on
    /// the command line must not carry (DEVICE, --alias, --name).
    static func hasControlCharacters(_ s: String) -> Bool {
        s.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        if v < 0x7F { return v < 0x20 }
        if v <= 0x9F { return true } // DEL and C1
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
            return true
        case .format:
            return v != 0x200C && v != 0x200D
        default:
            return false
        }
    }

    static func appendEscaped(_ scalar: Unicode.Scalar, to out: inout String) {
        if scalar == "\\" {
            out += "\\\\"
        } else if needsEscape(scalar) {
            appendCodePoint(scalar, to: &out)
        } else {
            out.unicodeScalars.append(scalar)
        }
    }

    /// `\xhh` up to U+00FF, else `\u{h...}`, lowercase.
    static func appendCodePoint(_ scalar: Unicode.Scalar, to out: inout String) {
        let hex = String(scalar.value, radix: 16)
        if scalar.value <= 0xFF {
            out += hex.count == 1 ? "\\x0" + hex : "\\x" + hex
        } else {
            out += "\\u{" + hex + "}"
        }
    }

    /// `a` and `b` would make one extended grapheme cluster.
    private static func joins(_ a: Unicode.Scalar, _ b: Unicode.Scalar) -> Bool {
        var s = ""
        s.unicodeScalars.append(a)
        s.unicodeScalars.append(b)
        return s.count == 1
    }
}
