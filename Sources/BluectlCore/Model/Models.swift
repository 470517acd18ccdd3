#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BluectlDBus

/// A Bluetooth adapter (controller) as BlueZ's `Adapter1` describes it.
public struct AdapterInfo: Sendable, Equatable {
    package var path: ObjectPath
    /// "hci0": the last element of the path.
    public var name: String { path.lastComponent }
    /// Its own Bluetooth address.
    public var address: BluetoothAddress?
    /// Whether that address is public or random.
    public var addressType: AddressType?
    /// The system's name for it (BlueZ's `Name`).
    public var systemName: String?
    /// The name it shows to other devices (BlueZ's `Alias`).
    public var alias: String?
    /// Whether it is powered on.
    public var powered: Bool
    /// "on", "off", "off-enabling", "on-disabling", "off-blocked" (BlueZ ≥ 5.64)
    public var powerState: String?
    /// Whether a discovery is running on it (by any client).
    public var discovering: Bool
    /// Whether other devices can discover it.
    public var discoverable: Bool
    /// Whether it accepts pairing.
    public var pairable: Bool
    /// The BlueZ release of the bluetoothd serving it ("5.66"), as its `Modalias` says (bluetoothd's
    /// Device ID, `usb:v1D6Bp0246dMMmm`: Linux Foundation, BlueZ, major and minor in hex); nil when
    /// main.conf sets another Device ID or there is none. D-Bus says the version nowhere else.
    public var bluezVersion: String?

    /// Reads `Adapter1` properties; wrong types count as absent.
    package init(path: ObjectPath, properties p: PropertyMap) {
        self.path = path
        address = p["Address"]?.string.flatMap { BluetoothAddress($0) }
        addressType = p["AddressType"]?.string.flatMap(AddressType.init(rawValue:))
        systemName = p["Name"]?.string
        alias = p["Alias"]?.string
        powered = p["Powered"]?.bool ?? false
        powerState = p["PowerState"]?.string
        discovering = p["Discovering"]?.bool ?? false
        discoverable = p["Discoverable"]?.bool ?? false
        pairable = p["Pairable"]?.bool ?? false
        bluezVersion = p["Modalias"]?.string.flatMap(Self.bluezVersion(modalias:))
    }

    /// "5.66" from "usb:v1D6Bp0246d0542"; nil for another vendor or product.
    package static func bluezVersion(modalias: String) -> String? {
        let prefix = "usb:v1d6bp0246d"
        let text = modalias.lowercased()
        guard text.hasPrefix(prefix), let number = UInt16(text.dropFirst(prefix.count), radix: 16) else { return nil }
        return "\(number >> 8).\(number & 0xff)"
    }

    /// CoreBluetooth's view of this adapter.
    public var centralState: CentralState {
        if powerState == "off-blocked" { return .unauthorized }
        if powerState == "on-disabling" || powerState == "off-enabling" { return .resetting }
        return powered ? .poweredOn : .poweredOff
    }
}

/// CBManagerState, derived from what BlueZ shows.
public enum CentralState: String, Sendable, Equatable, CaseIterable {
    /// Not known yet (before the first look at the bus).
    case unknown
    /// bluetoothd is restarting or the adapter is changing power state.
    case resetting
    /// bluetoothd runs but there is no adapter.
    case unsupported
    /// The bus policy denies access, or the adapter is rfkill-blocked.
    case unauthorized
    /// The adapter is powered off.
    case poweredOff
    /// The adapter is powered on and usable.
    case poweredOn

    /// The state from the facts: is org.bluez on the bus, did it refuse us,
    /// and the adapter in use (nil: none).
    public static func derive(bluetoothdRunning: Bool, accessDenied: Bool, adapter: AdapterInfo?) -> CentralState {
        if accessDenied { return .unauthorized }
        guard bluetoothdRunning else { return .resetting }
        guard let adapter else { return .unsupported }
        return adapter.centralState
    }
}

/// A remote device as BlueZ's `Device1` describes it: identity, connection
/// state and the advertisement data seen last.
public struct DeviceInfo: Sendable, Equatable {
    package var path: ObjectPath
    package var adapter: ObjectPath?
    /// The device's Bluetooth address, "AA:BB:CC:DD:EE:FF".
    public var address: BluetoothAddress
    /// Whether that address is public or random (nil: BlueZ did not say).
    public var addressType: AddressType?
    /// The name it advertises, when known.
    public var name: String?
    /// BlueZ's alias: a name set locally, else the advertised name, else the address with dashes.
    public var alias: String?
    /// dBm; nil when BlueZ reports none, or 127, HCI's "RSSI is not available".
    public var rssi: Int?
    /// BlueZ's RSSI is 127: an advertising report came, from a controller
    /// that does not measure its strength (the lab's emulated ones), which
    /// `rssi` (nil) cannot tell from no report at all.
    package var rssiUnavailable = false
    /// The transmit power it advertises, in dBm.
    public var txPower: Int?
    /// The services it advertises (or has, once resolved).
    public var serviceUUIDs: [BluetoothUUID]
    /// company identifier → data
    public var manufacturerData: [UInt16: [UInt8]]
    /// service UUID → data
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// The advertisement's Flags data type.
    public var advertisingFlags: [UInt8]?
    /// The GAP appearance it advertises.
    public var appearance: Int?
    /// BlueZ's icon name for its appearance or class.
    public var icon: String?
    /// Whether it is connected.
    public var connected: Bool
    /// Whether it is paired.
    public var paired: Bool
    /// Whether the pairing is stored (a bond).
    public var bonded: Bool
    /// Whether it is trusted (may connect without asking).
    public var trusted: Bool
    /// Whether it is blocked (BlueZ refuses its connections).
    public var blocked: Bool
    /// Whether its services have been discovered after connecting.
    public var servicesResolved: Bool

