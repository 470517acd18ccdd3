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
    /// This manager's object paths start with it.
    let base: ObjectPath
    private let ownsCentral: Bool

    /// The outgoing bytes above which `updateValue` asks the caller to wait
    /// (about a thousand notifications of 20 bytes).
    public static let updateBacklogLimit = 256 * 1024

    /// Everything bluetoothd can ask about, the loop's.
    struct Server {
        var machine = GattServerMachine()
        var attributes: [Int: ServedAttribute] = [:]
        var paths: [ObjectPath: Int] = [:]
        var services: [Int: PublishedService] = [:]
        var nextAttribute = 0
        var nextService = 0
        var nextRequest: UInt64 = 1
        /// Requests whose reply is still to be sent, with their call and deadline.
        var calls: [UInt64: (message: DBusMessage, request: ATTRequest, timer: EventLoop.TimerID?)] = [:]
        var advertisements: [ObjectPath: AdvertisementData] = [:]
        var nextAdvertisement = 0
        /// `updateValue` said no: report room once the backlog drains.
        var waitingForRoom = false
        var stopped = false
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
        central.mirror.loop.execute { [self] in watchBluetoothd() }
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
            throw .notSupported("\(adapter.name) cannot serve GATT (bluetoothd exports no GattManager1 for it)")
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
            guard !server.value.stopped, server.value.attributes[characteristic.attribute] != nil else { return false }
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
            drive(.update(attribute: characteristic.attribute, value: value), request: nil)
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
        loop.sync { [self] in server.value.machine.attributes[characteristic.attribute]?.value }
    }

    /// Whether some central is subscribed to the characteristic.
    public func isNotifying(_ characteristic: PublishedCharacteristic) -> Bool {
        loop.sync { [self] in server.value.machine.attributes[characteristic.attribute]?.notifying ?? false }
    }

    /// Answers a request (`ATTRequest.respond`); false when it was answered already or expired.
    func answer(_ request: ATTRequest, _ result: Result<[UInt8], ATTError>) -> Bool {
        loop.sync { [self] in
            guard server.value.machine.isPending(request.id) else { return false }
            drive(.answer(request.id, result), request: request)
            return true
        }
    }

    // MARK: - Stopping

    /// Stops advertising, unregisters and unexports every service, fails
    /// the requests still waiting, and ends `events`. Then closes the bus
    /// connection if `open` made it.
    public func stop() async {
        let (services, ads) = await loop.submit { [self] () -> ([PublishedService], [ObjectPath]) in
            guard !server.value.stopped else { return ([], []) }
            drive(.stop, request: nil)
            server.value.stopped = true
            if let observation = server.value.observation { central.mirror.stopObserving(observation) }
            return (server.value.services.keys.sorted().compactMap { server.value.services[$0] },
                    server.value.advertisements.keys.sorted())
        }
        for path in ads { await unregisterAdvertisement(path) }
        for service in services { await remove(service) }
        continuation.finish()
        if ownsCentral { central.close() }
    }

    // MARK: - On the loop: exporting

    private func export(_ service: MutableService) -> PublishedService {
        let number = server.value.nextService
        server.value.nextService += 1
        let root = base.appending("app\(number)")!
        let servicePath = root.appending("service0")!
        var characteristics: [PublishedCharacteristic] = []
        var added: [GattServerMachine.Attribute] = []
        let first = server.value.nextAttribute
        var objects: [(ObjectPath, [String: [String: DBusValue]])] = [
            (servicePath, ["org.bluez.GattService1": [
                "UUID": .string(service.uuid.uuidString), "Primary": .boolean(service.isPrimary),
                "Includes": .array(element: .objectPath, []),
            ]]),
        ]
        for (c, definition) in service.characteristics.enumerated() {
            let path = servicePath.appending("char\(c)")!
            let attribute = first + added.count
            var descriptors: [PublishedDescriptor] = []
            let characteristic = PublishedCharacteristic(uuid: definition.uuid, serviceUUID: service.uuid, flags: definition.flags,
                                                         attribute: attribute, descriptors: [])
            added.append(.init(flags: definition.flags, value: definition.value ?? [], automatic: definition.value != nil,
                               isDescriptor: false))
            server.value.paths[path] = attribute
            var descriptorPlaces: [(PublishedDescriptor, ObjectPath)] = []
            for (d, descriptorDefinition) in definition.descriptors.enumerated() {
                let descriptorPath = path.appending("desc\(d)")!
                let descriptor = PublishedDescriptor(uuid: descriptorDefinition.uuid, flags: descriptorDefinition.flags,
                                                     attribute: first + added.count)
                added.append(.init(flags: descriptorDefinition.flags, value: descriptorDefinition.value, automatic: true,
                                   isDescriptor: true))
                server.value.paths[descriptorPath] = descriptor.attribute
                descriptors.append(descriptor)
                descriptorPlaces.append((descriptor, descriptorPath))
            }
            var withDescriptors = characteristic
            withDescriptors.descriptors = descriptors
            characteristics.append(withDescriptors)
            server.value.attributes[attribute] = ServedAttribute(path: path, characteristic: withDescriptors, descriptor: nil,
                                                                 flags: definition.flags, parent: servicePath)
            for (descriptor, descriptorPath) in descriptorPlaces {
                server.value.attributes[descriptor.attribute] = ServedAttribute(
                    path: descriptorPath, characteristic: withDescriptors, descriptor: descriptor, flags: descriptor.flags, parent: path)
            }
        }
        server.value.nextAttribute = first + added.count
        drive(.add(first: first, added), request: nil)
        let published = PublishedService(uuid: service.uuid, isPrimary: service.isPrimary, characteristics: characteristics,
                                          number: number, root: root)
        server.value.services[number] = published
        for attribute in first..<(first + added.count) {
            objects.append((server.value.attributes[attribute]!.path, properties(of: attribute)))
        }
        let exported = objects
        for attribute in first..<(first + added.count) {
            let path = server.value.attributes[attribute]!.path
            connection.export(path) { [weak self] message, connection in
                guard let self else { return Self.refuse(message, connection) }
                handleAttributeCall(message, attribute: attribute)
            }
        }
        connection.export(servicePath) { [weak self] message, connection in
            guard self != nil else { return Self.refuse(message, connection) }
            Self.answerProperties(message, connection, exported[0].1)
        }
        connection.export(root) { [weak self] message, connection in
            guard let self else { return Self.refuse(message, connection) }
            guard message.interface == BlueZ.objectManager || message.interface == nil, message.member == "GetManagedObjects" else {
                return Self.unknownMethod(message, connection)
            }
            // the current values and notifying states, not those at export time
            let current = exported.map { path, interfaces in
                (path, server.value.paths[path].map { properties(of: $0) } ?? interfaces)
            }
            try? connection.send(.methodReturn(to: message, arguments: [Self.managedObjects(current)]))
        }
        return published
    }

    private func unexport(_ service: PublishedService) {
        guard server.value.services.removeValue(forKey: service.number) != nil else { return }
        var numbers: [Int] = []
        for characteristic in service.characteristics {
            numbers.append(characteristic.attribute)
            numbers += characteristic.descriptors.map(\.attribute)
        }
        drive(.remove(numbers), request: nil)
        for number in numbers {
            if let attribute = server.value.attributes.removeValue(forKey: number) {
                server.value.paths[attribute.path] = nil
                connection.unexport(attribute.path)
            }
        }
        connection.unexport(service.root.appending("service0")!)
        connection.unexport(service.root)
    }

    /// The D-Bus properties of a served attribute now.
    private func properties(of number: Int) -> [String: [String: DBusValue]] {
        guard let served = server.value.attributes[number] else { return [:] }
        let state = server.value.machine.attributes[number]
        let flags = GattFlag.stringList(served.flags)
        if let descriptor = served.descriptor {
            return ["org.bluez.GattDescriptor1": [
                "UUID": .string(descriptor.uuid.uuidString), "Characteristic": .objectPath(served.parent),
                "Flags": flags, "Value": .bytes(state?.value ?? []),
            ]]
        }
        var properties: [String: DBusValue] = [
            "UUID": .string(served.characteristic.uuid.uuidString), "Service": .objectPath(served.parent), "Flags": flags,
        ]
        if GattFlag.allowsRead(served.flags) || state?.automatic == true { properties["Value"] = .bytes(state?.value ?? []) }
        if GattFlag.allowsSubscribe(served.flags) { properties["Notifying"] = .boolean(state?.notifying ?? false) }
        return ["org.bluez.GattCharacteristic1": properties]
    }

    // MARK: - On the loop: bluetoothd's calls

    private func handleAttributeCall(_ message: DBusMessage, attribute number: Int) {
        guard let served = server.value.attributes[number] else { return Self.refuse(message, connection) }
        let interface = served.descriptor == nil ? "org.bluez.GattCharacteristic1" : "org.bluez.GattDescriptor1"
        if message.interface == BlueZ.properties {
            return Self.answerProperties(message, connection, properties(of: number))
        }
        guard message.interface == nil || message.interface == interface, let member = message.member else {
            return Self.unknownMethod(message, connection)
        }
        let options = Self.options(message.arguments.last)
        switch (member, message.signature) {
        case ("ReadValue", "a{sv}"):
            let request = newRequest(message, served, kind: .read, options: options, value: [])
            drive(.read(request.id, attribute: number, offset: request.offset), request: request)
        case ("WriteValue", "aya{sv}"):
            let bytes = message.arguments.first?.bytes ?? []
            let request = newRequest(message, served, kind: .write, options: options, value: bytes)
            drive(.write(request.id, attribute: number, offset: request.offset, value: bytes,
                         expectsReply: !message.noReplyExpected), request: request)
        case ("StartNotify", ""), ("StopNotify", ""):
            let id = takeRequestID()
            let request = ATTRequest(id: id, manager: self, kind: .read, characteristic: served.characteristic, descriptor: nil,
                                     central: nil, offset: 0, value: [], writeType: nil, mtu: nil)
            server.value.calls[id] = (message, request, nil)
            drive(member == "StartNotify" ? .startNotify(id, attribute: number) : .stopNotify(id, attribute: number), request: request)
        case ("Confirm", ""):
            if !message.noReplyExpected { try? connection.send(.methodReturn(to: message)) }
            drive(.confirm(attribute: number), request: nil)
        default:
            Self.unknownMethod(message, connection)
        }
    }

    private func takeRequestID() -> UInt64 {
        defer { server.value.nextRequest += 1 }
        return server.value.nextRequest
    }

    private func newRequest(_ message: DBusMessage, _ served: ServedAttribute, kind: ATTRequest.Kind,
                            options: [String: DBusValue], value: [UInt8]) -> ATTRequest {
        let id = takeRequestID()
        let central = options["device"]?.objectPath.map { DeviceInfo.addressFromPath($0) }
        let writeType = kind == .write ? ATTRequest.writeKind(options: options) : nil
        let request = ATTRequest(id: id, manager: self, kind: kind, characteristic: served.characteristic, descriptor: served.descriptor,
                                 central: central, offset: options["offset"]?.integer ?? 0, value: value, writeType: writeType,
                                 mtu: options["mtu"]?.integer)
        server.value.calls[id] = (message, request, nil)
        return request
    }

    /// Hands `event` to the machine and carries out what it says.
    func drive(_ event: GattServerMachine.Event, request: ATTRequest?) {
        if GattServerMachine.traces(event) { Trace.log("peripheral: \(event)") }
        for action in server.value.machine.handle(event) { perform(action, request: request) }
    }

    private func perform(_ action: GattServerMachine.Action, request: ATTRequest?) {
        switch action {
        case .replyValue(let id, let bytes):
            guard let call = server.value.calls.removeValue(forKey: id) else { return }
            try? connection.send(.methodReturn(to: call.message, arguments: [.bytes(bytes)]))
        case .replyDone(let id):
            guard let call = server.value.calls.removeValue(forKey: id) else { return }
            if !call.message.noReplyExpected { try? connection.send(.methodReturn(to: call.message)) }
        case .replyError(let id, let error, let why):
            guard let call = server.value.calls.removeValue(forKey: id) else { return }
            if !call.message.noReplyExpected { try? connection.send(.error(to: call.message, name: error.errorName, message: why)) }
        case .forget(let id):
            server.value.calls[id] = nil
        case .startDeadline(let id):
            let timer = loop.schedule(after: requestDeadline) { [weak self] in self?.drive(.deadline(id), request: request) }
            server.value.calls[id]?.timer = timer
        case .cancelDeadline(let id):
            if let timer = server.value.calls[id]?.timer { loop.cancel(timer) }
        case .emitValue(let number, let bytes):
            emitChange(number, ["Value": .bytes(bytes)])
        case .emitNotifying(let number, let on):
            emitChange(number, ["Notifying": .boolean(on)])
        case .report(let report):
            switch report {
            case .request(let id, _):
                guard let request, request.id == id else { return }
                continuation.yield(request.kind == .read ? .read(request) : .write(request))
            case .expired(let id):
                if let request, request.id == id { continuation.yield(.requestExpired(request)) }
            case .subscribed(let number):
                if let served = server.value.attributes[number] { continuation.yield(.subscribed(served.characteristic)) }
            case .unsubscribed(let number):
                if let served = server.value.attributes[number] { continuation.yield(.unsubscribed(served.characteristic)) }
            case .confirmed(let number):
                if let served = server.value.attributes[number] { continuation.yield(.confirmed(served.characteristic)) }
            }
        case .unplanned(let what):
            Trace.log("peripheral: unplanned: \(what)")
        }
    }

    private func emitChange(_ number: Int, _ changed: [String: DBusValue]) {
        guard let served = server.value.attributes[number] else { return }
        let interface = served.descriptor == nil ? "org.bluez.GattCharacteristic1" : "org.bluez.GattDescriptor1"
        try? connection.send(.signal(
            path: served.path, interface: BlueZ.properties, member: "PropertiesChanged",
            arguments: [.string(interface), .stringVariantDictionary(changed), .stringArray([])]))
    }

    // MARK: - bluetoothd going and coming back

    /// bluetoothd forgets every registration when it stops (or crashes);
    /// when it is back with the adapter, register everything again.
    ///
    /// An advertisement also goes silent when its adapter is powered off and
    /// on again: bluetoothd 5.66 keeps it registered (ActiveInstances stays)
    /// but in the lab no central hears it any more; so at power-on the
    /// advertisements are registered anew.
    private func watchBluetoothd() {
        var wasRunning = true
        var adapterPresent = true
        var wasPowered = adapter.powered
        let adapterPath = adapter.path
        server.value.observation = central.mirror.observe(start: { _ in }, onChange: { [weak self] _, tree, running in
            guard let self, !server.value.stopped else { return }
            let properties = running ? tree.properties(adapterPath, BlueZ.adapterInterface) : nil
            let present = properties != nil
            let powered = properties?["Powered"]?.bool ?? false
            defer { wasRunning = running; adapterPresent = present; wasPowered = powered }
            if !running, wasRunning {
                continuation.yield(.bluetoothdStopped)
                // its subscriptions died with it (no StopNotify will come): end them here
                for number in server.value.machine.attributes.keys.sorted() where server.value.machine.attributes[number]!.notifying {
                    drive(.stopNotify(takeRequestID(), attribute: number), request: nil)
                }
            } else if present, !adapterPresent {
                let services = server.value.services.keys.sorted().compactMap { server.value.services[$0] }
                let ads = server.value.advertisements
                Task { await self.registerAgain(services, ads) }
            } else if present, adapterPresent, powered, !wasPowered, !server.value.advertisements.isEmpty {
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

    // MARK: - D-Bus helpers

    static func options(_ value: DBusValue?) -> [String: DBusValue] {
        var options: [String: DBusValue] = [:]
        guard case .dictionary(_, _, let entries)? = value?.unwrapped else { return options }
        for entry in entries {
            if let key = entry.key.string { options[key] = entry.value.unwrapped }
        }
        return options
    }

    static func managedObjects(_ objects: [(ObjectPath, [String: [String: DBusValue]])]) -> DBusValue {
        .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!, objects.map { path, interfaces in
            DBusDictEntry(.objectPath(path), .dictionary(
                key: .string, value: DBusSignature("a{sv}")!,
                interfaces.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .stringVariantDictionary($0.value)) }))
        })
    }

    /// Properties.Get / GetAll of an exported object; Set is refused (bluetoothd never sets).
    static func answerProperties(_ message: DBusMessage, _ connection: DBusConnection, _ interfaces: [String: [String: DBusValue]]) {
        guard message.interface == BlueZ.properties else { return unknownMethod(message, connection) }
        let interface = message.arguments.first?.string ?? ""
        switch message.member {
        case "GetAll":
            try? connection.send(.methodReturn(to: message, arguments: [.stringVariantDictionary(interfaces[interface] ?? [:])]))
        case "Get":
            let name = message.arguments.dropFirst().first?.string ?? ""
            if let value = interfaces[interface]?[name] {
                try? connection.send(.methodReturn(to: message, arguments: [.variant(value)]))
            } else {
                try? connection.send(.error(to: message, name: "org.freedesktop.DBus.Error.InvalidArgs", message: "no property \(name)"))
            }
        default:
            try? connection.send(.error(to: message, name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "read-only"))
        }
    }

    static func unknownMethod(_ message: DBusMessage, _ connection: DBusConnection) {
        guard !message.noReplyExpected else { return }
        try? connection.send(.error(to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                                    message: "no method \(message.member ?? "?") on \(message.interface ?? "?")"))
    }

    static func refuse(_ message: DBusMessage, _ connection: DBusConnection) {
        guard !message.noReplyExpected else { return }
        try? connection.send(.error(to: message, name: "org.bluez.Error.Failed", message: "no longer served"))
    }
}

