import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

/// The peripheral role: CoreBluetooth's CBPeripheralManager on BlueZ. It
/// serves GATT services from this process (`GattManager1.RegisterApplication`
/// of objects it exports on its bus connection), advertises
/// (`LEAdvertisingManager1`, see `startAdvertising`), hands the requests of
/// centrals to the application as `events`, and notifies or indicates
/// subscribers (`updateValue`). All of its state belongs to the central's
/// event loop; bluetoothd's calls are answered there.
///
/// bluetoothd 5.66 tells a served characteristic that *a* central
/// subscribed (`StartNotify` has no arguments; it comes once per central)
/// and that the last one left (`StopNotify`): it fans each value out to
/// every subscribed central itself. Reads and writes name their central.
///
/// `stop()` (or `close()`) unregisters and unexports everything; a process
/// that dies without it leaves nothing behind either, as bluetoothd drops
/// the registrations of a client that leaves the bus.
public final class PeripheralManager: Sendable {
    /// The central whose bus connection, mirror and loop this manager shares.
    public let central: CentralManager
    /// The adapter it serves and advertises on.
    public let adapter: AdapterInfo
    /// How long a request from a central may wait for the application's
    /// answer before it is failed (bluetoothd itself waits 25 s, a central 30 s).
    public let requestDeadline: Duration
    /// What happens, in order: requests, subscriptions, confirmations,
    /// room for more updates, advertising stopped by bluetoothd. One
    /// consumer; ends when the manager stops or the bus connection is lost.
    public let events: AsyncStream<PeripheralEvent>
    let continuation: AsyncStream<PeripheralEvent>.Continuation
    let server: LoopBound<Server>
    /// Runs the GATT server's machine, which decides every answer:
    /// bluetoothd's calls and the application's answers are its events
    /// (PeripheralManager+Requests.swift).
    let driver: MachineDriver<GattServerMachine, Void>
    /// This manager's object paths start with it.
    let base: ObjectPath
    private let ownsCentral: Bool

    /// The outgoing bytes above which `updateValue` asks the caller to wait
    /// (about a thousand notifications of 20 bytes).
    public static let updateBacklogLimit = 256 * 1024

    /// What bluetoothd can ask about beside the machine's attributes, the
    /// loop's: the objects exported, the calls waiting for their reply, the
    /// advertisements.
    struct Server {
        var attributes: [Int: ServedAttribute] = [:]
        var paths: [ObjectPath: Int] = [:]
        var services: [Int: PublishedService] = [:]
        var nextAttribute = 0
        var nextService = 0
        var nextRequest: UInt64 = 1
        /// bluetoothd's calls whose reply is still to be sent, by request.
        var calls: [UInt64: DBusMessage] = [:]
        /// The requests the application hears of, kept while the machine
        /// waits for the application's answer to them.
        var requests: [UInt64: ATTRequest] = [:]
        var advertisements: [ObjectPath: AdvertisementData] = [:]
        var nextAdvertisement = 0
        /// `updateValue` said no: report room once the backlog drains.
        var waitingForRoom = false
        var observation: UInt64?
    }

    /// One served characteristic or descriptor.
    struct ServedAttribute {
        let path: ObjectPath
        let characteristic: PublishedCharacteristic
        let descriptor: PublishedDescriptor?
        let flags: Set<GattFlag>
        let parent: ObjectPath
    }

    private static let managerCount = Locked(0)

    /// A peripheral manager on `central`'s connection, serving on `adapter`.
    public convenience init(central: CentralManager, adapter: AdapterInfo, requestDeadline: Duration = .seconds(10)) {
        self.init(central: central, adapter: adapter, requestDeadline: requestDeadline, ownsCentral: false)
    }

    private init(central: CentralManager, adapter: AdapterInfo, requestDeadline: Duration, ownsCentral: Bool) {
        self.central = central
        self.adapter = adapter
        self.requestDeadline = requestDeadline
        self.ownsCentral = ownsCentral
        let number = Self.managerCount.withLock { count -> Int in
            count += 1
            return count
        }
        base = ObjectPath("/org/bluectl/peripheral\(getpid())_\(number)") ?? ObjectPath(verified: "/org/bluectl/peripheral")
        (events, continuation) = AsyncStream<PeripheralEvent>.makeStream()
        server = LoopBound(Server(), loop: central.mirror.loop)
        driver = MachineDriver(mirror: central.mirror, machine: GattServerMachine(), label: "peripheral")
        central.mirror.loop.execute { [self] in
            startServing()
            watchBluetoothd()
        }
    }

