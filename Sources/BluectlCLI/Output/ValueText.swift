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
    /// Asked once: stdout is the same for the whole process, and the question
    /// is a system call (it was one per value line).
    static let stdoutIsTerminal: Bool = isatty(1) == 1

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

    /// Writes bytes to stdout unchanged.
    static func writeRaw(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Output.writeAll(1, $0) }
    }

    /// "2026-11-22T04:40:01.123Z" (UTC, milliseconds truncated). The civil
    /// date comes from the day number by arithmetic (Howard Hinnant's
    /// `civil_from_days`) and the digits are written into the string in
    /// place: no `gmtime_r` (glibc takes its time-zone lock) and no
    /// interpolated pieces. `subscribe` stamps every value line: this was
    /// about 7,400 instructions of a text line's 24,000.
    static func timestamp(_ date: Date = Date()) -> String {
        let since1970 = date.timeIntervalSince1970
        let whole = since1970.rounded(.down)
        let millis = Int((since1970 - whole) * 1000)
        let seconds = Int(whole)
        var days = seconds / 86_400
        var second = seconds % 86_400
        if second < 0 {
            second += 86_400
            days -= 1
        }
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153  // months from March
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return String(unsafeUninitializedCapacity: 40) { out in
            var at = 0
            /// `value` in decimal, zero-padded to `width` digits.
            func digits(_ value: Int, _ width: Int) {
                if value < 0 {
                    out[at] = UInt8(ascii: "-")
                    at += 1
                }
                var magnitude = value.magnitude
                var count = 1
                var rest = magnitude / 10
                while rest > 0 {
                    count += 1
                    rest /= 10
                }
                let end = at + max(count, width)
                var index = end - 1
                repeat {
                    out[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                    index -= 1
                } while magnitude > 0
                while index >= at {
                    out[index] = UInt8(ascii: "0")
                    index -= 1
                }
                at = end
            }
            func mark(_ c: Unicode.Scalar) {
                out[at] = UInt8(ascii: c)
                at += 1
            }
            digits(year, 4); mark("-"); digits(month, 2); mark("-"); digits(day, 2); mark("T")
            digits(second / 3600, 2); mark(":"); digits(second / 60 % 60, 2); mark(":"); digits(second % 60, 2)
            mark("."); digits(millis, 3); mark("Z")
            return at
        }
    }
}

func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
}

/// A value read or notified. `read` prints the value alone; `subscribe` with its time
/// and characteristic: "2026-11-22T04:40:01.123Z  2a19 (Battery Level)  64 (100 %)".
struct ValueRecord: OutputRecord {
    /// When it arrived (`subscribe`).
    var time: String?
    let device: String
    let characteristic: BluetoothUUID
    /// Set when the value is a descriptor's (`read --descriptor`).
    var descriptor: BluetoothUUID?
    let bytes: [UInt8]
    /// The text's format (`--format`).
    let format: ValueFormat?
    /// Whether the text names the characteristic (a subscription may have several).
    var namesCharacteristic = false
    /// Whether the text names the device (a command given several).
    var namesDevice = false

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.field("time", time.map { .string($0) }, text: time.map { .plain("time", $0) })
        sink.field("device", .string(device), text: namesDevice ? .plain("device", device) : nil)  // else the command line named it
        sink.field("characteristic", .string(characteristic.uuidString),
                   text: namesCharacteristic ? .plain("characteristic", characteristic.label) : nil)
        sink.json("descriptor", descriptor.map { .string($0.uuidString) })  // the command line named it
        let uuid = descriptor ?? characteristic
        sink.field("value", .string(ByteFormats.hex(bytes)), text: .plain("value", ValueText.text(bytes, uuid: uuid, format: format)))
        // The text's value part shows the decoded form too.
        sink.json("decoded", descriptor == nil ? CharacteristicDecoding.decode(uuid: uuid, bytes).map { .object(JSONLine(fields: $0.fields)) } : nil)
    }
}
