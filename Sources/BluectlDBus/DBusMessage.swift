import CBluectlShim
import CDBus
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A D-Bus message as a plain value: header fields and decoded arguments.
///
/// Values cross threads freely; libdbus's own message objects never leave
/// the codec below (built just before sending, read just after receiving).
public struct DBusMessage: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case methodCall, methodReturn, error, signal
    }

    public var kind: Kind
    public var serial: UInt32 = 0
    public var replySerial: UInt32?
    public var sender: String?
    public var destination: String?
    public var path: ObjectPath?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var noReplyExpected = false
    /// The body as it was read: generic values, or a PropertiesChanged read
    /// straight into its typed form (see `PropertiesChanged`).
    @usableFromInline var body: Body

    @usableFromInline enum Body: Sendable {
        case values([DBusValue])
        case propertiesChanged(PropertiesChanged)
    }

    public init(kind: Kind, arguments: [DBusValue] = []) {
        self.kind = kind
        self.body = .values(arguments)
    }

    /// The body's values (a PropertiesChanged read in its typed form builds them here).
    public var arguments: [DBusValue] {
        get {
            switch body {
            case .values(let values): return values
            case .propertiesChanged(let change): return change.arguments
            }
        }
        set { body = .values(newValue) }
    }

    /// A `PropertiesChanged` signal's body in its typed form, as the
    /// connection read it (or made from `arguments` for a message built by
    /// hand); nil for any other message, or a body not of `sa{sv}as`.
    public var propertiesChanged: PropertiesChanged? {
        switch body {
        case .propertiesChanged(let change): return change
        case .values(let values):
            guard kind == .signal, member == PropertiesChanged.memberName,
                  interface == PropertiesChanged.interfaceName else { return nil }
            return PropertiesChanged(arguments: values)
        }
    }

    /// `propertiesChanged` handed to `read` in place, not copied out of the
    /// message (its strings and arrays retained, then released): a
    /// notification value's handlers — the mirror, the value handler —
    /// each read it. nil when the message is not a `PropertiesChanged`.
    @inlinable
    public func withPropertiesChanged<Result>(_ read: (PropertiesChanged) -> Result) -> Result? {
        if case .propertiesChanged(let change) = body { return read(change) }
        return propertiesChanged.map(read)
    }

    /// The first argument when it is a string, without building the others.
    var firstArgumentString: String? {
        switch body {
        case .values(let values): return values.first?.string
        case .propertiesChanged(let change): return change.interface
        }
    }

    public static func methodCall(
        destination: String?, path: ObjectPath, interface: String?, member: String,
        arguments: [DBusValue] = []
    ) -> DBusMessage {
        var m = DBusMessage(kind: .methodCall, arguments: arguments)
        m.destination = destination
        m.path = path
        m.interface = interface
        m.member = member
        return m
    }

    public static func signal(path: ObjectPath, interface: String, member: String, arguments: [DBusValue] = []) -> DBusMessage {
        var m = DBusMessage(kind: .signal, arguments: arguments)
        m.path = path
        m.interface = interface
        m.member = member
        return m
    }

    /// A reply to the method call `call` carrying `arguments`.
    public static func methodReturn(to call: DBusMessage, arguments: [DBusValue] = []) -> DBusMessage {
        var m = DBusMessage(kind: .methodReturn, arguments: arguments)
        m.replySerial = call.serial
        m.destination = call.sender
        return m
    }

    /// An error reply to `call`.
    public static func error(to call: DBusMessage, name: String, message: String) -> DBusMessage {
        var m = DBusMessage(kind: .error, arguments: [.string(message)])
        m.replySerial = call.serial
        m.destination = call.sender
        m.errorName = name
        return m
    }

    /// The body's signature.
    public var signature: String { arguments.map(\.signatureText).joined() }

    /// "org.bluez.Adapter1.StartDiscovery", for messages and logs.
    public var methodDescription: String {
        [interface, member].compactMap { $0 }.joined(separator: ".")
    }

    /// For error replies: the error as a `DBusError.remote`.
    public var remoteError: DBusError? {
        guard kind == .error else { return nil }
        return .remote(name: errorName ?? "org.freedesktop.DBus.Error.Failed", message: arguments.first?.string ?? "")
    }

    /// Equal headers and equal arguments, however the body was read.
    public static func == (lhs: DBusMessage, rhs: DBusMessage) -> Bool {
        lhs.kind == rhs.kind && lhs.serial == rhs.serial && lhs.replySerial == rhs.replySerial && lhs.sender == rhs.sender
            && lhs.destination == rhs.destination && lhs.path == rhs.path && lhs.interface == rhs.interface
            && lhs.member == rhs.member && lhs.errorName == rhs.errorName && lhs.noReplyExpected == rhs.noReplyExpected
            && lhs.arguments == rhs.arguments
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(serial)
        hasher.combine(replySerial)
        hasher.combine(sender)
        hasher.combine(destination)
        hasher.combine(path)
        hasher.combine(interface)
        hasher.combine(member)
        hasher.combine(errorName)
        hasher.combine(noReplyExpected)
        hasher.combine(arguments)
    }
}