    /// Connects to the system bus and serves on the adapter named `name`
    /// (default: the first powered one), which must be powered on.
    public static func open(
        adapter name: String? = nil, busAddress: String? = nil, callTimeout: Duration = .seconds(25),
        requestDeadline: Duration = .seconds(10)
    ) async throws(BluetoothError) -> PeripheralManager {
        let central = try await CentralManager.open(busAddress: busAddress, callTimeout: callTimeout)
        do {
            let adapter = try await central.mirror.loop.submit {
                Result { () throws(BluetoothError) in try central.poweredAdapter(named: name) }
            }.get()
            return PeripheralManager(central: central, adapter: adapter, requestDeadline: requestDeadline, ownsCentral: true)
        } catch {
            central.close()
            throw error
        }
    }

    var connection: DBusConnection { central.connection }
    var loop: EventLoop { central.mirror.loop }

    /// CBPeripheralManager.state: the adapter's, as the central reports it.
    public var state: CentralState { central.state(adapter: adapter.name) }

    /// The services served now, in the order they were added.
    public var services: [PublishedService] {
        loop.sync { [self] in server.value.services.keys.sorted().compactMap { server.value.services[$0] } }
    }

    // MARK: - Services

    /// Serves `service` (CBPeripheralManager.add): exports its objects and
    /// registers them with bluetoothd as one GATT application. Returns the
    /// handles to update its characteristics by. Throws, with nothing left
    /// exported, when the definition is invalid (`MutableService.validate`)
    /// or bluetoothd refuses it.
    @discardableResult
    public func add(_ service: MutableService) async throws(BluetoothError) -> PublishedService {
        try service.validate()
        guard await central.mirror.properties(adapter.path, "org.bluez.GattManager1") != nil else {
            throw .roleUnavailable("\(adapter.name) cannot serve GATT (bluetoothd exports no GattManager1 for it)")
        }
        let published = await loop.submit { [self] in export(service) }
        do {
            try await register("RegisterApplication", published.root)
        } catch {
            await loop.submit { [self] in unexport(published) }
            throw BluetoothError.from(error, operation: "register service \(service.uuid.label) with bluetoothd")
        }
        Trace.log("peripheral: serving \(service.uuid) at \(published.root)")
        return published
    }

    /// Stops serving `service` (CBPeripheralManager.remove).
    public func remove(_ service: PublishedService) async {
        try? await register("UnregisterApplication", service.root)
        await loop.submit { [self] in unexport(service) }
    }

    /// Stops serving every service (CBPeripheralManager.removeAllServices).
    public func removeAllServices() async {
        for service in await loop.submit({ [self] in services }) { await remove(service) }
    }

    // MARK: - Values and subscribers

    /// Sets the characteristic's value and sends it to the subscribed
    /// centrals, if any (CBPeripheralManager.updateValue). Returns false,
    /// sending nothing, when the bus connection already holds
    /// `updateBacklogLimit` bytes not yet written: `readyToUpdateSubscribers`
    /// follows once it has drained (`waitUntilReadyToUpdate` waits for it).
    @discardableResult
    public func updateValue(_ value: [UInt8], for characteristic: PublishedCharacteristic) -> Bool {
        loop.sync { [self] in
            guard !driver.hasEnded, server.value.attributes[characteristic.attribute] != nil else { return false }
            if connection.outgoingBacklog > Self.updateBacklogLimit {
                if !server.value.waitingForRoom {
                    server.value.waitingForRoom = true
                    connection.whenDrained(below: Self.updateBacklogLimit / 2) { [self] in
                        server.value.waitingForRoom = false
                        continuation.yield(.readyToUpdateSubscribers)
                    }
                }
                return false
            }
            driver.send(.update(attribute: characteristic.attribute, value: value))
            return true
        }
    }

    /// Waits until `updateValue` would take a value (at once when it would).
    public func waitUntilReadyToUpdate() async {
        let ready = HandOff<Void>()
        loop.execute { [self] in
            connection.whenDrained(below: Self.updateBacklogLimit / 2) { ready.settle(.success(())) }
        }
        _ = try? await ready.wait()
    }

    /// The characteristic's current value.
    public func value(of characteristic: PublishedCharacteristic) -> [UInt8]? {
        loop.sync { [self] in driver.machine.attributes[characteristic.attribute]?.value }
    }

    /// Whether some central is subscribed to the characteristic.
    public func isNotifying(_ characteristic: PublishedCharacteristic) -> Bool {
        loop.sync { [self] in driver.machine.attributes[characteristic.attribute]?.notifying ?? false }
    }

