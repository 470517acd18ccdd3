import Testing
@testable import BluectlDBus

/// A PropertiesChanged is read from the marshalled body straight into its
/// typed form (`WireDecoder.propertiesChanged`); the generic reading and
/// libdbus's iterator are the references it must agree with.
@Suite struct PropertiesChangedTests {
    static let path = ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF/service0010/char0011")!

    static func signal(_ arguments: [DBusValue]) -> DBusMessage {
        DBusMessage.signal(path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                           arguments: arguments)
    }

    /// Every sample type as a changed property, beside a notification's Value, and names invalidated.
    @Test(arguments: 0..<DBusValueRoundTripTests.samples.count)
    func agreesWithTheGenericReadingAndLibdbus(index: Int) throws {
        let value = DBusValueRoundTripTests.samples[index].1
        let arguments: [DBusValue] = [
            .string("org.bluez.GattCharacteristic1"),
            .dictionary(key: .string, value: .variant, [
                DBusDictEntry(.string("Value"), .variant(.bytes([1, 2, 3]))),
                DBusDictEntry(.string("ManufacturerData"), .variant(value)),
                DBusDictEntry(.string("Value"), .variant(.bytes([4]))),
            ]),
            .stringArray(["Notifying", "ServicesResolved"]),
        ]
        let raw = try MessageCodec.demarshalRaw(MessageCodec.marshal(Self.signal(arguments)))
        try withExtendedLifetime(raw) {
            let decoded = try MessageCodec.decode(raw.pointer)
            guard case .propertiesChanged(let typed) = decoded.body else {
                Issue.record("a PropertiesChanged was not read in its typed form")
                return
            }
            #expect(decoded.arguments == (try MessageCodec.bodyThroughIterator(raw.pointer)))
            #expect(decoded.arguments == arguments)
            #expect(typed.interface == "org.bluez.GattCharacteristic1")
            #expect(typed.changed.map(\.name) == ["Value", "ManufacturerData", "Value"])
            #expect(typed.changed[1].value == value)
            #expect(typed["Value"] == .bytes([4]), "a name sent twice: the last one counts")
            #expect(typed.invalidated == ["Notifying", "ServicesResolved"])
            // What a handler reads is the same, however the message was made.
            #expect(decoded.propertiesChanged == Self.signal(arguments).propertiesChanged)
            #expect(decoded == Self.signal(arguments).withHeader(of: decoded))
        }
    }

    @Test func emptyChangesAndLongNamesAreShared() throws {
        let arguments: [DBusValue] = [.string("org.bluez.Device1"), .stringVariantDictionary([:]), .stringArray([])]
        let decoded = try MessageCodec.demarshal(MessageCodec.marshal(Self.signal(arguments)))
        #expect(decoded.propertiesChanged == PropertiesChanged(interface: "org.bluez.Device1", changed: []))
        #expect(decoded.arguments == arguments)
        let typed = try #require(decoded.propertiesChanged)
        // the interface is the shared name, not a copy made per message
        #expect(typed.interface.utf8.withContiguousStorageIfAvailable { $0.baseAddress }
                == SharedNames.shared("org.bluez.Device1").utf8.withContiguousStorageIfAvailable { $0.baseAddress })
    }

    /// Only a `sa{sv}as` PropertiesChanged signal has the typed form; any
    /// other body of that name keeps its generic values.
    @Test func otherBodiesStayGeneric() throws {
        let odd: [DBusValue] = [.string("org.bluez.Device1"), .dictionary(key: .string, value: .string, [
            DBusDictEntry(.string("Name"), .string("x")),
        ]), .stringArray([])]
        let decoded = try MessageCodec.demarshal(MessageCodec.marshal(Self.signal(odd)))
        guard case .values(let values) = decoded.body else {
            Issue.record("a{ss} was read as a{sv}")
            return
        }
        #expect(values == odd)
        #expect(decoded.propertiesChanged == nil)
        var call = DBusMessage.methodCall(destination: "org.bluez", path: Self.path, interface: "org.freedesktop.DBus.Properties",
                                          member: "PropertiesChanged", arguments: [.string("a"), .stringVariantDictionary([:]), .stringArray([])])
        call.serial = 3
        #expect(try MessageCodec.demarshal(MessageCodec.marshal(call)).propertiesChanged == nil, "a method call is not a signal")
    }

    /// A big-endian peer's body, by hand: s, a{sv} with one entry (ay), as with one name.
    @Test func readsBigEndianBodies() throws {
        let body: [UInt8] = [
            0, 0, 0, 1, 0x49, 0,           // s "I"
            0, 0,                          // padding to 4
            0, 0, 0, 22,                   // a{sv}: 22 bytes of entries
            0, 0, 0, 0,                    // padding to 8 (the entry)
            0, 0, 0, 5, 0x56, 0x61, 0x6c, 0x75, 0x65, 0,  // s "Value"
            2, 0x61, 0x79, 0,              // g "ay"
            0, 0,                          // padding to 4
            0, 0, 0, 2, 0xaa, 0xbb,        // ay, 2 bytes
            0, 0,                          // padding to 4
            0, 0, 0, 6,                    // as: 6 bytes
            0, 0, 0, 1, 0x4e, 0,           // s "N"
        ]
        let change = try body.withUnsafeBytes { bytes in
            var decoder = WireDecoder(body: bytes, bigEndian: true)
            return try decoder.propertiesChanged()
        }
        #expect(change == PropertiesChanged(interface: "I", changed: [DBusProperty(name: "Value", value: .bytes([0xaa, 0xbb]))],
                                            invalidated: ["N"]))
    }

    /// Bytes that do not fit `sa{sv}as` are an error, never a read past the end.
    @Test(arguments: [
        [UInt8]([1, 0, 0, 0, 0x49]),                               // the interface without its NUL
        [1, 0, 0, 0, 0x49, 0, 0, 0, 0xff, 0, 0, 0],                // a{sv} longer than the body
        [1, 0, 0, 0, 0x49, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0,        // an entry whose variant names
         1, 0, 0, 0, 0x56, 0, 1, 0x7a, 0],                         //   an unknown type
        [1, 0, 0, 0, 0x49, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,        // no entries, then an `as`
         8, 0, 0, 0, 1, 0, 0, 0, 0x4e],                            //   longer than the body
        [1, 0, 0, 0, 0x49, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],       // the `as` missing
    ])
    func refusesBodiesThatDoNotFit(body: [UInt8]) {
        #expect(throws: DBusError.self) {
            try body.withUnsafeBytes { bytes in
                var decoder = WireDecoder(body: bytes, bigEndian: false)
                return try decoder.propertiesChanged()
            }
        }
    }
}

extension DBusMessage {
    /// This message with the header fields the bus and libdbus set on `other`.
    fileprivate func withHeader(of other: DBusMessage) -> DBusMessage {
        var copy = self
        copy.serial = other.serial
        copy.sender = other.sender
        copy.destination = other.destination
        copy.noReplyExpected = other.noReplyExpected
        return copy
    }
}
