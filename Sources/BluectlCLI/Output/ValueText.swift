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
