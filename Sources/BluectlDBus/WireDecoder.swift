/// Reads a message body straight from its marshalled bytes, by the D-Bus
/// specification's wire format.
///
/// libdbus stays the one owner of the connection: it reads the socket and
/// validates every message it loads (signatures, alignment, padding, UTF-8,
/// object paths) before we see it. Walking the body with its iterator then
/// cost more than that validation itself — a call into libdbus per value
/// and per container, each re-reading the signature — about a quarter of a
/// busy scan's CPU. The body of a loaded message is taken once with
/// `dbus_message_marshal` and read here in one pass.
///
/// The bytes were validated by libdbus, but this reader does not rely on
/// it to stay safe: every read is bounds-checked, and anything that does
/// not fit the signature is an error, never a trap. Messages that carry
/// Unix file descriptors are not read here: only libdbus's iterator hands
/// out the descriptors themselves (`MessageCodec.body` keeps that path).
struct WireDecoder {
    private let body: UnsafeRawBufferPointer
    private let bigEndian: Bool
    private var offset = 0

    /// `body`: the body's bytes (its offsets align as the message's do: a
    /// body starts 8-aligned). `bigEndian`: the message's byte order flag.
    init(body: UnsafeRawBufferPointer, bigEndian: Bool) {
        self.body = body
        self.bigEndian = bigEndian
    }

    /// The complete types of `signature`, read one after the other.
    mutating func values(signature: UnsafeRawBufferPointer) throws(DBusError) -> [DBusValue] {
        var values: [DBusValue] = []
        var i = 0
        while i < signature.count {
            values.append(try value(signature, &i, depth: 0))
        }
        return values
    }

    /// The message's body as values, from libdbus's marshalled form of it
    /// (`message`: the whole message, header included).
    static func body(ofMarshalled message: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) throws(DBusError) -> [DBusValue] {
        var reader = try bodyReader(ofMarshalled: message)
        return try reader.values(signature: signature)
    }

    /// A PropertiesChanged body (`sa{sv}as`) of libdbus's marshalled form,
    /// read straight into its typed form.
    static func propertiesChanged(ofMarshalled message: UnsafeRawBufferPointer) throws(DBusError) -> PropertiesChanged {
        var reader = try bodyReader(ofMarshalled: message)
        return try reader.propertiesChanged()
    }

    /// A reader of the body of `message` (the whole message, header included).
    private static func bodyReader(ofMarshalled message: UnsafeRawBufferPointer) throws(DBusError) -> WireDecoder {
        // Fixed header: endianness, type, flags, version, body length, serial;
        // then the header fields' array length at 12, its fields, padding to 8.
        guard message.count >= 16 else { throw .unexpectedReply("message shorter than its header") }
        let bigEndian = message[0] == UInt8(ascii: "B")
        var header = WireDecoder(body: message, bigEndian: bigEndian)
        header.offset = 4
        let bodyLength = Int(try header.uint32())
        header.offset = 12
        let fieldsLength = Int(try header.uint32())
        let bodyStart = (16 + fieldsLength + 7) & ~7
        guard bodyStart <= message.count, bodyLength <= message.count - bodyStart else {
            throw .unexpectedReply("message shorter than its header says")
        }
        return WireDecoder(body: UnsafeRawBufferPointer(rebasing: message[bodyStart..<(bodyStart + bodyLength)]),
                           bigEndian: bigEndian)
    }

    /// `sa{sv}as` as a `PropertiesChanged`: the values `values(signature:)`
    /// reads, and the same checks, without the generic containers (the
    /// dictionary, its entries, a box per variant, the arguments' array).
    mutating func propertiesChanged() throws(DBusError) -> PropertiesChanged {
        align(4)
        let interface = SharedNames.string(try text(length: Int(try uint32())))
        align(4)
        let length = Int(try uint32())
        align(8)  // a dict entry's alignment, even when the array is empty
        guard length <= body.count - offset else { throw .unexpectedReply("array longer than the message") }
        let end = offset + length
        var changed: [DBusProperty] = []
        changed.reserveCapacity(4)
        while offset < end {
            align(8)
            align(4)
            let name = SharedNames.string(try text(length: Int(try uint32())))
            let inner = try signatureBytes()
            var j = 0
            // depth 2: where values(signature:) reads a variant's content of a{sv}
            let value = try value(inner, &j, depth: 2)
            guard j == inner.count else { throw .unexpectedReply("a variant holds more than one type") }
            changed.append(DBusProperty(name: name, value: value))
        }
        guard offset == end else { throw .unexpectedReply("array elements overrun its length") }
        align(4)
        let namesLength = Int(try uint32())
        guard namesLength <= body.count - offset else { throw .unexpectedReply("array longer than the message") }
        let namesEnd = offset + namesLength
        var invalidated: [String] = []
        while offset < namesEnd {
            align(4)
            invalidated.append(String(decoding: try text(length: Int(try uint32())), as: UTF8.self))
        }
        guard offset == namesEnd else { throw .unexpectedReply("array elements overrun its length") }
        return PropertiesChanged(interface: interface, changed: changed, invalidated: invalidated)
    }