extension GattFlag {
    /// `as`, in declaration order.
    static func stringList(_ flags: Set<GattFlag>) -> DBusValue { .stringArray(flags.sorted().map(\.rawValue)) }
}

/// A served service (what `PeripheralManager.add` returns).
public struct PublishedService: Sendable, Hashable {
    /// Its type.
    public let uuid: BluetoothUUID
    /// Primary or secondary.
    public let isPrimary: Bool
    /// Its characteristics, in the order they were defined.
    public let characteristics: [PublishedCharacteristic]
    package let number: Int
    package let root: ObjectPath

    /// The characteristic with this UUID (the first, when there are several).
    public func characteristic(_ uuid: BluetoothUUID) -> PublishedCharacteristic? {
        characteristics.first { $0.uuid == uuid }
    }
}

/// A served characteristic: what `updateValue` takes and events name.
public struct PublishedCharacteristic: Sendable, Hashable {
    /// Its type.
    public let uuid: BluetoothUUID
    /// The UUID of the service it belongs to.
    public let serviceUUID: BluetoothUUID
    /// Its flags, as defined.
    public let flags: Set<GattFlag>
    package let attribute: Int
    /// Its descriptors, in the order they were defined.
    public internal(set) var descriptors: [PublishedDescriptor]
}

/// A served descriptor.
public struct PublishedDescriptor: Sendable, Hashable {
    /// Its type.
    public let uuid: BluetoothUUID
    /// Its flags, as defined.
    public let flags: Set<GattFlag>
    package let attribute: Int
}

