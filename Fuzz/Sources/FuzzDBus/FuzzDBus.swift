// Fuzz target: the D-Bus value decoder and encoder, through libdbus itself.
//
// First byte even — wire mode: the rest is a message in D-Bus wire format,
// parsed by libdbus's validating dbus_message_demarshal and converted by
// MessageCodec.decode (what bluectl does with every message it receives; a
// PropertiesChanged read in its typed form must agree with the generic reading).
// Whatever is accepted must encode again (MessageCodec.encode + libdbus's
// marshaller) and come back the same: decode ∘ encode is the identity.
//
// First byte odd — value mode: the rest draws a typed DBusValue
// (ValueGenerator). A value `validate()` accepts must marshal without libdbus
// aborting and come back equal; one it rejects must fail to encode (throw).
import FuzzSupport
@testable import BluectlDBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() & 1 == 0 {
        wire(input.rest())
    } else {
        values(ValueGenerator(input))
    }
    return 0
}

func wire(_ bytes: [UInt8]) {
    guard let raw = try? MessageCodec.demarshalRaw(bytes) else { return }
    // A PropertiesChanged is read straight into its typed form: it must say
    // what the generic reading of the same body says, and refuse what it refuses.
    let (decoded, generic) = withExtendedLifetime(raw) {
        (try? MessageCodec.decode(raw.pointer), try? MessageCodec.body(raw.pointer))
    }
    guard let first = decoded else {
        check(generic == nil, "the typed reading refused a body the generic reading took: \(generic ?? [])")
        return
    }
    check(generic.map { sameValues($0, first.arguments) } ?? false,
          "the typed and the generic readings differ: \(first.arguments) against \(generic ?? [])")
    // Descriptors cannot be re-sent meaningfully (each decode dup()s one).
    guard !first.arguments.contains(where: \.containsUnixFD) else { return }
    let again: [UInt8]
    do {
        again = try MessageCodec.marshal(first, serial: first.serial)
    } catch {
        check(false, "libdbus accepted a message bluectl cannot encode again: \(error); \(first)")
        return
    }
    let second: DBusMessage
    do {
        second = try MessageCodec.demarshal(again)
    } catch {
        check(false, "bluectl encoded a message libdbus rejects: \(error); \(first)")
        return
    }
    check(second.kind == first.kind && second.path == first.path && second.interface == first.interface
              && second.member == first.member && second.errorName == first.errorName
              && second.replySerial == first.replySerial && second.destination == first.destination
              && second.serial == first.serial,
          "header changed in a round trip: \(first) became \(second)")
    check(sameValues(second.arguments, first.arguments), "body changed in a round trip: \(first.arguments) became \(second.arguments)")
    // …and the encoding is stable.
    check((try? MessageCodec.marshal(second, serial: second.serial)) == again, "re-encoding is not a fixed point")
}

func values(_ generator: ValueGenerator) {
    var generator = generator
    let count = 1 + Int(generator.input.byte() % 3)
    let arguments = (0..<count).map { _ in generator.anyValue() }
    let message = DBusMessage.methodCall(
        destination: "org.bluez", path: ObjectPath(verified: "/org/bluez/hci0"),
        interface: "org.bluez.Fuzz1", member: "Values", arguments: arguments)
    let valid = arguments.allSatisfy { (try? $0.validate()) != nil } && message.signature.utf8.count <= 255
    let wire: [UInt8]
    do {
        wire = try MessageCodec.marshal(message)
    } catch {
        check(!valid, "a value that validates did not encode: \(error); \(arguments)")
        return
    }
    check(valid, "a value validate() rejects was encoded: \(arguments)")
    let back: DBusMessage
    do {
        back = try MessageCodec.demarshal(wire)
    } catch {
        check(false, "libdbus rejected what bluectl encoded (\(error)): signature \(message.signature), \(arguments)")
        return
    }
    check(sameValues(back.arguments, arguments), "\(arguments) came back as \(back.arguments)")
    check(back.signature == message.signature, "signature \(message.signature) came back as \(back.signature)")
}

/// Equal, with NaN equal to a NaN of the same bit pattern.
func sameValues(_ a: [DBusValue], _ b: [DBusValue]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy(sameValue)
}

func sameValue(_ a: DBusValue, _ b: DBusValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.array(let e1, let i1), .array(let e2, let i2)): return e1 == e2 && sameValues(i1, i2)
    case (.dictionary(let k1, let v1, let d1), .dictionary(let k2, let v2, let d2)):
        return k1 == k2 && v1 == v2 && d1.count == d2.count
            && zip(d1, d2).allSatisfy { sameValue($0.key, $1.key) && sameValue($0.value, $1.value) }
    case (.structure(let m1), .structure(let m2)): return sameValues(m1, m2)
    case (.variant(let x), .variant(let y)): return sameValue(x, y)
    default: return a == b
    }
}

extension DBusValue {
    var containsUnixFD: Bool {
        switch self {
        case .unixFD: true
        case .array(_, let items), .structure(let items): items.contains(where: \.containsUnixFD)
        case .dictionary(_, _, let entries): entries.contains { $0.key.containsUnixFD || $0.value.containsUnixFD }
        case .variant(let inner): inner.containsUnixFD
        default: false
        }
    }
}