    // MARK: - Values

    private static let maxDepth = 64

    private mutating func value(_ signature: UnsafeRawBufferPointer, _ i: inout Int, depth: Int) throws(DBusError) -> DBusValue {
        guard i < signature.count else { throw .unexpectedReply("signature ends inside a type") }
        guard depth <= Self.maxDepth else { throw .unexpectedReply("values nested too deeply") }
        let code = signature[i]
        i += 1
        switch code {
        case UInt8(ascii: "y"): return .byte(try byte())
        case UInt8(ascii: "b"):
            align(4)
            return .boolean(try uint32() != 0)
        case UInt8(ascii: "n"):
            align(2)
            return .int16(Int16(bitPattern: try uint16()))
        case UInt8(ascii: "q"):
            align(2)
            return .uint16(try uint16())
        case UInt8(ascii: "i"):
            align(4)
            return .int32(Int32(bitPattern: try uint32()))
        case UInt8(ascii: "u"):
            align(4)
            return .uint32(try uint32())
        case UInt8(ascii: "x"):
            align(8)
            return .int64(Int64(bitPattern: try uint64()))
        case UInt8(ascii: "t"):
            align(8)
            return .uint64(try uint64())
        case UInt8(ascii: "d"):
            align(8)
            return .double(Double(bitPattern: try uint64()))
        case UInt8(ascii: "s"):
            align(4)
            return .string(String(decoding: try text(length: Int(try uint32())), as: UTF8.self))
        case UInt8(ascii: "o"):
            align(4)
            let text = String(decoding: try text(length: Int(try uint32())), as: UTF8.self)
            guard let path = ObjectPath(text) else { throw .unexpectedReply("invalid object path") }
            return .objectPath(path)
        case UInt8(ascii: "g"):
            let bytes = try signatureBytes()
            return .signature(DBusSignature(unchecked: String(decoding: bytes, as: UTF8.self)))
        case UInt8(ascii: "v"):
            let inner = try signatureBytes()
            var j = 0
            let held = try value(inner, &j, depth: depth + 1)
            guard j == inner.count else { throw .unexpectedReply("a variant holds more than one type") }
            return .variant(held)
        case UInt8(ascii: "("):
            align(8)
            var members: [DBusValue] = []
            while i < signature.count, signature[i] != UInt8(ascii: ")") {
                members.append(try value(signature, &i, depth: depth + 1))
            }
            guard i < signature.count else { throw .unexpectedReply("structure without its end") }
            guard !members.isEmpty else { throw .unexpectedReply("empty structure") }  // would take no bytes: an array of them never ends
            i += 1
            return .structure(members)
        case UInt8(ascii: "a"):
            return try array(signature, &i, depth: depth)
        default:
            throw .unexpectedReply("unsupported D-Bus type code \(code)")
        }
    }

