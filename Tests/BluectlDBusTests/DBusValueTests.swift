import Testing
@testable import BluectlDBus

/// Every signature BlueZ uses, marshalled to the wire by libdbus and parsed
/// back by libdbus's validating demarshaller: what goes out comes back equal.
@Suite struct DBusValueRoundTripTests {
    static let device = ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")!

    static let samples: [(String, DBusValue)] = [
        ("y", .byte(0xfe)),
        ("b", .boolean(true)),
        ("n", .int16(-127)),
        ("q", .uint16(0xffff)),
        ("i", .int32(Int32.min)),
        ("u", .uint32(UInt32.max)),
        ("x", .int64(Int64.min)),
        ("t", .uint64(UInt64.max)),
        ("d", .double(-2.5)),
        ("s", .string("TestAdvertisement ✓ ümlaut")),
        ("o", .objectPath(device)),
        ("g", .signature(DBusSignature("a{sv}")!)),
        ("ay", .bytes([0, 1, 2, 0xff])),
        ("ay", .bytes([])),
        ("as", .stringArray(["0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"])),
        ("ao", .array(element: .objectPath, [.objectPath(device)])),
        ("a{sv}", .stringVariantDictionary([
            "Powered": .boolean(true), "Name": .string("hci0"), "RSSI": .int16(-60),
            "UUIDs": .stringArray([]), "Value": .bytes([1, 2]),
        ])),
        ("a{qv}", .dictionary(key: DBusSignature("q")!, value: .variant, [
            DBusDictEntry(.uint16(0xffff), .variant(.bytes([0, 1, 2, 3]))),
            DBusDictEntry(.uint16(0x004c), .variant(.bytes([]))),
        ])),
        ("a{sa{sv}}", .dictionary(key: .string, value: DBusSignature("a{sv}")!, [
            DBusDictEntry(.string("org.bluez.Device1"), .stringVariantDictionary(["Connected": .boolean(false)])),
        ])),
        ("a{oa{sa{sv}}}", .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!, [
            DBusDictEntry(.objectPath(device), .dictionary(key: .string, value: DBusSignature("a{sv}")!, [
                DBusDictEntry(.string("org.bluez.Device1"), .stringVariantDictionary([
                    "Address": .string("AA:BB:CC:DD:EE:FF"),
                    "ManufacturerData": .dictionary(key: DBusSignature("q")!, value: .variant, [
                        DBusDictEntry(.uint16(0xffff), .variant(.bytes([0, 1, 2, 3]))),
                    ]),
                ])),
            ])),
        ])),
        ("v", .variant(.variant(.variant(.uint32(7))))),
        ("(ayq)", .structure([.bytes([9, 8]), .uint16(23)])),
        ("a(si)", .array(element: DBusSignature("(si)")!, [.structure([.string("a"), .int32(1)])])),
        ("aay", .array(element: DBusSignature("ay")!, [.bytes([1]), .bytes([])])),
    ]

    @Test(arguments: 0..<samples.count)
    func roundTrip(index: Int) throws {
        let (signature, value) = Self.samples[index]
        #expect(value.signature.rawValue == signature)
        let message = DBusMessage.methodCall(
            destination: "org.bluez", path: Self.device, interface: "org.bluez.Device1",
            member: "Test", arguments: [value, .string("after")])
        let wire = try MessageCodec.marshal(message)
        let back = try MessageCodec.demarshal(wire)
        #expect(back.arguments == [value, .string("after")])
        #expect(back.signature == signature + "s")
        #expect(back.path == Self.device)
        #expect(back.member == "Test")
        #expect(back.destination == "org.bluez")
    }

    @Test func unixFDIsDuplicatedAndOwned() throws {
        // Marshalling fds needs a connection; encoding into a message does not.
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { _ = closeDescriptor(fds[0]); _ = closeDescriptor(fds[1]) }
        let message = DBusMessage.methodCall(
            destination: nil, path: .root, interface: nil, member: "Fd",
            arguments: [.unixFD(DBusUnixFD(borrowing: fds[0]))])
        let raw = try MessageCodec.encode(message)
        let decoded = try withExtendedLifetime(raw) { try MessageCodec.decode(raw.pointer) }
        guard case .unixFD(let fd) = decoded.arguments.first else {
            Issue.record("expected a unix fd, got \(decoded.arguments)")
            return
        }
        #expect(fd.fileDescriptor >= 0)
        #expect(fd.fileDescriptor != fds[0], "libdbus hands out a duplicate")
        #expect(decoded.signature == "h")
    }

    @Test func replyAndErrorHeaders() throws {
        var call = DBusMessage.methodCall(destination: "org.bluez", path: .root, interface: nil, member: "X")
        call.serial = 41
        call.sender = ":1.7"
        let error = DBusMessage.error(to: call, name: "org.bluez.Error.NotPermitted", message: "Read not permitted")
        let back = try MessageCodec.demarshal(MessageCodec.marshal(error))
        #expect(back.kind == .error)
        #expect(back.replySerial == 41)
        #expect(back.destination == ":1.7")
        #expect(back.remoteError == .remote(name: "org.bluez.Error.NotPermitted", message: "Read not permitted"))
    }
}

