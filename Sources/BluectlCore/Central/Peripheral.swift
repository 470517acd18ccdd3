import BluectlDBus
import Dispatch

/// CBPeripheralState.
public enum PeripheralState: String, Sendable, Equatable {
    /// Not connected.
    case disconnected
    /// A connect is under way.
    case connecting
    /// Connected.
    case connected
    /// A disconnect is under way.
    case disconnecting
}

/// A change of a peripheral's connection (see `Peripheral.connectionEvents()`).
public enum ConnectionEvent: Sendable, Equatable {
    /// The link is up.
    case connected
    /// The link is down; `reason` says how BlueZ showed it ("the link went
    /// down", "removed from BlueZ", "bluetoothd stopped", …).
    case disconnected(reason: String)
}

/// A remote device: CoreBluetooth's CBPeripheral over BlueZ's `Device1` and
/// the GATT objects bluetoothd exports under it. Everything it shows is read
/// from the central's mirror of BlueZ's tree, so it is always current.
public final class Peripheral: Sendable, CustomStringConvertible {
    /// The central this peripheral belongs to.
    public let central: CentralManager
    /// `/org/bluez/hciN/dev_AA_BB_…`
    package let path: ObjectPath
    /// The device's address: BlueZ's identity for it (CoreBluetooth's
    /// `identifier`; its text is "AA:BB:CC:DD:EE:FF").
    public let identifier: BluetoothAddress

    /// What this process keeps about the peripheral: the loop's, in one
    /// `LoopBound` (one object per peripheral, not one per field).
    struct LoopState {
        /// connecting / disconnecting while this process is doing that (the
        /// connect and disconnect drivers set it).
        var transition: PeripheralState?
        /// setNotifyValue's subscriptions, one per characteristic.
        var sessions: [ObjectPath: NotificationSession] = [:]
        /// The notification sessions this process has on, each shared by its
        /// subscribers (see `NotificationSession`).
        var notifyShares: [NotifyKey: NotifyShare] = [:]
        /// How it pairs: on demand or not, and what to do first.
        var pairing = PairingSettings()
    }
    let local: LoopBound<LoopState>

    package init(central: CentralManager, path: ObjectPath) {
        self.central = central
        self.path = path
        local = LoopBound(LoopState(), loop: central.mirror.loop)
        if let p = central.mirror.tree.properties(path, BlueZ.deviceInterface) {
            identifier = DeviceInfo(path: path, properties: p).address
        } else {
            identifier = DeviceInfo.addressFromPath(path)
        }
    }

    public var description: String { identifier.description }

    /// `Device1` as it is now (nil once BlueZ has removed the device).
    public var info: DeviceInfo? {
        central.mirror.tree.properties(path, BlueZ.deviceInterface).map { DeviceInfo(path: path, properties: $0) }
    }

    /// Its advertised name or alias (`DeviceInfo.displayName`).
    public var name: String? { info?.displayName }
    /// The last RSSI BlueZ reported, in dBm (nil when not in range or not reported).
    public var rssi: Int? { info?.rssi }

    /// Its connection state, from BlueZ's `Connected` and this process's own connects and disconnects.
    public var state: PeripheralState {
        central.mirror.loop.sync { [self] in
            if let transition = local.value.transition { return transition }
            return central.mirror.tree.properties(path, BlueZ.deviceInterface)?["Connected"]?.bool == true
                ? .connected : .disconnected
        }
    }

    /// Sets the transition shown by `state` (on the loop).
    func setTransition(_ value: PeripheralState?) {
        central.mirror.loop.execute { [self] in local.value.transition = value }
    }