// MARK: - Codec: DBusMessage <-> libdbus

/// Owns one libdbus message reference. Built on a caller's thread, then
/// handed whole to the I/O thread and not touched again by the caller.
final class RawMessage: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }
    deinit { dbus_message_unref(pointer) }
}

enum MessageCodec {
    static let typeByte = Int32(BLUECTL_TYPE_BYTE)
    static let typeBoolean = Int32(BLUECTL_TYPE_BOOLEAN)
    static let typeInt16 = Int32(BLUECTL_TYPE_INT16)
    static let typeUInt16 = Int32(BLUECTL_TYPE_UINT16)
    static let typeInt32 = Int32(BLUECTL_TYPE_INT32)
    static let typeUInt32 = Int32(BLUECTL_TYPE_UINT32)
    static let typeInt64 = Int32(BLUECTL_TYPE_INT64)
    static let typeUInt64 = Int32(BLUECTL_TYPE_UINT64)
    static let typeDouble = Int32(BLUECTL_TYPE_DOUBLE)
    static let typeString = Int32(BLUECTL_TYPE_STRING)
    static let typeObjectPath = Int32(BLUECTL_TYPE_OBJECT_PATH)
    static let typeSignature = Int32(BLUECTL_TYPE_SIGNATURE)
    static let typeUnixFD = Int32(BLUECTL_TYPE_UNIX_FD)
    static let typeArray = Int32(BLUECTL_TYPE_ARRAY)
    static let typeVariant = Int32(BLUECTL_TYPE_VARIANT)
    static let typeStruct = Int32(BLUECTL_TYPE_STRUCT)
    static let typeDictEntry = Int32(BLUECTL_TYPE_DICT_ENTRY)
    static let typeInvalid = Int32(BLUECTL_TYPE_INVALID)

    // MARK: encode

