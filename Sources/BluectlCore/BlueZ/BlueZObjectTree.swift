import BluectlDBus

/// BlueZ's names on the bus. The long ones are the very strings decoded
/// messages carry (`SharedNames`): comparing a message's name with one of
/// these is then a compare of two words, not of their bytes (per
/// notification value, and per advertisement a scan sees).
package enum BlueZ {
    package static let service = "org.bluez"
    package static let root = ObjectPath(verified: "/org/bluez")
    package static let adapterInterface = SharedNames.shared("org.bluez.Adapter1")
    package static let deviceInterface = SharedNames.shared("org.bluez.Device1")
    package static let serviceInterface = SharedNames.shared("org.bluez.GattService1")
    package static let characteristicInterface = SharedNames.shared("org.bluez.GattCharacteristic1")
    package static let descriptorInterface = SharedNames.shared("org.bluez.GattDescriptor1")
    /// A GATT database's objects: services, characteristics, descriptors.
    package static let gattInterfaces: Set<String> = [serviceInterface, characteristicInterface, descriptorInterface]
    package static let agentManagerInterface = SharedNames.shared("org.bluez.AgentManager1")
    package static let monitorManagerInterface = "org.bluez.AdvertisementMonitorManager1"
    package static let monitorInterface = "org.bluez.AdvertisementMonitor1"
    package static let objectManager = SharedNames.shared("org.freedesktop.DBus.ObjectManager")
    package static let properties = PropertiesChanged.interfaceName
}

