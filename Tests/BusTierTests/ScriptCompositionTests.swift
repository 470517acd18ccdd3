import Foundation
import Testing

/// Commands as a script strings them together (issue 26.6, 26.7): several
/// devices BlueZ does not know are found by one discovery, and a command
/// that disconnects on exit leaves the device settled for the next one.
/// The real binary against the stand-in on a private bus.
@Suite("devices found together, commands that compose (bus tier)", .serialized, .timeLimit(.minutes(3)))
struct ScriptCompositionTests {
    static let second = "AA:BB:CC:DD:EE:21"
    static let secondPath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_21"

    /// A second peripheral with a battery service (level 0x33); `inRange`
    /// false: it does not advertise until `UpdateAdvertiser`.
    /// Returns its battery level characteristic's path.
    @discardableResult
    static func addSecond(_ bus: PrivateBus, inRange: Bool) async throws -> String {
        let fields: [AdField] = [.addressType("random"), .name("Second"), .rssi(-60), .uuids(["180f"])]
        try await bus.mock("AddAdvertiser", [.string("hci0"), .string(second),
                                             .dict(fields.map(\.entry) + [("InRange", .bool(inRange))])])
        let bas = try await bus.addGattService("hci0", second, uuid: "180f")
        return try await bus.addGattCharacteristic(bas, uuid: "2a19", flags: ["read", "notify"], value: [0x33])
    }

    @Test("read A,B of two devices BlueZ does not know: one discovery finds both, though B starts advertising after A was found and StopDiscovery is slow to answer")
    func foundTogether() async throws {
        try await withPrivateBus { bus in
            // Both silent until bluectl looks for them.
            try await bus.mock("AddAdvertiser", [.string("hci0"), .string(heartRateAddress),
                                                 .dict(heartRate.map(\.entry) + [("InRange", .bool(false))])])
            let bas = try await bus.addGattService("hci0", heartRateAddress, uuid: "180f")
            _ = try await bus.addGattCharacteristic(bas, uuid: "2a19", flags: ["read", "notify"], value: [0x5c])
            try await Self.addSecond(bus, inRange: false)
            // bluetoothd answers StopDiscovery only once the controller has stopped scanning:
            // slow here, longer than a finder's time. A finder that waits for it, or for the
            // turn of a finder that does, runs out of time.
            try await bus.mock("DelayReply", [.string("/org/bluez/hci0"), .string("StopDiscovery"), .uint32(10_000)])
            let read = try bus.startBluectl(["read", "\(heartRateAddress),\(Self.second)", "battery_level", "--json", "--timeout", "8"])
            #expect(try await bus.eventually(timeout: .seconds(15)) {
                try await bus.discoveryLog().contains { $0.event == "StartDiscovery" }
            }, "bluectl never scanned")
            // A starts advertising and is found; B starts advertising once bluectl is done with A's
            // find: A connected (one discovery for both), or that discovery stopped (each its own).
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-52)])
            #expect(try await bus.eventually(timeout: .seconds(15)) {
                let connected = (try? await bus.property(heartRatePath, "org.bluez.Device1", "Connected"))?["data"] == .bool(true)
                let stopped = try await bus.discoveryLog().contains { $0.event == "StopDiscovery" }
                return connected || stopped
            }, "A was never found")
            try await bus.updateAdvertiser("hci0", Self.second, [.rssi(-58)])
            let r = await read.wait(timeout: .seconds(40))
            #expect(r.exitCode == 0, "\(r)")
            let byDevice = Dictionary(try r.jsonLines().map { ($0["device"]?.string ?? "", $0["value"]?.string ?? "") },
                                      uniquingKeysWith: { a, _ in a })
            #expect(byDevice == [heartRateAddress: "5c", Self.second: "33"], "\(r)")
            #expect(!r.stderr.contains("turn"), "\(r)")
            let log = try await bus.discoveryLog()
            #expect(log.filter { $0.event == "StartDiscovery" }.count == 1, "one discovery for both devices: \(log)")
            #expect(log.last?.event == "StopDiscovery", "bluectl stopped the discovery it started before it ended: \(log)")
        }
    }

    @Test("subscribe A,B --count N, then connect A at once: subscribe waited until BlueZ showed A disconnected (the link goes down seconds after Disconnect, as in bluetoothd 5.66), so connect makes a connection of its own")
    func settledBetweenCommands() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let secondLevel = try await Self.addSecond(bus, inRange: true)
            // 5.66 takes the link down 2 s after Disconnect (DISCONNECT_TIMER), and answers then; a slow
            // machine (the lab, under TCG) takes longer: here 6 s.
            try await bus.mock("DelayReply", [.string(heartRatePath), .string("Disconnect"), .uint32(6_000)])
            let sub = try bus.startBluectl(["subscribe", "\(heartRateAddress),\(Self.second)", "battery_level", "--json", "--count", "2"])
            #expect(try await bus.eventually(timeout: .seconds(15)) {
                let a = (try? await bus.notifyClients(g.battery))?.count ?? 0
                let b = (try? await bus.notifyClients(secondLevel))?.count ?? 0
                return a == 1 && b == 1
            }, "the two devices were not both subscribed")
            for value: UInt8 in [0x50, 0x51] {
                _ = try await bus.emitNotification(g.battery, [value])
                _ = try await bus.emitNotification(secondLevel, [value])
            }
            let r = await sub.wait(timeout: .seconds(40))
            #expect(r.exitCode == 0, "\(r)")
            #expect(try r.jsonLines().filter { $0["event"] == nil }.count == 4, "two values of each device: \(r)")
            // The next command finds A settled, not going down.
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Connected")["data"] == .bool(false),
                    "subscribe exited before BlueZ showed A disconnected: \(r)")
            let connect = try await bus.runBluectl(["connect", heartRateAddress, "--json"])
            #expect(connect.exitCode == 0, "\(connect)")
            #expect(try connect.jsonLines().first?["already_connected"] == .bool(false), "\(connect)")
            #expect(try await bus.callCount(heartRatePath, "Connect") == 2)
        }
    }
}
