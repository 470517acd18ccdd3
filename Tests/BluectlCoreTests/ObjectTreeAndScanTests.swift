import BluectlDBus
import Testing
@testable import BluectlCore

/// Builders for BlueZ-shaped signal arguments.
enum Fixture {
    static let hci0 = ObjectPath("/org/bluez/hci0")!
    static let hci1 = ObjectPath("/org/bluez/hci1")!
    static func device(_ adapter: ObjectPath = hci0, _ suffix: String = "AA_BB_CC_DD_EE_FF") -> ObjectPath {
        adapter.appending("dev_" + suffix)!
    }

    static func interfaces(_ byName: [String: [String: DBusValue]]) -> DBusValue {
        .dictionary(key: .string, value: DBusSignature("a{sv}")!,
                    byName.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .stringVariantDictionary($0.value)) })
    }

    static func added(_ path: ObjectPath, _ byName: [String: [String: DBusValue]]) -> [DBusValue] {
        [.objectPath(path), interfaces(byName)]
    }

    static func changed(_ interface: String, _ properties: [String: DBusValue], invalidated: [String] = []) -> [DBusValue] {
        [.string(interface), .stringVariantDictionary(properties), .stringArray(invalidated)]
    }

    static func deviceProperties(adapter: ObjectPath = hci0, name: String? = "Thermo", rssi: Int16? = -60,
                                 uuids: [String] = ["0000180d-0000-1000-8000-00805f9b34fb"]) -> [String: DBusValue] {
        var p: [String: DBusValue] = [
            "Address": .string("AA:BB:CC:DD:EE:FF"), "AddressType": .string("random"),
            "Adapter": .objectPath(adapter), "UUIDs": .stringArray(uuids), "Connected": .boolean(false),
            "ManufacturerData": .dictionary(key: DBusSignature("q")!, value: .variant,
                                            [DBusDictEntry(.uint16(0xffff), .variant(.bytes([0, 1, 2, 3])))]),
            "ServiceData": .dictionary(key: .string, value: .variant,
                                       [DBusDictEntry(.string("00009999-0000-1000-8000-00805f9b34fb"), .variant(.bytes([4, 5])))]),
        ]
        if let name { p["Name"] = .string(name) }
        if let rssi { p["RSSI"] = .int16(rssi) }
        return p
    }
}