    /// Each change of this peripheral's connection from now on, whoever
    /// made it (this process, another client, the device, bluetoothd):
    /// CoreBluetooth's `didConnect` and `didDisconnectPeripheral`. A slow
    /// consumer gets the newest 16 events. Ends when the consuming task is
    /// cancelled or the bus connection is lost.
    public func connectionEvents() -> AsyncStream<ConnectionEvent> {
        let (stream, continuation) = AsyncStream<ConnectionEvent>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let device = path
        let connected = LoopBound(false, loop: central.mirror.loop)
        let observation = central.mirror.observeFromAnywhere(start: { tree in
            connected.value = tree.properties(device, BlueZ.deviceInterface)?["Connected"]?.bool ?? false
        }, onChange: { change, tree, _ in
            guard let event = Self.connectionEvent(for: change, device: device, in: tree, wasConnected: connected.value) else { return }
            connected.value = event == .connected
            continuation.yield(event)
        }, onBusLost: {
            continuation.finish()
        })
        continuation.onTermination = { _ in observation.cancel() }
        return stream
    }

    /// The connection event a change of BlueZ's tree means for `device`, if any.
    static func connectionEvent(for change: BlueZObjectTree.Change, device: ObjectPath,
                                in tree: borrowing BlueZObjectTree, wasConnected: Bool) -> ConnectionEvent? {
        let now: Bool
        let reason: String
        switch change {
        case .propertiesChanged(device, BlueZ.deviceInterface, let changed, _):
            guard let value = changed["Connected"]?.bool else { return nil }
            (now, reason) = (value, "the link went down")
        case .added(device, let interfaces) where interfaces.contains(BlueZ.deviceInterface):
            (now, reason) = (tree.properties(device, BlueZ.deviceInterface)?["Connected"]?.bool ?? false, "")
        case .removed(device, let interfaces) where interfaces.contains(BlueZ.deviceInterface):
            (now, reason) = (false, "removed from BlueZ")
        case .replaced:
            (now, reason) = (tree.properties(device, BlueZ.deviceInterface)?["Connected"]?.bool ?? false, "bluetoothd restarted")
        case .cleared:
            (now, reason) = (false, "bluetoothd stopped")
        default:
            return nil
        }
        guard now != wasConnected else { return nil }
        return now ? .connected : .disconnected(reason: reason)
    }

    /// `Device1` properties asked from bluetoothd directly (`GetAll`), not
    /// from the mirror: BlueZ 5.66 does not always emit `Connected=true`
    /// (`BlueZ566.connectPollInterval`), so a signal-only view can wait forever.
    package func fetchDeviceProperties(timeout: Duration = .seconds(5)) async -> PropertyMap? {
        let reply = try? await central.connection.call(deviceGetAll, timeout: timeout)
        return reply.flatMap { Self.deviceProperties(in: .success($0)) }
    }

    /// A method call on this device's object: `member` of Device1.
    func deviceMessage(_ member: String) -> DBusMessage {
        DBusMessage.methodCall(destination: BlueZ.service, path: path, interface: BlueZ.deviceInterface, member: member)
    }

    /// `GetAll(Device1)` of this device: what a machine's poll asks.
    var deviceGetAll: DBusMessage {
        DBusMessage.methodCall(destination: BlueZ.service, path: path, interface: BlueZ.properties, member: "GetAll",
                               arguments: [.string(BlueZ.deviceInterface)])
    }

    /// The Device1 properties a `GetAll` answered (nil: no answer).
    static func deviceProperties(in reply: Result<DBusMessage, DBusError>) -> PropertyMap? {
        (try? reply.get())?.arguments.first?.stringKeyedDictionary.map(PropertyMap.init)
    }

    /// Whether bluetoothd says the device is connected (asked directly).
    public func isConnected() async -> Bool {
        if let asked = await fetchDeviceProperties()?["Connected"]?.bool { return asked }
        return await central.mirror.properties(path, BlueZ.deviceInterface)?["Connected"]?.bool ?? false
    }

    /// The GATT database as BlueZ exports it now (empty until services are resolved).
    public var database: GattDatabase { GattDatabase(tree: central.mirror.tree, device: path) }

    /// The services discovered so far (empty until they are resolved).
    public var services: [GattService] { database.services }