    /// Builds a libdbus message; throws instead of letting libdbus abort on
    /// an invalid name, path, string or signature.
    static func encode(_ message: DBusMessage) throws(DBusError) -> RawMessage {
        for argument in message.arguments { try argument.validate() }
        // Each argument's signature may be valid while the body's, all of them
        // together, is longer than the header's signature field can hold:
        // libdbus would then write a corrupt message (found by Scripts/fuzz).
        let bodySignatureLength = message.signature.utf8.count
        guard bodySignatureLength <= SignatureParser.maxLength else {
            throw .invalidArgument("the arguments' signature is \(bodySignatureLength) characters long; D-Bus allows \(SignatureParser.maxLength)")
        }
        if let destination = message.destination, !bluectl_valid_bus_name(destination) {
            throw .invalidArgument("bus name \"\(destination)\"")
        }
        let raw: OpaquePointer?
        switch message.kind {
        case .methodCall:
            guard let path = message.path, let member = message.member else {
                throw .invalidArgument("a method call needs a path and a member")
            }
            if let interface = message.interface, !bluectl_valid_interface(interface) {
                throw .invalidArgument("interface name \"\(interface)\"")
            }
            guard bluectl_valid_member(member) else { throw .invalidArgument("member name \"\(member)\"") }
            raw = bluectl_message_new_method_call(message.destination, path.rawValue, message.interface, member)
        case .signal:
            guard let path = message.path, let interface = message.interface, let member = message.member else {
                throw .invalidArgument("a signal needs a path, an interface and a member")
            }
            guard bluectl_valid_interface(interface) else { throw .invalidArgument("interface name \"\(interface)\"") }
            guard bluectl_valid_member(member) else { throw .invalidArgument("member name \"\(member)\"") }
            raw = bluectl_message_new_signal(path.rawValue, interface, member)
            if let raw, let destination = message.destination { dbus_message_set_destination(raw, destination) }
        case .methodReturn, .error:
            guard let replySerial = message.replySerial else {
                throw .invalidArgument("a reply needs the serial it replies to")
            }
            let kind = message.kind == .error ? Int32(BLUECTL_MESSAGE_TYPE_ERROR) : Int32(BLUECTL_MESSAGE_TYPE_METHOD_RETURN)
            if message.kind == .error {
                guard let name = message.errorName, bluectl_valid_error_name(name) else {
                    throw .invalidArgument("error name \"\(message.errorName ?? "")\"")
                }
            }
            raw = dbus_message_new(kind)
            if let raw {
                if let name = message.errorName, message.kind == .error, dbus_message_set_error_name(raw, name) == 0 {
                    dbus_message_unref(raw)
                    throw .invalidArgument("out of memory")
                }
                _ = dbus_message_set_reply_serial(raw, replySerial)
                if let destination = message.destination { _ = dbus_message_set_destination(raw, destination) }
                dbus_message_set_no_reply(raw, 1)
            }
        }
        guard let raw else { throw .invalidArgument("libdbus refused to build \(message.methodDescription)") }
        let owned = RawMessage(taking: raw)
        if message.noReplyExpected { dbus_message_set_no_reply(raw, 1) }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for argument in message.arguments {
            guard append(argument, to: &iter) else { throw .invalidArgument("out of memory while encoding") }
        }
        return owned
    }

