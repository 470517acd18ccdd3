import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

/// What to advertise (CBPeripheralManager.startAdvertising's dictionary, with
/// the fields BlueZ's `LEAdvertisement1` takes). bluetoothd puts the local
/// name in the scan response and everything else in the advertising data,
/// which must fit the controller's limit (31 bytes without extended
/// advertising) after the flags (3 bytes, when discoverable or connectable),
/// the TX power (3) and the appearance (4): `check(maximumLength:)`.
public struct AdvertisementData: Sendable, Equatable {
    /// The name centrals show (in the scan response).
    public var localName: String?
    /// The services centrals may look for (`scan --service`).
    public var serviceUUIDs: [BluetoothUUID]
    /// Company identifier → data.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service UUID → data (Eddystone's frames are service data of feaa).
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// GAP appearance (0x0341: heart rate sensor, belt).
    public var appearance: UInt16?
    /// Advertise the TX power (bluetoothd fills it in).
    public var includesTxPower: Bool
    /// Centrals may connect ("peripheral"); false: "broadcast".
    public var isConnectable: Bool
    /// In the general discoverable mode (flags).
    public var isDiscoverable: Bool
    /// bluetoothd stops advertising it after this long (`Timeout`); nil: until stopped.
    public var timeout: Duration?

    /// An advertisement; connectable and discoverable by default.
    public init(localName: String? = nil, serviceUUIDs: [BluetoothUUID] = [], manufacturerData: [UInt16: [UInt8]] = [:],
                serviceData: [BluetoothUUID: [UInt8]] = [:], appearance: UInt16? = nil, includesTxPower: Bool = false,
                isConnectable: Bool = true, isDiscoverable: Bool = true, timeout: Duration? = nil) {
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.appearance = appearance
        self.includesTxPower = includesTxPower
        self.isConnectable = isConnectable
        self.isDiscoverable = isDiscoverable
        self.timeout = timeout
    }

    /// The advertising data's length as bluetoothd lays it out (AD
    /// structures of 2 + n bytes), flags, TX power and appearance included.
    public var advertisingDataLength: Int {
        var length = 0
        for size in [2, 4, 16] {
            let count = serviceUUIDs.filter { Self.size(of: $0) == size }.count
            if count > 0 { length += 2 + size * count }
        }
        for (uuid, data) in serviceData { length += 2 + Self.size(of: uuid) + data.count }
        for data in manufacturerData.values { length += 2 + 2 + data.count }
        if appearance != nil { length += 4 }
        if includesTxPower { length += 3 }
        if isDiscoverable || isConnectable { length += 3 }
        return length
    }

    /// The scan response's length: the local name's AD structure.
    public var scanResponseLength: Int { localName.map { 2 + $0.utf8.count } ?? 0 }

    /// How many bytes a UUID takes in advertising data.
    static func size(of uuid: BluetoothUUID) -> Int {
        uuid.uint16Value != nil ? 2 : uuid.uint32Value != nil ? 4 : 16
    }

    /// Refuses data that does not fit, naming what takes the room, instead
    /// of letting bluetoothd fail it with "Failed to parse advertisement" or
    /// shorten the name.
    public func check(maximumLength: Int = 31) throws(BluetoothError) {
        if advertisingDataLength > maximumLength {
            var parts: [String] = []
            if isDiscoverable || isConnectable { parts.append("flags 3") }
            if !serviceUUIDs.isEmpty { parts.append("service UUIDs \(advertisingDataLength - otherLength)") }
            if !serviceData.isEmpty { parts.append("service data \(serviceData.map { 2 + Self.size(of: $0.key) + $0.value.count }.reduce(0, +))") }
            if !manufacturerData.isEmpty { parts.append("manufacturer data \(manufacturerData.values.map { 4 + $0.count }.reduce(0, +))") }
            if appearance != nil { parts.append("appearance 4") }
            if includesTxPower { parts.append("TX power 3") }
            throw .invalidRequest("advertisement of \(advertisingDataLength) bytes is longer than the adapter's \(maximumLength) (\(parts.joined(separator: ", ")))")
        }
        if scanResponseLength > maximumLength {
            throw .invalidRequest("local name of \(localName?.utf8.count ?? 0) bytes is longer than the scan response's \(maximumLength - 2)")
        }
    }

