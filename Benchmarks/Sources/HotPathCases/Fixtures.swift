// What the hot paths are fed: messages as bluetoothd 5.66 sends them during a
// scan and a notification stream, and a mirror holding 10,000 devices. Only
// set-up: nothing here is measured (the measured calls are in HotPathCases.swift).
@testable import BluectlDBus
@testable import BluectlCore
import CDBus

enum Fixtures {
    static let adapter = ObjectPath(verified: "/org/bluez/hci0")
    /// bluetoothd's unique name on the bus (the sender of its signals).
    static let bluetoothd = ":1.4"
    static let deviceCount = 10_000
    /// The devices whose changes the apply benchmarks cycle through (spread over the tree).
    static let rotation = 64

    static func address(_ index: Int) -> String {
        "C0:00:00:" + [(index >> 16) & 0xff, (index >> 8) & 0xff, index & 0xff].map { hex2($0) }.joined(separator: ":")
    }

    static func devicePath(_ index: Int) -> ObjectPath {
        ObjectPath(adapter.rawValue + "/dev_" + address(index).replacingColons())!
    }

    /// An iPhone's ManufacturerData entry: Apple (0x004c), Nearby Action + Nearby Info, 14 bytes.
    static func manufacturerData(_ index: Int) -> [UInt8] {
        [0x0f, 0x05, 0xc0, 0x1b, 0x8e, 0x2a, 0x3c, 0x10, 0x05, 0x01, 0x18, UInt8(index & 0xff), UInt8((index >> 8) & 0xff), 0x7b]
    }

    static func rssi(_ index: Int) -> Int16 { Int16(-40 - index % 50) }

    /// `a{qv}` with one entry.
    static func manufacturerDataValue(_ index: Int) -> DBusValue {
        .dictionary(key: DBusSignature("q")!, value: .variant, [DBusDictEntry(.uint16(0x004c), .variant(.bytes(manufacturerData(index))))])
    }

    /// A device's Device1 properties as GetManagedObjects gives them (in bluetoothd's order).
    static func deviceProperties(_ index: Int) -> DBusValue {
        let name = "Sensor-\(hex2(index >> 8))\(hex2(index & 0xff))"
        return orderedVariantDictionary([
            ("Address", .string(address(index))), ("AddressType", .string("random")), ("Name", .string(name)),
            ("Alias", .string(name)), ("Paired", .boolean(false)), ("Bonded", .boolean(false)),
            ("Trusted", .boolean(false)), ("Blocked", .boolean(false)), ("LegacyPairing", .boolean(false)),
            ("RSSI", .int16(rssi(index))), ("Connected", .boolean(index == 0)),
            ("UUIDs", .stringArray(["0000180f-0000-1000-8000-00805f9b34fb", "6e400001-b5a3-f393-e0a9-e50e24dcca9e"])),
            ("Adapter", .objectPath(adapter)), ("ManufacturerData", manufacturerDataValue(index)),
            ("TxPower", .int16(8)), ("ServicesResolved", .boolean(index == 0)), ("AdvertisingFlags", .bytes([0x06])),
        ])
    }

    /// A Nordic UART TX characteristic (notify) on device 0, which is connected.
    static let servicePath = ObjectPath(devicePath(0).rawValue + "/service0010")!
    static let characteristicPath = ObjectPath(servicePath.rawValue + "/char0011")!
    static let characteristicProperties = orderedVariantDictionary([
        ("UUID", .string("6e400003-b5a3-f393-e0a9-e50e24dcca9e")), ("Service", .objectPath(servicePath)),
        ("Value", .bytes([])), ("Notifying", .boolean(true)), ("Flags", .stringArray(["notify"])), ("MTU", .uint16(247)),
    ])

    /// A 20-byte notification (a sequence number and payload, as the lab's stream sends).
    static func notificationValue(_ sequence: Int) -> [UInt8] {
        (0..<20).map { UInt8(truncatingIfNeeded: $0 < 4 ? sequence >> (8 * $0) : 0x30 + $0) }
    }