    /// Reads `Device1` properties; values of the wrong type count as absent,
    /// entries that cannot be understood are skipped.
    ///
    /// One pass over the properties (a scan builds one per advertisement):
    /// looking each field up by name searched the map twenty times.
    package init(path: ObjectPath, properties p: PropertyMap) {
        self.path = path
        serviceUUIDs = []
        manufacturerData = [:]
        serviceData = [:]
        (connected, paired, bonded, trusted, blocked, servicesResolved) = (false, false, false, false, false, false)
        var address: BluetoothAddress?
        for (key, value) in p {
            guard let property = Property(key) else { continue }
            switch property {
            case .adapter: adapter = value.objectPath
            case .address: address = value.string.flatMap { BluetoothAddress($0) }
            case .addressType: addressType = value.string.flatMap(AddressType.init(rawValue:))
            case .name: name = value.string
            case .alias: alias = value.string
            case .rssi:
                rssiUnavailable = value.integer == Self.rssiNotAvailable
                rssi = rssiUnavailable ? nil : value.integer
            case .txPower: txPower = value.integer
            case .uuids: serviceUUIDs = (value.stringArray ?? []).compactMap { try? BluetoothUUID($0) }
            case .manufacturerData:
                for entry in value.dictionaryEntries ?? [] {
                    guard case .uint16(let company) = entry.key, let data = entry.value.bytes else { continue }
                    manufacturerData[company] = data
                }
            case .serviceData:
                for entry in value.dictionaryEntries ?? [] {
                    guard let key = entry.key.string, let uuid = try? BluetoothUUID(key), let data = entry.value.bytes else { continue }
                    serviceData[uuid] = data
                }
            case .advertisingFlags: advertisingFlags = value.bytes
            case .appearance: appearance = value.integer
            case .icon: icon = value.string
            case .connected: connected = value.bool ?? false
            case .paired: paired = value.bool ?? false
            case .bonded: bonded = value.bool ?? false
            case .trusted: trusted = value.bool ?? false
            case .blocked: blocked = value.bool ?? false
            case .servicesResolved: servicesResolved = value.bool ?? false
            }
        }
        if adapter == nil { adapter = path.parent }
        self.address = address ?? Self.addressFromPath(path)
    }

    /// The `Device1` properties read into a `DeviceInfo`.
    private enum Property {
        case adapter, address, addressType, name, alias, rssi, txPower, uuids, manufacturerData, serviceData
        case advertisingFlags, appearance, icon, connected, paired, bonded, trusted, blocked, servicesResolved

        /// Told apart by length first: most names differ in length, and
        /// that costs no string comparison.
        init?(_ name: String) {
            let found: Property? = switch name.utf8.count {
            case 4: name == "Name" ? .name : name == "RSSI" ? .rssi : name == "Icon" ? .icon : nil
            case 5: name == "Alias" ? .alias : name == "UUIDs" ? .uuids : nil
            case 6: name == "Paired" ? .paired : name == "Bonded" ? .bonded : nil
            case 7: name == "Adapter" ? .adapter : name == "Address" ? .address : name == "TxPower" ? .txPower
                : name == "Trusted" ? .trusted : name == "Blocked" ? .blocked : nil
            case 9: name == "Connected" ? .connected : nil
            case 10: name == "Appearance" ? .appearance : nil
            case 11: name == "AddressType" ? .addressType : name == "ServiceData" ? .serviceData : nil
            case 16: name == "ManufacturerData" ? .manufacturerData : name == "AdvertisingFlags" ? .advertisingFlags
                : name == "ServicesResolved" ? .servicesResolved : nil
            default: nil
            }
            guard let found else { return nil }
            self = found
        }
    }

    /// The RSSI value (127) by which HCI advertising reports say "not available"; never a reading.
    public static let rssiNotAvailable = 127

    /// The address in ".../dev_AA_BB_…", for when the Address property is
    /// missing or unreadable; 00:00:00:00:00:00 for a path without one (BlueZ
    /// names every device object so: only a broken tree gets here).
    package static func addressFromPath(_ path: ObjectPath) -> BluetoothAddress {
        BluetoothAddress(pathElement: path.lastComponent) ?? BluetoothAddress(uint64: 0)!
    }

    /// The name to show: the advertised/GAP name, else BlueZ's alias unless
    /// that is only the address with dashes.
    public var displayName: String? {
        if let name, !name.isEmpty { return name }
        if let alias, alias != address.format(separator: UInt8(ascii: "-")) { return alias }
        return nil
    }
}

/// Whether a Bluetooth address is the device's public (IEEE-assigned) one or
/// a random one (static or private), as BlueZ's `AddressType` says.
public enum AddressType: String, Sendable, Equatable, CaseIterable {
    /// A public device address.
    case `public`
    /// A random address: static, or private resolvable/non-resolvable.
    case random
}