    /// The MTU BlueZ reports on any characteristic (all share the connection's).
    public var mtu: Int? { database.characteristics.lazy.compactMap(\.mtu).first }

    // MARK: - Discovery

    /// CoreBluetooth's `discoverServices(_:)`: bluetoothd discovers the
    /// whole database by itself, so this waits for `ServicesResolved` (racing
    /// a disconnect, the device's removal and `timeout`), then returns the
    /// services with one of `uuids` (all when nil or empty).
    @discardableResult
    public func discoverServices(_ uuids: [BluetoothUUID]? = nil, timeout: Duration = .seconds(30)) async throws -> [GattService] {
        try await waitForServicesResolved(timeout: timeout)
        return database.services(matching: uuids ?? [])
    }

    /// Characteristics of `service` with one of `uuids` (all when nil or empty).
    public func discoverCharacteristics(_ uuids: [BluetoothUUID]? = nil, for service: GattService) -> [GattCharacteristic] {
        let all = database.characteristics(of: service)
        guard let uuids, !uuids.isEmpty else { return all }
        return all.filter { uuids.contains($0.uuid) }
    }

    /// The descriptors of `characteristic` (all are discovered with the services).
    public func discoverDescriptors(for characteristic: GattCharacteristic) -> [GattDescriptor] {
        database.descriptors(of: characteristic)
    }

    /// Services included by `service`.
    public func discoverIncludedServices(for service: GattService) -> [GattService] {
        let all = database.services
        return service.includes.compactMap { path in all.first { $0.path == path } }
    }

    /// The one characteristic `selector` names (optionally within `service`);
    /// throws `BluetoothError.attributeNotFound` listing what exists, or `.ambiguous` with paths and handles.
    public func characteristic(_ selector: AttributeSelector, service: BluetoothUUID? = nil) throws -> GattCharacteristic {
        try database.characteristic(selector, service: service)
    }

    /// The one descriptor `selector` names under `characteristic`.
    public func descriptor(_ selector: AttributeSelector, of characteristic: GattCharacteristic) throws -> GattDescriptor {
        try database.descriptor(selector, of: characteristic)
    }

    func waitForServicesResolved(timeout: Duration) async throws {
        try await waitForServicesResolvedSignalled(timeout: timeout)
        await recoverMTU()
    }

    /// Pitfall 26 (`BlueZ566.mtuMissing`): once the services are resolved,
    /// a characteristic of the device without its `MTU` has it asked
    /// for (within 2 s, as the machines' polls: bluetoothd answers a Get at
    /// once) and the answer recorded on every characteristic of the device
    /// (they share the link's). Costs one loop hop when the MTU is there.
    private func recoverMTU() async {
        let (mirror, path) = (central.mirror, path)
        let lacking = await mirror.loop.submit { () -> [ObjectPath] in
            // (Not the mirror's `Connected`: 5.66 may never signal it (pitfall 24), and the
            // caller has just found the device connected and resolved, asking if need be.)
            let tree = mirror.tree   // on the loop: read in place
            let characteristics = tree.paths(with: BlueZ.characteristicInterface).filter { $0.isDescendant(of: path) }
            guard let first = characteristics.first,
                  BlueZ566.mtuMissing(tree.properties(first, BlueZ.characteristicInterface)) else { return [] }
            return characteristics
        }
        guard let first = lacking.first, let mtu = await askMTU(first, timeout: .seconds(2)) else { return }
        await mirror.record([DBusProperty(name: "MTU", value: .uint16(UInt16(clamping: mtu)))],
                            interface: BlueZ.characteristicInterface, at: lacking)
    }

    /// bluetoothd's `MTU` of the characteristic at `path` (`Properties.Get`), nil when it gives none.
    private func askMTU(_ path: ObjectPath, timeout: Duration) async -> Int? {
        let reply = try? await central.connection.callMethod(
            destination: BlueZ.service, path: path, interface: BlueZ.properties, member: "Get",
            arguments: [.string(BlueZ.characteristicInterface), .string("MTU")], timeout: timeout)
        return reply?.first?.unwrapped.integer
    }

