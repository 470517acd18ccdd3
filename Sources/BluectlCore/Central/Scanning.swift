import BluectlDBus

/// What to scan for: CoreBluetooth's `scanForPeripherals(withServices:options:)`
/// in BlueZ's terms (`SetDiscoveryFilter`).
public struct ScanOptions: Sendable, Equatable {
    /// Report only devices advertising one of these services (empty: all).
    public var services: [BluetoothUUID] = []
    /// Minimum RSSI in dBm.
    public var rssi: Int?
    /// Maximum path loss in dB.
    public var pathloss: Int?
    /// Which radio to scan with (default: Low Energy).
    public var transport: ScanTransport = .le
    /// Report every advertisement (CBCentralManagerScanOptionAllowDuplicatesKey).
    public var duplicates = false
    /// BlueZ's Pattern: an address or name prefix.
    public var pattern: String?
    /// Report only devices whose name or alias contains this (case-insensitive).
    public var nameContains: String?
    /// Decode each result's sensor advertisement (`Discovery.sensor`): the formats of
    /// `SensorDecoders`, with a scan-long `SensorDecoder` (the counter check).
    public var decodesSensors = false
    /// Report only devices that advertise a sensor format: a reading, or the reason their
    /// frame gives none (`Discovery.sensor` not nil). Implies `decodesSensors`.
    public var sensorsOnly = false
    /// The keys of encrypted sensors.
    public var sensorKeys = SensorKeys()
    /// Scan passively instead: an advertisement monitor with these patterns
    /// (`AdvertisementMonitor`; bluetoothd 5.66 offers it only with `--experimental`) in
    /// place of SetDiscoveryFilter and StartDiscovery. No scan requests, so no scan
    /// responses (most devices' names); `services`, `rssi`, `pattern` are then checked by
    /// bluectl alone, and `transport`, `pathloss` and `duplicates` mean nothing to bluetoothd
    /// (it reports every change of a monitored device's advertisement).
    public var passive: [AdvertisementPattern]?

    /// Options for a scan of every device, with no filter.
    public init() {}

    /// The `SetDiscoveryFilter` argument.
    package var discoveryFilter: DBusValue {
        var filter: [String: DBusValue] = [
            "Transport": .string(transport.rawValue),
            "DuplicateData": .boolean(duplicates),
        ]
        if !services.isEmpty { filter["UUIDs"] = .stringArray(services.map(\.uuidString)) }
        if let rssi { filter["RSSI"] = .int16(Int16(clamping: rssi)) }
        if let pathloss { filter["Pathloss"] = .uint16(UInt16(clamping: pathloss)) }
        if let pattern { filter["Pattern"] = .string(pattern) }
        return .stringVariantDictionary(filter)
    }

    /// The filter as the trace shows it: "transport le, duplicates off, services 180d".
    var traceDescription: String {
        var parts = passive.map { ["passive, \($0.count) patterns"] }
            ?? ["transport \(transport.rawValue)", "duplicates \(duplicates ? "on" : "off")"]
        if !services.isEmpty { parts.append("services " + services.map(\.shortString).joined(separator: ",")) }
        if let rssi { parts.append("rssi >= \(rssi)") }
        if let nameContains { parts.append("name contains \"\(nameContains)\" (checked by bluectl)") }
        return parts.joined(separator: ", ")
    }

    /// BlueZ merges the filters of all its clients, so every result is checked
    /// again against ours (docs/bluez-pitfalls.md, 9).
    public func matches(_ device: DeviceInfo) -> Bool {
        if !services.isEmpty {
            let advertised = Set(device.serviceUUIDs).union(device.serviceData.keys)
            guard services.contains(where: advertised.contains) else { return false }
        }
        if let rssi {
            guard let seen = device.rssi, seen >= rssi else { return false }
        }
        if let needle = nameContains?.lowercased(), !needle.isEmpty {
            let names = [device.name, device.alias].compactMap { $0?.lowercased() }
            // The standard library's search, not Foundation's `contains`, which
            // traps on a needle with a NUL character (found by Scripts/fuzz).
            guard names.contains(where: { $0.firstRange(of: needle) != nil }) else { return false }
        }
        if let pattern, !pattern.isEmpty {
            let names = [device.address.description, device.name ?? ""]
            guard names.contains(where: { $0.uppercased().hasPrefix(pattern.uppercased()) }) else { return false }
        }
        return true
    }
}

/// The radio a scan uses (BlueZ's discovery filter `Transport`).
public enum ScanTransport: String, Sendable, Equatable, CaseIterable {
    /// Bluetooth Low Energy only.
    case le
    /// Classic Bluetooth (BR/EDR) only.
    case bredr
    /// Both, interleaved (BlueZ's default without a filter).
    case auto
}