    /// Appends one (already validated) value.
    static func append(_ value: DBusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(var v): return dbus_message_iter_append_basic(&iter, typeByte, &v) != 0
        case .boolean(let b):
            var v: dbus_bool_t = b ? 1 : 0
            return dbus_message_iter_append_basic(&iter, typeBoolean, &v) != 0
        case .int16(var v): return dbus_message_iter_append_basic(&iter, typeInt16, &v) != 0
        case .uint16(var v): return dbus_message_iter_append_basic(&iter, typeUInt16, &v) != 0
        case .int32(var v): return dbus_message_iter_append_basic(&iter, typeInt32, &v) != 0
        case .uint32(var v): return dbus_message_iter_append_basic(&iter, typeUInt32, &v) != 0
        case .int64(var v): return dbus_message_iter_append_basic(&iter, typeInt64, &v) != 0
        case .uint64(var v): return dbus_message_iter_append_basic(&iter, typeUInt64, &v) != 0
        case .double(var v): return dbus_message_iter_append_basic(&iter, typeDouble, &v) != 0
        case .string(let s): return appendString(s, type: typeString, to: &iter)
        case .objectPath(let p): return appendString(p.rawValue, type: typeObjectPath, to: &iter)
        case .signature(let g): return appendString(g.rawValue, type: typeSignature, to: &iter)
        case .unixFD(let fd):
            var v = fd.fileDescriptor
            return dbus_message_iter_append_basic(&iter, typeUnixFD, &v) != 0
        case .bytes(let bytes):
            return withContainer(typeArray, "y", &iter) { sub in
                bytes.withUnsafeBufferPointer { buffer in
                    // libdbus wants a pointer to the element pointer; an empty
                    // array still needs a non-null one.
                    var base: UnsafePointer<UInt8>? = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                    return dbus_message_iter_append_fixed_array(&sub, typeByte, &base, Int32(buffer.count)) != 0
                }
            }
        case .array(let element, let items):
            return withContainer(typeArray, element.rawValue, &iter) { sub in
                items.allSatisfy { append($0, to: &sub) }
            }
        case .dictionary(let key, let valueType, let entries):
            return withContainer(typeArray, "{" + key.rawValue + valueType.rawValue + "}", &iter) { sub in
                entries.allSatisfy { entry in
                    withContainer(typeDictEntry, nil, &sub) { pair in
                        append(entry.key, to: &pair) && append(entry.value, to: &pair)
                    }
                }
            }
        case .structure(let members):
            return withContainer(typeStruct, nil, &iter) { sub in
                members.allSatisfy { append($0, to: &sub) }
            }
        case .variant(let inner):
            return withContainer(typeVariant, inner.signatureText, &iter) { sub in
                append(inner, to: &sub)
            }
        }
    }

    private static func appendString(_ s: String, type: Int32, to iter: inout DBusMessageIter) -> Bool {
        s.withCString { cString in
            var pointer: UnsafePointer<CChar>? = cString
            return dbus_message_iter_append_basic(&iter, type, &pointer) != 0
        }
    }

    private static func withContainer(
        _ type: Int32, _ signature: String?, _ iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) } != 0
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub) != 0
        }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    // MARK: decode

    /// Reads header and body of a message libdbus received (and validated).
    static func decode(_ raw: OpaquePointer) throws(DBusError) -> DBusMessage {
        var paths = RecentPath()
        return try decode(raw, recentPath: &paths) { $0 }
    }

    /// `decode(_:)`, handing the message to `handle` (the connection's
    /// handler) rather than returning it: returned, it was copied (its
    /// strings retained) and the original destroyed, per message. Takes the
    /// object path from `recentPath` when it is the one the message before
    /// carried (the I/O thread keeps one).
    @inline(__always)
    static func decode<Result>(
        _ raw: OpaquePointer, recentPath: inout RecentPath, _ handle: (DBusMessage) -> Result
    ) throws(DBusError) -> Result {
        let kind: DBusMessage.Kind
        switch dbus_message_get_type(raw) {
        case Int32(BLUECTL_MESSAGE_TYPE_METHOD_CALL): kind = .methodCall
        case Int32(BLUECTL_MESSAGE_TYPE_METHOD_RETURN): kind = .methodReturn
        case Int32(BLUECTL_MESSAGE_TYPE_ERROR): kind = .error
        case Int32(BLUECTL_MESSAGE_TYPE_SIGNAL): kind = .signal
        default: throw .unexpectedReply("message of unknown type")
        }
        var message = DBusMessage(kind: kind)
        message.serial = dbus_message_get_serial(raw)
        let isReply = kind == .methodReturn || kind == .error
        let replySerial = isReply ? dbus_message_get_reply_serial(raw) : 0
        message.replySerial = replySerial == 0 ? nil : replySerial
        message.sender = dbus_message_get_sender(raw).map { String(cString: $0) }
        message.destination = dbus_message_get_destination(raw).map { String(cString: $0) }
        // libdbus validated the header's path when it loaded the message.
        message.path = dbus_message_get_path(raw).map { recentPath.path($0) }
        message.interface = dbus_message_get_interface(raw).map(headerName)
        message.member = dbus_message_get_member(raw).map(headerName)
        message.errorName = kind == .error ? dbus_message_get_error_name(raw).map { String(cString: $0) } : nil
        message.noReplyExpected = dbus_message_get_no_reply(raw) != 0
        let typed = kind == .signal && message.member == PropertiesChanged.memberName
            && message.interface == PropertiesChanged.interfaceName
        message.body = try decodedBody(raw, propertiesChanged: typed)
        return handle(message)
    }

    /// An interface or member name of the header: a shared name (`SharedNames`), or a new string.
    private static func headerName(_ cString: UnsafePointer<CChar>) -> String {
        SharedNames.string(UnsafeRawBufferPointer(start: cString, count: strlen(cString)))
    }

    /// The body's values: read by `WireDecoder`, but for bodies with Unix
    /// file descriptors, which only libdbus's iterator hands out.
    static func body(_ raw: OpaquePointer) throws(DBusError) -> [DBusValue] {
        guard case .values(let values) = try decodedBody(raw, propertiesChanged: false) else { return [] }
        return values
    }

    /// The body as `body(_:)` reads it, but a PropertiesChanged's (when
    /// `propertiesChanged`, and of signature `sa{sv}as`) in its typed form.
    static func decodedBody(_ raw: OpaquePointer, propertiesChanged: Bool) throws(DBusError) -> DBusMessage.Body {
        // Any descriptor, at any depth (inside a variant too), takes the iterator.
        guard dbus_message_contains_unix_fds(raw) == 0, let signature = dbus_message_get_signature(raw) else {
            return .values(try bodyThroughIterator(raw))
        }
        let signatureBytes = UnsafeRawBufferPointer(start: signature, count: strlen(signature))
        if signatureBytes.isEmpty { return .values([]) }
        return try withMarshalledForm(raw) { (message) throws(DBusError) -> DBusMessage.Body in
            if propertiesChanged, signatureBytes.count == 8, memcmp(signatureBytes.baseAddress!, "sa{sv}as", 8) == 0 {
                return .propertiesChanged(try WireDecoder.propertiesChanged(ofMarshalled: message))
            }
            return .values(try WireDecoder.body(ofMarshalled: message, signature: signatureBytes))
        }
    }

    /// The body through libdbus's iterator, a call per value.
    static func bodyThroughIterator(_ raw: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var arguments: [DBusValue] = []
        repeat {
            arguments.append(try read(&iter))
        } while dbus_message_iter_next(&iter) != 0
        return arguments
    }

    /// `read` of libdbus's marshalled copy of the message (one allocation
    /// and copy, instead of a call into libdbus per value).
    static func withMarshalledForm<T>(_ raw: OpaquePointer,
                                      _ read: (UnsafeRawBufferPointer) throws(DBusError) -> T) throws(DBusError) -> T {
        var buffer: UnsafeMutablePointer<CChar>? = nil
        var length: Int32 = 0
        guard dbus_message_marshal(raw, &buffer, &length) != 0, let buffer else {
            throw .unexpectedReply("libdbus could not hand out the message's bytes")
        }
        defer { dbus_free(buffer) }
        return try read(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
    }

    /// One value through libdbus's iterator (bodies with Unix file descriptors).
    static func read(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        var basic = DBusBasicValue()
        switch type {
        case typeByte:
            dbus_message_iter_get_basic(&iter, &basic)
            return .byte(basic.byt)
        case typeBoolean:
            dbus_message_iter_get_basic(&iter, &basic)
            return .boolean(basic.bool_val != 0)
        case typeInt16:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int16(basic.i16)
        case typeUInt16:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint16(basic.u16)
        case typeInt32:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int32(basic.i32)
        case typeUInt32:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint32(basic.u32)
        case typeInt64:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int64(Int64(basic.i64))
        case typeUInt64:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint64(UInt64(basic.u64))
        case typeDouble:
            dbus_message_iter_get_basic(&iter, &basic)
            return .double(basic.dbl)
        case typeString:
            return .string(readString(&iter))
        case typeObjectPath:
            let text = readString(&iter)
            guard let path = ObjectPath(text) else { throw .unexpectedReply("invalid object path") }
            return .objectPath(path)
        case typeSignature:
            return .signature(DBusSignature(unchecked: readString(&iter)))
        case typeUnixFD:
            dbus_message_iter_get_basic(&iter, &basic)
            return .unixFD(DBusUnixFD(owning: basic.fd))
        case typeVariant:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try read(&sub))
        case typeStruct:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var members: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != typeInvalid {
                members.append(try read(&sub))
                _ = dbus_message_iter_next(&sub)
            }
            return .structure(members)
        case typeArray:
            return try readArray(&iter)
        default:
            throw .unexpectedReply("unsupported D-Bus type code \(type)")
        }
    }

    private static func readString(_ iter: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        guard let pointer else { return "" }
        return String(cString: pointer)
    }

    private static func readArray(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let elementType = dbus_message_iter_get_element_type(&iter)
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        if elementType == typeByte {
            var base: UnsafeMutableRawPointer? = nil
            var count: Int32 = 0
            dbus_message_iter_get_fixed_array(&sub, &base, &count)
            guard let base, count > 0 else { return .bytes([]) }
            return .bytes(Array(UnsafeRawBufferPointer(start: base, count: Int(count))))
        }
        guard let full = dbus_message_iter_get_signature(&iter) else {
            throw .unexpectedReply("array without a signature")
        }
        let signature = String(cString: full)
        dbus_free(full)
        let elementSignature = String(signature.dropFirst())
        if elementType == typeDictEntry {
            // "{kv}": the key is one basic type code, the value the rest.
            let inner = elementSignature.dropFirst().dropLast()
            let key = DBusSignature(unchecked: String(inner.prefix(1)))
            let value = DBusSignature(unchecked: String(inner.dropFirst()))
            var entries: [DBusDictEntry] = []
            while dbus_message_iter_get_arg_type(&sub) == typeDictEntry {
                var pair = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &pair)
                let k = try read(&pair)
                guard dbus_message_iter_next(&pair) != 0 else { throw .unexpectedReply("dictionary entry without a value") }
                let v = try read(&pair)
                entries.append(DBusDictEntry(k, v))
                _ = dbus_message_iter_next(&sub)
            }
            return .dictionary(key: key, value: value, entries)
        }
        var items: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != typeInvalid {
            items.append(try read(&sub))
            _ = dbus_message_iter_next(&sub)
        }
        return .array(element: DBusSignature(unchecked: elementSignature), items)
    }

    // MARK: wire form (for tests and fuzzing: the real libdbus marshaller, no bus)

    /// The message in D-Bus wire format, as libdbus marshals it.
    static func marshal(_ message: DBusMessage, serial: UInt32 = 1) throws(DBusError) -> [UInt8] {
        let raw = try encode(message)
        // The message must outlive the calls given its pointer: Swift may release
        // `raw` right after its last use, the load of `pointer`.
        return try withExtendedLifetime(raw) { () throws(DBusError) -> [UInt8] in
            dbus_message_set_serial(raw.pointer, serial)
            var buffer: UnsafeMutablePointer<CChar>? = nil
            var length: Int32 = 0
            guard dbus_message_marshal(raw.pointer, &buffer, &length) != 0, let buffer else {
                throw .invalidArgument("libdbus could not marshal the message")
            }
            defer { dbus_free(buffer) }
            return Array(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
        }
    }

    /// Parses wire-format bytes with libdbus's own (validating) demarshaller.
    static func demarshal(_ bytes: [UInt8]) throws(DBusError) -> DBusMessage {
        let raw = try demarshalRaw(bytes)
        // Alive until decoded (a temporary's lifetime may end at the load of
        // `pointer`: the message was freed under decode, and the tests that
        // marshal in parallel then read each other's reused messages).
        return try withExtendedLifetime(raw) { () throws(DBusError) -> DBusMessage in try decode(raw.pointer) }
    }

    /// libdbus's message of wire-format bytes (validated), not yet decoded.
    static func demarshalRaw(_ bytes: [UInt8]) throws(DBusError) -> RawMessage {
        var error = DBusError_C()
        dbus_error_init(&error)
        let raw: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                dbus_message_demarshal(chars.baseAddress, Int32(chars.count), &error)
            }
        }
        guard let raw else {
            let reason = error.message.map { String(cString: $0) } ?? "invalid message"
            dbus_error_free(&error)
            throw .unexpectedReply(reason)
        }
        return RawMessage(taking: raw)
    }
}

/// libdbus's `DBusError` struct (our Swift `DBusError` enum takes the name).
typealias DBusError_C = CDBus.DBusError

/// The object path of the message before, kept by whoever decodes a
/// connection's messages in turn (the I/O thread): a burst of
/// notifications names one characteristic again and again, and a path
/// longer than 15 bytes made anew is an allocation, a copy and a free per
/// message. A different path costs one comparison of its bytes.
struct RecentPath {
    private var last: ObjectPath?

    /// The path libdbus handed out (validated when it loaded the message).
    mutating func path(_ cString: UnsafePointer<CChar>) -> ObjectPath {
        let length = strlen(cString)
        if let last, last.rawValue.utf8.count == length,
           last.rawValue.utf8.withContiguousStorageIfAvailable({ memcmp($0.baseAddress!, cString, length) == 0 }) == true {
            return last
        }
        let path = ObjectPath(validatedByLibdbus: String(cString: cString))
        last = path
        return path
    }
}