    private func waitForServicesResolvedSignalled(timeout: Duration) async throws {
        let path = self.path
        @Sendable func serviceCount(_ tree: borrowing BlueZObjectTree) -> Int {
            tree.paths(with: BlueZ.serviceInterface).filter { $0.isDescendant(of: path) }.count
        }
        let id = identifier.description
        // Resolved already, as the mirror has it: the machine's start on it
        // is its end, and nothing needs to run.
        let seen = await central.mirror.currentTree()
        guard let seenDevice = seen.properties(path, BlueZ.deviceInterface) else { throw BluetoothError.deviceNotFound(id) }
        if seenDevice["Connected"]?.bool == true, seenDevice["ServicesResolved"]?.bool == true {
            var machine = ServiceDiscoveryStateMachine()
            if machine.handle(.start(connected: true, servicesResolved: true, serviceObjects: serviceCount(seen))) == [.done] {
                return
            }
        }
        let driver = MachineDriver<ServiceDiscoveryStateMachine, Void>(
            mirror: central.mirror, machine: ServiceDiscoveryStateMachine(), label: "services \(id)")
        // Follow first, then look (pitfall 4): nothing changes unseen in between.
        driver.follow { change, tree in
            if case .added(let added, let interfaces) = change, added.isDescendant(of: path),
               interfaces.contains(where: BlueZ.gattInterfaces.contains) {
                return [.serviceAdded]
            }
            switch change.fate(ofDevice: path, in: tree) {
            case .changed(let changed)?:
                var events: [ServiceDiscoveryStateMachine.Event] = []
                if let connected = changed["Connected"]?.bool { events.append(.connectedChanged(connected)) }
                if let resolved = changed["ServicesResolved"]?.bool {
                    events.append(.servicesResolvedChanged(resolved, serviceObjects: serviceCount(tree)))
                }
                return events
            case .gone?: return [.deviceRemoved]
            case .bluetoothdStopped?: return [.bluetoothdStopped]
            case nil: return []
            }
        }
        var tree = await driver.snapshot()
        guard var device = tree.properties(path, BlueZ.deviceInterface) else {
            driver.abandon()
            throw BluetoothError.deviceNotFound(id)
        }
        // The mirror's word when it says resolved (a missing signal is only
        // ever a missing *true*), else bluetoothd's.
        if device["Connected"]?.bool != true || device["ServicesResolved"]?.bool != true {
            let (answer, treeThen) = await driver.look(deviceGetAll, timeout: .seconds(5))
            if let asked = Self.deviceProperties(in: answer) {
                (device, tree) = (asked, treeThen)
            }
        }
        let start = ServiceDiscoveryStateMachine.Event.start(
            connected: device["Connected"]?.bool ?? false,
            servicesResolved: device["ServicesResolved"]?.bool ?? false,
            serviceObjects: serviceCount(tree))
        try await driver.run(start: start, cancel: .timeout, setUp: { driver in
            driver.after(timeout, .timeout)
        }, perform: { action, driver in
            switch action {
            case .startSettleTimer(let delay): driver.after(delay, .settleTimerFired, replacing: "settle")
            case .schedulePoll(let delay): driver.after(delay, .pollTimerFired)
            case .askDevice:
                // Signals can be missing (see fetchDeviceProperties): ask bluetoothd.
                driver.call(self.deviceGetAll, timeout: .seconds(2)) { [mirror = driver.mirror] result in
                    guard let p = Self.deviceProperties(in: result) else { return .polled(nil) }
                    return .polled(.init(connected: p["Connected"]?.bool ?? false,
                                         servicesResolved: p["ServicesResolved"]?.bool ?? false,
                                         serviceObjects: serviceCount(mirror.tree)))
                }
            case .done: driver.answer(.success(()))
            case .fail(let failure): driver.answer(.failure(Self.error(failure, id)))
            case .unplanned(let what): Trace.unplanned(driver.label, what)
            }
        })
    }

