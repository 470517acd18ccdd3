import BluectlDBus
import Testing
@testable import BluectlCore

/// A `PeripheralManager` on an embedded connection: the real manager, its
/// GATT server machine and driver run on the connection's loop; the test
/// plays bluetoothd — it answers RegisterApplication and RegisterAdvertisement,
/// reads the exported objects, calls them as a central's requests reach a
/// GATT application, and stops and restarts. Time is the loop's.
struct EmbeddedPeripheralRole {
    static let measurement = BluetoothUUID(uint16: 0x2a37)
    static let control = BluetoothUUID(uint16: 0x2a39)
    /// A characteristic the manager answers from its value, and one the application answers.
    static let service = MutableService(uuid: BluetoothUUID(uint16: 0x180d), characteristics: [
        MutableCharacteristic(uuid: measurement, flags: [.read, .write, .notify], value: [1, 2, 3]),
        MutableCharacteristic(uuid: control, flags: [.read, .write]),
    ])
    static let centralDevice = Fixture.device(Fixture.hci0, "11_22_33_44_55_66")
    /// The embedded connection's own name (`DBusConnection.embedded()`).
    static let us = ":1.99"

    let lab: EmbeddedBlueZ
    let manager: PeripheralManager
    let published: PublishedService
    /// The application's root (its ObjectManager), as RegisterApplication named it.
    let root: ObjectPath
    /// Each characteristic's object, as bluetoothd found it in the application's objects.
    let paths: [BluetoothUUID: ObjectPath]

    /// An adapter that can serve GATT and advertise.
    static func adapter() -> [ObjectPath: [String: [String: DBusValue]]] {
        [Fixture.hci0: [
            BlueZ.adapterInterface: ["Address": .string("00:AA:01:00:00:01"), "Powered": .boolean(true)],
            "org.bluez.GattManager1": [:],
            "org.bluez.LEAdvertisingManager1": ["SupportedInstances": .byte(4), "ActiveInstances": .byte(0)],
        ]]
    }