/// What a `PeripheralManager` reports (CBPeripheralManagerDelegate's calls).
public enum PeripheralEvent: Sendable {
    /// A central reads (didReceiveRead). Already answered when the
    /// characteristic has a value (`request.isAnswered`); else answer it.
    case read(ATTRequest)
    /// A central writes (didReceiveWrite); answered already when the
    /// characteristic has a value, which now holds what was written.
    case write(ATTRequest)
    /// A request was not answered within the deadline; bluetoothd was told it failed.
    case requestExpired(ATTRequest)
    /// A central subscribed (bluetoothd does not say which).
    case subscribed(PublishedCharacteristic)
    /// The last subscribed central unsubscribed or disconnected.
    case unsubscribed(PublishedCharacteristic)
    /// A central confirmed an indication.
    case confirmed(PublishedCharacteristic)
    /// `updateValue` takes values again (peripheralManagerIsReady(toUpdateSubscribers:)).
    case readyToUpdateSubscribers
    /// bluetoothd removed an advertisement by itself (its timeout ran out, or
    /// the adapter went away).
    case advertisingStopped(AdvertisementData)
    /// bluetoothd stopped or crashed: the services and advertisements are
    /// registered again when it is back (`restored`).
    case bluetoothdStopped
    /// bluetoothd is back (or the adapter was powered on again) and what it
    /// had forgotten (or silenced: the advertisements) was registered again,
    /// except what `failures` names.
    case restored(failures: [String])
}

