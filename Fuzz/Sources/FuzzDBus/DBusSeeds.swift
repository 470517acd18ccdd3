// The seed corpus of FuzzDBus: real BlueZ-shaped messages in wire form, and
// a few values in ValueGenerator's form.
import FuzzSupport
@testable import BluectlDBus

enum DBusSeeds {
    static let device = ObjectPath(verified: "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF")

    static let deviceProperties = DBusValue.stringVariantDictionary([
        "Address": .string("AA:BB:CC:DD:EE:FF"), "AddressType": .string("random"),
        "Name": .string("HR ✓"), "RSSI": .int16(-60), "TxPower": .int16(4),
        "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]),
        "ManufacturerData": .dictionary(key: DBusSignature("q")!, value: .variant, [
            DBusDictEntry(.uint16(0xffff), .variant(.bytes([0, 1, 2, 3]))),
        ]),
        "ServiceData": .dictionary(key: .string, value: .variant, [
            DBusDictEntry(.string("0000180d-0000-1000-8000-00805f9b34fb"), .variant(.bytes([9]))),
        ]),
        "AdvertisingFlags": .bytes([6]), "Appearance": .uint16(0x0340),
        "Adapter": .objectPath(ObjectPath(verified: "/org/bluez/hci0")), "Connected": .boolean(false),
    ])

    static var messages: [(String, DBusMessage)] {
        var interfacesAdded = DBusMessage.signal(
            path: ObjectPath(verified: "/"), interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            arguments: [.objectPath(device), .dictionary(key: .string, value: DBusSignature("a{sv}")!, [
                DBusDictEntry(.string("org.bluez.Device1"), deviceProperties),
            ])])
        interfacesAdded.destination = ":1.7"
        let propertiesChanged = DBusMessage.signal(
            path: device, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            arguments: [.string("org.bluez.Device1"), .stringVariantDictionary(["RSSI": .int16(-42)]),
                        .stringArray(["TxPower"])])
        var call = DBusMessage.methodCall(
            destination: "org.bluez", path: device, interface: "org.freedesktop.DBus.ObjectManager",
            member: "GetManagedObjects")
        call.serial = 5
        call.sender = ":1.7"
        let managed = DBusMessage.methodReturn(to: call, arguments: [
            .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!, [
                DBusDictEntry(.objectPath(device), .dictionary(key: .string, value: DBusSignature("a{sv}")!, [
                    DBusDictEntry(.string("org.bluez.Device1"), deviceProperties),
                ])),
            ]),
        ])
        let error = DBusMessage.error(to: call, name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")
        let mixed = DBusMessage.methodCall(
            destination: nil, path: device, interface: nil, member: "Mixed",
            arguments: [.byte(1), .boolean(true), .int32(-1), .uint64(.max), .double(2.5),
                        .signature(DBusSignature("a(yv)")!), .variant(.variant(.structure([.byte(3), .string("x")]))),
                        .array(element: DBusSignature("ay")!, [.bytes([1]), .bytes([])])])
        return [
            ("wire-interfaces-added", interfacesAdded), ("wire-properties-changed", propertiesChanged),
            ("wire-get-managed-objects", call), ("wire-managed-objects-reply", managed),
            ("wire-error", error), ("wire-mixed", mixed),
        ]
    }

    static let values: [(String, DBusValue)] = [
        ("value-device-properties", .stringVariantDictionary([
            "Address": .string("AA:BB:CC:DD:EE:FF"), "RSSI": .int16(-60),
            "UUIDs": .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]),
            "ManufacturerData": .dictionary(key: DBusSignature("q")!, value: .variant, [
                DBusDictEntry(.uint16(0xffff), .variant(.bytes([0, 1, 2, 3]))),
            ]),
        ])),
        ("value-struct", .structure([.bytes([1, 2]), .uint16(23), .variant(.double(-0.5))])),
        ("value-nested-variant", .variant(.variant(.array(element: .objectPath, [.objectPath(device)])))),
    ]

    static func all() -> [(name: String, bytes: [UInt8])] {
        let wire = messages.map { name, message in
            (name: name, bytes: [0] + (try! MessageCodec.marshal(message, serial: 9)))
        }
        let generated = values.map { name, value in
            var writer = ValueSeedWriter()
            writer.output.byte(1) // value mode
            writer.output.byte(0) // one argument
            writer.anyValue(value)
            // The generator must read back exactly this value.
            var generator = ValueGenerator(FuzzInput(writer.output.bytes))
            _ = generator.input.byte()
            _ = generator.input.byte()
            precondition(generator.anyValue() == value, "seed \(name) does not read back")
            return (name: name, bytes: writer.output.bytes)
        }
        return wire + generated
    }
}