    /// A manager serving `service`: RegisterApplication answered once
    /// bluetoothd has read the application's objects, as it does.
    static func serving(requestDeadline: Duration = .seconds(10)) async throws -> EmbeddedPeripheralRole {
        let lab = try await EmbeddedBlueZ.start(adapter())
        let manager = PeripheralManager(central: lab.central, adapter: try lab.central.adapter(named: "hci0"),
                                        requestDeadline: requestDeadline)
        let adding = Task { try await manager.add(service) }
        let register = try #require(await lab.bus.nextCall("RegisterApplication"))
        #expect(register.path == Fixture.hci0)
        #expect(register.interface == "org.bluez.GattManager1")
        let root = try #require(register.arguments.first?.objectPath)
        let read = lab.bus.call(.methodCall(destination: us, path: root, interface: BlueZ.objectManager, member: "GetManagedObjects"),
                                from: BlueZ.service)
        let objects = try #require(await lab.bus.answer(to: read))
        var tree = BlueZObjectTree()
        _ = tree.replace(withManagedObjects: try #require(objects.arguments.first))
        #expect(tree.paths(with: BlueZ.serviceInterface).count == 1)
        var paths: [BluetoothUUID: ObjectPath] = [:]
        for path in tree.paths(with: BlueZ.characteristicInterface) {
            let text = try #require(tree.properties(path, BlueZ.characteristicInterface)?["UUID"]?.string)
            paths[try BluetoothUUID(text)] = path
        }
        #expect(Set(paths.keys) == [measurement, control])
        #expect(tree.properties(paths[measurement]!, BlueZ.characteristicInterface)?["Flags"] == .stringArray(["read", "write", "notify"]))
        lab.bus.reply(to: register)
        return EmbeddedPeripheralRole(lab: lab, manager: manager, published: try await adding.value, root: root, paths: paths)
    }

    func characteristic(_ uuid: BluetoothUUID) throws -> PublishedCharacteristic {
        try #require(published.characteristic(uuid))
    }

    /// bluetoothd passes a central's request on: `member` of the characteristic `uuid`.
    @discardableResult
    func central(_ member: String, _ uuid: BluetoothUUID, _ arguments: [DBusValue] = [], noReply: Bool = false) -> DBusMessage {
        var call = DBusMessage.methodCall(destination: Self.us, path: paths[uuid]!, interface: BlueZ.characteristicInterface,
                                          member: member, arguments: arguments)
        call.noReplyExpected = noReply
        return lab.bus.call(call, from: BlueZ.service)
    }

    /// ReadValue's and WriteValue's options as 5.66 sends them (docs/bluez-pitfalls.md, 20).
    static func options(offset: Int = 0) -> DBusValue {
        var options: [String: DBusValue] = ["device": .objectPath(centralDevice), "link": .string("LE"), "mtu": .uint16(185)]
        if offset != 0 { options["offset"] = .uint16(UInt16(offset)) }
        return .stringVariantDictionary(options)
    }

    /// The manager's PropertiesChanged on the characteristic `uuid` so far: each one's changed properties.
    func changes(_ uuid: BluetoothUUID) -> [[String: DBusValue]] {
        lab.bus.sent.filter { $0.kind == .signal && $0.member == "PropertiesChanged" && $0.path == paths[uuid] }
            .map { PeripheralManager.options($0.arguments.dropFirst().first) }
    }

    /// Advertises, RegisterAdvertisement answered once bluetoothd has read the advertisement.
    func advertise() async throws -> (Advertisement, ObjectPath) {
        let advertising = Task {
            try await manager.startAdvertising(AdvertisementData(localName: "bluectl", serviceUUIDs: [BluetoothUUID(uint16: 0x180d)]))
        }
        let register = try #require(await lab.bus.nextCall("RegisterAdvertisement"))
        #expect(register.path == Fixture.hci0)
        #expect(register.interface == "org.bluez.LEAdvertisingManager1")
        let path = try #require(register.arguments.first?.objectPath)
        let get = lab.bus.call(.methodCall(destination: Self.us, path: path, interface: BlueZ.properties, member: "GetAll",
                                           arguments: [.string("org.bluez.LEAdvertisement1")]), from: BlueZ.service)
        let properties = PeripheralManager.options(try #require(await lab.bus.answer(to: get)).arguments.first)
        #expect(properties["LocalName"] == .string("bluectl"))
        #expect(properties["Type"] == .string("peripheral"))
        #expect(properties["ServiceUUIDs"] == .stringArray(["0000180d-0000-1000-8000-00805f9b34fb"]))
        lab.bus.reply(to: register)
        return (try await advertising.value, path)
    }

    /// A central subscribes to `measurement` (StartNotify, answered).
    func subscribe(_ events: EventLog) async throws {
        let start = central("StartNotify", Self.measurement)
        #expect(try #require(await lab.bus.answer(to: start)).kind == .methodReturn)
        guard case .subscribed(let subscribed)? = await events.next() else { throw Unexpected("no subscribed event") }
        #expect(subscribed.uuid == Self.measurement)
    }
}

/// A manager's events as they come, read by a task of the test's (like
/// `EmbeddedBus.nextCall`): a missing event fails the test after a bounded
/// wait instead of hanging it.
final class EventLog: Sendable {
    private struct State {
        var events: [PeripheralEvent] = []
        var taken = 0
        var ended = false
    }
    private let state = Locked(State())

    init(_ events: AsyncStream<PeripheralEvent>) {
        Task { [state] in
            for await event in events { state.withLock { $0.events.append(event) } }
            state.withLock { $0.ended = true }
        }
    }

    /// The next event not taken before, waiting for it up to `limit` of real time; nil if none came.
    func next(limit: Duration = .seconds(10)) async -> PeripheralEvent? {
        await EmbeddedBus.waitFor(limit: limit) { [state] in
            state.withLock { state -> PeripheralEvent? in
                guard state.taken < state.events.count else { return nil }
                defer { state.taken += 1 }
                return state.events[state.taken]
            }
        }
    }

    /// Waits (up to `limit` of real time) for the stream's end, every event taken; false if it did not end.
    func ended(limit: Duration = .seconds(10)) async -> Bool {
        await EmbeddedBus.waitFor(limit: limit) { [state] in
            state.withLock { $0.ended && $0.taken == $0.events.count } ? true : nil
        } ?? false
    }
}

struct Unexpected: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite(.timeLimit(.minutes(1))) struct PeripheralManagerDriverTests {
    typealias Role = EmbeddedPeripheralRole

    /// A central's reads and writes: answered from the value (at the
    /// offset; a write stored) or by the application; one the application
    /// never answers fails at the deadline of the loop's clock.
    @Test func aCentralsReadsAndWritesAreAnsweredByTheValueOrTheApplication() async throws {
        let role = try await Role.serving(requestDeadline: .seconds(10))
        defer { role.lab.close() }
        let events = EventLog(role.manager.events)
        let measurement = try role.characteristic(Role.measurement)

        let read = role.central("ReadValue", Role.measurement, [Role.options(offset: 1)])
        let readReply = try #require(await role.lab.bus.answer(to: read))
        #expect(readReply.kind == .methodReturn)
        #expect(readReply.arguments == [.bytes([2, 3])])
        guard case .read(let answered)? = await events.next() else { throw Unexpected("no read event") }
        #expect(!answered.isPending, "answered from the value")
        #expect(answered.offset == 1)
        #expect(answered.mtu == 185)
        #expect(answered.central == BluetoothAddress("11:22:33:44:55:66"))
        #expect(answered.writeType == nil, "5.66 does not say how a central wrote")

        let write = role.central("WriteValue", Role.measurement, [.bytes([9, 8]), Role.options()])
        #expect(try #require(await role.lab.bus.answer(to: write)).kind == .methodReturn)
        guard case .write(let stored)? = await events.next() else { throw Unexpected("no write event") }
        #expect(stored.value == [9, 8])
        #expect(role.manager.value(of: measurement) == [9, 8])

        let asked = role.central("ReadValue", Role.control, [Role.options()])
        guard case .read(let pending)? = await events.next() else { throw Unexpected("no read event") }
        #expect(pending.isPending)
        #expect(await role.lab.bus.answer(to: asked, limit: .zero) == nil, "no reply before the application's")
        #expect(pending.respond(with: [7, 7]))
        #expect(try #require(await role.lab.bus.answer(to: asked)).arguments == [.bytes([7, 7])])
        #expect(!pending.respond(with: [8]), "a request is answered once")

        let unanswered = role.central("WriteValue", Role.control, [.bytes([1]), Role.options()])
        guard case .write(let late)? = await events.next() else { throw Unexpected("no write event") }
        role.lab.bus.advance(by: .seconds(9))
        #expect(await role.lab.bus.answer(to: unanswered, limit: .zero) == nil, "not before the deadline")
        role.lab.bus.advance(by: .seconds(1))
        let failed = try #require(await role.lab.bus.answer(to: unanswered))
        #expect(failed.errorName == ATTError.failed.errorName)
        guard case .requestExpired(let expired)? = await events.next() else { throw Unexpected("no requestExpired event") }
        #expect(expired === late)
        #expect(!late.isPending)
        #expect(!late.respond(with: []), "too late")
    }

    /// StartNotify: Notifying turns true on the object, then each
    /// `updateValue` is a PropertiesChanged(Value) bluetoothd fans out;
    /// StopNotify (after the last central left) turns it false.
    @Test func aCentralSubscribesAndGetsEachUpdate() async throws {
        let role = try await Role.serving()
        defer { role.lab.close() }
        let events = EventLog(role.manager.events)
        let measurement = try role.characteristic(Role.measurement)
        #expect(!role.manager.isNotifying(measurement))
        try await role.subscribe(events)
        #expect(role.manager.isNotifying(measurement))
        #expect(role.manager.updateValue([4], for: measurement))
        #expect(role.manager.updateValue([5], for: measurement))
        let stop = role.central("StopNotify", Role.measurement)
        #expect(try #require(await role.lab.bus.answer(to: stop)).kind == .methodReturn)
        guard case .unsubscribed(let left)? = await events.next() else { throw Unexpected("no unsubscribed event") }
        #expect(left.uuid == Role.measurement)
        #expect(role.manager.updateValue([6], for: measurement), "stored, sent to no one")
        #expect(role.changes(Role.measurement) == [
            ["Notifying": .boolean(true)], ["Value": .bytes([4])], ["Value": .bytes([5])], ["Notifying": .boolean(false)],
        ])
        #expect(role.manager.value(of: measurement) == [6])
    }

