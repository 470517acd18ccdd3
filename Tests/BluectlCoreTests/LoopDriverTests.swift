import BluectlDBus
import Testing
@testable import BluectlCore

/// A central on an embedded connection (swift-nio's `EmbeddedChannel` for
/// D-Bus): the real mirror, drivers and machines run on the connection's
/// loop; the test plays bluetoothd — it answers the calls that go out, emits
/// the signals, and moves the loop's virtual clock. Nothing here sleeps on a
/// real clock but `EmbeddedBus.nextCall`, which only waits for a call the
/// code under test is about to send.
struct EmbeddedBlueZ {
    static let owner = ":1.7"
    static let device = Fixture.device()
    static let service = device.appending("service000a")!
    static let characteristic = service.appending("char000b")!

    let central: CentralManager
    let bus: EmbeddedBus

    /// Opens a central against `objects` (path → interface → properties),
    /// answering its GetManagedObjects.
    static func start(_ objects: [ObjectPath: [String: [String: DBusValue]]], callTimeout: Duration = .seconds(25)) async throws -> EmbeddedBlueZ {
        let (connection, bus) = DBusConnection.embedded(owners: [BlueZ.service: owner])
        let opening = Task { try await CentralManager.open(connection: connection, callTimeout: callTimeout) }
        let get = try #require(await bus.nextCall("GetManagedObjects"))
        bus.reply(to: get, [managedObjects(objects)])
        return EmbeddedBlueZ(central: try await opening.value, bus: bus)
    }

    static func managedObjects(_ objects: [ObjectPath: [String: [String: DBusValue]]]) -> DBusValue {
        .dictionary(key: .objectPath, value: DBusSignature("a{sa{sv}}")!,
                    objects.sorted { $0.key < $1.key }.map { DBusDictEntry(.objectPath($0.key), Fixture.interfaces($0.value)) })
    }

    /// A connected heart-rate sensor with resolved services and one notifying characteristic.
    static func sensor(connected: Bool = true, resolved: Bool = true, notifying: Bool = false) -> [ObjectPath: [String: [String: DBusValue]]] {
        var device = Fixture.deviceProperties()
        device["Connected"] = .boolean(connected)
        device["ServicesResolved"] = .boolean(resolved)
        var objects: [ObjectPath: [String: [String: DBusValue]]] = [
            Fixture.hci0: [BlueZ.adapterInterface: ["Address": .string("00:AA:01:00:00:01"), "Powered": .boolean(true)]],
            Self.device: [BlueZ.deviceInterface: device],
        ]
        if resolved {
            objects[service] = [BlueZ.serviceInterface: [
                "UUID": .string("0000180d-0000-1000-8000-00805f9b34fb"), "Primary": .boolean(true), "Device": .objectPath(Self.device)]]
            objects[characteristic] = [BlueZ.characteristicInterface: [
                "UUID": .string("00002a37-0000-1000-8000-00805f9b34fb"), "Service": .objectPath(service),
                "Flags": .stringArray(["read", "notify"]), "Notifying": .boolean(notifying)]]
            // 5.66 has MTU on a characteristic while the device is connected (pitfall 26).
            if connected { objects[characteristic]![BlueZ.characteristicInterface]!["MTU"] = .uint16(247) }
        }
        return objects
    }

    /// A connected sensor whose services are exported but not yet marked
    /// resolved, and `discoverServices()` waiting for them.
    static func discoveringExportedServices() async throws -> (EmbeddedBlueZ, Task<[GattService], any Error>) {
        var objects = sensor(connected: true, resolved: true)
        objects[device]![BlueZ.deviceInterface]!["ServicesResolved"] = .boolean(false)
        let lab = try await start(objects)
        let peripheral = try lab.peripheral
        let discovering = Task { try await peripheral.discoverServices() }
        try await lab.answerGetAll(["Connected": .boolean(true), "ServicesResolved": .boolean(false)])
        return (lab, discovering)
    }

    /// Ends the central (its connection's tables, observers and timers go:
    /// what a test leaves running would otherwise outlive it).
    func close() { central.close() }

    var peripheral: Peripheral {
        get throws {
            let adapter = try central.adapter(named: "hci0")
            return try #require(try central.knownDevice(Self.device.rawValue, adapter: adapter))
        }
    }

