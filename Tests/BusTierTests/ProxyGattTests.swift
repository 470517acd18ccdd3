// GATT through `bluectl proxy` against the stand-in, with Home Assistant's
// ESPHome client (aioesphomeapi, Tests/ProxyClient/esphome_client.py):
// connect, services with handles, read, write, descriptors, notifications,
// errors, disconnect; the connection slots running out and coming back; a
// device that drops reported to its client; a killed client's slot freed.

import Foundation
import Testing

@Suite(.serialized) struct ProxyGattTests {
    /// Three more connectable devices with a service each, for the slots.
    static let others = ["AA:BB:CC:DD:EE:11", "AA:BB:CC:DD:EE:12", "AA:BB:CC:DD:EE:13"]

    /// Starts the proxy, installs the heart-rate device (and `others`), and
    /// returns once the proxy has seen each advertise (as Home Assistant
    /// connects only to a device it has seen).
    static func proxyWithDevices(_ bus: PrivateBus, others: [String] = []) async throws -> (ChildProcess, String, HeartRateGatt) {
        let (proxy, port) = try await ProxyTests.startProxy(bus)
        var watchers: [ChildProcess] = []
        for address in [heartRateAddress] + others {
            watchers.append(try await ProxyTests.startAdvertsClient(bus, port: port, address: address))
        }
        let g = try await HeartRateGatt.install(bus)
        for address in others {
            try await bus.addAdvertiser("hci0", address, [.name("Slot"), .rssi(-60), .addressType("public")])
            try await bus.addGattService("hci0", address, uuid: "180f")
        }
        for watcher in watchers { _ = try await ProxyTests.advertisement(watcher) }
        return (proxy, port, g)
    }

    static func stop(_ proxy: ChildProcess) async {
        proxy.signal(SIGINT)
        let end = await proxy.wait(timeout: .seconds(20))
        #expect(end.exitCode == 130, "\(end)")
    }