/// One scan result.
public struct Discovery: Sendable, Equatable {
    /// Why a device is reported.
    public enum Kind: String, Sendable {
        /// First advertisement of this device in this scan.
        case discovered
        /// A later change of its advertisement (only with `duplicates`).
        case updated
    }
    /// First sighting or a later change.
    public var kind: Kind
    /// The device as BlueZ knows it after this advertisement.
    public var device: DeviceInfo
    /// Its sensor reading, or why its sensor frame gives none; nil when it advertises no
    /// sensor format or the scan does not decode (`ScanOptions.decodesSensors`).
    public var sensor: Result<SensorReading, SensorDecodingError>?
}

/// Turns tree changes into scan results for one adapter: a pure value,
/// tested without a bus.
///
/// A device counts as seen in this scan when BlueZ adds it, or when one of
/// its advertisement properties changes. BlueZ drops RSSI when a discovery
/// ends, so a cached device that is in range again gets a fresh RSSI.
package struct ScanTracker: Sendable {
    package let adapter: ObjectPath
    package let options: ScanOptions
    package private(set) var seen: Set<ObjectPath> = []
    /// The scan's sensor decoder: its counters and devices' last entries live as long as the scan.
    private var sensors: SensorDecoder

    /// Whether `name` is a `Device1` property an advertisement sets: RSSI, TxPower,
    /// ManufacturerData, ServiceData, AdvertisingFlags, AdvertisingData. Told by
    /// length first, without hashing the name (a scan asks per advertisement).
    static func isAdvertisementProperty(_ name: String) -> Bool {
        switch name.utf8.count {
        case 4: name == "RSSI"
        case 7: name == "TxPower"
        case 11: name == "ServiceData"
        case 15: name == "AdvertisingData"
        case 16: name == "ManufacturerData" || name == "AdvertisingFlags"
        default: false
        }
    }

    /// An advertisement property, or one more that a scan line shows: Name, Alias, UUIDs.
    static func isDescribingProperty(_ name: String) -> Bool {
        switch name.utf8.count {
        case 4: name == "Name" || name == "RSSI"
        case 5: name == "Alias" || name == "UUIDs"
        default: isAdvertisementProperty(name)
        }
    }

    package init(adapter: ObjectPath, options: ScanOptions) {
        self.adapter = adapter
        self.options = options
        sensors = SensorDecoder(keys: options.sensorKeys)
    }

    /// Devices already in range when the scan starts: those with an RSSI,
    /// which BlueZ only keeps while some discovery is running.
    package mutating func start(with tree: BlueZObjectTree) -> [Discovery] {
        tree.paths(with: BlueZ.deviceInterface).compactMap { path in
            guard let properties = tree.properties(path, BlueZ.deviceInterface), properties["RSSI"] != nil else { return nil }
            return report(path, properties)
        }
    }

    /// `tree`: the tree right after `change` (the mirror's own, borrowed
    /// under its lock: `BlueZMirror.observe`).
    package mutating func handle(_ change: BlueZObjectTree.Change, in tree: borrowing BlueZObjectTree) -> Discovery? {
        switch change {
        case .added(let path, let interfaces):
            guard interfaces.contains(BlueZ.deviceInterface),
                  let properties = tree.properties(path, BlueZ.deviceInterface) else { return nil }
            return report(path, properties)
        case .propertiesChanged(let path, let interface, let changed, _):
            guard interface == BlueZ.deviceInterface,
                  let properties = tree.properties(path, BlueZ.deviceInterface) else { return nil }
            let seenBefore = seen.contains(path)
            if seenBefore {
                guard options.duplicates, changed.names.contains(where: Self.isDescribingProperty) else { return nil }
            } else {
                guard changed.names.contains(where: Self.isAdvertisementProperty) else { return nil }
            }
            return report(path, properties, seenBefore: seenBefore)
        case .removed(let path, let interfaces):
            if interfaces.contains(BlueZ.deviceInterface) { seen.remove(path) }
            return nil
        case .replaced, .cleared:
            return nil
        }
    }

    /// `seenBefore`: whether `seen` holds `path`, when the caller has just looked (nil: not looked).
    private mutating func report(_ path: ObjectPath, _ properties: PropertyMap, seenBefore: Bool? = nil) -> Discovery? {
        let device = DeviceInfo(path: path, properties: properties)
        guard device.adapter == adapter, options.matches(device) else { return nil }
        let sensor = options.decodesSensors || options.sensorsOnly ? sensors.decode(SensorAdvertisement(device)) : nil
        // Not yet seen while it shows no sensor: its next advertisement is a first sighting.
        if options.sensorsOnly, sensor == nil { return nil }
        if seenBefore != true, seen.insert(path).inserted { return Discovery(kind: .discovered, device: device, sensor: sensor) }
        return options.duplicates ? Discovery(kind: .updated, device: device, sensor: sensor) : nil
    }
}
