// D-Bus values from fuzzer bytes, type first: a type is drawn, then a value of
// that type, so every input is a well-typed DBusValue (arrays homogeneous,
// dictionary keys basic). `ValueSeedWriter` is the inverse, for seeds.
@testable import BluectlDBus

/// The basic type codes generated (no `h`: a descriptor number means nothing
/// without the descriptor). A type tag below `basicCodes.count` is basic.
let basicCodes: [UInt8] = Array("ybnqiuxtdsog".utf8)

private enum Tag {
    static let variant: UInt8 = 12
    static let bytes: UInt8 = 13
    static let array: UInt8 = 14
    static let dictionary: UInt8 = 15
    static let structure: UInt8 = 16
    static let count: UInt8 = 17
}

/// A complete D-Bus type.
public indirect enum FuzzType: Equatable, Sendable {
    case basic(UInt8)
    case bytes
    case array(FuzzType)
    case dictionary(key: UInt8, value: FuzzType)
    case structure([FuzzType])
    case variant

    public var signature: String {
        switch self {
        case .basic(let c): String(UnicodeScalar(c))
        case .bytes: "ay"
        case .array(let e): "a" + e.signature
        case .dictionary(let k, let v): "a{" + String(UnicodeScalar(k)) + v.signature + "}"
        case .structure(let m): "(" + m.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }
}

public struct ValueGenerator {
    public var input: FuzzInput
    /// Containers nest at most this deep (sizes stay linear in the input).
    public let maxDepth: Int

    public init(_ input: FuzzInput, maxDepth: Int = 6) {
        self.input = input
        self.maxDepth = maxDepth
    }

    public mutating func type(depth: Int = 0) -> FuzzType {
        let tag = input.byte() % (depth >= maxDepth ? UInt8(basicCodes.count) : Tag.count)
        switch tag {
        case Tag.variant: return .variant
        case Tag.bytes: return .bytes
        case Tag.array:
            let element = type(depth: depth + 1)
            // `ay` is always .bytes, never an array of .byte
            return element == .basic(UInt8(ascii: "y")) ? .bytes : .array(element)
        case Tag.dictionary:
            let key = basicCodes[Int(input.byte()) % basicCodes.count]
            return .dictionary(key: key, value: type(depth: depth + 1))
        case Tag.structure:
            let count = 1 + Int(input.byte() % 4)
            return .structure((0..<count).map { _ in type(depth: depth + 1) })
        default:
            return .basic(basicCodes[Int(tag)])
        }
    }

    /// A value of type `type`; strings may be any UTF-8 (NUL included), so
    /// `validate()` decides what may be sent.
    public mutating func value(of type: FuzzType, depth: Int = 0) -> DBusValue {
        switch type {
        case .basic(let code): return basic(code)
        case .bytes: return .bytes(input.lengthPrefixed())
        case .variant: return .variant(value(of: self.type(depth: depth + 1), depth: depth + 1))
        case .array(let element):
            let count = Int(input.byte() % 8)
            return .array(element: DBusSignature(unchecked: element.signature),
                          (0..<count).map { _ in value(of: element, depth: depth + 1) })
        case .dictionary(let key, let valueType):
            let count = Int(input.byte() % 8)
            return .dictionary(
                key: DBusSignature(unchecked: String(UnicodeScalar(key))),
                value: DBusSignature(unchecked: valueType.signature),
                (0..<count).map { _ in
                    DBusDictEntry(basic(key), value(of: valueType, depth: depth + 1))
                })
        case .structure(let members):
            return .structure(members.map { value(of: $0, depth: depth + 1) })
        }
    }

    /// A type, then a value of it.
    public mutating func anyValue() -> DBusValue {
        value(of: type())
    }

    public mutating func string() -> String {
        String(decoding: input.lengthPrefixed(), as: UTF8.self)
    }

    private mutating func basic(_ code: UInt8) -> DBusValue {
        switch code {
        case UInt8(ascii: "y"): return .byte(input.byte())
        case UInt8(ascii: "b"): return .boolean(input.bool())
        case UInt8(ascii: "n"): return .int16(Int16(truncatingIfNeeded: input.integer(2)))
        case UInt8(ascii: "q"): return .uint16(UInt16(truncatingIfNeeded: input.integer(2)))
        case UInt8(ascii: "i"): return .int32(Int32(truncatingIfNeeded: input.integer(4)))
        case UInt8(ascii: "u"): return .uint32(UInt32(truncatingIfNeeded: input.integer(4)))
        case UInt8(ascii: "x"): return .int64(Int64(bitPattern: input.integer(8)))
        case UInt8(ascii: "t"): return .uint64(input.integer(8))
        case UInt8(ascii: "d"): return .double(Double(bitPattern: input.integer(8)))
        case UInt8(ascii: "s"): return .string(string())
        case UInt8(ascii: "o"): return .objectPath(ObjectPath(string()) ?? .root)
        default: return .signature(DBusSignature(string()) ?? .string)
        }
    }
}

/// Writes the bytes `ValueGenerator` reads back as `value` (for seeds).
public struct ValueSeedWriter {
    public var output = FuzzOutput()
    public init() {}

    public mutating func type(_ signature: String) {
        var bytes = Array(signature.utf8)[...]
        type(&bytes)
        precondition(bytes.isEmpty, "not one complete type: \(signature)")
    }

    private mutating func type(_ s: inout ArraySlice<UInt8>) {
        let c = s.removeFirst()
        if let i = basicCodes.firstIndex(of: c) { return output.byte(UInt8(i)) }
        switch c {
        case UInt8(ascii: "v"): output.byte(Tag.variant)
        case UInt8(ascii: "a"):
            if s.first == UInt8(ascii: "y") {
                s.removeFirst()
                output.byte(Tag.bytes)
            } else if s.first == UInt8(ascii: "{") {
                s.removeFirst()
                output.byte(Tag.dictionary)
                output.byte(UInt8(basicCodes.firstIndex(of: s.removeFirst())!))
                type(&s)
                s.removeFirst() // }
            } else {
                output.byte(Tag.array)
                type(&s)
            }
        case UInt8(ascii: "("):
            output.byte(Tag.structure)
            let countAt = output.bytes.count
            output.byte(0)
            var members = 0
            while s.first != UInt8(ascii: ")") {
                type(&s)
                members += 1
            }
            s.removeFirst()
            precondition((1...4).contains(members), "seed structs hold 1 to 4 members")
            output.set(countAt, UInt8(members - 1))
        default:
            preconditionFailure("unsupported type code \(c)")
        }
    }

    /// The value's bytes (its type already written, or implied).
    public mutating func value(_ value: DBusValue) {
        switch value {
        case .byte(let v): output.byte(v)
        case .boolean(let v): output.byte(v ? 1 : 0)
        case .int16(let v): output.integer(UInt64(UInt16(bitPattern: v)), 2)
        case .uint16(let v): output.integer(UInt64(v), 2)
        case .int32(let v): output.integer(UInt64(UInt32(bitPattern: v)), 4)
        case .uint32(let v): output.integer(UInt64(v), 4)
        case .int64(let v): output.integer(UInt64(bitPattern: v), 8)
        case .uint64(let v): output.integer(v, 8)
        case .double(let v): output.integer(v.bitPattern, 8)
        case .string(let s): output.lengthPrefixed(Array(s.utf8))
        case .objectPath(let p): output.lengthPrefixed(Array(p.rawValue.utf8))
        case .signature(let g): output.lengthPrefixed(Array(g.rawValue.utf8))
        case .bytes(let b): output.lengthPrefixed(b)
        case .unixFD: preconditionFailure("no descriptors in seeds")
        case .array(_, let items):
            precondition(items.count < 8)
            output.byte(UInt8(items.count))
            items.forEach { self.value($0) }
        case .dictionary(_, _, let entries):
            precondition(entries.count < 8)
            output.byte(UInt8(entries.count))
            for entry in entries {
                self.value(entry.key)
                self.value(entry.value)
            }
        case .structure(let members): members.forEach { self.value($0) }
        case .variant(let inner):
            type(inner.signatureText)
            self.value(inner)
        }
    }

    /// A type, then a value of it (what `ValueGenerator.anyValue` reads).
    public mutating func anyValue(_ value: DBusValue) {
        type(value.signatureText)
        self.value(value)
    }
}