    /// PropertiesChanged from bluetoothd.
    func changed(_ path: ObjectPath, _ interface: String, _ properties: [String: DBusValue], from sender: String = BlueZ.service) {
        bus.emit(.signal(path: path, interface: BlueZ.properties, member: "PropertiesChanged",
                         arguments: Fixture.changed(interface, properties)), from: sender)
    }

    /// InterfacesAdded from bluetoothd.
    func added(_ path: ObjectPath, _ interfaces: [String: [String: DBusValue]]) {
        bus.emit(.signal(path: .root, interface: BlueZ.objectManager, member: "InterfacesAdded",
                         arguments: Fixture.added(path, interfaces)), from: BlueZ.service)
    }

    /// A value notified by the characteristic.
    func notify(_ bytes: [UInt8], from sender: String = BlueZ.service) {
        changed(Self.characteristic, BlueZ.characteristicInterface, ["Value": .bytes(bytes)], from: sender)
    }

    /// Subscribes to `characteristic` as the first subscriber (StartNotify answered).
    func subscribe(_ peripheral: Peripheral, to characteristic: GattCharacteristic) async throws -> NotificationSession {
        let subscribing = Task { try await peripheral.subscribe(to: characteristic) }
        bus.reply(to: try #require(await bus.nextCall("StartNotify")))
        return try await subscribing.value
    }

    /// Answers the next `GetAll` of Device1 with `properties`.
    func answerGetAll(_ properties: [String: DBusValue]) async throws {
        let call = try #require(await bus.nextCall("GetAll"))
        #expect(call.path == Self.device)
        bus.reply(to: call, [.stringVariantDictionary(properties)])
    }

    /// The calls sent to bluetoothd named `member`, so far.
    func calls(_ member: String) -> [DBusMessage] {
        bus.calls.filter { $0.member == member }
    }
}

@Suite(.timeLimit(.minutes(1))) struct LoopDriverTests {
    /// BlueZ aborts the first connection (`le-connection-abort-by-local`,
    /// the link never came up); the machine connects again at once and the
    /// second attempt's Connected=true completes it.
    @Test func connectRetriesAfterAbortByLocalThenSucceeds() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: false, resolved: false))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let connecting = Task { try await lab.central.connect(peripheral, timeout: .seconds(30), retries: 2) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        let first = try #require(await lab.bus.nextCall("Connect"))
        lab.bus.fail(first, name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")
        let second = try #require(await lab.bus.nextCall("Connect"))
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        lab.bus.reply(to: second)
        #expect(try await connecting.value == true)
        #expect(lab.calls("Connect").count == 2)
        #expect(lab.calls("Disconnect").isEmpty)
    }

    /// The abort came after the link was up: the machine waits for
    /// Connected=false before trying again (connecting on top of a dying
    /// link is what makes 5.66 fail again).
    @Test func connectAfterAbortWaitsForTheLinkToDrop() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: false, resolved: false))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let connecting = Task { try await lab.central.connect(peripheral, timeout: .seconds(30), retries: 2) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        let first = try #require(await lab.bus.nextCall("Connect"))
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        lab.bus.fail(first, name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")
        lab.bus.advance(by: .seconds(1))
        #expect(lab.calls("Connect").count == 1, "no second Connect while the link is still up")
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(false)])
        let second = try #require(await lab.bus.nextCall("Connect"))
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        lab.bus.reply(to: second)
        #expect(try await connecting.value == true)
    }

    /// Connect answered but Connected=true never signalled (bluetoothd 5.66
    /// does that): the machine asks bluetoothd every 250 ms of the loop's clock.
    @Test func connectAsksWhenConnectedIsNeverSignalled() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: false, resolved: false))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let connecting = Task { try await lab.central.connect(peripheral) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        lab.bus.reply(to: try #require(await lab.bus.nextCall("Connect")))
        try await lab.answerGetAll(["Connected": .boolean(false)])
        lab.bus.advance(by: .milliseconds(250))
        try await lab.answerGetAll(["Connected": .boolean(true)])
        #expect(try await connecting.value == true)
    }

    /// A call that never answers: the connect's deadline is a loop timer;
    /// at it the machine sends Disconnect, which does not answer either, and
    /// that call's own deadline ends the wait. All on the virtual clock.
    @Test func aCallThatNeverAnswersEndsAtTheDeadline() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: false, resolved: false), callTimeout: .seconds(60))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let connecting = Task { try await lab.central.connect(peripheral, timeout: .seconds(10)) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        _ = try #require(await lab.bus.nextCall("Connect"))
        lab.bus.advance(by: .seconds(9))
        #expect(lab.calls("Disconnect").isEmpty, "not before the deadline")
        lab.bus.advance(by: .seconds(1))
        _ = try #require(await lab.bus.nextCall("Disconnect"))
        lab.bus.advance(by: .seconds(5))
        await expectFailure(connecting, "connect should have timed out") { $0.isTimeout }
    }

    /// Disconnect answered, Connected=false never signalled: the machine
    /// asks bluetoothd every 300 ms of the loop's clock until it says so.
    @Test func disconnectAsksWhenTheLinkDropIsNeverSignalled() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let disconnecting = Task { try await lab.central.cancelPeripheralConnection(peripheral) }
        try await lab.answerGetAll(["Connected": .boolean(true)])
        lab.bus.reply(to: try #require(await lab.bus.nextCall("Disconnect")))
        try await lab.answerGetAll(["Connected": .boolean(true)])
        #expect(peripheral.state == .disconnecting)
        lab.bus.advance(by: .milliseconds(300))
        try await lab.answerGetAll(["Connected": .boolean(false)])
        try await disconnecting.value
        #expect(lab.calls("Disconnect").count == 1)
    }

    /// Changes that came before bluetoothd's answer the machine starts from
    /// are in that answer: the link dropping and coming back while the
    /// first GetAll was out is not replayed as "disconnected" after it.
    @Test func changesOlderThanTheStartAreNotReplayed() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let disconnecting = Task { try await lab.central.cancelPeripheralConnection(peripheral) }
        let look = try #require(await lab.bus.nextCall("GetAll"))
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(false)])
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        lab.bus.reply(to: look, [.stringVariantDictionary(["Connected": .boolean(true)])])
        let disconnect = try #require(await lab.bus.nextCall("Disconnect"))
        #expect(peripheral.state == .disconnecting, "still disconnecting: the old drop is not this disconnect")
        lab.bus.reply(to: disconnect)
        try await lab.answerGetAll(["Connected": .boolean(false)])
        try await disconnecting.value
    }

    /// ServicesResolved=true and Connected=false race: in the order
    /// bluetoothd sends them. The disconnect first fails the wait.
    @Test func servicesResolvedLosesToADisconnectSentFirst() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: true, resolved: false))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let discovering = Task { try await peripheral.discoverServices() }
        try await lab.answerGetAll(["Connected": .boolean(true), "ServicesResolved": .boolean(false)])
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(false)])
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["ServicesResolved": .boolean(true)])
        await expectFailure(discovering, "discovery should have failed") { $0.isDisconnected }
    }

    /// The same race the other way: ServicesResolved first, with the
    /// service objects exported, completes the wait; the disconnect after it
    /// is no longer this wait's business.
    @Test func servicesResolvedBeforeTheDisconnectCompletes() async throws {
        let (lab, discovering) = try await EmbeddedBlueZ.discoveringExportedServices()
        defer { lab.close() }
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["ServicesResolved": .boolean(true)])
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(false)])
        let services = try await discovering.value
        #expect(services.map(\.uuid) == [BluetoothUUID(uint16: 0x180d)])
    }

    /// What the lab showed: bluetoothd signals ServicesResolved, then
    /// exports the database in a burst. The wait ends once the burst is over
    /// (a quiet time on the loop's clock), with the whole database, not at
    /// its first object.
    @Test func aDatabaseExportedAfterServicesResolvedIsWaitedForWhole() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: true, resolved: false))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        // What the caller sees the moment discovery ends.
        let discovering = Task { () throws -> [BluetoothUUID] in
            try await peripheral.discoverServices()
            return peripheral.database.characteristics.map(\.uuid)
        }
        try await lab.answerGetAll(["Connected": .boolean(true), "ServicesResolved": .boolean(false)])
        let whole = EmbeddedBlueZ.sensor()
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["ServicesResolved": .boolean(true)])
        lab.added(EmbeddedBlueZ.service, whole[EmbeddedBlueZ.service]!)
        // The one real pause here: time for a wait that wrongly ended at the
        // first object to show it (the caller would then see no characteristic).
        try await Task.sleep(for: .milliseconds(50))
        lab.added(EmbeddedBlueZ.characteristic, whole[EmbeddedBlueZ.characteristic]!)
        #expect(await lab.bus.untilTimerScheduled())
        lab.bus.advance(by: .milliseconds(200))
        #expect(try await discovering.value == [BluetoothUUID(uint16: 0x2a37)])
    }

    /// Pitfalls 24 and 26 together (the lab's proxy reported MTU 23): bluetoothd never
    /// signalled Connected, and the cached characteristic has no MTU. Once the services are
    /// found resolved by asking, the MTU is asked for and recorded.
    @Test func mtuAskedForWhenConnectedWasNeverSignalled() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor(connected: false, resolved: true))
        defer { lab.close() }
        let peripheral = try lab.peripheral
        #expect(peripheral.mtu == nil)
        let discovering = Task { try await peripheral.discoverServices() }
        try await lab.answerGetAll(["Connected": .boolean(true), "ServicesResolved": .boolean(true)])
        let get = try #require(await lab.bus.nextCall("Get"))
        #expect(get.path == EmbeddedBlueZ.characteristic)
        lab.bus.reply(to: get, [.variant(.uint16(517))])
        #expect(try await discovering.value.count == 1)
        #expect(peripheral.mtu == 517)
    }

    /// No signal at all: the machine's poll finds ServicesResolved.
    @Test func servicesResolvedFoundByAskingWhenNoSignalComes() async throws {
        let (lab, discovering) = try await EmbeddedBlueZ.discoveringExportedServices()
        defer { lab.close() }
        #expect(await lab.bus.untilTimerScheduled())
        lab.bus.advance(by: .milliseconds(500))
        try await lab.answerGetAll(["Connected": .boolean(true), "ServicesResolved": .boolean(true)])
        #expect(try await discovering.value.count == 1)
    }

    /// The device disconnects while a read waits: BlueZ answers the read
    /// "Not connected" before it signals the disconnect; the read reports a
    /// disconnect (after asking bluetoothd), not a BlueZ failure.
    @Test func theDeviceDisconnectingMidReadIsReportedAsADisconnect() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let characteristic = try peripheral.characteristic(.uuid(BluetoothUUID(uint16: 0x2a37)))
        let reading = Task { try await peripheral.readValue(for: characteristic) }
        let read = try #require(await lab.bus.nextCall("ReadValue"))
        lab.bus.fail(read, name: "org.bluez.Error.Failed", message: "Not connected")
        try await lab.answerGetAll(["Connected": .boolean(false)])
        await expectFailure(reading, "the read should have failed") { $0.isDisconnected }
    }

    /// bluetoothd changes owner (it crashed and systemd restarted it) in the
    /// middle of a subscription: the session fails as a disconnect, a value
    /// the old owner's name still sends is not accepted, and the mirror reads
    /// the new bluetoothd's tree.
    @Test func bluetoothdChangingOwnerEndsTheSubscription() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let characteristic = try peripheral.characteristic(.uuid(BluetoothUUID(uint16: 0x2a37)))
        let session = try await lab.subscribe(peripheral, to: characteristic)
        var values = session.values.makeAsyncIterator()
        lab.notify([1])
        #expect(try await values.next() == [1])
        lab.bus.setOwner(BlueZ.service, to: ":1.8")
        lab.notify([2], from: EmbeddedBlueZ.owner)   // the old owner: an impostor now
        do {
            _ = try await values.next()
            Issue.record("the session should have failed")
        } catch let error as BluetoothError {
            #expect(error.isDisconnected, "\(error)")
        }
        let reread = try #require(await lab.bus.nextCall("GetManagedObjects"))
        #expect(reread.destination == BlueZ.service)
        lab.bus.reply(to: reread, [EmbeddedBlueZ.managedObjects(EmbeddedBlueZ.sensor(connected: false, resolved: false))])
        #expect(lab.central.state() == .poweredOn)
    }
}

/// `task` fails with a `BluetoothError` for which `check` holds.
func expectFailure<T>(_ task: Task<T, any Error>, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
                      _ check: (BluetoothError) -> Bool) async {
    do {
        _ = try await task.value
        Issue.record("\(what)", sourceLocation: sourceLocation)
    } catch let error as BluetoothError {
        #expect(check(error), "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("not a BluetoothError: \(error)", sourceLocation: sourceLocation)
    }
}

extension BluetoothError {
    var isTimeout: Bool {
        if case .timeout = self { return true }
        return false
    }

    var isDisconnected: Bool {
        if case .disconnected = self { return true }
        return false
    }
}
