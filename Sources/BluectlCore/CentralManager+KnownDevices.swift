import BluectlDBus

/// Which of the devices BlueZ knows to list (`CentralManager.devices(on:matching:)`):
/// every condition set must hold; `services` matches a device that
/// advertises or offers any one of them.
public struct DeviceFilter: Sendable, Equatable {
    /// Only connected devices.
    public var connected = false
    /// Only paired devices.
    public var paired = false
    /// Only bonded devices (the pairing's keys are stored).
    public var bonded = false
    /// Only trusted devices.
    public var trusted = false
    /// Only devices advertising or offering one of these services (any when empty).
    public var services: [BluetoothUUID] = []

    /// A filter that lets every device through.
    public init() {}

    /// Whether `device` passes; `offered` are the services of its resolved
    /// GATT database (asked only when `services` is set and the advertised
    /// ones do not match).
    func admits(_ device: DeviceInfo, offered: () -> [BluetoothUUID]) -> Bool {
        if connected, !device.connected { return false }
        if paired, !device.paired { return false }
        if bonded, !device.bonded { return false }
        if trusted, !device.trusted { return false }
        if services.isEmpty || device.serviceUUIDs.contains(where: services.contains) { return true }
        return offered().contains(where: services.contains)
    }
}

/// The devices BlueZ knows and their lifecycle: what bluetoothctl's
/// `devices`, `trust`, `block` and `remove` do, and the adapter's settings.
extension CentralManager {
    /// The devices BlueZ knows on `adapter` (any adapter when nil) that pass
    /// `filter`, in address order: CoreBluetooth's
    /// `retrievePeripherals(withIdentifiers:)` and
    /// `retrieveConnectedPeripherals(withServices:)` in one call, without scanning.
    public func devices(on adapter: AdapterInfo? = nil, matching filter: DeviceFilter) -> [DeviceInfo] {
        let tree = mirror.tree
        return devices(on: adapter)
            .filter { device in
                filter.admits(device) { GattDatabase(tree: tree, device: device.path).services.map(\.uuid) }
            }
            .sorted { ($0.address, $0.path.rawValue) < ($1.address, $1.path.rawValue) }
    }

    /// `Adapter1.RemoveDevice`: BlueZ disconnects the device, deletes its
    /// bond (keys on both sides of this host) and its cached GATT database,
    /// and drops the object. Returns when the object is gone from the tree
    /// (false: it was not there to begin with).
    @discardableResult
    public func removeDevice(_ peripheral: Peripheral, timeout: Duration = .seconds(10)) async throws(BluetoothError) -> Bool {
        let path = peripheral.path
        guard let device = await mirror.properties(path, BlueZ.deviceInterface),
              let adapterPath = DeviceInfo(path: path, properties: device).adapter else { return false }
        do {
            _ = try await connection.callMethod(
                destination: BlueZ.service, path: adapterPath, interface: BlueZ.adapterInterface, member: "RemoveDevice",
                arguments: [.objectPath(path)], timeout: min(callTimeout, timeout))
        } catch let error as DBusError where error.remoteName == "org.bluez.Error.DoesNotExist" {
            return false
        } catch {
            throw BluetoothError.from(error, operation: "remove \(peripheral.identifier)")
        }
        let gone = await mirror.waitUntil(timeout: timeout) { tree, _ in
            tree.properties(path, BlueZ.deviceInterface) == nil
        }
        guard gone else { throw .timeout("BlueZ to drop \(peripheral.identifier) after RemoveDevice") }
        return true
    }

    /// Sets the adapter's `Alias` (the name other devices see; empty: back
    /// to the system name) and waits until BlueZ reports a change.
    public func setAlias(_ alias: String, adapter: AdapterInfo, timeout: Duration = .seconds(10)) async throws(BluetoothError) {
        try await setAdapterProperty("Alias", .string(alias), adapter: adapter, what: "set the alias of \(adapter.name)",
                                     timeout: timeout) { properties in
            let now = properties["Alias"]?.string
            return alias.isEmpty ? now == properties["Name"]?.string : now == alias
        }
    }