    /// Answers a request (`ATTRequest.respond`); false when it was answered already or expired.
    func answer(_ request: ATTRequest, _ result: Result<[UInt8], ATTError>) -> Bool {
        loop.sync { [self] in
            guard driver.machine.isPending(request.id) else { return false }
            driver.send(.answer(request.id, result))
            return true
        }
    }

    /// Whether a request still waits for the application's answer (`ATTRequest.isPending`).
    func isPending(_ request: UInt64) -> Bool {
        loop.sync { [self] in driver.machine.isPending(request) }
    }

    // MARK: - Stopping

    /// Stops advertising, unregisters and unexports every service, fails
    /// the requests still waiting, and ends `events`. Then closes the bus
    /// connection if `open` made it.
    public func stop() async {
        let (services, ads) = await loop.submit { [self] () -> ([PublishedService], [ObjectPath]) in
            guard !driver.hasEnded else { return ([], []) }
            driver.send(.stop)
            if let observation = server.value.observation { central.mirror.stopObserving(observation) }
            return (server.value.services.keys.sorted().compactMap { server.value.services[$0] },
                    server.value.advertisements.keys.sorted())
        }
        for path in ads { await unregisterAdvertisement(path) }
        for service in services { await remove(service) }
        continuation.finish()
        if ownsCentral { central.close() }
    }

    // MARK: - bluetoothd going and coming back

    /// bluetoothd forgets every registration when it stops (or crashes);
    /// when it is back with the adapter, register everything again.
    ///
    /// An advertisement also goes silent when its adapter is powered off and
    /// on again (`BlueZ566.powerCycleSilencesAdvertisements`); so at
    /// power-on the advertisements are registered anew.
    private func watchBluetoothd() {
        var wasRunning = true
        var adapterPresent = true
        var wasPowered = adapter.powered
        let adapterPath = adapter.path
        server.value.observation = central.mirror.observe(start: { _ in }, onChange: { [weak self] _, tree, running in
            guard let self, !driver.hasEnded else { return }
            let properties = running ? tree.properties(adapterPath, BlueZ.adapterInterface) : nil
            let present = properties != nil
            let powered = properties?["Powered"]?.bool ?? false
            defer { wasRunning = running; adapterPresent = present; wasPowered = powered }
            if !running, wasRunning {
                continuation.yield(.bluetoothdStopped)
                // its subscriptions died with it (no StopNotify will come): end them here
                let attributes = driver.machine.attributes
                for number in attributes.keys.sorted() where attributes[number]!.notifying {
                    driver.send(.stopNotify(takeRequestID(), attribute: number))
                }
            } else if present, !adapterPresent {
                let services = server.value.services.keys.sorted().compactMap { server.value.services[$0] }
                let ads = server.value.advertisements
                Task { await self.registerAgain(services, ads) }
            } else if present, adapterPresent, powered, !wasPowered, BlueZ566.powerCycleSilencesAdvertisements,
                      !server.value.advertisements.isEmpty {
                let ads = server.value.advertisements
                Task { await self.registerAgain([], ads, anew: true) }
            }
        }, onBusLost: { [weak self] in self?.continuation.finish() })
    }

    /// Registers `services` and `ads` with bluetoothd again (`anew`: the
    /// advertisements are unregistered first, bluetoothd still holds them).
    private func registerAgain(_ services: [PublishedService], _ ads: [ObjectPath: AdvertisementData], anew: Bool = false) async {
        var failures: [String] = []
        if anew {
            for path in ads.keys.sorted() { try? await register("UnregisterAdvertisement", path) }
        }
        let registrations = services.map { ("RegisterApplication", $0.root, "service \($0.uuid.label)") }
            + ads.keys.sorted().map { ("RegisterAdvertisement", $0, "advertisement") }
        for (member, path, what) in registrations {
            do {
                try await register(member, path)
            } catch {
                failures.append("\(what): \(BluetoothError.from(error, operation: "register again"))")
            }
        }
        continuation.yield(.restored(failures: failures))
    }

    /// `GattManager1.(Un)RegisterApplication` or `LEAdvertisingManager1.(Un)RegisterAdvertisement` of `path` on the adapter.
    func register(_ member: String, _ path: ObjectPath) async throws {
        let interface = member.hasSuffix("Application") ? "org.bluez.GattManager1" : Self.advertisingManager
        let options: [DBusValue] = member.hasPrefix("Register") ? [.stringVariantDictionary([:])] : []
        _ = try await connection.callMethod(
            destination: BlueZ.service, path: adapter.path, interface: interface, member: member,
            arguments: [.objectPath(path)] + options, timeout: central.callTimeout)
    }
}