    /// The GetManagedObjects reply's `a{oa{sa{sv}}}`: the adapter, 10,000 devices, one
    /// connected device's GATT service and characteristic.
    static func managedObjects() -> DBusValue {
        let standard: [(String, DBusValue)] = [
            ("org.freedesktop.DBus.Introspectable", .stringVariantDictionary([:])),
            ("org.freedesktop.DBus.Properties", .stringVariantDictionary([:])),
        ]
        func object(_ path: ObjectPath, _ interfaces: [(String, DBusValue)]) -> DBusDictEntry {
            DBusDictEntry(.objectPath(path), .dictionary(key: .string, value: DBusSignature("a{sv}")!,
                                                         (standard + interfaces).map { DBusDictEntry(.string($0.0), $0.1) }))
        }
        var objects = [object(adapter, [("org.bluez.Adapter1", orderedVariantDictionary([
            ("Address", .string("00:AA:01:00:00:01")), ("AddressType", .string("public")), ("Name", .string("bench")),
            ("Alias", .string("bench")), ("Powered", .boolean(true)), ("Discoverable", .boolean(false)),
            ("Pairable", .boolean(true)), ("Discovering", .boolean(true)), ("PowerState", .string("on")),
        ]))])]
        for index in 0..<deviceCount {
            objects.append(object(devicePath(index), [("org.bluez.Device1", deviceProperties(index))]))
        }
        objects.append(object(servicePath, [("org.bluez.GattService1", orderedVariantDictionary([
            ("UUID", .string("6e400001-b5a3-f393-e0a9-e50e24dcca9e")), ("Device", .objectPath(devicePath(0))),
            ("Primary", .boolean(true)), ("Includes", .array(element: .objectPath, [])),
        ]))]))
        objects.append(object(characteristicPath, [("org.bluez.GattCharacteristic1", characteristicProperties)]))
        return .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!, objects)
    }

    /// The mirror's tree after GetManagedObjects.
    static func tree() -> BlueZObjectTree {
        var tree = BlueZObjectTree()
        _ = tree.replace(withManagedObjects: managedObjects())
        return tree
    }

    /// A scan's PropertiesChanged: a new RSSI and ManufacturerData (bluetoothd sends
    /// both when an advertisement's data changed), nothing invalidated.
    static func devicePropertiesChanged(_ index: Int, serial: UInt32) -> DBusMessage {
        var message = DBusMessage.signal(
            path: devicePath(index), interface: BlueZ.properties, member: "PropertiesChanged",
            arguments: [.string(BlueZ.deviceInterface),
                        orderedVariantDictionary([("RSSI", .int16(rssi(index + Int(serial)))),
                                                  ("ManufacturerData", manufacturerDataValue(index + Int(serial)))]),
                        .stringArray([])])
        message.serial = serial
        return message
    }

    /// A notification: the characteristic's `Value` alone.
    static func valueChanged(_ sequence: Int) -> DBusMessage {
        var message = DBusMessage.signal(
            path: characteristicPath, interface: BlueZ.properties, member: "PropertiesChanged",
            arguments: [.string(BlueZ.characteristicInterface), orderedVariantDictionary([("Value", .bytes(notificationValue(sequence)))]),
                        .stringArray([])])
        message.serial = UInt32(sequence)
        return message
    }

    /// The message on the wire as bluetoothd's libdbus sends it (with its sender, as the bus daemon fills it in).
    static func wire(_ message: DBusMessage) -> [UInt8] {
        var sent = message
        sent.sender = bluetoothd
        return try! MessageCodec.marshal(sent, serial: message.serial)
    }

    /// The message as libdbus holds it after reading it from the socket (what
    /// `dbus_connection_pop_message` hands the bus thread).
    static func loaded(_ message: DBusMessage) -> RawMessage {
        let bytes = wire(message)
        var error = DBusError_C()
        dbus_error_init(&error)
        let raw = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { dbus_message_demarshal($0.baseAddress, Int32($0.count), &error) }
        }
        guard let raw else { fatalError("libdbus rejected a fixture: \(String(cString: error.message))") }
        return RawMessage(taking: raw)
    }

    static func orderedVariantDictionary(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(key: .string, value: .variant, entries.map { DBusDictEntry(.string($0.0), .variant($0.1)) })
    }

    private static func hex2(_ value: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return digits.count < 2 ? "0" + digits : digits
    }
}

private extension String {
    func replacingColons() -> String { String(map { $0 == ":" ? "_" : $0 }) }
}
