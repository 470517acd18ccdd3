#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A D-Bus object path, validated by the rules of the D-Bus specification.
///
/// libdbus aborts the whole process when handed an invalid path, so every
/// path that reaches it is built through this type.
public struct ObjectPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// `nil` when `text` is not a valid object path ("/", or "/"-separated
    /// non-empty elements of `[A-Za-z0-9_]`, no trailing "/").
    public init?(_ text: String) {
        guard ObjectPath.isValid(text) else { return nil }
        rawValue = text
    }

    /// For paths known valid at compile time.
    public init(verified text: StaticString) {
        let string = text.description
        precondition(ObjectPath.isValid(string), "invalid object path literal")
        rawValue = string
    }

    /// A path libdbus has validated already (a loaded message's header):
    /// checked again in debug builds only.
    init(validatedByLibdbus text: String) {
        assert(ObjectPath.isValid(text), "libdbus handed out an invalid object path")
        rawValue = text
    }

    public static let root = ObjectPath(verified: "/")

    public var description: String { rawValue }

    public static func < (lhs: ObjectPath, rhs: ObjectPath) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Whether `self` is `other` or lies below it in the tree.
    public func isDescendant(of other: ObjectPath) -> Bool {
        if other.rawValue == "/" { return true }
        // On the contiguous bytes, without building `other + "/"`: the mirror
        // asks this of every change (a generic prefix test cost 880
        // instructions). Read in place (`withUTF8` wants copies of the two
        // strings it may make contiguous: their retains and releases, per
        // change); copied only if a string's bytes are not contiguous.
        if let inPlace = rawValue.utf8.withContiguousStorageIfAvailable({ a in
            other.rawValue.utf8.withContiguousStorageIfAvailable { b in Self.isPrefix(b, of: a) }
        }), let result = inPlace {
            return result
        }
        var mine = rawValue, theirs = other.rawValue
        return mine.withUTF8 { a in theirs.withUTF8 { b in Self.isPrefix(b, of: a) } }
    }

    /// Whether the path `prefix` is `path` or one of its ancestors, as bytes.
    private static func isPrefix(_ prefix: UnsafeBufferPointer<UInt8>, of path: UnsafeBufferPointer<UInt8>) -> Bool {
        guard path.count >= prefix.count, memcmp(path.baseAddress!, prefix.baseAddress!, prefix.count) == 0 else { return false }
        return path.count == prefix.count || path[prefix.count] == UInt8(ascii: "/")
    }

    /// The path one level up; `nil` for the root.
    public var parent: ObjectPath? {
        guard rawValue != "/", let slash = rawValue.lastIndex(of: "/") else { return nil }
        if slash == rawValue.startIndex { return .root }
        return ObjectPath(String(rawValue[..<slash]))
    }

    /// The last element ("dev_AA_BB" of "/org/bluez/hci0/dev_AA_BB"); "" for the root.
    public var lastComponent: String {
        guard let slash = rawValue.lastIndex(of: "/") else { return rawValue }
        return String(rawValue[rawValue.index(after: slash)...])
    }

    /// Appends one element; `nil` when `element` is not a valid path element.
    public func appending(_ element: String) -> ObjectPath? {
        ObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    static func isValid(_ text: String) -> Bool {
        var text = text
        // On the contiguous bytes: every path decoded is checked, and walking
        // the UTF8View (or a copy of it in an array) cost more than the decoding.
        return text.withUTF8 { bytes in
            guard let first = bytes.first, first == UInt8(ascii: "/") else { return false }
            if bytes.count == 1 { return true }
            guard bytes[bytes.count - 1] != UInt8(ascii: "/") else { return false }
            var previousWasSlash = true
            for byte in UnsafeBufferPointer(rebasing: bytes[1...]) {
                if byte == UInt8(ascii: "/") {
                    if previousWasSlash { return false }
                    previousWasSlash = true
                } else if isPathElementByte(byte) {
                    previousWasSlash = false
                } else {
                    return false
                }
            }
            return true
        }
    }

    /// `[A-Za-z0-9_]`, without a branch per range.
    @inline(__always)
    private static func isPathElementByte(_ b: UInt8) -> Bool {
        (b &- 0x30) < 10 || ((b | 0x20) &- 0x61) < 26 || b == 0x5F
    }
}

/// A D-Bus type signature such as `a{sv}`, validated on construction.
public struct DBusSignature: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// `nil` unless `text` is a valid signature (any number of complete types).
    public init?(_ text: String) {
        guard SignatureParser.validate(text) else { return nil }
        rawValue = text
    }

    /// For signatures known valid at compile time.
    public init(verified text: StaticString) {
        let string = text.description
        precondition(SignatureParser.validate(string), "invalid signature literal")
        rawValue = string
    }

    init(unchecked text: String) { rawValue = text }

    public var description: String { rawValue }

    /// Whether this is exactly one complete type (what an array element or a
    /// variant holds).
    public var isSingleCompleteType: Bool {
        SignatureParser.completeTypes(rawValue)?.count == 1
    }

    public static let byte = DBusSignature(unchecked: "y")
    public static let string = DBusSignature(unchecked: "s")
    public static let objectPath = DBusSignature(unchecked: "o")
    public static let variant = DBusSignature(unchecked: "v")
}

