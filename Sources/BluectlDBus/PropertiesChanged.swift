#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `org.freedesktop.DBus.Properties.PropertiesChanged(s, a{sv}, as)` in its
/// typed form: the interface, each changed property with the content of its
/// variant, the names invalidated.
///
/// BlueZ sends one per notification value and one per advertisement a scan
/// sees. The connection reads it straight from the message's marshalled
/// body into this form (`WireDecoder.propertiesChanged`), with no generic
/// value tree first, and every handler of the message — the mirror of
/// BlueZ's tree, a characteristic's value handler — reads this one decode
/// in place (`DBusMessage.withPropertiesChanged`). Such a message's `arguments` are
/// built from it on demand, for code that wants the generic values.
public struct PropertiesChanged: Sendable, Hashable {
    /// The interface whose properties changed (its first argument).
    public var interface: String
    /// The changed properties in the order they came, each the content of its variant.
    public var changed: [DBusProperty]
    /// The names of the properties invalidated (their values not sent).
    public var invalidated: [String]

    /// The signal's interface (the string decoded headers carry: `SharedNames`).
    public static let interfaceName = SharedNames.shared("org.freedesktop.DBus.Properties")
    /// The signal's member (the string decoded headers carry).
    public static let memberName = SharedNames.shared("PropertiesChanged")

    /// A change of `interface`'s properties.
    public init(interface: String, changed: [DBusProperty], invalidated: [String] = []) {
        self.interface = interface
        self.changed = changed
        self.invalidated = invalidated
    }

    /// From the generic values of a message built by hand or read by
    /// libdbus's iterator; nil unless they are `s`, `a{sv}`, `as`.
    public init?(arguments: [DBusValue]) {
        guard arguments.count == 3, case .string(let interface) = arguments[0],
              case .dictionary(let key, let value, let entries) = arguments[1],
              key == .string, value == .variant, let invalidated = arguments[2].stringArray,
              case .array(.string, _) = arguments[2] else { return nil }
        var changed: [DBusProperty] = []
        changed.reserveCapacity(entries.count)
        for entry in entries {
            guard case .string(let name) = entry.key, case .variant(let content) = entry.value else { return nil }
            changed.append(DBusProperty(name: name, value: content))
        }
        self.init(interface: interface, changed: changed, invalidated: invalidated)
    }

    /// The generic values: `s`, `a{sv}` (each value in its variant), `as`.
    public var arguments: [DBusValue] {
        [.string(interface),
         .dictionary(key: .string, value: .variant, changed.map { DBusDictEntry(.string($0.name), .variant($0.value)) }),
         .stringArray(invalidated)]
    }

    /// The value of the changed property `name` (the last one, should it
    /// come twice), variants unwrapped.
    public subscript(name: String) -> DBusValue? {
        changed.last(where: { $0.name == name })?.value.unwrapped
    }
}

/// One entry of a property dictionary (`a{sv}`): a name and the content of its variant.
public struct DBusProperty: Sendable, Hashable {
    /// The property's name.
    public let name: String
    /// Its value: the content of the variant it came in.
    public var value: DBusValue

    /// A property and its value.
    public init(name: String, value: DBusValue) {
        self.name = name
        self.value = value
    }
}

/// The names that arrive by the thousand — D-Bus's own signals, BlueZ's
/// interfaces and its longer property names — as shared strings: a name of
/// more than 15 bytes made from each message's copy would be an allocation
/// and a free, and stored once per object of a mirror of 10,000 devices.
/// (Names of 15 bytes or fewer are stored inline: nothing to share.)
package enum SharedNames {
    static let names: [String] = [
        "org.freedesktop.DBus.Properties", "PropertiesChanged",
        "org.freedesktop.DBus.ObjectManager", "InterfacesRemoved",
        "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus", "NameOwnerChanged",
        "org.bluez.Device1", "org.bluez.Adapter1", "org.bluez.GattService1", "org.bluez.GattCharacteristic1",
        "org.bluez.GattDescriptor1", "org.bluez.Battery1", "org.bluez.LEAdvertisingManager1", "org.bluez.GattManager1",
        "org.bluez.AdvertisementMonitorManager1", "org.bluez.Media1", "org.bluez.NetworkServer1",
        "org.bluez.AgentManager1", "org.bluez.ProfileManager1", "org.bluez.MediaControl1", "org.bluez.Input1",
        "org.bluez.Network1",
        "ManufacturerData", "ServicesResolved", "AdvertisingFlags", "DiscoverableTimeout", "ExperimentalFeatures",
        "WriteAcquired", "NotifyAcquired",
    ].filter { $0.utf8.count > 15 }

    /// `name`, or its shared copy.
    package static func shared(_ name: String) -> String {
        let length = name.utf8.count
        guard length > 15, length < byLength.count else { return name }
        for known in byLength[length] where known == name { return known }
        return name
    }

    /// `names` by length (index: the length in bytes), so that a name is
    /// compared only with the known names of its length: the search went
    /// through every name, twice per message.
    static let byLength: [[String]] = {
        var table = [[String]](repeating: [], count: (names.map(\.utf8.count).max() ?? 0) + 1)
        for name in names { table[name.utf8.count].append(name) }
        return table
    }()

    /// The UTF-8 text `bytes` as a string: a shared one when it is a known name.
    static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        if bytes.count > 15, bytes.count < byLength.count, let base = bytes.baseAddress {
            for known in byLength[bytes.count] {
                let same = known.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, base, bytes.count) == 0 }
                if same == true { return known }
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// `==` for names (bus, interface, member, property names), but names of
/// another length in UTF-8 are told apart without a string comparison: most
/// names compared differ, most of those in length, and comparing two strings
/// that differ is a call (about 100 instructions, per signal and
/// subscription). For ASCII, as D-Bus's names are, the same as `==`; two
/// spellings of one Unicode text that `==` holds equal but whose UTF-8
/// lengths differ are told apart.
@inlinable @inline(__always)
package func sameName(_ a: String, _ b: String) -> Bool {
    a.utf8.count == b.utf8.count && a == b
}

/// `sameName`, for a name a message may lack.
@inlinable @inline(__always)
package func sameName(_ a: String?, _ b: String) -> Bool {
    guard let a else { return false }
    return sameName(a, b)
}