@Suite struct BlueZObjectTreeTests {
    @Test func appliesAddedChangedRemoved() throws {
        var tree = BlueZObjectTree()
        let path = Fixture.device()
        #expect(tree.apply(interfacesAdded: Fixture.added(path, [BlueZ.deviceInterface: Fixture.deviceProperties()]))
                == .added(path, interfaces: [BlueZ.deviceInterface]))
        #expect(tree.properties(path, BlueZ.deviceInterface)?["RSSI"] == .int16(-60), "variants are unwrapped")
        let change = tree.apply(propertiesChangedAt: path, arguments: Fixture.changed(BlueZ.deviceInterface, ["RSSI": .int16(-40)], invalidated: ["Name"]))
        #expect(change == .propertiesChanged(path, interface: BlueZ.deviceInterface, changed: ["RSSI": .int16(-40)], invalidated: ["Name"]))
        #expect(tree.properties(path, BlueZ.deviceInterface)?["RSSI"] == .int16(-40))
        #expect(tree.properties(path, BlueZ.deviceInterface)?["Name"] == nil)
        #expect(tree.apply(interfacesRemoved: [.objectPath(path), .stringArray([BlueZ.deviceInterface])])
                == .removed(path, interfaces: [BlueZ.deviceInterface]))
        #expect(tree[path] == nil, "an object with no interface left is gone")
    }

    @Test("devices announced alike share their names; a change of one leaves the others as they were")
    func devicesShareNames() throws {
        var tree = BlueZObjectTree()
        let one = Fixture.device(Fixture.hci0, "AA_BB_CC_DD_EE_01"), two = Fixture.device(Fixture.hci0, "AA_BB_CC_DD_EE_02")
        _ = tree.apply(interfacesAdded: Fixture.added(one, [BlueZ.deviceInterface: Fixture.deviceProperties(rssi: -60)]))
        _ = tree.apply(interfacesAdded: Fixture.added(two, [BlueZ.deviceInterface: Fixture.deviceProperties(rssi: -70)]))
        let first = try #require(tree.properties(one, BlueZ.deviceInterface))
        #expect(try #require(tree.properties(two, BlueZ.deviceInterface)).sharesNames(with: first))
        #expect(try #require(tree[two]).sharesNames(with: try #require(tree[one])), "the interface maps too")
        _ = tree.apply(propertiesChangedAt: two, arguments: Fixture.changed(BlueZ.deviceInterface, ["RSSI": .int16(-40)],
                                                                            invalidated: ["Name"]))
        #expect(tree.properties(two, BlueZ.deviceInterface)?["RSSI"] == .int16(-40))
        #expect(tree.properties(two, BlueZ.deviceInterface)?["Name"] == nil)
        #expect(tree.properties(one, BlueZ.deviceInterface)?["RSSI"] == .int16(-60), "the other device is unchanged")
        #expect(tree.properties(one, BlueZ.deviceInterface)?["Name"] == .string("Thermo"))
        // BlueZ invalidates every device's RSSI when discovery stops: the copies are shared again
        _ = tree.apply(propertiesChangedAt: one, arguments: Fixture.changed(BlueZ.deviceInterface, [:], invalidated: ["RSSI", "Name"]))
        _ = tree.apply(propertiesChangedAt: two, arguments: Fixture.changed(BlueZ.deviceInterface, [:], invalidated: ["RSSI"]))
        let oneNow = try #require(tree.properties(one, BlueZ.deviceInterface))
        let twoNow = try #require(tree.properties(two, BlueZ.deviceInterface))
        #expect(oneNow.sharesNames(with: twoNow), "each copied its names when it lost one; now they share one list again")
        #expect(oneNow["RSSI"] == nil && twoNow["Name"] == nil && oneNow.count == first.count - 2)
        var other = BlueZObjectTree()
        _ = other.apply(interfacesAdded: Fixture.added(one, [BlueZ.deviceInterface: Fixture.deviceProperties(name: nil, rssi: nil)]))
        _ = other.apply(interfacesAdded: Fixture.added(two, [BlueZ.deviceInterface: Fixture.deviceProperties(name: nil, rssi: nil)]))
        #expect(other == tree, "== compares the objects, not how their names are held")
        #expect(try #require(other.properties(one, BlueZ.deviceInterface)).sharesNames(with: oneNow) == false,
                "another tree keeps lists of its own")
    }

    @Test("InterfacesAdded: an interface that is not an a{sv} is left out, a repeated one keeps the last; a name not a string fails")
    func interfacesAddedOddShapes() throws {
        var tree = BlueZObjectTree()
        let path = Fixture.device()
        let device = DBusDictEntry(.string(BlueZ.deviceInterface), .stringVariantDictionary(["RSSI": .int16(-60)]))
        let again = DBusDictEntry(.string(BlueZ.deviceInterface), .stringVariantDictionary(["RSSI": .int16(-50)]))
        let odd = DBusDictEntry(.string("org.bluez.Battery1"), .uint32(7))
        let byName = DBusValue.dictionary(key: .string, value: DBusSignature("a{sv}")!, [device, odd, again])
        #expect(tree.apply(interfacesAdded: [.objectPath(path), byName]) != nil)
        #expect(tree[path]?.keys == [BlueZ.deviceInterface], "Battery1's value is no a{sv}: left out")
        #expect(tree.properties(path, BlueZ.deviceInterface) == ["RSSI": .int16(-50)], "the last Device1 wins")
        let notString = DBusValue.dictionary(key: DBusSignature("q")!, value: DBusSignature("a{sv}")!, [DBusDictEntry(.uint16(1), device.value)])
        #expect(tree.apply(interfacesAdded: [.objectPath(Fixture.device(Fixture.hci0, "00_00_00_00_00_01")), notString]) == nil)
        // the same through GetManagedObjects
        var snapshot = BlueZObjectTree()
        #expect(snapshot.replace(withManagedObjects: .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!,
                                                                 [DBusDictEntry(.objectPath(path), byName)])) == .replaced)
        #expect(snapshot == tree)
        // a second InterfacesAdded for the object: a new interface joins, a known one merges
        _ = tree.apply(interfacesAdded: Fixture.added(path, ["org.bluez.Battery1": ["Percentage": .byte(90)],
                                                             BlueZ.deviceInterface: ["Name": .string("Thermo")]]))
        #expect(Set(try #require(tree[path]).keys) == [BlueZ.deviceInterface, "org.bluez.Battery1"])
        #expect(tree.properties(path, BlueZ.deviceInterface) == ["RSSI": .int16(-50), "Name": .string("Thermo")])
        #expect(tree.properties(path, "org.bluez.Battery1") == ["Percentage": .byte(90)])
    }

    @Test func ignoresMalformedAndUnknown() {
        var tree = BlueZObjectTree()
        #expect(tree.apply(interfacesAdded: [.string("not a path")]) == nil)
        #expect(tree.apply(interfacesAdded: [.objectPath(Fixture.hci0), .string("x")]) == nil)
        #expect(tree.apply(propertiesChangedAt: Fixture.hci0, arguments: Fixture.changed(BlueZ.adapterInterface, ["Powered": .boolean(false)])) == nil,
                "changes for objects never added are ignored")
        #expect(tree.apply(propertiesChangedAt: Fixture.hci0, arguments: [.int32(1)]) == nil)
        #expect(tree.replace(withManagedObjects: .string("nope")) == nil)
        #expect(tree.objects.isEmpty)
    }

    @Test func replaceWithManagedObjects() {
        var tree = BlueZObjectTree()
        let snapshot = DBusValue.dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!, [
            DBusDictEntry(.objectPath(Fixture.hci0), Fixture.interfaces([BlueZ.adapterInterface: ["Powered": .boolean(true), "Address": .string("00:01:02:03:04:05")]])),
        ])
        #expect(tree.replace(withManagedObjects: snapshot) == .replaced)
        #expect(tree.paths(with: BlueZ.adapterInterface) == [Fixture.hci0])
        let adapter = AdapterInfo(path: Fixture.hci0, properties: tree.properties(Fixture.hci0, BlueZ.adapterInterface)!)
        #expect(adapter.name == "hci0")
        #expect(adapter.powered)
        #expect(adapter.centralState == .poweredOn)
    }
}