/// What libdbus would abort the process on is refused with an error instead.
@Suite struct DBusValidationTests {
    @Test(arguments: ["", "org", "/org/", "//", "/org//bluez", "/org/blu-ez", "/ä", "/org/bluez\n", "relative/path"])
    func invalidObjectPaths(text: String) {
        #expect(ObjectPath(text) == nil)
    }

    @Test(arguments: ["/", "/org", "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF", "/_/9"])
    func validObjectPaths(text: String) {
        #expect(ObjectPath(text)?.rawValue == text)
    }

    @Test(arguments: ["a", "a{", "a{vs}", "a{sv", "()", "(", "{sv}", "z", String(repeating: "a", count: 33) + "y",
                      String(repeating: "(", count: 33) + "y" + String(repeating: ")", count: 33)])
    func invalidSignatures(text: String) {
        #expect(DBusSignature(text) == nil)
    }

    @Test(arguments: ["", "y", "a{sv}", "a{oa{sa{sv}}}", "(ayq)", "aaay", "sas", "h"])
    func validSignatures(text: String) {
        #expect(DBusSignature(text)?.rawValue == text)
    }

    @Test func pathHelpers() {
        let path = ObjectPath("/org/bluez/hci0/dev_AA")!
        #expect(path.parent == ObjectPath("/org/bluez/hci0"))
        #expect(path.lastComponent == "dev_AA")
        #expect(path.isDescendant(of: ObjectPath("/org/bluez")!))
        #expect(!ObjectPath("/org/bluez0")!.isDescendant(of: ObjectPath("/org/bluez")!))
        #expect(ObjectPath.root.appending("org")?.rawValue == "/org")
        #expect(path.appending("not valid") == nil)
    }

    @Test func refusedBeforeLibdbusSeesThem() {
        let bad: [(DBusMessage, String)] = [
            (.methodCall(destination: "not a name", path: .root, interface: nil, member: "X"), "bus name"),
            (.methodCall(destination: nil, path: .root, interface: "no-dots", member: "X"), "interface"),
            (.methodCall(destination: nil, path: .root, interface: nil, member: "a.b"), "member"),
            (.methodCall(destination: nil, path: .root, interface: nil, member: "X", arguments: [.string("a\u{0}b")]), "NUL"),
            (.methodCall(destination: nil, path: .root, interface: nil, member: "X",
                         arguments: [.array(element: .string, [.int32(1)])]), "holds"),
            (.methodCall(destination: nil, path: .root, interface: nil, member: "X", arguments: [.structure([])]), "empty structure"),
            (.methodCall(destination: nil, path: .root, interface: nil, member: "X",
                         arguments: [.dictionary(key: .variant, value: .string, [])]), "not a basic type"),
            (.signal(path: .root, interface: "org.x", member: "1bad"), "member"),
        ]
        for (message, expected) in bad {
            #expect(throws: DBusError.self) { try MessageCodec.encode(message) }
            do {
                _ = try MessageCodec.encode(message)
            } catch {
                #expect(error.description.contains(expected), "\(error.description) should mention \(expected)")
            }
        }
    }

    /// Found by Scripts/fuzz: arguments valid one by one whose signatures add up
    /// to more than 255 characters made libdbus write a message it then rejects
    /// as corrupt (and a bus daemon would drop the connection over).
    @Test func bodySignatureLongerThan255IsRefused() throws {
        let wide = DBusValue.structure(Array(repeating: .byte(1), count: 128)) // "(yyy…y)": 130 characters
        try wide.validate()
        let message = DBusMessage.methodCall(destination: nil, path: .root, interface: nil, member: "X",
                                             arguments: [wide, wide])
        #expect(message.signature.utf8.count == 260)
        do {
            _ = try MessageCodec.marshal(message)
            Issue.record("a 260-character body signature was encoded")
        } catch {
            #expect(error.description.contains("260 characters long"))
        }
        // One of them fits and still round-trips.
        let one = DBusMessage.methodCall(destination: nil, path: .root, interface: nil, member: "X", arguments: [wide])
        #expect(try MessageCodec.demarshal(MessageCodec.marshal(one)).arguments == [wide])
    }

