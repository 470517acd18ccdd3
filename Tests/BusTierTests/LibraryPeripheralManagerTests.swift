// BluectlCore's PeripheralManager as a library user meets it, in this
// process against the stand-in: requests the application answers itself, a
// request nobody answers failed at the deadline (never left hanging in
// bluetoothd), backpressure, and registrations made again after bluetoothd
// restarts.

import BluectlCore
import Testing

private let central = "00:AA:01:C0:00:02"

// The limit counts the wait for a private bus too (BusSlots: tests queue for
// one), which under the thread sanitizer on a loaded machine took more than
// 2 minutes while the tests themselves take about a second: 3, as the other
// bus-tier suites have.
@Suite("Library: PeripheralManager (bus tier, in process)", .timeLimit(.minutes(3)))
struct LibraryPeripheralManagerTests {
    @Test("a characteristic without a value: the application answers reads and writes; one left unanswered fails at the deadline")
    func applicationAnswers() async throws {
        try await withPrivateBus { bus in
            let manager = try await PeripheralManager.open(adapter: "hci0", busAddress: bus.address, requestDeadline: .milliseconds(500))
            let uuid = try BluetoothUUID("12345678-1234-5678-1234-56789abcdef9")
            let served = try await manager.add(MutableService(uuid: try BluetoothUUID("180f"), characteristics: [
                MutableCharacteristic(uuid: uuid, flags: [.read, .write]),
            ]))
            let characteristic = try #require(served.characteristic(uuid))
            var events = manager.events.makeAsyncIterator()
            try await bus.mock("RemoteConnect", [.string("hci0"), .string(central), .dict([])])

            let read = Task { try await bus.mock("RemoteRead", [.string("hci0"), .string(central), .string(uuid.uuidString), .uint16(0)]) }
            guard case .read(let request)? = await events.next() else { Issue.record("no read event"); return }
            #expect(request.central?.description == central)
            #expect(request.isPending)
            #expect(request.respond(with: [0x2a, 0x2b]))
            #expect(!request.respond(with: [0x00]), "answered once only")
            #expect(try await read.value.first == .array([.int(0x2a), .int(0x2b)]))

            let write = Task { try await bus.mock("RemoteWrite", [.string("hci0"), .string(central), .string(uuid.uuidString), .bytes([7]), .string("request")]) }
            guard case .write(let written)? = await events.next() else { Issue.record("no write event"); return }
            #expect(written.value == [7])
            #expect(written.respond(withError: .notAuthorized))
            await #expect(throws: BusTierError.self, "the ATT error reaches the central") { _ = try await write.value }

            let unanswered = Task { try await bus.mock("RemoteRead", [.string("hci0"), .string(central), .string(uuid.uuidString), .uint16(0)]) }
            guard case .read(let ignored)? = await events.next() else { Issue.record("no read event"); return }
            guard case .requestExpired(let expired)? = await events.next() else { Issue.record("no expiry"); return }
            #expect(expired === ignored)
            #expect(!ignored.respond(with: [1]), "too late")
            await #expect(throws: BusTierError.self, "failed at the deadline, not left hanging") { _ = try await unanswered.value }
            #expect(manager.value(of: characteristic) == [], "application-answered: the manager keeps no value")
            await manager.stop()
            let left = try await bus.mock("RegisteredApplications")
            #expect(left == [.array([])], "\(left)")
        }
    }

    @Test("bluetoothd restarts: the manager says so, ends the subscriptions that died with it, and registers the service and advertisement again; a power cycle registers the advertisement anew")
    func registersAgainAfterRestart() async throws {
        try await withPrivateBus { bus in
            let manager = try await PeripheralManager.open(adapter: "hci0", busAddress: bus.address)
            try await manager.add(MutableService(uuid: try BluetoothUUID("180d"), characteristics: [
                MutableCharacteristic(uuid: try BluetoothUUID("2a38"), flags: [.read], value: [1]),
                MutableCharacteristic(uuid: try BluetoothUUID("2a37"), flags: [.notify], value: [0, 60]),
            ]))
            let ad = try await manager.startAdvertising(AdvertisementData(localName: "lib", serviceUUIDs: [try BluetoothUUID("180d")]))
            var events = manager.events.makeAsyncIterator()
            try await bus.mock("RemoteConnect", [.string("hci0"), .string(central), .dict([])])
            try await bus.mock("RemoteSubscribe", [.string("hci0"), .string(central), .string("2a37"), .string("notify")])
            guard case .subscribed? = await events.next() else { Issue.record("no subscription"); return }
            await bus.stopStandIn()
            guard case .bluetoothdStopped? = await events.next() else { Issue.record("no bluetoothdStopped"); return }
            guard case .unsubscribed(let gone)? = await events.next() else { Issue.record("the subscription outlived bluetoothd"); return }
            #expect(gone.uuid == (try BluetoothUUID("2a37")))
            #expect(!manager.isNotifying(gone))
            try await bus.startStandIn(adapters: [.hci0])
            guard case .restored(let failures)? = await events.next() else { Issue.record("not restored"); return }
            #expect(failures.isEmpty, "\(failures)")
            guard case .array(let apps)? = try await bus.mock("RegisteredApplications").first,
                  case .array(let ads)? = try await bus.mock("RegisteredAdvertisements").first else { Issue.record("no answer"); return }
            #expect(apps.count == 1 && ads.count == 1, "\(apps) \(ads)")
            #expect(manager.isAdvertising(ad))
            // the adapter powered off and on: the advertisement is registered anew (bluetoothd 5.66 silences it)
            try await bus.setPowered("hci0", false)
            try await bus.setPowered("hci0", true)
            guard case .restored(let again)? = await events.next() else { Issue.record("not registered anew at power-on"); return }
            #expect(again.isEmpty, "\(again)")
            guard case .array(let adsAfter)? = try await bus.mock("RegisteredAdvertisements").first else { Issue.record("no answer"); return }
            #expect(adsAfter.count == 1, "\(adsAfter)")
            await manager.stop()
            #expect(try await bus.mock("RegisteredAdvertisements") == [.array([])])
        }
    }
}