/// A copy of BlueZ's object tree (what `GetManagedObjects` returns), kept up
/// to date by applying its signals. A pure value: the mirror feeds it in bus
/// order; tests feed it by hand.
package struct BlueZObjectTree: Sendable, Equatable {
    /// path → interface → properties
    package private(set) var objects: [ObjectPath: InterfaceMap] = [:] {
        didSet { recent = nil }   // an object added or removed moves the others
    }
    /// The object the last PropertiesChanged applied to and where it is in
    /// `objects`: a characteristic's values come one after another on one
    /// path, and each lookup hashed the whole path (some 600 instructions
    /// per value). Changing values in place leaves an index valid; any other
    /// change of `objects` forgets it. Not part of the tree's value.
    private var recent: (path: ObjectPath, index: Dictionary<ObjectPath, InterfaceMap>.Index)?
    /// The names the maps of `objects` share (`SmallMap`): not part of the
    /// tree's value (`==` ignores them).
    private var nameLists = NameLists()

    package init() {}

    package static func == (lhs: BlueZObjectTree, rhs: BlueZObjectTree) -> Bool { lhs.objects == rhs.objects }

    /// What a change did, for listeners.
    package enum Change: Sendable, Equatable {
        case added(ObjectPath, interfaces: [String])
        case removed(ObjectPath, interfaces: [String])
        case propertiesChanged(ObjectPath, interface: String, changed: ChangedProperties, invalidated: [String])
        /// The whole tree was replaced (first snapshot, or bluetoothd restarted).
        case replaced
        /// bluetoothd left the bus (it stopped or crashed): every object is gone.
        case cleared
    }

    package subscript(path: ObjectPath) -> InterfaceMap? { objects[path] }

    package func properties(_ path: ObjectPath, _ interface: String) -> PropertyMap? {
        objects[path]?[interface]
    }

    /// Paths that carry `interface`, sorted.
    package func paths(with interface: String) -> [ObjectPath] {
        objects.compactMap { $0.value[interface] != nil ? $0.key : nil }.sorted()
    }

    // MARK: applying BlueZ's messages

    /// Replaces everything with a `GetManagedObjects` reply (`a{oa{sa{sv}}}`).
    /// Returns nil when the reply is not of that type.
    package mutating func replace(withManagedObjects value: DBusValue) -> Change? {
        guard let byPath = value.objectPathKeyedDictionary else { return nil }
        var fresh: [ObjectPath: InterfaceMap] = [:]
        for (path, interfacesValue) in byPath {
            guard let interfaces = interfaces(interfacesValue) else { continue }
            fresh[path] = interfaces
        }
        objects = fresh
        return .replaced
    }

    package mutating func clear() -> Change {
        objects = [:]
        return .cleared
    }

    /// `InterfacesAdded(o, a{sa{sv}})`
    package mutating func apply(interfacesAdded arguments: [DBusValue]) -> Change? {
        guard arguments.count == 2, let path = arguments[0].objectPath,
              let interfaces = interfaces(arguments[1]) else { return nil }
        guard var existing = objects[path] else {
            objects[path] = interfaces   // its names shared (`interfaces(_:)`)
            return .added(path, interfaces: interfaces.keys.sorted())
        }
        // interfaces new to the object join it; those it has take the new values
        var joined: [String] = []
        existing.changingNames(through: &nameLists) { existing in
            for (name, properties) in interfaces where existing[name] == nil {
                existing[name] = properties
                joined.append(name)
            }
        }
        for (name, properties) in interfaces where !joined.contains(name) {
            existing.modifyValue(forKey: name) { $0.changingNames(through: &nameLists) { $0.merge(properties) } }
        }
        objects[path] = existing
        return .added(path, interfaces: interfaces.keys.sorted())
    }

    /// `InterfacesRemoved(o, as)`
    package mutating func apply(interfacesRemoved arguments: [DBusValue]) -> Change? {
        guard arguments.count == 2, let path = arguments[0].objectPath,
              let names = arguments[1].stringArray else { return nil }
        guard var existing = objects[path] else { return .removed(path, interfaces: names) }
        existing.changingNames(through: &nameLists) { existing in
            for name in names { existing.removeValue(forKey: name) }
        }
        objects[path] = existing.isEmpty ? nil : existing
        return .removed(path, interfaces: names)
    }

    /// `PropertiesChanged(s, a{sv}, as)` emitted by `path`, as generic values.
    package mutating func apply(propertiesChangedAt path: ObjectPath, arguments: [DBusValue]) -> Change? {
        guard let change = PropertiesChanged(arguments: arguments) else { return nil }
        return apply(change, at: path)
    }

    /// A `PropertiesChanged` emitted by `path` (the mirror applies the one
    /// decode of the message its other handlers read too). Changes for an
    /// object or interface we don't know are ignored (BlueZ announces objects
    /// with InterfacesAdded first).
    package mutating func apply(_ change: PropertiesChanged, at path: ObjectPath) -> Change? {
        // An object or interface BlueZ has not announced: ignored.
        let index: Dictionary<ObjectPath, InterfaceMap>.Index
        if let recent, recent.path == path {
            index = recent.index
        } else {
            guard let found = objects.index(forKey: path) else { return nil }
            index = found
        }
        let changed = ChangedProperties(change.changed)
        // In place: one lookup of the path, and neither the object's
        // interfaces nor its properties are moved or copied (the optional
        // subscript's modify would move the object out and back in).
        // The lists moved out for the closure (which must not touch `self`
        // while `objects` is being modified) and back, not copied.
        var lists = NameLists()
        swap(&lists, &nameLists)
        let applied: Void? = objects.values[index].modifyValue(forKey: change.interface) { properties in
            properties.changingNames(through: &lists) { properties in
                properties.merge(changes: changed)
                for key in change.invalidated { properties.removeValue(forKey: key) }
            }
        }
        swap(&lists, &nameLists)
        recent = (path, index)   // after the change in place (it passed through `objects`' didSet)
        guard applied != nil else { return nil }
        return .propertiesChanged(path, interface: change.interface, changed: changed, invalidated: change.invalidated)
    }

    /// An `a{sa{sv}}` as maps, their names shared with the maps built
    /// before (`NameLists`); nil when it is not of that type.
    private mutating func interfaces(_ value: DBusValue) -> InterfaceMap? {
        guard let byName = value.dictionaryEntries else { return nil }
        // Each interface's properties, nil where they are not an a{sv} (left out).
        var properties = ContiguousArray<PropertyMap?>()
        properties.reserveCapacity(byName.count)
        for entry in byName {
            guard case .string = entry.key else { return nil }
            properties.append(entry.value.dictionaryEntries.flatMap { PropertyMap(entries: $0, sharing: &nameLists) })
        }
        if !properties.contains(where: { $0 == nil }), let shared = InterfaceMap(
            count: byName.count, sharing: &nameLists,
            name: { if case .string(let name) = byName[$0].key { name } else { nil } }, value: { properties[$0]! }) {
            return shared
        }
        // a name repeated (the last wins), or an interface left out: name by name
        var result = InterfaceMap(minimumCapacity: byName.count)
        for (entry, map) in zip(byName, properties) {
            guard case .string(let name) = entry.key, let map else { continue }
            result[name] = map
        }
        return result
    }
}

extension BlueZObjectTree.Change {
    /// What a change of the tree means for one device.
    package enum DeviceFate: Sendable, Equatable {
        /// Some of its `Device1` properties changed.
        case changed(ChangedProperties)
        /// It is gone: removed, or missing from the tree bluetoothd gave again.
        case gone
        /// bluetoothd left the bus.
        case bluetoothdStopped
    }

    /// What this change means for the device at `path` (nil: nothing),
    /// with `tree` as it is after the change.
    package func fate(ofDevice path: ObjectPath, in tree: borrowing BlueZObjectTree) -> DeviceFate? {
        switch self {
        case .propertiesChanged(path, BlueZ.deviceInterface, let changed, _):
            return .changed(changed)
        case .removed(path, let interfaces) where interfaces.contains(BlueZ.deviceInterface):
            return .gone
        case .replaced:
            return tree.properties(path, BlueZ.deviceInterface) == nil ? .gone : nil
        case .cleared:
            return .bluetoothdStopped
        default:
            return nil
        }
    }
}