    @Test func gattThroughTheProxy() async throws {
        try await withPrivateBus { bus in
            let (proxy, port, g) = try await Self.proxyWithDevices(bus)
            let child = try bus.spawn(try ProxyTests.python(), [ProxyTests.client, "gatt", "127.0.0.1", port, heartRateAddress])
            guard await child.waitForStdout(timeout: .seconds(60), { $0.contains("\"notifying\": true") }) else {
                throw BusTierError("the gatt client did not subscribe: \(await child.wait(timeout: .seconds(2))) \(proxy.stderr)")
            }
            #expect(try await bus.emitNotification(g.hrm, [0x06, 0x4b]) == 1, "one StartNotify session")
            let result = await child.wait(timeout: .seconds(60))
            #expect(result.termination == .exited(0), "\(result) \(proxy.stderr)")
            let line = try #require(try result.jsonLines().last)
            #expect(line["connected"]?.bool == true)
            #expect(line["mtu"]?.int == 247, "BlueZ's MTU of the link")
            // The services, with BlueZ's handles (5.66: those of the object paths).
            let handle = { (path: String) in Int(path.suffix(4), radix: 16) }
            let services = line["services"]?.array ?? []
            #expect(services.compactMap { $0["uuid"]?.string } == ["0000180d-0000-1000-8000-00805f9b34fb",
                                                                  "0000180f-0000-1000-8000-00805f9b34fb", HeartRateGatt.customService])
            #expect(services.first?["handle"]?.int == handle(g.hrService))
            let hr = services.first?["characteristics"]?.array ?? []
            #expect(hr.compactMap { $0["handle"]?.int } == [g.hrm, g.location, g.control].compactMap(handle))
            #expect(hr.compactMap { $0["properties"]?.int } == [0x10, 0x02, 0x08], "notify, read, write")
            #expect(hr.first?["descriptors"]?[0]?["handle"]?.int == handle(g.cccd))
            #expect(hr.first?["descriptors"]?[0]?["uuid"]?.string == "00002902-0000-1000-8000-00805f9b34fb")
            // Reads, the write and its read-back, the descriptor.
            #expect(line["battery"]?.string == "5c")
            #expect(line["written"]?.string == "627965", "\"bye\"")
            #expect(try await bus.gattWrites(g.custom).map(\.hex) == ["627965"])
            #expect(line["cccd_before"]?.string == "0100")
            // Errors as ESP-IDF's statuses: invalid handle, write not permitted.
            #expect(line["unknown_handle_error"]?.int == 1)
            #expect(line["read_only_error"]?.int == 3)
            // The notification, once StartNotify ran (the CCCD write becomes StartNotify, not a write BlueZ refuses).
            #expect(line["notified"]?["handle"]?.int == handle(g.hrm))
            #expect(line["notified"]?["data"]?.string == "064b")
            #expect(try await bus.callCount(g.hrm, "StartNotify") == 1)
            #expect(try await bus.gattWrites(g.cccd).isEmpty)
            // Slots: 3 of 3 free when subscribing, 2 once the connect began (this device's), 3 again after the disconnect.
            let free = line["free"]?.array ?? []
            #expect(free.map { $0.array?.compactMap(\.int) ?? [] } == [[3, 3], [2, 3], [3, 3]], "\(free)")
            #expect(free.map { $0[2]?.array?.compactMap(\.int) ?? [-1] } == [[], [0xAABB_CCDD_EEFF], []], "\(free)")
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(false))
            await Self.stop(proxy)
            #expect(!proxy.stderr.contains("[warning]"), "\(proxy.stderr)")
        }
    }

    @Test func slotsRunOutThenComeBack() async throws {
        try await withPrivateBus { bus in
            let (proxy, port, _) = try await Self.proxyWithDevices(bus, others: Self.others)
            let line = try #require(try await ProxyTests.runClient(bus, ["slots", "127.0.0.1", port, heartRateAddress] + Self.others).first)
            let results = line["results"]?.array ?? []
            #expect(results.compactMap { $0["connected"]?.bool } == [true, true, true, false], "\(line)")
            #expect(results.last?["error"]?.int == 0, "ESPHome's answer when no slot is free: connected=false")
            #expect(proxy.stderr.contains("no free connection slot for \(Self.others[2]) (3 of 3 in use)"), "\(proxy.stderr)")
            let free = try #require(try await ProxyTests.runClient(bus, ["free", "127.0.0.1", port]).first)
            #expect(free["free"]?.int == 3 && free["limit"]?.int == 3, "\(free)")
            #expect(free["allocated"]?.array?.isEmpty == true, "\(free)")
            await Self.stop(proxy)
        }
    }

    @Test func pairUnpairAndClearCache() async throws {
        try await withPrivateBus { bus in
            let (proxy, port, g) = try await Self.proxyWithDevices(bus, others: [Self.others[0]])
            let line = try #require(try await ProxyTests.runClient(bus, ["records", "127.0.0.1", port, heartRateAddress, Self.others[0]]).first)
            #expect(line["pair"]?.array?.compactMap(\.int) == [0], "\(line)")
            #expect(line["pair"]?[0]?.bool == true, "\(line)")
            // Clearing the cache of a connected, bonded device: refused (ESP_GATT_WRONG_STATE, 130).
            #expect(line["clear_connected"]?[0]?.bool == false && line["clear_connected"]?[1]?.int == 130, "\(line)")
            // Unpairing and clearing the cache both remove BlueZ's record of the device.
            #expect(line["unpair"]?[0]?.bool == true && line["unpair"]?[1]?.int == 0, "\(line)")
            #expect(line["clear_other"]?[0]?.bool == true && line["clear_other"]?[1]?.int == 0, "\(line)")
            let pairs = try await bus.pairLog()
            #expect(pairs.map(\.device) == [g.device], "\(pairs)")
            #expect(pairs.first?.capability == "NoInputNoOutput", "just works: nobody to show a passkey to")
            let removed = try await bus.calls("/org/bluez/hci0").filter { $0 == "RemoveDevice" }
            #expect(removed.count == 2, "\(removed)")
            await Self.stop(proxy)
        }
    }

    /// Two devices paired at once (each pairing takes 1.5 s): one agent
    /// serves both (bluetoothd takes one per connection: a second
    /// RegisterAgent fails AlreadyExists), unregistered once both are done.
    @Test func twoDevicesPairAtOnce() async throws {
        try await withPrivateBus { bus in
            let (proxy, port, g) = try await Self.proxyWithDevices(bus, others: [Self.others[0]])
            let other = "/org/bluez/hci0/dev_" + Self.others[0].replacingOccurrences(of: ":", with: "_")
            for device in [g.device, other] {
                try await bus.mock("DelayReply", [.string(device), .string("Pair"), .uint32(1_500)])
            }
            let line = try #require(try await ProxyTests.runClient(bus, ["pair-all", "127.0.0.1", port, heartRateAddress, Self.others[0]]).first)
            #expect(line["pair"]?.array?.map { $0.array?.compactMap(\.int) } == [[0], [0]], "both paired, no error: \(line)")
            #expect(line["pair"]?.array?.compactMap { $0[0]?.bool } == [true, true], "\(line)")
            let pairs = try await bus.pairLog()
            #expect(Set(pairs.map(\.device)) == [g.device, other], "\(pairs)")
            #expect(pairs.allSatisfy { !$0.agentOwner.isEmpty && $0.capability == "NoInputNoOutput" }, "each Pair asked the proxy's agent: \(pairs)")
            await Self.stop(proxy)
            // Unregistered by the proxy itself (the stand-in forgets a gone client's agent too).
            #expect(try await bus.calls("/org/bluez") == ["RegisterAgent", "UnregisterAgent"], "one agent for both pairings")
        }
    }

    /// The proxy stopped while a device pairs: it unregisters the agent itself.
    @Test func stoppedWhilePairingUnregistersTheAgent() async throws {
        try await withPrivateBus { bus in
            let (proxy, port, g) = try await Self.proxyWithDevices(bus)
            try await bus.mock("DelayReply", [.string(g.device), .string("Pair"), .uint32(20_000)])
            let client = try bus.spawn(try ProxyTests.python(), [ProxyTests.client, "pair-all", "127.0.0.1", port, heartRateAddress])
            #expect(try await bus.eventually(timeout: .seconds(30)) { try await !bus.pairLog().isEmpty }, "Pair was called")
            await Self.stop(proxy)
            _ = await client.wait(timeout: .seconds(20))   // its pairing failed with the proxy gone
            #expect(try await bus.calls("/org/bluez") == ["RegisterAgent", "UnregisterAgent"])
        }
    }

    @Test func scannerStateAndMode() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await ProxyTests.startProxy(bus)
            let line = try #require(try await ProxyTests.runClient(bus, ["scanner", "127.0.0.1", port]).first)
            // Running, active (BlueZ's discovery), configured active; asked for passive, it stays active and says so.
            #expect(line["states"]?.array?.map { $0.array?.compactMap(\.int) ?? [] } == [[2, 1, 1], [2, 1, 1]], "\(line)")
            #expect(await proxy.waitForStderr(timeout: .seconds(10)) { $0.contains("asked for a passive scan: BlueZ's discovery scans actively") })
            await Self.stop(proxy)
        }
    }

    @Test func scannerStateFollowsBluetoothd() async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await ProxyTests.startProxy(bus)
            let follower = try bus.spawn(try ProxyTests.python(), [ProxyTests.client, "scanner-follow", "127.0.0.1", port, "3"])
            #expect(await follower.waitForStdoutLines(1, timeout: .seconds(30)), "\(proxy.stderr)")
            await bus.stopStandIn()
            #expect(await follower.waitForStdoutLines(2, timeout: .seconds(30)), "\(proxy.stderr)")
            try await bus.startStandIn(adapters: [.hci0])
            let result = await follower.wait(timeout: .seconds(40))
            #expect(result.termination == .exited(0), "\(result) \(proxy.stderr)")
            // Running, failed while bluetoothd is gone, running again once the scan is back; active throughout.
            #expect(try result.jsonLines().map { [$0["state"]?.int, $0["mode"]?.int] } == [[2, 1], [3, 1], [2, 1]], "\(result)")
            await Self.stop(proxy)
        }
    }

    @Test func droppedDeviceReportedKilledClientFreesItsSlot() async throws {
        try await withPrivateBus { bus in
            let (proxy, port, g) = try await Self.proxyWithDevices(bus)
            let holder = try bus.spawn(try ProxyTests.python(), [ProxyTests.client, "hold", "127.0.0.1", port, heartRateAddress, "30"])
            #expect(await holder.waitForStdout(timeout: .seconds(40)) { $0.contains("\"connected\": true") }, "\(proxy.stderr)")
            let busy = try #require(try await ProxyTests.runClient(bus, ["free", "127.0.0.1", port]).first)
            #expect(busy["free"]?.int == 2, "\(busy)")
            #expect(busy["allocated"]?.array?.compactMap(\.int) == [0xAABB_CCDD_EEFF], "\(busy)")
            // The device drops: its client hears connected=false (the link's end, 0x13).
            try await bus.dropConnection(g.device)
            let ended = await holder.wait(timeout: .seconds(30))
            #expect(ended.termination == .exited(0), "\(ended)")
            #expect(try ended.jsonLines().last?["error"]?.int == 0x13, "\(ended)")
            // A client killed while connected: the proxy disconnects the device and frees the slot.
            let second = try bus.spawn(try ProxyTests.python(), [ProxyTests.client, "hold", "127.0.0.1", port, heartRateAddress, "60"])
            #expect(await second.waitForStdout(timeout: .seconds(40)) { $0.contains("\"connected\": true") }, "\(proxy.stderr)")
            second.kill9()
            #expect(await proxy.waitForStderr(timeout: .seconds(20)) { $0.contains("disconnected \(heartRateAddress) (0 of 3 slots in use)") },
                    "\(proxy.stderr)")
            let free = try #require(try await ProxyTests.runClient(bus, ["free", "127.0.0.1", port]).first)
            #expect(free["free"]?.int == 3, "\(free)")
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(false))
            await Self.stop(proxy)
        }
    }
}
