// BluetoothUUID: 16-, 32- and 128-bit Bluetooth UUIDs, their canonical forms,
// and names from the Bluetooth assigned numbers (AssignedNumbers.swift, which
// Scripts/gen-assigned-numbers generates).

/// A Bluetooth UUID (16-, 32- or 128-bit), stored as 128 bits.
///
/// 16- and 32-bit UUIDs are shorthands on the Bluetooth base UUID
/// `00000000-0000-1000-8000-00805f9b34fb`: `180d` is `0000180d-0000-1000-8000-00805f9b34fb`.
public struct BluetoothUUID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Which table a name belongs to.
    public enum Kind: Sendable, CaseIterable {
        /// Services (GATT service UUIDs).
        case service
        /// Characteristics.
        case characteristic
        /// Descriptors.
        case descriptor
    }

    /// The 128 bits, most significant first as written in `uuidString`.
    public let uint128Value: UInt128

    /// The low 96 bits of the Bluetooth base UUID 00000000-0000-1000-8000-00805F9B34FB.
    static let baseLow96: UInt128 = 0x0000_1000_8000_00805f9b34fb
    static let low96Mask: UInt128 = (1 << 96) - 1

    /// Longest text `init(_:kind:)` looks at (UTF-8 bytes, before trimming); anything
    /// longer is rejected without being examined. Names in the tables are far shorter.
    static let maxInputLength = 256

    /// The UUID with these 128 bits.
    public init(uint128: UInt128) { uint128Value = uint128 }
    /// The 16-bit UUID `uint16` on the Bluetooth base UUID.
    public init(uint16: UInt16) { self.init(uint32: UInt32(uint16)) }
    /// The 32-bit UUID `uint32` on the Bluetooth base UUID.
    public init(uint32: UInt32) { uint128Value = (UInt128(uint32) << 96) | Self.baseLow96 }

    /// 2, 4 or 16 bytes, big-endian (the order of the canonical string); nil for any other count.
    public init?(bytes: some Collection<UInt8>) {
        let count = bytes.count
        guard count == 2 || count == 4 || count == 16 else { return nil }
        var v: UInt128 = 0
        for b in bytes { v = (v << 8) | UInt128(b) }
        if count == 16 {
            uint128Value = v
        } else {
            uint128Value = (v << 96) | Self.baseLow96
        }
    }

    /// Parses a UUID given on a command line or in a file.
    ///
    /// Hex forms (surrounding spaces, tabs and line breaks are ignored; case does not matter):
    /// `180d`, `0x180D` (16-bit), `0000180d`, `0x0000180D` (32-bit), both on the base UUID;
    /// `0000180d-0000-1000-8000-00805f9b34fb` and `0000180D00001000800000805F9B34FB` (128-bit).
    /// Text of 4, 8 or 32 hex digits is always read as hex, never as a name.
    ///
    /// Names, matched ignoring ASCII case, from the generated tables: the full identifier
    /// (`org.bluetooth.characteristic.battery_level`), the local name after
    /// `org.bluetooth.<kind>.` (`battery_level`), the human name (`Battery Level`), or another
    /// dotted tail of the identifier. `kind` limits the search to one table. The first of
    /// these tiers with any match decides:
    /// 1. an exact full identifier;
    /// 2. a Bluetooth SIG entry's human name, local name, or a longer tail of its identifier
    ///    (`characteristic.battery_level`);
    /// 3. a shorter tail of a SIG entry's local name: `status` for
    ///    `org.bluetooth.characteristic.iod.status`, `client_characteristic_configuration`
    ///    for `org.bluetooth.descriptor.gatt.client_characteristic_configuration`;
    /// 4. as 2., for vendor entries (Nordic, Apple, Google, ...): `uart`, `thingy.temperature`,
    ///    `microbit.service.temperature`; their local names are not cut shorter.
    /// So `temperature` is the SIG characteristic 2a6e, not one of the vendor ones that end in
    /// `.temperature`. If the deciding tier holds more than one UUID (`current_time` is both
    /// a service and a characteristic), the name is ambiguous and the error lists the candidates.
    public init(_ text: String, kind: Kind? = nil) throws(BluetoothParseError) {
        let byteCount = text.utf8.count
        guard byteCount <= Self.maxInputLength else {
            throw BluetoothParseError(.uuid, input: text, reason: "too long (\(byteCount) bytes); \(Self.expectation(kind))")
        }
        let all = Array(text.utf8)
        var lo = all.startIndex, hi = all.endIndex
        while lo < hi, Self.isTrimmable(all[lo]) { lo += 1 }
        while hi > lo, Self.isTrimmable(all[hi - 1]) { hi -= 1 }
        let bytes = all[lo..<hi]

        guard !bytes.isEmpty else {
            throw BluetoothParseError(.uuid, input: text, reason: "empty; \(Self.expectation(kind))")
        }
        if let v = Self.parseHex(bytes) {
            uint128Value = v
            return
        }
        let trimmed = String(decoding: bytes, as: UTF8.self)
        if trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw BluetoothParseError(.uuid, input: text, reason: "contains control characters; \(Self.expectation(kind))")
        }

        let key = bytes.map(Self.asciiLower)
        switch AssignedNumbers.resolve(key, kind: kind) {
        case .found(let v):
            uint128Value = v
            return
        case .ambiguous(let candidates):
            throw BluetoothParseError(.uuid, input: text,
                reason: "ambiguous name, matches \(Self.list(candidates)); use the full identifier or the UUID")
        case .notFound:
            break
        }
        throw BluetoothParseError(.uuid, input: text, reason: Self.notFoundReason(bytes, key: key, kind: kind))
    }

    // MARK: Forms

    /// Canonical lowercase 8-4-4-4-12, as BlueZ uses on D-Bus.
    public var uuidString: String {
        // Written in place, a byte (two digits) at a time from the two 64-bit
        // halves: `subscribe --json` names the characteristic in every value
        // line, and a 128-bit shift per digit with an array in between cost
        // 1,800 instructions.
        let halves = (UInt64(truncatingIfNeeded: uint128Value >> 64), UInt64(truncatingIfNeeded: uint128Value))
        let digits: StaticString = "0123456789abcdef"
        return digits.withUTF8Buffer { d in
            String(unsafeUninitializedCapacity: 36) { out in
                var at = 0
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        out[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    let byte = UInt8(truncatingIfNeeded: (i < 8 ? halves.0 : halves.1) >> UInt64(56 - 8 * (i & 7)))
                    out[at] = d[Int(byte >> 4)]
                    out[at + 1] = d[Int(byte & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }

    public var description: String { uuidString }

    /// The 32-bit value when this is on the Bluetooth base UUID.
    public var uint32Value: UInt32? {
        guard uint128Value & Self.low96Mask == Self.baseLow96 else { return nil }
        return UInt32(truncatingIfNeeded: uint128Value >> 96)
    }

    /// The 16-bit value when this is on the Bluetooth base UUID and fits 16 bits.
    public var uint16Value: UInt16? {
        guard let v = uint32Value, v <= 0xFFFF else { return nil }
        return UInt16(v)
    }

    /// `180d` for a 16-bit UUID on the base UUID, 8 hex digits (`0001fe2c`) for a larger
    /// 32-bit one, else `uuidString`.
    public var shortString: String {
        guard let v = uint32Value else { return uuidString }
        let digits = v <= 0xFFFF ? 4 : 8
        var out = [UInt8]()
        for i in stride(from: digits - 1, through: 0, by: -1) {
            out.append(Self.hexDigit(UInt128(v >> UInt32(4 * i))))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// How people see it: `180d (Heart Rate)` when the SIG assigned it a name, else
    /// `shortString`. Every UUID bluectl shows, in its output and in its error messages.
    public var label: String {
        guard let name else { return shortString }
        return shortString + " (" + name + ")"
    }

    /// The 16 bytes, big-endian (the order of `uuidString`).
    public var bytes: [UInt8] {
        (0..<16).map { UInt8(truncatingIfNeeded: uint128Value >> UInt128(120 - 8 * $0)) }
    }

    public static func < (a: BluetoothUUID, b: BluetoothUUID) -> Bool {
        a.uint128Value < b.uint128Value
    }

    // MARK: Names

    /// The SIG or vendor name ("Battery Level"), looking in the service, characteristic
    /// and descriptor tables in that order.
    public var name: String? { AssignedNumbers.rowIndex(for: uint128Value).map { AssignedNumbers.field(.name, ofRow: $0) } }

    /// The name in one table only.
    public func name(as kind: Kind) -> String? {
        AssignedNumbers.rowIndex(for: uint128Value, kind: kind).map { AssignedNumbers.field(.name, ofRow: $0) }
    }

    /// A short name such as `battery_level`, for display and for the CLI: the shortest tail
    /// of the identifier that `init(_:kind:)` (given this entry's kind) reads back as this UUID.
    public var shortName: String? {
        AssignedNumbers.rowIndex(for: uint128Value).map { AssignedNumbers.field(.shortName, ofRow: $0) }
    }

    /// `shortName` in one table only.
    public func shortName(as kind: Kind) -> String? {
        AssignedNumbers.rowIndex(for: uint128Value, kind: kind).map { AssignedNumbers.field(.shortName, ofRow: $0) }
    }

    /// The full identifier, such as `org.bluetooth.characteristic.battery_level`.
    public var identifier: String? {
        AssignedNumbers.rowIndex(for: uint128Value).map { AssignedNumbers.field(.identifier, ofRow: $0) }
    }

    /// The kinds this UUID has a table entry for (usually none or one).
    public var kinds: [Kind] { Kind.allCases.filter { AssignedNumbers.rowIndex(for: uint128Value, kind: $0) != nil } }

    // MARK: Parsing helpers

    private static func isTrimmable(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    private static func asciiLower(_ b: UInt8) -> UInt8 {
        (0x41...0x5A).contains(b) ? b | 0x20 : b
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b &- 0x30
        case 0x41...0x46: return b &- 0x37
        case 0x61...0x66: return b &- 0x57
        default: return nil
        }
    }

    private static func hexDigit(_ v: UInt128) -> UInt8 {
        let d = UInt8(truncatingIfNeeded: v & 0xF)
        return d < 10 ? 0x30 + d : 0x57 + d
    }

    private static func isHexPrefixed(_ s: ArraySlice<UInt8>) -> Bool {
        s.count >= 2 && s[s.startIndex] == UInt8(ascii: "0") && s[s.startIndex + 1] | 0x20 == UInt8(ascii: "x")
    }

    /// Hex digits to a value; nil if any is not a hex digit.
    private static func digits(_ s: some Sequence<UInt8>) -> UInt128? {
        var v: UInt128 = 0
        for b in s {
            guard let d = hexValue(b) else { return nil }
            v = (v << 4) | UInt128(d)
        }
        return v
    }

    static func parseHex(_ s: ArraySlice<UInt8>) -> UInt128? {
        if isHexPrefixed(s) {
            let rest = s.dropFirst(2)
            guard rest.count == 4 || rest.count == 8, let v = digits(rest) else { return nil }
            return (v << 96) | baseLow96
        }
        switch s.count {
        case 4, 8:
            guard let v = digits(s) else { return nil }
            return (v << 96) | baseLow96
        case 32:
            return digits(s)
        case 36:
            let dash = UInt8(ascii: "-")
            let start = s.startIndex
            for offset in [8, 13, 18, 23] where s[start + offset] != dash { return nil }
            var v: UInt128 = 0
            var n = 0
            for b in s where b != dash {
                guard let d = hexValue(b) else { return nil }
                v = (v << 4) | UInt128(d)
                n += 1
            }
            return n == 32 ? v : nil
        default:
            return nil
        }
    }

    static func expectation(_ kind: Kind?) -> String {
        let what = switch kind {
        case nil: "name such as battery_level"
        case .service: "service name such as heart_rate"
        case .characteristic: "characteristic name such as battery_level"
        case .descriptor: "descriptor name such as client_characteristic_configuration"
        }
        return "expected 4, 8 or 32 hex digits, or a Bluetooth SIG \(what)"
    }

    private static func list(_ candidates: [AssignedUUID]) -> String {
        let shown = 6
        var parts = candidates.prefix(shown).map {
            "\($0.kind) \($0.identifier) (\(BluetoothUUID(uint128: $0.uuid).shortString))"
        }
        if candidates.count > shown { parts.append("\(candidates.count - shown) more") }
        guard let last = parts.popLast() else { return "nothing" }
        return parts.isEmpty ? last : parts.joined(separator: ", ") + " and " + last
    }

    private static func notFoundReason(_ bytes: ArraySlice<UInt8>, key: [UInt8], kind: Kind?) -> String {
        if isHexPrefixed(bytes) {
            return "expected 4 or 8 hex digits after 0x"
        }
        let dash = UInt8(ascii: "-")
        let hexOrDash = bytes.allSatisfy { hexValue($0) != nil || $0 == dash }
        // Dashes and no name-like separators: an attempt at 8-4-4-4-12 (names with dashes,
        // such as com.philips-hue.service.light_control, also have '.', '_' or spaces).
        let dashes = bytes.count(where: { $0 == dash })
        let nameLike = bytes.contains { $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == 0x20 }
        if (hexOrDash && dashes > 0) || (dashes >= 2 && !nameLike) {
            return "expected 8-4-4-4-12 hex digits, as in 0000180d-0000-1000-8000-00805f9b34fb"
        }
        if hexOrDash {
            return "got \(bytes.count) hex digit\(bytes.count == 1 ? "" : "s"); \(expectation(kind))"
        }
        if let kind {
            switch AssignedNumbers.resolve(key, kind: nil) {
            case .found(let v):
                let others = AssignedNumbers.matches(key, kind: nil).filter { $0.uuid == v }
                return "not a \(kind) name; it names \(list(others))"
            case .ambiguous(let candidates):
                return "not a \(kind) name; it names \(list(candidates))"
            case .notFound:
                break
            }
        }
        let suggestions = AssignedNumbers.suggestions(for: key, kind: kind)
        if !suggestions.isEmpty {
            return "unknown name; did you mean \(suggestions.joined(separator: ", "))?"
        }
        return expectation(kind)
    }
}

extension BluetoothUUID.Kind {
    var rank: Int {
        switch self {
        case .service: 0
        case .characteristic: 1
        case .descriptor: 2
        }
    }
}

/// Bluetooth SIG company identifiers (manufacturer data keys).
public enum CompanyIdentifiers {
    /// The company's name, e.g. "Apple, Inc." for 0x004C; nil when unassigned.
    public static func name(for id: UInt16) -> String? {
        AssignedNumbers.companyName(for: id)
    }

    /// The name to show beside the identifier: `name(for:)` without its legal-form suffix
    /// ("Apple, Inc." → "Apple", "Nordic Semiconductor ASA" → "Nordic Semiconductor"),
    /// cut at a word to at most `maxShortLength` characters plus "…"; nil when unassigned.
    public static func shortName(for id: UInt16) -> String? {
        if id == 0xFFFF { return "SIG reserved default ID" }  // the SIG's long "Default Vendor ID for …" sentence
        return name(for: id).map(shorten)
    }

    /// The longest `shortName` before its "…".
    public static let maxShortLength = 30

    /// Legal forms and their parts, lowercased without dots, as the last word of a name.
    static let legalSuffixes: Set<String> = [
        "inc", "incorporated", "corp", "corporation", "co", "company", "ltd", "ltda", "limited", "llc", "lllp", "llp",
        "plc", "pte", "pty", "gmbh", "mbh", "ag", "kg", "ug", "se", "ab", "asa", "as", "a/s", "aps", "oy", "oyj", "sa",
        "sas", "sarl", "uab", "spa", "srl", "sro", "bv", "nv", "kk", "kft", "doo", "sl", "slu", "sau", "lda", "ev", "coltd",
        "sp", "z", "oo", "oü", "&", "-", "(publ)",
        "(haftungsbeschraenkt)", "(haftungsbeschränkt)",
    ]

    static func shorten(_ full: String) -> String {
        // Words are slices of `full`: what is kept is `full` up to the last kept word.
        var words = full.split(whereSeparator: { $0 == " " || $0 == "," })
        while words.count > 1, let last = words.last,
              legalSuffixes.contains(String(last.lowercased().filter { $0 != "." })) {
            words.removeLast()
        }
        guard let end = words.last?.endIndex else { return full }
        let name = String(full[..<end])
        guard name.count > maxShortLength else { return name }
        var cut = ""
        for word in name.split(separator: " ") {
            let next = cut.isEmpty ? String(word) : cut + " " + word
            if next.count > maxShortLength { break }
            cut = next
        }
        // A word too long to cut at ("Microelectronics(ShenZhen)Co."): cut inside it.
        if cut.count < maxShortLength / 2 { cut = String(name.prefix(maxShortLength)) }
        while let last = cut.last, [",", "-", "(", "&", " "].contains(last) { cut.removeLast() }
        return cut + "…"
    }
}
