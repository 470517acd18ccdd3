import BluectlDBus
import Testing
@testable import BluectlCore

private func path(_ text: String) -> ObjectPath { ObjectPath(text)! }
private let dev = "/org/bluez/hci1/dev_00_AA_01_00_00_00"

/// A tree with a heart-rate service and two characteristics sharing one vendor UUID.
private func tree() -> BlueZObjectTree {
    var t = BlueZObjectTree()
    func add(_ p: String, _ interface: String, _ props: [String: DBusValue]) {
        _ = t.apply(interfacesAdded: [.objectPath(path(p)), .dictionary(key: .string, value: DBusSignature("a{sv}")!, [
            DBusDictEntry(.string(interface), .stringVariantDictionary(props)),
        ])])
    }
    add(dev, BlueZ.deviceInterface, ["Address": .string("00:AA:01:00:00:00"), "Connected": .boolean(true)])
    add(dev + "/service000a", BlueZ.serviceInterface, [
        "UUID": .string("0000180d-0000-1000-8000-00805f9b34fb"), "Primary": .boolean(true), "Handle": .uint16(10),
        "Device": .objectPath(path(dev)),
    ])
    add(dev + "/service000a/char000b", BlueZ.characteristicInterface, [
        "UUID": .string("00002a37-0000-1000-8000-00805f9b34fb"), "Flags": .stringArray(["notify"]), "Handle": .uint16(11),
        "Service": .objectPath(path(dev + "/service000a")), "MTU": .uint16(517),
    ])
    add(dev + "/service000a/char000b/desc000d", BlueZ.descriptorInterface, [
        "UUID": .string("00002902-0000-1000-8000-00805f9b34fb"), "Handle": .uint16(13),
        "Characteristic": .objectPath(path(dev + "/service000a/char000b")),
    ])
    add(dev + "/service0010", BlueZ.serviceInterface, [
        "UUID": .string("12345678-1234-5678-1234-56789abcdef0"), "Primary": .boolean(true), "Handle": .uint16(16),
    ])
    for handle in ["0011", "0013"] {
        add(dev + "/service0010/char\(handle)", BlueZ.characteristicInterface, [
            "UUID": .string("12345678-1234-5678-1234-56789abcdef1"), "Flags": .stringArray(["read", "write"]),
            "Handle": .uint16(UInt16(handle, radix: 16)!),
        ])
    }
    return t
}

@Suite struct GattDatabaseTests {
    @Test func readsTheTreeInHandleOrder() {
        let db = GattDatabase(tree: tree(), device: path(dev))
        #expect(db.services.map(\.handle) == [10, 16])
        #expect(db.characteristics.map(\.handle) == [11, 17, 19])
        #expect(db.descriptors.count == 1)
        #expect(db.characteristics(of: db.services[0]).count == 1)
        #expect(db.descriptors(of: db.characteristics[0]).first?.uuid == BluetoothUUID(uint16: 0x2902))
        #expect(db.characteristics[0].mtu == 517)
        #expect(db.characteristics[0].maximumWriteValueLength(for: .withoutResponse) == 514)
        #expect(db.characteristics[1].maximumWriteValueLength(for: .withoutResponse) == 20)
        #expect(db.characteristics[0].maximumWriteValueLength(for: .withResponse) == 512)
    }

    @Test func findsByUUIDName() throws {
        let db = GattDatabase(tree: tree(), device: path(dev))
        let c = try db.characteristic(AttributeSelector("heart_rate_measurement", kind: .characteristic))
        #expect(c.handle == 11)
        #expect(c.properties.canNotify && !c.properties.canRead)
    }

    @Test func duplicateUUIDsAreAmbiguousButHandleAndPathWork() throws {
        let db = GattDatabase(tree: tree(), device: path(dev))
        let selector = try AttributeSelector("12345678-1234-5678-1234-56789abcdef1", kind: .characteristic)
        #expect(throws: BluetoothError.self) { try db.characteristic(selector) }
        do {
            _ = try db.characteristic(selector)
        } catch {
            guard case .ambiguous(_, _, let candidates) = error else { Issue.record("expected ambiguous"); return }
            #expect(candidates.count == 2)
            #expect(candidates[0].hasPrefix("handle:0x0011 "))  // 17, in hex as bluectl shows handles
        }
        #expect(try db.characteristic(AttributeSelector("handle:0x13", kind: .characteristic)).handle == 19)
        #expect(try db.characteristic(AttributeSelector(dev + "/service0010/char0011", kind: .characteristic)).handle == 17)
    }

    @Test func notFoundListsWhatExists() throws {
        let db = GattDatabase(tree: tree(), device: path(dev))
        do {
            _ = try db.characteristic(AttributeSelector("battery_level", kind: .characteristic))
            Issue.record("expected attributeNotFound")
        } catch {
            guard case .attributeNotFound(_, _, let existing) = error else { Issue.record("expected attributeNotFound"); return }
            #expect(existing.count == 3)
            #expect(error.description.contains("2a37"))
        }
        // Scoped to a service without it.
        #expect(throws: BluetoothError.self) {
            try db.characteristic(.uuid(BluetoothUUID(uint16: 0x2a37)), service: BluetoothUUID(uint16: 0x180f))
        }
    }

    @Test func selectorsRejectNonsense() {
        #expect(throws: BluetoothError.self) { try AttributeSelector("handle:zz", kind: .characteristic) }
        #expect(throws: BluetoothError.self) { try AttributeSelector("handle:0", kind: .characteristic) }
        #expect(throws: BluetoothError.self) { try AttributeSelector("/not a path", kind: .characteristic) }
        #expect(throws: BluetoothError.self) { try AttributeSelector("no_such_name", kind: .characteristic) }
    }

    @Test func propertiesFromFlags() {
        let p = CharacteristicProperties(flags: ["encrypt-read", "write-without-response", "indicate"])
        #expect(p.canRead && p.contains(.encryptedRead))
        #expect(p.canWriteWithoutResponse && !p.canWriteWithResponse)
        #expect(p.canNotify)
        #expect(CharacteristicProperties(flags: []).isEmpty)
    }
}

@Suite struct AttributeHandleTests {
    @Test func handlesFromBlueZPaths() {
        #expect(BlueZ566.attributeHandle(fromPath: ObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00/service0015")!) == 0x15)
        #expect(BlueZ566.attributeHandle(fromPath: ObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00/service0015/char0016")!) == 0x16)
        #expect(BlueZ566.attributeHandle(fromPath: ObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00/service0015/char0016/desc0018")!) == 0x18)
        #expect(BlueZ566.attributeHandle(fromPath: ObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00")!) == nil)
        #expect(BlueZ566.attributeHandle(fromPath: ObjectPath("/x/charzzzz")!) == nil)
        #expect(BlueZ566.attributeHandle(fromPath: ObjectPath("/x/char0000")!) == nil)
    }
}