/// Splits and checks signatures by the D-Bus specification's grammar.
enum SignatureParser {
    static let maxLength = 255
    static let maxDepth = 32

    static func validate(_ text: String) -> Bool {
        completeTypes(text) != nil
    }

    /// The complete types of `text` in order, or `nil` when it is invalid.
    static func completeTypes(_ text: String) -> [String]? {
        let bytes = Array(text.utf8)
        guard bytes.count <= maxLength else { return nil }
        var index = 0
        var result: [String] = []
        while index < bytes.count {
            let start = index
            guard parseOne(bytes, &index, arrayDepth: 0, structDepth: 0) else { return nil }
            result.append(String(decoding: bytes[start..<index], as: UTF8.self))
        }
        return result
    }

    static func isBasic(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"),
             UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "t"),
             UInt8(ascii: "d"), UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"),
             UInt8(ascii: "h"):
            return true
        default:
            return false
        }
    }

    private static func parseOne(_ s: [UInt8], _ i: inout Int, arrayDepth: Int, structDepth: Int) -> Bool {
        guard i < s.count else { return false }
        let c = s[i]
        if isBasic(c) || c == UInt8(ascii: "v") {
            i += 1
            return true
        }
        switch c {
        case UInt8(ascii: "a"):
            guard arrayDepth < maxDepth else { return false }
            i += 1
            guard i < s.count else { return false }
            if s[i] == UInt8(ascii: "{") {
                // dict entry: a basic key and one complete value type
                i += 1
                guard i < s.count, isBasic(s[i]) else { return false }
                i += 1
                guard parseOne(s, &i, arrayDepth: arrayDepth + 1, structDepth: structDepth) else { return false }
                guard i < s.count, s[i] == UInt8(ascii: "}") else { return false }
                i += 1
                return true
            }
            return parseOne(s, &i, arrayDepth: arrayDepth + 1, structDepth: structDepth)
        case UInt8(ascii: "("):
            guard structDepth < maxDepth else { return false }
            i += 1
            var members = 0
            while i < s.count, s[i] != UInt8(ascii: ")") {
                guard parseOne(s, &i, arrayDepth: arrayDepth, structDepth: structDepth + 1) else { return false }
                members += 1
            }
            guard i < s.count, members > 0 else { return false }
            i += 1
            return true
        default:
            return false
        }
    }
}

/// A Unix file descriptor received or sent over D-Bus (signature `h`).
///
/// libdbus hands out a duplicate for every descriptor it unmarshals; this
/// object owns it and closes it when released, so none leak.
public final class DBusUnixFD: Hashable, Sendable, CustomStringConvertible {
    public let fileDescriptor: Int32
    private let closesOnRelease: Bool

    /// Takes ownership of `fd`: it is closed when this object goes away.
    public init(owning fd: Int32) {
        fileDescriptor = fd
        closesOnRelease = true
    }

    /// Refers to `fd` without owning it (for sending a descriptor the caller keeps).
    public init(borrowing fd: Int32) {
        fileDescriptor = fd
        closesOnRelease = false
    }

    deinit {
        if closesOnRelease, fileDescriptor >= 0 { _ = closeDescriptor(fileDescriptor) }
    }

    public static func == (lhs: DBusUnixFD, rhs: DBusUnixFD) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String { "fd \(fileDescriptor)" }
}

/// One key/value pair of a D-Bus dictionary (`a{..}`).
public struct DBusDictEntry: Hashable, Sendable {
    public var key: DBusValue
    public var value: DBusValue
    public init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}