    /// Sets whether other devices can discover the adapter, and waits until BlueZ reports it.
    public func setDiscoverable(_ on: Bool, adapter: AdapterInfo, timeout: Duration = .seconds(10)) async throws(BluetoothError) {
        try await setAdapterProperty("Discoverable", .boolean(on), adapter: adapter,
                                     what: "make \(adapter.name) \(on ? "discoverable" : "not discoverable")", timeout: timeout) {
            $0["Discoverable"]?.bool == on
        }
    }

    /// Sets whether the adapter accepts pairing, and waits until BlueZ reports it.
    public func setPairable(_ on: Bool, adapter: AdapterInfo, timeout: Duration = .seconds(10)) async throws(BluetoothError) {
        try await setAdapterProperty("Pairable", .boolean(on), adapter: adapter,
                                     what: "make \(adapter.name) \(on ? "pairable" : "not pairable")", timeout: timeout) {
            $0["Pairable"]?.bool == on
        }
    }

    /// `Properties.Set` of an `Adapter1` property, then a wait (on the
    /// loop, at most `timeout`) until the mirror's copy satisfies `reached`.
    func setAdapterProperty(_ name: String, _ value: DBusValue, adapter: AdapterInfo, what: String, timeout: Duration,
                            reached: @escaping @Sendable (PropertyMap) -> Bool) async throws(BluetoothError) {
        try await setProperty(name, value, interface: BlueZ.adapterInterface, of: adapter.path, what: what,
                              timeout: timeout, reached: reached)
    }

    /// `Properties.Set` of a BlueZ property, then a wait until the mirror's
    /// copy satisfies `reached` (bluetoothd signals the change after or
    /// before its reply: the wait covers both orders).
    func setProperty(_ name: String, _ value: DBusValue, interface: String, of path: ObjectPath, what: String,
                     timeout: Duration, reached: @escaping @Sendable (PropertyMap) -> Bool) async throws(BluetoothError) {
        do {
            _ = try await connection.callMethod(
                destination: BlueZ.service, path: path, interface: BlueZ.properties, member: "Set",
                arguments: [.string(interface), .string(name), .variant(value)], timeout: min(callTimeout, timeout))
        } catch {
            throw BluetoothError.from(error, operation: what)
        }
        let done = await mirror.waitUntil(timeout: timeout) { tree, _ in
            tree.properties(path, interface).map(reached) ?? false
        }
        guard done else { throw .timeout(what) }
    }
}

extension Peripheral {
    /// Sets `Device1.Trusted` (a trusted device may connect and use
    /// profiles without the agent being asked) and waits until BlueZ
    /// reports it. Returns whether it changed anything.
    @discardableResult
    public func setTrusted(_ trusted: Bool, timeout: Duration = .seconds(10)) async throws(BluetoothError) -> Bool {
        try await setFlag("Trusted", trusted, what: "\(trusted ? "trust" : "untrust") \(identifier)", timeout: timeout)
    }

    /// Sets `Device1.Blocked` (BlueZ disconnects a blocked device and
    /// refuses its connections) and waits until BlueZ reports it. Returns
    /// whether it changed anything.
    @discardableResult
    public func setBlocked(_ blocked: Bool, timeout: Duration = .seconds(10)) async throws(BluetoothError) -> Bool {
        try await setFlag("Blocked", blocked, what: "\(blocked ? "block" : "unblock") \(identifier)", timeout: timeout)
    }

    private func setFlag(_ name: String, _ on: Bool, what: String, timeout: Duration) async throws(BluetoothError) -> Bool {
        guard let now = await central.mirror.properties(path, BlueZ.deviceInterface) else {
            throw .deviceNotFound("\(identifier) (no longer known to BlueZ)")
        }
        if now[name]?.bool == on { return false }
        try await central.setProperty(name, .boolean(on), interface: BlueZ.deviceInterface, of: path, what: what,
                                      timeout: timeout) { $0[name]?.bool == on }
        return true
    }
}