/// A central's read or write of a served characteristic or descriptor
/// (CBATTRequest), to be answered once with `respond`.
public final class ATTRequest: Sendable, CustomStringConvertible {
    /// Read or write.
    public enum Kind: Sendable {
        /// ATT Read (or Read Blob, at `offset`).
        case read
        /// ATT Write (request, command or part of a reliable write).
        case write
    }
    /// How a central wrote (BlueZ's `type` option).
    public enum WriteKind: String, Sendable {
        /// ATT Write Request: the central waits for the answer.
        case request
        /// ATT Write Command (without response): no answer goes back.
        case command
        /// Part of a reliable (queued) write.
        case reliable
    }

    /// How the central wrote: BlueZ's `type` option where bluetoothd sends
    /// it. bluetoothd 5.66 does not, and its ATT server accepts either kind
    /// of write on any writable characteristic (the lab saw a Write Request
    /// on a write-without-response-only one), so without it: nil.
    static func writeKind(options: [String: DBusValue]) -> WriteKind? {
        options["type"]?.string.flatMap(WriteKind.init(rawValue:))
    }

    let id: UInt64
    private weak let manager: PeripheralManager?
    /// Read or write.
    public let kind: Kind
    /// The characteristic asked about (or whose descriptor is).
    public let characteristic: PublishedCharacteristic
    /// The descriptor, when the request is about one of the characteristic's descriptors.
    public let descriptor: PublishedDescriptor?
    /// The central (bluetoothd names it, except for requests it makes itself).
    public let central: BluetoothAddress?
    /// Where in the value the read starts or the write goes (long values).
    public let offset: Int
    /// What is written (empty for a read).
    public let value: [UInt8]
    /// How the central wrote, when bluetoothd says (5.66 does not).
    public let writeType: WriteKind?
    /// The link's ATT MTU, when bluetoothd says.
    public let mtu: Int?

