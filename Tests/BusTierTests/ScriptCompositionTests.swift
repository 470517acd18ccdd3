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
    static func addSecond(_ bus: PrivateBus, inRange: Bool) async throws {
        let fields: [AdField] = [.addressType("random"), .name("Second"), .rssi(-60), .uuids(["180f"])]
        try await bus.mock("AddAdvertiser", [.string("hci0"), .string(second),
                                             .dict(fields.map(\.entry) + [("InRange", .bool(inRange))])])
        let bas = try await bus.addGattService("hci0", second, uuid: "180f")
        _ = try await bus.addGattCharacteristic(bas, uuid: "2a19", flags: ["read", "notify"], value: [0x33])
    }

    @Test("read A,B of two devices BlueZ does not know: one discovery finds both, though B starts advertising after A was found and StopDiscovery is slow to answer")
    func foundTogether() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await Self.addSecond(bus, inRange: false)
            // bluetoothd answers StopDiscovery only once the controller has stopped scanning:
            // slow here, longer than the command's --timeout. A finder that waits for it, or
            // for the turn of a finder that does, runs out of time.
            try await bus.mock("DelayReply", [.string("/org/bluez/hci0"), .string("StopDiscovery"), .uint32(30_000)])
            let read = try bus.startBluectl(["read", "\(heartRateAddress),\(Self.second)", "battery_level", "--json", "--timeout", "8"])
            // A is found by the discovery bluectl started; B starts advertising after that.
            #expect(try await bus.eventually(timeout: .seconds(15)) {
                (try? await bus.property(heartRatePath, "org.bluez.Device1", "Address")) != nil
            }, "A was never found")
            try await bus.updateAdvertiser("hci0", Self.second, [.rssi(-58)])
            let r = await read.wait(timeout: .seconds(30))
            #expect(r.exitCode == 0, "\(r)")
            let byDevice = Dictionary(try r.jsonLines().map { ($0["device"]?.string ?? "", $0["value"]?.string ?? "") },
                                      uniquingKeysWith: { a, _ in a })
            #expect(byDevice == [heartRateAddress: "5c", Self.second: "33"], "\(r)")
            #expect(!r.stderr.contains("turn"), "\(r)")
            let starts = try await bus.discoveryLog().filter { $0.event == "StartDiscovery" }
            #expect(starts.count == 1, "one discovery for both devices: \(starts)")
        }
    }
}