@Suite struct CentralStateTests {
    static func adapter(powered: Bool, powerState: String? = nil) -> AdapterInfo {
        var p: PropertyMap = ["Powered": .boolean(powered)]
        if let powerState { p["PowerState"] = .string(powerState) }
        return AdapterInfo(path: Fixture.hci0, properties: p)
    }

    @Test func derivation() {
        #expect(CentralState.derive(bluetoothdRunning: true, accessDenied: true, adapter: Self.adapter(powered: true)) == .unauthorized)
        #expect(CentralState.derive(bluetoothdRunning: false, accessDenied: false, adapter: nil) == .resetting)
        #expect(CentralState.derive(bluetoothdRunning: true, accessDenied: false, adapter: nil) == .unsupported)
        #expect(CentralState.derive(bluetoothdRunning: true, accessDenied: false, adapter: Self.adapter(powered: false)) == .poweredOff)
        #expect(CentralState.derive(bluetoothdRunning: true, accessDenied: false, adapter: Self.adapter(powered: true)) == .poweredOn)
        #expect(CentralState.derive(bluetoothdRunning: true, accessDenied: false, adapter: Self.adapter(powered: false, powerState: "off-blocked")) == .unauthorized)
        #expect(CentralState.derive(bluetoothdRunning: true, accessDenied: false, adapter: Self.adapter(powered: false, powerState: "off-enabling")) == .resetting)
    }