    /// The length of everything but the service UUID lists.
    private var otherLength: Int {
        var copy = self
        copy.serviceUUIDs = []
        return copy.advertisingDataLength
    }

    /// LEAdvertisement1's properties.
    var properties: [String: DBusValue] {
        var properties: [String: DBusValue] = [
            "Type": .string(isConnectable ? "peripheral" : "broadcast"),
            "Discoverable": .boolean(isDiscoverable),
        ]
        if !serviceUUIDs.isEmpty { properties["ServiceUUIDs"] = .stringArray(serviceUUIDs.map(\.uuidString)) }
        if !manufacturerData.isEmpty {
            properties["ManufacturerData"] = .dictionary(key: DBusSignature("q")!, value: .variant, manufacturerData.keys.sorted().map {
                DBusDictEntry(.uint16($0), .variant(.bytes(manufacturerData[$0]!)))
            })
        }
        if !serviceData.isEmpty {
            properties["ServiceData"] = .dictionary(key: .string, value: .variant, serviceData.keys.sorted().map {
                DBusDictEntry(.string($0.uuidString), .variant(.bytes(serviceData[$0]!)))
            })
        }
        if let localName { properties["LocalName"] = .string(localName) }
        if let appearance { properties["Appearance"] = .uint16(appearance) }
        if includesTxPower { properties["Includes"] = .stringArray(["tx-power"]) }
        if let timeout { properties["Timeout"] = .uint16(UInt16(clamping: Int(timeout.seconds.rounded(.up)))) }
        return properties
    }
}

/// An advertisement being advertised (what `startAdvertising` returns).
public struct Advertisement: Sendable, Hashable {
    package let path: ObjectPath
}

extension PeripheralManager {
    static let advertisingManager = "org.bluez.LEAdvertisingManager1"

    /// The adapter's advertising limits as bluetoothd reports them.
    public struct AdvertisingLimits: Sendable, Equatable {
        /// How many advertisements it can have at once (`SupportedInstances` + `ActiveInstances`).
        public var supportedInstances: Int?
        /// How many are registered now (by any program).
        public var activeInstances: Int?
        /// The longest advertising data (`SupportedCapabilities.MaxAdvLen`; 31 when not reported).
        public var maximumLength: Int
        /// What bluetoothd can include for us ("tx-power", "appearance", "local-name").
        public var supportedIncludes: [String]
    }

    /// The adapter's advertising limits now; nil when it cannot advertise.
    public var advertisingLimits: AdvertisingLimits? {
        let tree = central.mirror.tree
        guard let p = tree.properties(adapter.path, Self.advertisingManager) else { return nil }
        let free = p["SupportedInstances"]?.integer
        let active = p["ActiveInstances"]?.integer
        var maximum = 31
        if case .dictionary(_, _, let entries)? = p["SupportedCapabilities"]?.unwrapped,
           let entry = entries.first(where: { $0.key.string == "MaxAdvLen" }), let length = entry.value.integer {
            maximum = length
        }
        let includes = (p["SupportedIncludes"]?.array ?? []).compactMap(\.string)
        return AdvertisingLimits(supportedInstances: BlueZ566.totalAdvertisingInstances(supportedInstances: free, activeInstances: active),
                                 activeInstances: active,
                                 maximumLength: maximum, supportedIncludes: includes)
    }