    /// `stop()` leaves nothing registered or exported: the advertisement and
    /// the application are unregistered, the request still waiting fails,
    /// the subscription ends, `events` ends, and bluetoothd's later calls
    /// find no object.
    @Test func stopUnregistersAndUnexportsEverything() async throws {
        let role = try await Role.serving()
        defer { role.lab.close() }
        let events = EventLog(role.manager.events)
        let (advertisement, advertisementPath) = try await role.advertise()
        #expect(role.manager.isAdvertising(advertisement))
        try await role.subscribe(events)
        let waiting = role.central("ReadValue", Role.control, [Role.options()])
        guard case .read? = await events.next() else { throw Unexpected("no read event") }

        let stopping = Task { await role.manager.stop() }
        let unregisterAdvertisement = try #require(await role.lab.bus.nextCall("UnregisterAdvertisement"))
        #expect(unregisterAdvertisement.arguments.first?.objectPath == advertisementPath)
        #expect(try #require(await role.lab.bus.answer(to: waiting)).errorName == ATTError.failed.errorName)
        #expect(role.changes(Role.measurement).last == ["Notifying": .boolean(false)])
        role.lab.bus.reply(to: unregisterAdvertisement)
        let unregisterApplication = try #require(await role.lab.bus.nextCall("UnregisterApplication"))
        #expect(unregisterApplication.path == Fixture.hci0)
        #expect(unregisterApplication.arguments.first?.objectPath == role.root)
        role.lab.bus.reply(to: unregisterApplication)
        await stopping.value

        #expect(await events.ended(), "events end with the manager")
        #expect(!role.manager.isAdvertising(advertisement))
        #expect(role.manager.services.isEmpty)
        let late = role.central("ReadValue", Role.measurement, [Role.options()])
        #expect(try #require(await role.lab.bus.answer(to: late)).errorName == "org.freedesktop.DBus.Error.UnknownObject")
        for (path, interface, member) in [(advertisementPath, BlueZ.properties, "GetAll"),
                                          (role.root, BlueZ.objectManager, "GetManagedObjects")] {
            let call = role.lab.bus.call(.methodCall(destination: Role.us, path: path, interface: interface, member: member,
                                                     arguments: member == "GetAll" ? [.string("org.bluez.LEAdvertisement1")] : []),
                                         from: BlueZ.service)
            #expect(try #require(await role.lab.bus.answer(to: call)).errorName == "org.freedesktop.DBus.Error.UnknownObject", "\(path)")
        }
        #expect(role.lab.calls("UnregisterApplication").count == 1)
        #expect(role.lab.calls("UnregisterAdvertisement").count == 1)
    }