    @Test func wrongTypesCountAsAbsent() {
        let adapter = AdapterInfo(path: Fixture.hci0, properties: ["Powered": .string("yes"), "Address": .int32(5)])
        #expect(!adapter.powered)
        #expect(adapter.address == nil)
        let device = DeviceInfo(path: Fixture.device(), properties: [
            "RSSI": .string("-50"), "ManufacturerData": .stringArray(["x"]), "UUIDs": .stringArray(["zz", "180f"]),
        ])
        #expect(device.rssi == nil)
        #expect(device.manufacturerData.isEmpty)
        #expect(device.serviceUUIDs == [BluetoothUUID(uint16: 0x180f)], "unparsable UUIDs are skipped")
        #expect(device.address.description == "AA:BB:CC:DD:EE:FF", "from the path when the property is missing")
        let odd = DeviceInfo(path: Fixture.device(), properties: ["Address": .string("not an address"), "AddressType": .string("odd")])
        #expect(odd.address.description == "AA:BB:CC:DD:EE:FF", "from the path when the property does not parse")
        #expect(odd.addressType == nil, "an address type BlueZ does not define counts as absent")
        let typed = DeviceInfo(path: Fixture.device(), properties: ["Address": .string("11:22:33:44:55:66"), "AddressType": .string("random")])
        #expect(typed.address == BluetoothAddress("11:22:33:44:55:66") && typed.addressType == .random)
    }

    @Test func rssiNotAvailableIsNoReading() {
        #expect(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: 127)).rssi == nil)
        #expect(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: 126)).rssi == 126)
        #expect(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: -127)).rssi == -127)
        // A report without its strength, told apart from no report (the proxy forwards the first only).
        #expect(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: 127)).rssiUnavailable)
        #expect(!DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: -127)).rssiUnavailable)
    }
}

@Suite struct ScanTests {
    func tree(with properties: [String: DBusValue], at path: ObjectPath = Fixture.device()) -> (BlueZObjectTree, BlueZObjectTree.Change) {
        var tree = BlueZObjectTree()
        let change = tree.apply(interfacesAdded: Fixture.added(path, [BlueZ.deviceInterface: properties]))!
        return (tree, change)
    }

    @Test func discoveryFilterCarriesEveryOption() {
        var options = ScanOptions()
        options.services = [BluetoothUUID(uint16: 0x180d)]
        options.rssi = -70
        options.pathloss = 30
        options.duplicates = true
        options.pattern = "AA:BB"
        let filter = options.discoveryFilter.stringKeyedDictionary!
        #expect(filter["UUIDs"] == .variant(.stringArray(["0000180d-0000-1000-8000-00805f9b34fb"])))
        #expect(filter["RSSI"] == .variant(.int16(-70)))
        #expect(filter["Pathloss"] == .variant(.uint16(30)))
        #expect(filter["Transport"] == .variant(.string("le")))
        #expect(filter["DuplicateData"] == .variant(.boolean(true)))
        #expect(filter["Pattern"] == .variant(.string("AA:BB")))
        #expect(options.discoveryFilter.signature.rawValue == "a{sv}")
    }

    @Test func addedDeviceIsDiscoveredOnce() {
        var tracker = ScanTracker(adapter: Fixture.hci0, options: ScanOptions())
        let (tree, change) = tree(with: Fixture.deviceProperties())
        let first = tracker.handle(change, in: tree)
        #expect(first?.kind == .discovered)
        #expect(first?.device.name == "Thermo")
        #expect(first?.device.manufacturerData == [0xffff: [0, 1, 2, 3]])
        #expect(first?.device.serviceData == [BluetoothUUID(uint16: 0x9999): [4, 5]])
        let again = BlueZObjectTree.Change.propertiesChanged(Fixture.device(), interface: BlueZ.deviceInterface, changed: ["RSSI": .int16(-50)], invalidated: [])
        #expect(tracker.handle(again, in: tree) == nil, "no duplicates unless asked")
    }

    @Test func duplicatesReportUpdates() {
        var options = ScanOptions()
        options.duplicates = true
        var tracker = ScanTracker(adapter: Fixture.hci0, options: options)
        var (tree, change) = tree(with: Fixture.deviceProperties())
        _ = tracker.handle(change, in: tree)
        let update = tree.apply(propertiesChangedAt: Fixture.device(), arguments: Fixture.changed(BlueZ.deviceInterface, ["RSSI": .int16(-45)]))!
        let discovery = tracker.handle(update, in: tree)
        #expect(discovery?.kind == .updated)
        #expect(discovery?.device.rssi == -45)
        let connected = tree.apply(propertiesChangedAt: Fixture.device(), arguments: Fixture.changed(BlueZ.deviceInterface, ["Connected": .boolean(true)]))!
        #expect(tracker.handle(connected, in: tree) == nil, "only advertisement changes are updates")
    }