/// A typed D-Bus value: every type of the D-Bus specification, with byte
/// arrays (`ay`, BlueZ's characteristic values) held compactly as `.bytes`.
///
/// Decoding always yields `.bytes` for `ay` and `.dictionary` for `a{..}`.
///
/// Only the containers are `indirect` (boxed): scalars, strings and byte
/// arrays are stored inline (24 bytes), which halves the memory of a
/// mirror of thousands of scanned devices and saves an allocation per value.
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(DBusSignature)
    case unixFD(DBusUnixFD)
    /// `ay`
    case bytes([UInt8])
    /// `a<element>` for any element type but `y` and dict entries.
    indirect case array(element: DBusSignature, [DBusValue])
    /// `a{<key><value>}`
    indirect case dictionary(key: DBusSignature, value: DBusSignature, [DBusDictEntry])
    /// `(...)`
    case structure([DBusValue])
    /// `v`
    indirect case variant(DBusValue)

    /// The value's D-Bus type signature.
    public var signature: DBusSignature {
        DBusSignature(unchecked: signatureText)
    }

    var signatureText: String {
        switch self {
        case .byte: return "y"
        case .boolean: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .unixFD: return "h"
        case .bytes: return "ay"
        case .array(let element, _): return "a" + element.rawValue
        case .dictionary(let key, let value, _): return "a{" + key.rawValue + value.rawValue + "}"
        case .structure(let members): return "(" + members.map(\.signatureText).joined() + ")"
        case .variant: return "v"
        }
    }

    /// Checks what libdbus would otherwise abort on or silently truncate:
    /// strings with NUL bytes, elements that do not match their array's type,
    /// empty structures, non-basic dictionary keys, bad nesting.
    public func validate() throws(DBusError) {
        switch self {
        case .string(let s):
            if s.utf8.contains(0) {
                throw .invalidArgument("string contains a NUL byte")
            }
        case .array(let element, let items):
            guard element.isSingleCompleteType, element.rawValue != "y",
                  !element.rawValue.hasPrefix("{") else {
                throw .invalidArgument("array element signature \"\(element.rawValue)\" is not a single complete type")
            }
            for item in items {
                guard item.signatureText == element.rawValue else {
                    throw .invalidArgument("array of \"\(element.rawValue)\" holds a \"\(item.signatureText)\"")
                }
                try item.validate()
            }
        case .dictionary(let key, let value, let entries):
            guard key.rawValue.utf8.count == 1, let k = key.rawValue.utf8.first, SignatureParser.isBasic(k) else {
                throw .invalidArgument("dictionary key signature \"\(key.rawValue)\" is not a basic type")
            }
            guard value.isSingleCompleteType else {
                throw .invalidArgument("dictionary value signature \"\(value.rawValue)\" is not a single complete type")
            }
            for entry in entries {
                guard entry.key.signatureText == key.rawValue, entry.value.signatureText == value.rawValue else {
                    throw .invalidArgument("dictionary a{\(key.rawValue)\(value.rawValue)} holds {\(entry.key.signatureText)\(entry.value.signatureText)}")
                }
                try entry.key.validate()
                try entry.value.validate()
            }
        case .structure(let members):
            guard !members.isEmpty else { throw .invalidArgument("empty structure") }
            for member in members { try member.validate() }
        case .variant(let inner):
            try inner.validate()
        default:
            break
        }
        guard DBusSignature(signatureText) != nil else {
            throw .invalidArgument("signature \"\(signatureText)\" is too long or too deeply nested")
        }
    }
}

// MARK: - Building values

extension DBusValue {
    /// `a{sv}`: BlueZ's option and property dictionaries. Values are wrapped
    /// in variants here; keys are sorted for a stable wire form.
    public static func stringVariantDictionary(_ entries: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            entries.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .variant($0.value)) }
        )
    }

    /// `as`
    public static func stringArray(_ strings: [String]) -> DBusValue {
        .array(element: .string, strings.map { .string($0) })
    }
}

// MARK: - Reading values

extension DBusValue {
    /// The value inside any number of variant layers.
    public var unwrapped: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }

    public var bool: Bool? {
        if case .boolean(let v) = unwrapped { return v }
        return nil
    }

    public var string: String? {
        if case .string(let v) = unwrapped { return v }
        return nil
    }

    public var objectPath: ObjectPath? {
        if case .objectPath(let v) = unwrapped { return v }
        return nil
    }

    /// Any integer type that fits in Int.
    public var integer: Int? {
        switch unwrapped {
        case .byte(let v): return Int(v)
        case .int16(let v): return Int(v)
        case .uint16(let v): return Int(v)
        case .int32(let v): return Int(v)
        case .uint32(let v): return Int(v)
        case .int64(let v): return Int(v)
        case .uint64(let v): return Int(exactly: v)
        default: return nil
        }
    }

    /// `ay` (or an array of `y` built by hand).
    public var bytes: [UInt8]? {
        switch unwrapped {
        case .bytes(let v): return v
        case .array(let element, let items) where element.rawValue == "y":
            var out: [UInt8] = []
            for item in items {
                guard case .byte(let b) = item else { return nil }
                out.append(b)
            }
            return out
        default: return nil
        }
    }

    /// The elements of any array but `ay`.
    public var array: [DBusValue]? {
        if case .array(_, let items) = unwrapped { return items }
        return nil
    }

    /// `as`
    public var stringArray: [String]? {
        guard let items = array else { return nil }
        var out: [String] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard case .string(let s) = item else { return nil }
            out.append(s)
        }
        return out
    }

    /// The entries of any dictionary.
    public var dictionaryEntries: [DBusDictEntry]? {
        if case .dictionary(_, _, let entries) = unwrapped { return entries }
        return nil
    }

    /// `a{s*}` as a Swift dictionary; a key repeated on the wire keeps its last value.
    public var stringKeyedDictionary: [String: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var out: [String: DBusValue] = [:]
        out.reserveCapacity(entries.count)
        for entry in entries {
            guard case .string(let k) = entry.key else { return nil }
            out[k] = entry.value
        }
        return out
    }

    /// `a{o*}` as a Swift dictionary.
    public var objectPathKeyedDictionary: [ObjectPath: DBusValue]? {
        guard let entries = dictionaryEntries else { return nil }
        var out: [ObjectPath: DBusValue] = [:]
        out.reserveCapacity(entries.count)
        for entry in entries {
            guard case .objectPath(let k) = entry.key else { return nil }
            out[k] = entry.value
        }
        return out
    }
}
