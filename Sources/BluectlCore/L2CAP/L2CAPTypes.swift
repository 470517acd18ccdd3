internal import CBluectlShim

/// An LE protocol/service multiplexer (SPSM): the number an L2CAP
/// connection-oriented channel is opened to, like a TCP port
/// (CoreBluetooth's `CBL2CAPPSM`). LE PSMs run from 0x0001 to 0x00FF:
/// 0x0001-0x007F are assigned by the Bluetooth SIG (binding one needs
/// CAP_NET_BIND_SERVICE), 0x0080-0x00FF are dynamic, which the kernel hands
/// out to a listener that asks for none (`PeripheralManager.publishL2CAPChannel`).
public struct L2CAPPSM: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The PSM's number.
    public let rawValue: UInt16

    /// The lowest LE PSM.
    public static let minimum: UInt16 = 0x0001
    /// The first dynamic LE PSM (Core Specification, Vol 3, Part A, 4.22).
    public static let firstDynamic: UInt16 = 0x0080
    /// The highest LE PSM.
    public static let maximum: UInt16 = 0x00FF

    /// nil when `rawValue` is not an LE PSM (0, or above 0x00FF: BR/EDR PSMs are not LE ones).
    public init?(rawValue: UInt16) {
        guard (Self.minimum...Self.maximum).contains(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Whether it is in the dynamic range the kernel assigns from (0x0080-0x00FF).
    public var isDynamic: Bool { rawValue >= Self.firstDynamic }

    /// "0x0080": the form the Bluetooth specifications and btmon write.
    public var description: String { "0x" + hex4(rawValue) }

    /// Orders by number.
    public static func < (a: L2CAPPSM, b: L2CAPPSM) -> Bool { a.rawValue < b.rawValue }

    /// Parses a PSM written in decimal ("128") or hexadecimal with a 0x
    /// prefix ("0x80", "0x0080"). Nothing else is taken: no sign, no
    /// spaces, no other base, at most 5 decimal or 4 hexadecimal digits
    /// (so no text can overflow), and the value must be an LE PSM.
    public static func parse(_ text: String) throws(BluetoothParseError) -> L2CAPPSM {
        let utf8 = Array(text.utf8)
        let value: UInt32
        if utf8.count > 2, utf8[0] == UInt8(ascii: "0"), utf8[1] | 0x20 == UInt8(ascii: "x") {
            let digits = utf8[2...]
            guard digits.count <= 4 else { throw BluetoothParseError(.psm, input: text, reason: "too many hex digits (an LE PSM is at most 0x00FF)") }
            var v: UInt32 = 0
            for c in digits {
                guard let d = BluetoothAddress.hexValue(c) else { throw BluetoothParseError(.psm, input: text, reason: "not a hex number after 0x") }
                v = v << 4 | UInt32(d)
            }
            value = v
        } else {
            guard !utf8.isEmpty else { throw BluetoothParseError(.psm, input: text, reason: "empty") }
            guard utf8.count <= 5 else { throw BluetoothParseError(.psm, input: text, reason: "too many digits (an LE PSM is at most 255)") }
            var v: UInt32 = 0
            for c in utf8 {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) else {
                    throw BluetoothParseError(.psm, input: text, reason: "expected a decimal number or 0x followed by hex digits")
                }
                v = v * 10 + UInt32(c - UInt8(ascii: "0"))
            }
            value = v
        }
        guard value != 0 else { throw BluetoothParseError(.psm, input: text, reason: "0 is not a PSM") }
        guard value <= UInt32(maximum), let psm = L2CAPPSM(rawValue: UInt16(value)) else {
            throw BluetoothParseError(.psm, input: text, reason: "LE PSMs go up to 0x00FF (255); larger ones are BR/EDR PSMs, which bluectl does not open")
        }
        return psm
    }

    private func hex4(_ v: UInt16) -> String {
        let digits = String(v, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}

/// The security an L2CAP channel asks of its link (the kernel's BT_SECURITY
/// levels). Opening a channel at `encrypted` or `authenticated` encrypts the
/// link first, pairing when there is no key; a listener at those levels
/// makes a central's kernel raise the link's security before its channel is
/// accepted (the LE credit based connection is refused with "insufficient
/// encryption/authentication", and the central's kernel pairs and asks again).
public enum L2CAPSecurity: String, Sendable, CaseIterable, Comparable {
    /// No encryption needed (BT_SECURITY_LOW).
    case none
    /// An encrypted link, with any key (BT_SECURITY_MEDIUM): Just Works pairing is enough.
    case encrypted
    /// An encrypted link whose key was made with MITM protection
    /// (BT_SECURITY_HIGH): pairing by passkey or numeric comparison, not Just Works.
    case authenticated

    /// Orders by strength.
    public static func < (a: L2CAPSecurity, b: L2CAPSecurity) -> Bool { a.level < b.level }

    /// The kernel's BT_SECURITY level.
    var level: UInt8 {
        switch self {
        case .none: return UInt8(BLUECTL_BT_SECURITY_LOW)
        case .encrypted: return UInt8(BLUECTL_BT_SECURITY_MEDIUM)
        case .authenticated: return UInt8(BLUECTL_BT_SECURITY_HIGH)
        }
    }

    /// The kernel's level read back (FIPS, Secure Connections with MITM, counts as authenticated).
    init(level: UInt8) {
        switch Int(level) {
        case ...Int(BLUECTL_BT_SECURITY_LOW): self = .none
        case Int(BLUECTL_BT_SECURITY_MEDIUM): self = .encrypted
        default: self = .authenticated
        }
    }
}