    static func error(_ failure: DiscoveryFailure, _ id: String) -> BluetoothError {
        switch failure {
        case .notConnected: return .disconnected("\(id) is not connected")
        case .disconnected: return .disconnected("\(id) disconnected before its services were resolved")
        case .deviceRemoved: return .deviceNotFound("\(id) (removed by BlueZ)")
        case .bluetoothdStopped: return .bluetoothdStopped("resolving the services of \(id)")
        case .timeout: return .timeout("resolve the services of \(id)")
        }
    }

    // MARK: - Reading and writing

    /// `GattCharacteristic1.ReadValue({offset})`; checks `Flags` first.
    public func readValue(for characteristic: GattCharacteristic, offset: Int = 0) async throws -> [UInt8] {
        guard characteristic.properties.canRead || characteristic.flags.isEmpty else {
            throw BluetoothError.notSupported("characteristic \(characteristic.uuid.label) is not readable (flags: \(characteristic.flags.joined(separator: ",")))")
        }
        return try await read(characteristic.path, interface: BlueZ.characteristicInterface, offset: offset,
                              what: "read \(characteristic.uuid.label)")
    }

    /// `GattDescriptor1.ReadValue({offset})`.
    public func readValue(for descriptor: GattDescriptor, offset: Int = 0) async throws -> [UInt8] {
        guard descriptor.canRead else {
            throw BluetoothError.notSupported("descriptor \(descriptor.uuid.label) is not readable (flags: \(descriptor.flags.joined(separator: ",")))")
        }
        return try await read(descriptor.path, interface: BlueZ.descriptorInterface, offset: offset,
                              what: "read descriptor \(descriptor.uuid.label)")
    }

    /// `WriteValue(value, {type: request|command})`; checks `Flags` and the
    /// write limit first. A characteristic with no write property at all is
    /// refused without a call; one that lists only the other kind of write
    /// is still tried (the properties are advisory: servers commonly accept
    /// a Write Command wherever writing is permitted), see `supports(_:)`.
    public func writeValue(_ value: [UInt8], for characteristic: GattCharacteristic, type: WriteType) async throws {
        let p = characteristic.properties
        let allowed = characteristic.flags.isEmpty || p.canWriteWithResponse || p.canWriteWithoutResponse
        guard allowed else {
            throw BluetoothError.notSupported("characteristic \(characteristic.uuid.label) is not writable (flags: \(characteristic.flags.joined(separator: ",")))")
        }
        var limit = characteristic.maximumWriteValueLength(for: type)
        if BlueZ566.mayHaveLostMTU(characteristic, type: type, length: value.count, limit: limit) {
            // Ask before refusing on the 23-byte default.
            if let mtu = await askMTU(characteristic.path, timeout: central.callTimeout) {
                limit = GattCharacteristicLimits.maximum(type: type, mtu: mtu)
            }
        }
        guard value.count <= limit else { throw BluetoothError.valueTooLong(length: value.count, limit: limit, type: type) }
        let options = DBusValue.stringVariantDictionary(["type": .string(type.bluezType)])
        let uuid = characteristic.uuid
        _ = try await reportingDisconnect("write \(uuid.label)") {
            try await self.retryingInProgress(what: "write \(uuid.label)") {
                try await self.central.connection.callMethod(
                    destination: BlueZ.service, path: characteristic.path, interface: BlueZ.characteristicInterface,
                    member: "WriteValue", arguments: [.bytes(value), options], timeout: self.central.callTimeout)
            }
        }
    }

    /// `GattDescriptor1.WriteValue`.
    public func writeValue(_ value: [UInt8], for descriptor: GattDescriptor) async throws {
        guard descriptor.canWrite else {
            throw BluetoothError.notSupported("descriptor \(descriptor.uuid.label) is not writable (flags: \(descriptor.flags.joined(separator: ",")))")
        }
        _ = try await retryingInProgress(what: "write descriptor \(descriptor.uuid.label)") {
            try await self.central.connection.callMethod(
                destination: BlueZ.service, path: descriptor.path, interface: BlueZ.descriptorInterface,
                member: "WriteValue", arguments: [.bytes(value), .stringVariantDictionary([:])], timeout: self.central.callTimeout)
        }
    }