    @Test func cachedDeviceCountsWhenSeenAgain() {
        var tracker = ScanTracker(adapter: Fixture.hci0, options: ScanOptions())
        var (tree, _) = tree(with: Fixture.deviceProperties(rssi: nil))
        #expect(tracker.start(with: tree).isEmpty, "no RSSI: not in range as far as we know")
        let seen = tree.apply(propertiesChangedAt: Fixture.device(), arguments: Fixture.changed(BlueZ.deviceInterface, ["RSSI": .int16(-70)]))!
        #expect(tracker.handle(seen, in: tree)?.kind == .discovered)
    }

    @Test func otherAdaptersAndFiltersAreExcluded() {
        var options = ScanOptions()
        options.services = [BluetoothUUID(uint16: 0x180f)]
        var tracker = ScanTracker(adapter: Fixture.hci0, options: options)
        let (tree1, change1) = tree(with: Fixture.deviceProperties())
        #expect(tracker.handle(change1, in: tree1) == nil, "advertises 180d, not 180f")
        var other = ScanTracker(adapter: Fixture.hci1, options: ScanOptions())
        #expect(other.handle(change1, in: tree1) == nil, "device belongs to hci0")
        var byName = ScanOptions()
        byName.nameContains = "THER"
        #expect(byName.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties())))
        byName.nameContains = "phone"
        #expect(!byName.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties())))
        var byRSSI = ScanOptions()
        byRSSI.rssi = -50
        #expect(!byRSSI.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: -60))))
        #expect(!byRSSI.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: nil))))
        #expect(byRSSI.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(rssi: -50))))
        var byServiceData = ScanOptions()
        byServiceData.services = [BluetoothUUID(uint16: 0x9999)]
        #expect(byServiceData.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(uuids: []))))
    }

    /// Found by Scripts/fuzz: the name filter used Foundation's `contains`,
    /// which traps when the needle holds a NUL character. ScanOptions is
    /// public API; the command line cannot pass a NUL, a library caller can.
    @Test func nameFilterWithUnusualCharactersDoesNotTrap() {
        var options = ScanOptions()
        options.nameContains = "\u{FFFD}\u{0}"
        let odd = Fixture.deviceProperties(name: "AA-BB-Ct" + String(repeating: "\u{FFFD}", count: 9))
        #expect(!options.matches(DeviceInfo(path: Fixture.device(), properties: odd)))
        options.nameContains = "\u{0}"
        #expect(!options.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties())))
        options.nameContains = "ct\u{FFFD}"
        #expect(options.matches(DeviceInfo(path: Fixture.device(), properties: odd)))
        options.nameContains = "e\u{301}" // canonically equivalent to é
        #expect(options.matches(DeviceInfo(path: Fixture.device(), properties: Fixture.deviceProperties(name: "Café"))))
    }

    @Test func removedDeviceCanBeDiscoveredAgain() {
        var tracker = ScanTracker(adapter: Fixture.hci0, options: ScanOptions())
        var (tree, change) = tree(with: Fixture.deviceProperties())
        #expect(tracker.handle(change, in: tree)?.kind == .discovered)
        let removed = tree.apply(interfacesRemoved: [.objectPath(Fixture.device()), .stringArray([BlueZ.deviceInterface])])!
        #expect(tracker.handle(removed, in: tree) == nil)
        let again = tree.apply(interfacesAdded: Fixture.added(Fixture.device(), [BlueZ.deviceInterface: Fixture.deviceProperties()]))!
        #expect(tracker.handle(again, in: tree)?.kind == .discovered)
    }
}

/// The fixtures build `a{sv}` dictionaries (as on the bus); models take a `PropertyMap`.
extension DeviceInfo {
    init(path: ObjectPath, properties: [String: DBusValue]) {
        self.init(path: path, properties: PropertyMap(properties))
    }
}
