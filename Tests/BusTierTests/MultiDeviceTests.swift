// End to end: DEVICE as a comma-separated list (read, write, subscribe), the
// real bluectl binary against the stand-in with two peripherals. Contract:
// README "Many devices at once". Every line names its device; one device
// failing is reported on its own and never stops the other.

import Foundation
import Testing

private let A = heartRateAddress
private let B = "AA:BB:CC:DD:EE:01"
private let bPath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_01"

/// A second peripheral with a battery service (level 0x33, read and notify).
private func installSecond(_ bus: PrivateBus) async throws -> String {
    try await bus.addAdvertiser("hci0", B, [.addressType("random"), .name("Second"), .rssi(-60), .uuids(["180f"])])
    let bas = try await bus.addGattService("hci0", B, uuid: "180f")
    return try await bus.addGattCharacteristic(bas, uuid: "2a19", flags: ["read", "notify"], value: [0x33])
}

/// `subscribe A,B battery_level --json --count N`, once both notify.
private func subscribeToBoth(_ bus: PrivateBus, count: Int, extra: [String] = [],
                             environment: [String: String] = [:]) async throws -> (HeartRateGatt, String, ChildProcess) {
    let g = try await HeartRateGatt.install(bus)
    let bLevel = try await installSecond(bus)
    let sub = try bus.startBluectl(["subscribe", "\(A),\(B)", "battery_level", "--json", "--count", String(count)] + extra,
                                   environment: environment)
    let both = try await bus.eventually(timeout: .seconds(15)) {
        // (not exported until connected)
        let a = (try? await bus.notifyClients(g.battery))?.count ?? 0
        let b = (try? await bus.notifyClients(bLevel))?.count ?? 0
        return a == 1 && b == 1
    }
    guard both else { throw BusTierError("the two devices were not both subscribed") }
    return (g, bLevel, sub)
}

@Suite("bluectl with several devices at once, end to end", .timeLimit(.minutes(3)))
struct MultiDeviceTests {