    /// CoreBluetooth's `maximumWriteValueLength(for:)`.
    public func maximumWriteValueLength(for type: WriteType, characteristic: GattCharacteristic? = nil) -> Int {
        if let characteristic { return characteristic.maximumWriteValueLength(for: type) }
        return GattCharacteristicLimits.maximum(type: type, mtu: mtu)
    }

    private func read(_ objectPath: ObjectPath, interface: String, offset: Int, what: @autoclosure @escaping @Sendable () -> String) async throws -> [UInt8] {
        var options: [String: DBusValue] = [:]
        if offset > 0 { options["offset"] = .uint16(UInt16(clamping: offset)) }
        let argument = DBusValue.stringVariantDictionary(options)
        // Reading a characteristic that notifies makes bluetoothd send every
        // subscriber a Value signal: say so to bluectl's subscribers (ReadMarker).
        let connection = central.connection
        let marked = if interface == BlueZ.characteristicInterface {
            await central.mirror.properties(objectPath, BlueZ.characteristicInterface)?["Notifying"]?.bool == true
        } else {
            false
        }
        if marked { ReadMarker.send(ReadMarker.started, path: objectPath, on: connection) }
        @Sendable func finished(_ serial: UInt32, _ bytes: [UInt8]) async {
            guard marked else { return }
            ReadMarker.send(ReadMarker.finished, path: objectPath, arguments: [.uint32(serial), .bytes(bytes)], on: connection)
            // a round trip after it: the signal is on the bus before this process may exit
            _ = try? await connection.callMethod(
                destination: "org.freedesktop.DBus", path: ObjectPath(verified: "/org/freedesktop/DBus"),
                interface: "org.freedesktop.DBus.Peer", member: "Ping", timeout: .seconds(2))
        }
        let reply: DBusMessage
        do {
            reply = try await reportingDisconnect(what()) {
                try await self.retryingInProgress(what: what()) {
                    try await connection.call(
                        DBusMessage.methodCall(destination: BlueZ.service, path: objectPath, interface: interface,
                                               member: "ReadValue", arguments: [argument]),
                        timeout: self.central.callTimeout)
                }
            }
        } catch {
            await finished(0, [])
            throw error
        }
        guard let bytes = reply.arguments.first?.bytes else {
            await finished(0, [])
            throw BluetoothError.unexpected("ReadValue returned \(reply.arguments)")
        }
        await finished(reply.serial, bytes)
        return bytes
    }

    /// A read or write that BlueZ failed because the device went away in
    /// the meantime (it answers pending ATT requests "Failed: Not connected"
    /// before it signals the disconnect) is reported as a disconnect: asks
    /// bluetoothd whether the device is still there and connected.
    func reportingDisconnect<T: Sendable>(_ what: @autoclosure @escaping @Sendable () -> String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as BluetoothError {
            guard case .bluez = error else { throw error }
            let device = await fetchDeviceProperties(timeout: .seconds(2))
            if device == nil || device?["Connected"]?.bool == false {
                throw BluetoothError.disconnected("\(identifier) \(device == nil ? "disappeared" : "disconnected") during \(what())")
            }
            throw error
        }
    }

    /// Whether a failed read/write looks like the peer wants encryption
    /// (BlueZ: NotPermitted "Not paired", or ATT errors 0x05/0x08/0x0c/0x0f,
    /// or 0x0e after an automatic pairing attempt failed).
    static func needsPairing(_ error: BluetoothError) -> Bool {
        let message: String
        switch error {
        case .notPermitted(_, let m): message = m
        case .bluez(_, let m, _): message = m
        default: return false
        }
        let lower = message.lowercased()
        if lower.contains("not paired") { return true }
        return ["0x05", "0x08", "0x0c", "0x0e", "0x0f"].contains { lower.contains("att error: \($0)") }
    }