    init(id: UInt64, manager: PeripheralManager, kind: Kind, characteristic: PublishedCharacteristic, descriptor: PublishedDescriptor?,
         central: BluetoothAddress?, offset: Int, value: [UInt8], writeType: WriteKind?, mtu: Int?) {
        self.id = id
        self.manager = manager
        self.kind = kind
        self.characteristic = characteristic
        self.descriptor = descriptor
        self.central = central
        self.offset = offset
        self.value = value
        self.writeType = writeType
        self.mtu = mtu
    }

    /// Whether it still waits for `respond` (false when the manager answered
    /// it from the value, it was answered, or it expired).
    public var isPending: Bool { manager?.server.loop.sync { [self] in manager?.server.value.machine.isPending(id) ?? false } ?? false }

    /// Answers a read with `value` (from `offset` on: the bytes the central
    /// gets), or accepts a write (`value` is ignored). False when it was
    /// answered already or expired.
    @discardableResult
    public func respond(with value: [UInt8] = []) -> Bool { manager?.answer(self, .success(value)) ?? false }

    /// Refuses the request with an ATT error.
    @discardableResult
    public func respond(withError error: ATTError) -> Bool { manager?.answer(self, .failure(error)) ?? false }

    public var description: String {
        let what = descriptor.map { "descriptor \($0.uuid.label) of " } ?? ""
        return "\(kind == .read ? "read" : "write") of \(what)\(characteristic.uuid.label) by \(central?.description ?? "?") at \(offset)"
    }
}