    @Test("read A,B: one line per device naming it; both disconnected after; raw output refused")
    func readTwo() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            _ = try await installSecond(bus)
            let r = try await bus.runBluectl(["read", "\(A),\(B)", "battery_level", "--json"])
            #expect(r.exitCode == 0, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.count == 2, "\(r)")
            let byDevice = Dictionary(lines.map { ($0["device"]?.string ?? "", $0["value"]?.string ?? "") }, uniquingKeysWith: { a, _ in a })
            #expect(byDevice == [A: "5c", B: "33"], "\(r)")
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(false))
            #expect(try await bus.property(bPath, "org.bluez.Device1", "Connected")["data"] == .bool(false))
            #expect(try await bus.callCount(g.device, "Connect") == 1)
            #expect(try await bus.callCount(bPath, "Connect") == 1)
            let text = try await bus.runBluectl(["read", "\(A), \(B)", "battery_level"])
            #expect(Set(text.stdoutLines) == ["\(A)  5c (92 %)", "\(B)  33 (51 %)"], "text lines name their device: \(text)")
            expectCleanFailure(try await bus.runBluectl(["read", "\(A),\(B)", "2a19", "--format", "raw"]), 64, "--format raw takes one DEVICE")
        }
    }

    @Test("read A,missing: A's value; the missing device fails on its own (68), named, and the command says which")
    func readOneMissing() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            let missing = "AA:BB:CC:DD:EE:0F"
            let r = try await bus.runBluectl(["read", "\(A),\(missing)", "battery_level", "--json", "--timeout", "4"])
            #expect(r.exitCode == 68, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.contains { $0["device"] == .string(A) && $0["value"] == .string("5c") }, "\(r)")
            let failed = try #require(lines.first { $0["event"] == .string("failed") }, "\(r)")
            #expect(failed["device"] == .string(missing))
            #expect(failed["exit_status"] == .int(68))
            #expect(r.stderrLines.contains { $0.hasPrefix("bluectl: \(missing): device \(missing)") }, "\(r)")
            #expect(r.stderrLines.last == "bluectl: 1 of 2 devices failed: \(missing)", "\(r)")
        }
    }

    @Test("read A,B when the controller has no slot for B: B's failure says so, once (no retry); A is read")
    func noSlot() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            _ = try await installSecond(bus)
            _ = try await bus.runBluectl(["info", B])   // known, so its Connect can be failed
            try await bus.injectError(bPath, "Connect", "org.bluez.Error.Failed", "le-connection-concurrent-connection-limit")
            let r = try await bus.runBluectl(["read", "\(A),\(B)", "battery_level", "--json"])
            #expect(r.exitCode == 1, "\(r)")
            #expect(try r.jsonLines().contains { $0["device"] == .string(A) && $0["value"] == .string("5c") }, "\(r)")
            #expect(r.stderrLines.contains { $0.hasPrefix("bluectl: \(B): ") && $0.contains("no free connection slot") }, "\(r)")
            #expect(try await bus.callCount(bPath, "Connect") == 1, "not retried")
        }
    }

    @Test("subscribe A,B: each device's values, named, counted per device; both StopNotify'd and disconnected")
    func subscribeTwo() async throws {
        try await withPrivateBus { bus in
            let (g, bLevel, sub) = try await subscribeToBoth(bus, count: 3)
            for i in 0..<3 {
                _ = try await bus.emitNotification(g.battery, [UInt8(0x50 + i)])
                _ = try await bus.emitNotification(bLevel, [UInt8(0x20 + i)])
            }
            let r = await sub.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let values = try r.jsonLines().filter { $0["value"] != nil }
            #expect(values.filter { $0["device"] == .string(A) }.map { $0["value"]?.string ?? "" } == ["50", "51", "52"], "\(r)")
            #expect(values.filter { $0["device"] == .string(B) }.map { $0["value"]?.string ?? "" } == ["20", "21", "22"], "\(r)")
            #expect(try await bus.notifyClients(g.battery).isEmpty, "StopNotify on A")
            #expect(try await bus.notifyClients(bLevel).isEmpty, "StopNotify on B")
            #expect(try await bus.property(bPath, "org.bluez.Device1", "Connected")["data"] == .bool(false))
        }
    }

    @Test("subscribe A,B when B drops: B's disconnect is its own failure (74, event line); A's values go on to its count")
    func subscribeOneDrops() async throws {
        try await withPrivateBus { bus in
            let (g, bLevel, sub) = try await subscribeToBoth(bus, count: 4)
            _ = try await bus.emitNotification(g.battery, [0x01])
            _ = try await bus.emitNotification(bLevel, [0x11])
            try await bus.dropConnection(bPath)
            #expect(await sub.waitForStdout(timeout: .seconds(10)) { $0.contains("\"failed\"") }, "B's failure is reported at once")
            for value in [0x02, 0x03, 0x04] as [UInt8] { _ = try await bus.emitNotification(g.battery, [value]) }
            let r = await sub.wait(timeout: .seconds(15))
            #expect(r.exitCode == 74, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.filter { $0["device"] == .string(A) && $0["value"] != nil }.map { $0["value"]?.string ?? "" }
                    == ["01", "02", "03", "04"], "A's values all came: \(r)")
            let failed = try #require(lines.first { $0["event"] == .string("failed") })
            #expect(failed["device"] == .string(B))
            #expect(failed["exit_status"] == .int(74))
            #expect(r.stderrLines.last == "bluectl: 1 of 2 devices failed: \(B)", "\(r)")
        }
    }

    @Test("--restore-id with two devices: both are saved, and a run with only the id subscribes to both again")
    func restoreTwo() async throws {
        try await withPrivateBus { bus in
            let env = ["XDG_STATE_HOME": bus.directory.appendingPathComponent("state").path]
            let (g, bLevel, _) = try await subscribeToBoth(bus, count: 1, extra: ["--restore-id", "pair-of-sensors"], environment: env)
            _ = try await bus.emitNotification(g.battery, [0x01])
            _ = try await bus.emitNotification(bLevel, [0x02])
            let file = bus.directory.appendingPathComponent("state/bluectl/pair-of-sensors.json").path
            #expect(try await bus.eventually(timeout: .seconds(10)) {
                let saved = try? JSONValue.parse(String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self))
                return saved?["running"] == .bool(false)
            }, "saved as ended")
            let saved = try JSONValue.parse(String(decoding: try #require(FileManager.default.contents(atPath: file)), as: UTF8.self))
            #expect(saved["peripherals"]?.array?.compactMap { $0["device"]?.string } == [A, B])
            #expect(saved["subscriptions"]?.array?.count == 2)

            let again = try bus.startBluectl(["subscribe", "--restore-id", "pair-of-sensors", "--json", "--count", "1"], environment: env)
            #expect(try await bus.eventually(timeout: .seconds(15)) {
                let a = (try? await bus.notifyClients(g.battery))?.count ?? 0
                let b = (try? await bus.notifyClients(bLevel))?.count ?? 0
                return a == 1 && b == 1
            }, "both subscribed again")
            _ = try await bus.emitNotification(g.battery, [0x03])
            _ = try await bus.emitNotification(bLevel, [0x04])
            let r = await again.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.first?["event"] == .string("restored"), "\(r)")
            #expect(Set(lines.compactMap { $0["value"] == nil ? nil : "\($0["device"]?.string ?? "")=\($0["value"]?.string ?? "")" })
                    == ["\(A)=03", "\(B)=04"], "\(r)")
        }
    }

    @Test("bad device lists: an empty entry, a device named twice (also as AABBCCDDEEFF), a malformed entry: 64")
    func badLists() async throws {
        try await withPrivateBus { bus in
            expectCleanFailure(try await bus.runBluectl(["read", "\(A),,\(B)", "2a19"]), 64, "an empty entry")
            expectCleanFailure(try await bus.runBluectl(["read", "\(A),\(B),", "2a19"]), 64, "an empty entry")
            expectCleanFailure(try await bus.runBluectl(["subscribe", "\(A),AABBCCDDEEFF", "2a19"]), 64, "\(A) is named twice")
            expectCleanFailure(try await bus.runBluectl(["write", "\(A),AA:BB:CC", "2a19", "01"]), 64, "invalid DEVICE \"AA:BB:CC\"")
        }
    }
}
