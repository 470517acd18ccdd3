// How values are shown: --format, --json, and the text forms.

import ArgumentParser
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How values are shown.
enum ValueFormat: String, ExpressibleByArgument, Sendable, CaseIterable {
    /// hex + printable ASCII (the default on a terminal)
    case hex
    case utf8
    /// the bytes unchanged, for pipes
    case raw
    case json
    /// decoded for common SIG characteristics, else hex
    case decoded
}

/// The value format for `--format` and `--json` (the default depends on whether stdout is a terminal).
func chosenFormat(_ format: ValueFormat?, json: Bool) -> ValueFormat? {
    if json { return .json }
    return format
}

enum ValueText {
    static var stdoutIsTerminal: Bool { isatty(1) == 1 }

    /// A value as one line of text (nil format: hex dump on a terminal, plain hex otherwise).
    /// In the hex formats a value bluectl can decode is followed by its decoded form in
    /// parentheses: `64 (100 %)`, so that a byte is not read as a decimal number.
    static func text(_ bytes: [UInt8], uuid: BluetoothUUID, format: ValueFormat?) -> String {
        func withDecoded(_ hex: String) -> String {
            guard let decoded = CharacteristicDecoding.decode(uuid: uuid, bytes) else { return hex }
            return "\(hex) (\(TextSafety.terminalSafe(decoded.summary)))"
        }
        switch format {
        case nil: return withDecoded(stdoutIsTerminal ? ByteFormats.hexDump(bytes) : ByteFormats.hex(bytes))
        case .hex: return withDecoded(ByteFormats.hexDump(bytes))
        case .utf8: return TextSafety.terminalSafe(ByteFormats.utf8Text(bytes))
        case .decoded:
            if let decoded = CharacteristicDecoding.decode(uuid: uuid, bytes) {
                return TextSafety.terminalSafe(decoded.summary)
            }
            return ByteFormats.hexDump(bytes)
        case .raw, .json: return ByteFormats.hex(bytes)
        }
    }

    /// Adds `value` (hex) and, when known, `decoded` (an object of fields).
    static func addValue(_ bytes: [UInt8], uuid: BluetoothUUID, to line: inout JSONLine) {
        line.add("value", ByteFormats.hex(bytes))
        if let decoded = CharacteristicDecoding.decode(uuid: uuid, bytes) {
            var fields = JSONLine()
            for field in decoded.fields { fields.add(field.name, field.value) }
            line.add("decoded", object: fields)
        }
    }

    /// Writes bytes to stdout unchanged.
    static func writeRaw(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Output.writeAll(1, $0) }
    }

    /// "2026-11-22T04:40:01.123Z"
    static func timestamp(_ date: Date = Date()) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let millis = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ v: Int32, _ width: Int = 2) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T"
            + "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)).\(pad(Int32(millis), 3))Z"
    }

    static func label(_ uuid: BluetoothUUID) -> String {
        uuid.name.map { "\(uuid.shortString) (\($0))" } ?? uuid.uuidString
    }
}

func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
}