    /// bluetoothd crashes and comes back (its owner changes): its centrals'
    /// subscriptions died with it (no StopNotify comes, so they end here),
    /// and once its adapter is back the application and the advertisement
    /// are registered again.
    @Test func bluetoothdRestartingEndsSubscriptionsAndRegistersEverythingAgain() async throws {
        let role = try await Role.serving()
        defer { role.lab.close() }
        let events = EventLog(role.manager.events)
        let (_, advertisementPath) = try await role.advertise()
        try await role.subscribe(events)

        role.lab.bus.setOwner(BlueZ.service, to: nil)
        guard case .bluetoothdStopped? = await events.next() else { throw Unexpected("no bluetoothdStopped event") }
        guard case .unsubscribed(let left)? = await events.next() else { throw Unexpected("no unsubscribed event") }
        #expect(left.uuid == Role.measurement)
        #expect(!role.manager.isNotifying(try role.characteristic(Role.measurement)))
        #expect(role.changes(Role.measurement).last == ["Notifying": .boolean(false)])

        role.lab.bus.setOwner(BlueZ.service, to: ":1.8")
        let reread = try #require(await role.lab.bus.nextCall("GetManagedObjects"))
        role.lab.bus.reply(to: reread, [EmbeddedBlueZ.managedObjects(Role.adapter())])
        let application = try #require(await role.lab.bus.nextCall("RegisterApplication"))
        #expect(application.arguments.first?.objectPath == role.root)
        role.lab.bus.reply(to: application)
        let advertisement = try #require(await role.lab.bus.nextCall("RegisterAdvertisement"))
        #expect(advertisement.arguments.first?.objectPath == advertisementPath)
        role.lab.bus.reply(to: advertisement)
        guard case .restored(let failures)? = await events.next() else { throw Unexpected("no restored event") }
        #expect(failures.isEmpty)
        // What the new bluetoothd reads is the current state, served again.
        let read = role.central("ReadValue", Role.measurement, [Role.options()])
        #expect(try #require(await role.lab.bus.answer(to: read)).arguments == [.bytes([1, 2, 3])])
    }
}