    /// Advertises `data` (CBPeripheralManager.startAdvertising) until
    /// `stopAdvertising`, the manager stops, or `data.timeout` passes (then
    /// `advertisingStopped`). Refused before bluetoothd is asked when the
    /// data does not fit, TX power cannot be included, or every instance
    /// is taken.
    @discardableResult
    public func startAdvertising(_ data: AdvertisementData) async throws(BluetoothError) -> Advertisement {
        guard let limits = await loop.submit({ [self] in advertisingLimits }) else {
            throw .roleUnavailable("\(adapter.name) cannot advertise (bluetoothd exports no LEAdvertisingManager1 for it)")
        }
        try data.check(maximumLength: limits.maximumLength)
        if data.includesTxPower, !limits.supportedIncludes.isEmpty, !limits.supportedIncludes.contains("tx-power") {
            throw .notSupported("\(adapter.name) cannot include the TX power (it supports: \(limits.supportedIncludes.joined(separator: ", ")))")
        }
        if let free = limits.supportedInstances.map({ $0 - (limits.activeInstances ?? 0) }), free <= 0 {
            throw .notSupported("\(adapter.name) advertises \(limits.activeInstances ?? 0) advertisements already, all it can (SupportedInstances)")
        }
        let path = await loop.submit { [self] () -> ObjectPath in
            let path = base.appending("adv\(server.value.nextAdvertisement)")!
            server.value.nextAdvertisement += 1
            server.value.advertisements[path] = data
            connection.export(path) { [weak self] message, connection in
                guard let self else { return Self.refuse(message, connection) }
                if message.member == "Release", message.interface == nil || message.interface == Self.advertisementInterface {
                    if !message.noReplyExpected { try? connection.send(.methodReturn(to: message)) }
                    if let data = server.value.advertisements.removeValue(forKey: path) {
                        connection.unexport(path)
                        continuation.yield(.advertisingStopped(data))
                    }
                    return
                }
                // the data of now: `updateAdvertising` may have changed it
                Self.answerProperties(message, connection, [Self.advertisementInterface: server.value.advertisements[path]?.properties ?? [:]])
            }
            return path
        }
        do {
            try await register("RegisterAdvertisement", path)
        } catch {
            await loop.submit { [self] in
                server.value.advertisements[path] = nil
                connection.unexport(path)
            }
            throw BluetoothError.from(error, operation: "advertise on \(adapter.name)")
        }
        Trace.log("peripheral: advertising \(path)")
        return Advertisement(path: path)
    }

    /// Changes what `advertisement` advertises to `data`, in place: bluetoothd 5.66 watches a
    /// registered advertisement's properties (advertising.c, `properties_changed`), parses the
    /// ones a PropertiesChanged signal names and refreshes the controller's data, with no gap
    /// of unregistering. A `bluectl advertise --bthome` frame changes this way with each new
    /// value. Refused, with the advertisement unchanged, when `data` does not fit or the
    /// advertisement was stopped.
    public func updateAdvertising(_ advertisement: Advertisement, to data: AdvertisementData) async throws(BluetoothError) {
        let path = advertisement.path
        let outcome = await loop.submit { [self] () -> Result<Void, BluetoothError> in
            guard let old = server.value.advertisements[path] else {
                return .failure(.invalidRequest("the advertisement was stopped (bluetoothd released it, or stopAdvertising)"))
            }
            do throws(BluetoothError) {
                try data.check(maximumLength: advertisingLimits?.maximumLength ?? 31)
            } catch {
                return .failure(error)
            }
            server.value.advertisements[path] = data
            let (before, after) = (old.properties, data.properties)
            let changed = after.filter { before[$0.key] != $0.value }
            let invalidated = before.keys.filter { after[$0] == nil }.sorted()
            if !changed.isEmpty || !invalidated.isEmpty {
                try? connection.send(.signal(
                    path: path, interface: BlueZ.properties, member: "PropertiesChanged",
                    arguments: [.string(Self.advertisementInterface), .stringVariantDictionary(changed), .stringArray(invalidated)]))
            }
            return .success(())
        }
        try outcome.get()
    }

    static let advertisementInterface = "org.bluez.LEAdvertisement1"

    /// Stops advertising `advertisement` (nothing when it already stopped).
    public func stopAdvertising(_ advertisement: Advertisement) async {
        await unregisterAdvertisement(advertisement.path)
    }

    func unregisterAdvertisement(_ path: ObjectPath) async {
        let known = await loop.submit { [self] in server.value.advertisements.removeValue(forKey: path) != nil }
        guard known else { return }
        try? await register("UnregisterAdvertisement", path)
        connection.unexport(path)
    }

    /// Whether an advertisement is still registered (bluetoothd did not remove it).
    public func isAdvertising(_ advertisement: Advertisement) -> Bool {
        loop.sync { [self] in server.value.advertisements[advertisement.path] != nil }
    }
}