    /// `Device1.Pair` (the agent of this bus connection answers BlueZ's
    /// questions). Already paired is success. A device that is not
    /// connected is connected first (`CentralManager.connect`, with its
    /// retries): left to `Pair`, the kernel's own connection attempt can
    /// stall without an answer (seen in the lab after a refused pairing
    /// dropped the link).
    public func pair(timeout: Duration = .seconds(30)) async throws {
        let start = ContinuousClock.now
        if info?.connected == false {
            try await central.connect(self, timeout: timeout)
        }
        let timeout = timeout - (ContinuousClock.now - start)
        if let prepare = await central.mirror.loop.submit({ [self] in local.value.pairing.preparation }) { await prepare(self) }
        Trace.log("pair \(identifier): Device1.Pair")
        do {
            _ = try await central.connection.callMethod(
                destination: BlueZ.service, path: path, interface: BlueZ.deviceInterface, member: "Pair",
                timeout: timeout)
        } catch let error as DBusError where error.remoteName == "org.bluez.Error.AlreadyExists" {
            return
        } catch {
            throw BluetoothError.from(error, operation: "pair with \(identifier)")
        }
    }

    /// When set, a read or write refused for lack of encryption on an
    /// unpaired device pairs (`pair()`) and is tried once more.
    public var pairsOnDemand: Bool {
        get { central.mirror.loop.sync { [self] in local.value.pairing.onDemand } }
        set { central.mirror.loop.sync { [self] in local.value.pairing.onDemand = newValue } }
    }

    /// How this peripheral pairs: on demand or not, and what to do first.
    struct PairingSettings {
        var onDemand = true
        var preparation: (@Sendable (Peripheral) async -> Void)?
    }

    /// Runs before every `pair()`, e.g. to register the agent that answers
    /// it. Only the caller of `Pair` has its agent asked (ours is not the
    /// default agent), so registering it then rather than up front spares
    /// every command that never pairs two round trips to bluetoothd.
    /// `body` gets the peripheral as an argument: captured, it would keep
    /// itself alive through its own property.
    public func preparePairing(_ body: @escaping @Sendable (Peripheral) async -> Void) {
        central.mirror.loop.sync { [self] in local.value.pairing.preparation = body }
    }

    /// Retries on `org.bluez.Error.InProgress` every
    /// `BlueZ566.inProgressRetryInterval`, for at most `limit`; then
    /// `BluetoothError.inProgress`. Other errors are translated to `BluetoothError`.
    func retryingInProgress<T: Sendable>(
        what: @autoclosure @escaping @Sendable () -> String, limit: Duration = BlueZ566.inProgressRetryLimit, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        do {
            return try await retryingInProgressOnce(what: what(), limit: limit, body)
        } catch let error as BluetoothError {
            guard pairsOnDemand, Self.needsPairing(error), info?.paired != true else { throw error }
            try await pair()
            return try await retryingInProgressOnce(what: what(), limit: limit, body)
        }
    }

    func retryingInProgressOnce<T: Sendable>(
        what: @autoclosure @escaping @Sendable () -> String, limit: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let deadline = ContinuousClock.now + limit
        while true {
            do {
                return try await body()
            } catch let error as DBusError {
                if error.remoteName == "org.bluez.Error.InProgress", ContinuousClock.now < deadline {
                    try await Task.sleep(for: BlueZ566.inProgressRetryInterval)
                    continue
                }
                throw BluetoothError(error, operation: what())
            } catch {
                throw BluetoothError.from(error, operation: what())
            }
        }
    }
}

enum GattCharacteristicLimits {
    static func maximum(type: WriteType, mtu: Int?) -> Int {
        type == .withResponse ? 512 : max(20, (mtu ?? 23) - 3)
    }
}
