/// Why a text is not what it was parsed as: a Bluetooth address
/// (`BluetoothAddress.parse(_:)`), a UUID (`BluetoothUUID.init(_:kind:)`) or an LE PSM
/// (`L2CAPPSM.parse(_:)`). One type for all three, so that a caller handles a bad
/// argument once. Its `description` is one line that quotes the input (control
/// characters escaped, long input truncated).
public struct BluetoothParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What the text was parsed as.
    public enum Subject: String, Sendable, Equatable {
        /// A Bluetooth device address (`BluetoothAddress`).
        case address = "Bluetooth address"
        /// A service, characteristic or descriptor UUID, or its name (`BluetoothUUID`).
        case uuid = "UUID"
        /// An LE L2CAP PSM (`L2CAPPSM`).
        case psm = "PSM"
    }

    /// What the text was parsed as.
    public let subject: Subject
    /// The text as given.
    public let input: String
    /// Why it was rejected, e.g. `expected 4 or 8 hex digits after 0x`.
    public let reason: String

    /// An error for `input`, saying why it is not a `subject`.
    public init(_ subject: Subject, input: String, reason: String) {
        self.subject = subject
        self.input = input
        self.reason = reason
    }

    /// `invalid <subject> "<input>": <reason>`.
    public var description: String { "invalid \(subject.rawValue) \(Self.quote(input)): \(reason)" }

    /// At most this many Unicode scalars of the input are echoed.
    static let echoLimit = 64

    /// `input` in double quotes, safe for one line of a terminal: quote, backslash, control,
    /// format, separator, private-use and unassigned scalars escaped Swift-style, and so is a
    /// first or last scalar that would join the quotes into one character (a leading combining
    /// mark, a trailing prepended concatenation mark); cut after `echoLimit` scalars with an ellipsis.
    static func quote(_ input: String) -> String {
        var scalars: [Unicode.Scalar] = []
        var truncated = false
        for scalar in input.unicodeScalars {
            if scalars.count == echoLimit {
                truncated = true
                break
            }
            scalars.append(scalar)
        }
        var out = "\""
        for (i, scalar) in scalars.enumerated() {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\0": out += "\\0"
            default:
                let unsafe = switch scalar.properties.generalCategory {
                case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned: true
                default: false
                }
                if unsafe || (i == 0 && joins("\"", scalar)) || (i == scalars.count - 1 && joins(scalar, "\"")) {
                    out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + (truncated ? "…\"" : "\"")
    }

    /// `a` and `b` make one extended grapheme cluster.
    private static func joins(_ a: Unicode.Scalar, _ b: Unicode.Scalar) -> Bool {
        var s = ""
        s.unicodeScalars.append(a)
        s.unicodeScalars.append(b)
        return s.count == 1
    }
}
