// The programs in Examples/ (BluectlCore used as any other program would use
// it), run against the BlueZ stand-in like bluectl itself: what they print,
// how they end, and what they asked of "bluetoothd".

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Examples/ against the stand-in (bus tier)")
struct ExampleTests {
    @Test("ScanExample: each device's address once, as found, until interrupted")
    func scanExample() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, [.name("HR"), .rssi(-50)])
            try await bus.addAdvertiser("hci0", "11:22:33:44:55:66", [.name("Other"), .rssi(-70)])
            let scan = try bus.spawn(try BusTier.builtExecutable("ScanExample"), [])
            #expect(await scan.waitForStdoutLines(2, timeout: .seconds(10)), "\(scan.stderr)")
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-40)]) // a change is not a new device
            #expect(await scan.waitForStdoutLines(3, timeout: .seconds(2)) == false, "\(scan.stdout)")
            scan.signal(SIGINT)
            let r = await scan.wait(timeout: .seconds(10))
            #expect(r.exitCode == 128 + SIGINT, "interrupted, as it says: \(r)")
            #expect(r.stdoutLines.sorted() == ["11:22:33:44:55:66", heartRateAddress], "\(r)")
            #expect(try await bus.callCount("/org/bluez/hci0", "StartDiscovery") == 1)
        }
    }

    @Test("ReadExample: the value in hex; connects and disconnects; a wrong name is status 1, bad usage 64")
    func readExample() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let reader = try BusTier.builtExecutable("ReadExample")
            let r = try await bus.spawn(reader, [heartRateAddress, "battery_level"]).wait(timeout: .seconds(20))
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout == "5c\n", "\(r)")
            #expect(try await bus.callCount(g.device, "Connect") == 1)
            #expect(try await bus.callCount(g.device, "Disconnect") == 1, "it connected the device, so it disconnects it")
            let missing = try await bus.spawn(reader, [heartRateAddress, "2a00"]).wait(timeout: .seconds(20))
            #expect(missing.exitCode == 1, "\(missing)")
            #expect(missing.stderr.hasPrefix("ReadExample: ") && missing.stderr.contains("2a00"), "\(missing)")
            #expect(try await bus.callCount(g.device, "Disconnect") == 2, "disconnected after the failure too")
            // Two devices at once, one line each, naming it.
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:01", [.addressType("random"), .name("Second"), .uuids(["180f"])])
            let bas = try await bus.addGattService("hci0", "AA:BB:CC:DD:EE:01", uuid: "180f")
            _ = try await bus.addGattCharacteristic(bas, uuid: "2a19", flags: ["read"], value: [0x33])
            let two = try await bus.spawn(reader, ["\(heartRateAddress),AA:BB:CC:DD:EE:01", "battery_level"]).wait(timeout: .seconds(20))
            #expect(two.exitCode == 0, "\(two)")
            #expect(Set(two.stdoutLines) == ["\(heartRateAddress) 5c", "AA:BB:CC:DD:EE:01 33"], "\(two)")
            let usage = try await bus.spawn(reader, [heartRateAddress]).wait(timeout: .seconds(20))
            #expect(usage.exitCode == 64 && usage.stderr.hasPrefix("usage: ReadExample"), "\(usage)")
        }
    }

    @Test("NotifyLoggerExample: values as they come; the link drops, it subscribes again and goes on")
    func notifyLoggerExample() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let logger = try bus.spawn(try BusTier.builtExecutable("NotifyLoggerExample"),
                                       [heartRateAddress, "heart_rate_measurement"])
            #expect(await Self.subscribed(logger, times: 1), "\(logger.stderr)")
            _ = try await bus.emitNotification(g.hrm, [0x00, 0x3c])
            #expect(await logger.waitForStdout(timeout: .seconds(10)) { $0.contains(" 003c\n") })
            try await bus.dropConnection(g.device)
            #expect(await Self.subscribed(logger, times: 2), "subscribed again after the drop: \(logger.stderr)")
            _ = try await bus.emitNotification(g.hrm, [0x00, 0x3d])
            #expect(await logger.waitForStdout(timeout: .seconds(10)) { $0.contains(" 003d\n") })
            logger.signal(SIGINT)
            let r = await logger.wait(timeout: .seconds(10))
            let values = r.stdoutLines.filter { !$0.hasPrefix("#") }
            #expect(values.map { $0.split(separator: " ").last.map(String.init) } == ["003c", "003d"], "\(r)")
            #expect(values.allSatisfy { Double($0.split(separator: " ")[0]) != nil }, "a time in seconds first: \(r)")
            let notes = r.stdoutLines.filter { $0.hasPrefix("#") }
            #expect(notes.count == 3 && notes[1].contains("trying again in"), "subscribed, the loss, subscribed: \(r)")
            #expect(try await bus.callCount(g.hrm, "StartNotify") == 2)
        }
    }

    /// Waits until the logger has said "# subscribed" `times` times.
    static func subscribed(_ logger: ChildProcess, times: Int) async -> Bool {
        await logger.waitForStdout(timeout: .seconds(15)) { $0.components(separatedBy: "# subscribed").count - 1 == times }
    }

    @Test("PeripheralExample: a central reads and subscribes to the battery level, its command is answered by the program (01 recharges, anything else refused); Ctrl-C leaves nothing registered")
    func peripheralExample() async throws {
        try await withPrivateBus { bus in
            let example = try bus.spawn(try BusTier.builtExecutable("PeripheralExample"), ["hci0"])
            let started = await example.waitForStdoutLines(1, timeout: .seconds(15))
            #expect(started && example.stdout.hasPrefix("serving on hci0"), "\(example.stdout) \(example.stderr)")
            let central = "00:AA:01:C0:00:03"
            try await bus.mock("RemoteConnect", [.string("hci0"), .string(central), .dict([])])
            let first = try await bus.mock("RemoteRead", [.string("hci0"), .string(central), .string("2a19"), .uint16(0)])
            guard case .array(let level)? = first.first, case .int(let percent)? = level.first else { Issue.record("\(first)"); return }
            #expect((90...100).contains(percent), "\(first)")
            try await bus.mock("RemoteSubscribe", [.string("hci0"), .string(central), .string("2a19"), .string("notify")])
            try await bus.mock("RemoteWrite", [.string("hci0"), .string(central), .string("12345678-1234-5678-1234-56789abcdef0"),
                                               .bytes([0x01]), .string("request")])
            await #expect(throws: BusTierError.self, "refused with an ATT error") {
                try await bus.mock("RemoteWrite", [.string("hci0"), .string(central), .string("12345678-1234-5678-1234-56789abcdef0"),
                                                   .bytes([0x02]), .string("request")])
            }
            // Looked at until both have come (one a second: at least 2 s), not after a fixed time.
            var notified: [JSONValue] = []
            let deadline = ContinuousClock.now + .seconds(20)
            repeat {
                try await Task.sleep(for: .milliseconds(250))
                guard case .array(let now)? = try await bus.mock("RemoteNotifications", [.string("hci0"), .string(central), .string("2a19")]).first
                else { Issue.record("no notifications"); return }
                notified = now
            } while !(notified.count >= 2 && notified.contains(.array([.int(100)]))) && ContinuousClock.now < deadline
            #expect(notified.count >= 2, "one a second, and one on recharge: \(notified)")
            #expect(notified.contains(.array([.int(100)])), "the recharge was notified: \(notified)")
            example.signal(SIGINT)
            let r = await example.wait(timeout: .seconds(10))
            #expect(r.exitCode == 130, "\(r)")
            #expect(r.stdoutLines.contains("read by \(central)") && r.stdoutLines.contains("subscribed"), "\(r)")
            #expect(r.stdoutLines.contains("recharged by \(central)") && r.stdoutLines.contains("refused command 02"), "\(r)")
            #expect(try await bus.mock("RegisteredApplications") == [.array([])])
            #expect(try await bus.mock("RegisteredAdvertisements") == [.array([])])
        }
    }
}