    /// `i` just past the "a".
    private mutating func array(_ signature: UnsafeRawBufferPointer, _ i: inout Int, depth: Int) throws(DBusError) -> DBusValue {
        align(4)
        let length = Int(try uint32())
        guard i < signature.count else { throw .unexpectedReply("array without an element type") }
        let elementStart = i
        let elementEnd = try Self.completeTypeEnd(signature, from: elementStart)
        let element = signature[elementStart]
        align(Self.alignment(of: element))  // even when the array is empty
        guard length <= body.count - offset else { throw .unexpectedReply("array longer than the message") }
        let end = offset + length
        i = elementEnd
        if element == UInt8(ascii: "y") {
            let bytes = Array(UnsafeRawBufferPointer(rebasing: body[offset..<end]))
            offset = end
            return .bytes(bytes)
        }
        let elementSignature = String(decoding: UnsafeRawBufferPointer(rebasing: signature[elementStart..<elementEnd]), as: UTF8.self)
        if element == UInt8(ascii: "{") {
            // "{kv}": one basic key type, one complete value type.
            var entries: [DBusDictEntry] = []
            while offset < end {
                align(8)
                var j = elementStart + 1
                let key = try value(signature, &j, depth: depth + 1)
                let entryValue = try value(signature, &j, depth: depth + 1)
                guard j == elementEnd - 1 else { throw .unexpectedReply("dictionary entry of more than two types") }
                entries.append(DBusDictEntry(key, entryValue))
            }
            guard offset == end else { throw .unexpectedReply("array elements overrun its length") }
            let inner = elementSignature.utf8.dropFirst().dropLast()
            return .dictionary(key: DBusSignature(unchecked: String(decoding: inner.prefix(1), as: UTF8.self)),
                               value: DBusSignature(unchecked: String(decoding: inner.dropFirst(), as: UTF8.self)),
                               entries)
        }
        var items: [DBusValue] = []
        while offset < end {
            var j = elementStart
            items.append(try value(signature, &j, depth: depth + 1))
        }
        guard offset == end else { throw .unexpectedReply("array elements overrun its length") }
        return .array(element: DBusSignature(unchecked: elementSignature), items)
    }

    // MARK: - Signatures

    /// Where the complete type starting at `start` ends (one past it).
    static func completeTypeEnd(_ signature: UnsafeRawBufferPointer, from start: Int) throws(DBusError) -> Int {
        var i = start
        var open = 0
        while true {
            guard i < signature.count else { throw .unexpectedReply("signature ends inside a type") }
            let code = signature[i]
            i += 1
            switch code {
            case UInt8(ascii: "a"):
                continue  // an array's type goes on with its element type
            case UInt8(ascii: "("), UInt8(ascii: "{"):
                open += 1
            case UInt8(ascii: ")"), UInt8(ascii: "}"):
                open -= 1
                guard open >= 0 else { throw .unexpectedReply("unbalanced signature") }
            default:
                break
            }
            if open == 0 { return i }
        }
    }

    private static func alignment(of code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): return 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): return 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): return 8
        default: return 4
        }
    }

    // MARK: - Reading

    private mutating func align(_ boundary: Int) {
        offset = (offset + boundary - 1) & ~(boundary - 1)
    }

    /// The next `count` bytes. Inlined, with the one bounds check here (a
    /// slice checked its bounds again): a call per field read, some 25 per
    /// notification value.
    @inline(__always)
    private mutating func take(_ count: Int) throws(DBusError) -> UnsafeRawBufferPointer {
        guard count >= 0, offset <= body.count, count <= body.count - offset else {
            throw .unexpectedReply("message body ends early")
        }
        let start = body.baseAddress.map { $0 + offset }
        offset += count
        return UnsafeRawBufferPointer(start: start, count: count)
    }

    private mutating func byte() throws(DBusError) -> UInt8 {
        try take(1)[0]
    }

    private mutating func uint16() throws(DBusError) -> UInt16 {
        let raw = try take(2).loadUnaligned(as: UInt16.self)
        return bigEndian ? UInt16(bigEndian: raw) : UInt16(littleEndian: raw)
    }

    private mutating func uint32() throws(DBusError) -> UInt32 {
        let raw = try take(4).loadUnaligned(as: UInt32.self)
        return bigEndian ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw)
    }

    private mutating func uint64() throws(DBusError) -> UInt64 {
        let raw = try take(8).loadUnaligned(as: UInt64.self)
        return bigEndian ? UInt64(bigEndian: raw) : UInt64(littleEndian: raw)
    }

    /// A string's bytes and its terminating NUL (not returned).
    private mutating func text(length: Int) throws(DBusError) -> UnsafeRawBufferPointer {
        let bytes = try take(length)
        guard try take(1)[0] == 0 else { throw .unexpectedReply("string without its NUL") }
        return bytes
    }

    /// A signature's bytes (one length byte, the bytes, a NUL).
    private mutating func signatureBytes() throws(DBusError) -> UnsafeRawBufferPointer {
        try text(length: Int(try byte()))
    }
}