    @Test func malformedWireBytesAreAnError() {
        #expect(throws: DBusError.self) { try MessageCodec.demarshal([0x6c, 1, 0, 1, 0xff, 0xff, 0xff, 0x7f]) }
        #expect(throws: DBusError.self) { try MessageCodec.demarshal([]) }
    }

    @Test func accessorsUnwrapVariants() {
        let value = DBusValue.variant(.variant(.int16(-42)))
        #expect(value.integer == -42)
        #expect(DBusValue.variant(.bytes([1, 2])).bytes == [1, 2])
        #expect(DBusValue.array(element: .byte, [.byte(3)]).bytes == [3])
        #expect(DBusValue.stringVariantDictionary(["A": .boolean(true)]).stringKeyedDictionary?["A"] == .variant(.boolean(true)))
        #expect(DBusValue.string("x").bytes == nil)
    }

    @Test func matchRuleQuoting() {
        let filter = SignalFilter(sender: "org.bluez", interface: "org.freedesktop.DBus.Properties",
                                  member: "PropertiesChanged", pathNamespace: ObjectPath("/org/bluez"), arg0: "it's")
        #expect(filter.matchRule == "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path_namespace='/org/bluez',arg0='it'\\''s'")
    }
}

#if canImport(Glibc)
import Glibc
#endif

@Suite("DBusValue layout")
struct DBusValueLayoutTests {
    @Test("scalars and strings are stored inline: a value takes 24 bytes, not a pointer to a box")
    func inlineLayout() {
        // A scanned device holds ~20 properties; boxing each value (indirect enum) doubled the mirror's memory.
        #expect(MemoryLayout<DBusValue>.stride == 24)
    }
}

/// `WireDecoder` reads bodies from libdbus's marshalled bytes; libdbus's
/// iterator is the reference it must agree with, value for value.
@Suite struct WireDecoderTests {
    @Test(arguments: 0..<DBusValueRoundTripTests.samples.count)
    func agreesWithLibdbusIterator(index: Int) throws {
        let value = DBusValueRoundTripTests.samples[index].1
        let message = DBusMessage.signal(path: DBusValueRoundTripTests.device, interface: "org.freedesktop.DBus.Properties",
                                         member: "PropertiesChanged", arguments: [.byte(1), value, .string("after"), value])
        let raw = try MessageCodec.demarshalRaw(MessageCodec.marshal(message))
        try withExtendedLifetime(raw) {
            let throughIterator = try MessageCodec.bodyThroughIterator(raw.pointer)
            #expect(throughIterator == message.arguments)
            #expect(try MessageCodec.body(raw.pointer) == throughIterator)
        }
    }

    /// libdbus marshals in the machine's order (little-endian here); a
    /// big-endian peer's body, by hand: q, u, (ys), ay, as the spec aligns them.
    @Test func readsBigEndianBodies() throws {
        let body: [UInt8] = [
            0x01, 0x02, 0, 0,              // q 0x0102, padding to 4
            0x01, 0x02, 0x03, 0x04,        // u 0x01020304
            0x09, 0, 0, 0,                 // struct at 8: y 9, padding to 4
            0, 0, 0, 2, 0x68, 0x69, 0,     // s "hi"
            0,                             // padding to 4
            0, 0, 0, 3, 0xaa, 0xbb, 0xcc,  // ay, 3 bytes
        ]
        let values = try body.withUnsafeBytes { bytes in
            var decoder = WireDecoder(body: bytes, bigEndian: true)
            return try Array("qu(ys)ay".utf8).withUnsafeBytes { try decoder.values(signature: $0) }
        }
        #expect(values == [.uint16(0x0102), .uint32(0x0102_0304), .structure([.byte(9), .string("hi")]), .bytes([0xaa, 0xbb, 0xcc])])
    }

    /// Bytes that do not fit their signature are an error, never a read past the end.
    @Test(arguments: [
        ("u", [UInt8]([1, 2])),                      // body ends inside a value
        ("ay", [0xff, 0, 0, 0, 1]),                  // array longer than the body
        ("s", [5, 0, 0, 0, 0x61]),                   // string longer than the body
        ("a", [0, 0, 0, 0]),                         // signature ends inside a type
        ("(y", [1]),                                 // structure without its end
        ("v", [1, 0x7a, 0, 0]),                      // a variant of an unknown type
        ("s", [1, 0, 0, 0, 0x61, 0x62]),             // a string without its NUL
        ("a()", [8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),  // empty structures: an array of them would never end
    ])
    func refusesBodiesThatDoNotFit(signature: String, body: [UInt8]) {
        #expect(throws: DBusError.self) {
            try body.withUnsafeBytes { bytes in
                var decoder = WireDecoder(body: bytes, bigEndian: false)
                return try Array(signature.utf8).withUnsafeBytes { try decoder.values(signature: $0) }
            }
        }
    }
}
