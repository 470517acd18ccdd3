import BluectlDBus

/// BlueZ's names on the bus.
public enum BlueZ {
    public static let service = "org.bluez"
    public static let root = ObjectPath(verified: "/org/bluez")
    public static let adapterInterface = "org.bluez.Adapter1"
    public static let deviceInterface = "org.bluez.Device1"
    public static let serviceInterface = "org.bluez.GattService1"
    public static let characteristicInterface = "org.bluez.GattCharacteristic1"
    public static let descriptorInterface = "org.bluez.GattDescriptor1"
    public static let agentManagerInterface = "org.bluez.AgentManager1"
    public static let objectManager = "org.freedesktop.DBus.ObjectManager"
    public static let properties = "org.freedesktop.DBus.Properties"
}

/// Properties of one interface, with the variants unwrapped.
public typealias PropertyMap = [String: DBusValue]

/// A copy of BlueZ's object tree (what `GetManagedObjects` returns), kept up
/// to date by applying its signals. A pure value: the mirror feeds it in bus
/// order; tests feed it by hand.
public struct BlueZObjectTree: Sendable, Equatable {
    /// path → interface → properties
    public private(set) var objects: [ObjectPath: [String: PropertyMap]] = [:]

    public init() {}

    /// What a change did, for listeners.
    public enum Change: Sendable, Equatable {
        case added(ObjectPath, interfaces: [String])
        case removed(ObjectPath, interfaces: [String])
        case propertiesChanged(ObjectPath, interface: String, changed: PropertyMap, invalidated: [String])
        /// The whole tree was replaced (first snapshot, or bluetoothd restarted).
        case replaced
    }

    public subscript(path: ObjectPath) -> [String: PropertyMap]? { objects[path] }

    public func properties(_ path: ObjectPath, _ interface: String) -> PropertyMap? {
        objects[path]?[interface]
    }

    /// Paths that carry `interface`, sorted.
    public func paths(with interface: String) -> [ObjectPath] {
        objects.compactMap { $0.value[interface] != nil ? $0.key : nil }.sorted()
    }

    // MARK: applying BlueZ's messages

    /// Replaces everything with a `GetManagedObjects` reply (`a{oa{sa{sv}}}`).
    /// Returns nil when the reply is not of that type.
    public mutating func replace(withManagedObjects value: DBusValue) -> Change? {
        guard let byPath = value.objectPathKeyedDictionary else { return nil }
        var fresh: [ObjectPath: [String: PropertyMap]] = [:]
        for (path, interfacesValue) in byPath {
            guard let interfaces = Self.interfaces(interfacesValue) else { continue }
            fresh[path] = interfaces
        }
        objects = fresh
        return .replaced
    }

    public mutating func clear() -> Change {
        objects = [:]
        return .replaced
    }

    /// `InterfacesAdded(o, a{sa{sv}})`
    public mutating func apply(interfacesAdded arguments: [DBusValue]) -> Change? {
        guard arguments.count == 2, let path = arguments[0].objectPath,
              let interfaces = Self.interfaces(arguments[1]) else { return nil }
        var existing = objects[path] ?? [:]
        for (name, properties) in interfaces {
            existing[name, default: [:]].merge(properties) { _, new in new }
        }
        objects[path] = existing
        return .added(path, interfaces: interfaces.keys.sorted())
    }

    /// `InterfacesRemoved(o, as)`
    public mutating func apply(interfacesRemoved arguments: [DBusValue]) -> Change? {
        guard arguments.count == 2, let path = arguments[0].objectPath,
              let names = arguments[1].stringArray else { return nil }
        guard var existing = objects[path] else { return .removed(path, interfaces: names) }
        for name in names { existing.removeValue(forKey: name) }
        objects[path] = existing.isEmpty ? nil : existing
        return .removed(path, interfaces: names)
    }

    /// `PropertiesChanged(s, a{sv}, as)` emitted by `path`. Changes for an
    /// object or interface we don't know are ignored (BlueZ announces objects
    /// with InterfacesAdded first).
    public mutating func apply(propertiesChangedAt path: ObjectPath, arguments: [DBusValue]) -> Change? {
        guard arguments.count == 3, let interface = arguments[0].string,
              let changedValue = arguments[1].stringKeyedDictionary,
              let invalidated = arguments[2].stringArray else { return nil }
        guard objects[path]?[interface] != nil else { return nil }
        var changed: PropertyMap = [:]
        for (key, value) in changedValue { changed[key] = value.unwrapped }
        objects[path]![interface]!.merge(changed) { _, new in new }
        for key in invalidated { objects[path]![interface]!.removeValue(forKey: key) }
        return .propertiesChanged(path, interface: interface, changed: changed, invalidated: invalidated)
    }

    private static func interfaces(_ value: DBusValue) -> [String: PropertyMap]? {
        guard let byName = value.stringKeyedDictionary else { return nil }
        var result: [String: PropertyMap] = [:]
        for (name, propertiesValue) in byName {
            guard let properties = propertiesValue.stringKeyedDictionary else { continue }
            result[name] = properties.mapValues(\.unwrapped)
        }
        return result
    }
}
