// What a new user meets (issue 30), end to end against the stand-in: a
// command that only reads what BlueZ knows works on an adapter that is off,
// lines say which adapter and which device they are about, a command says
// what it did and when there is nothing, and BLUECTL_DEBUG shows a scan's steps.

import Foundation
import Testing

@Suite("What a new user meets (bus tier)", .timeLimit(.minutes(3)))
struct UserFacingTests {
    static let hci1 = AdapterSpec("hci1", address: "00:AA:01:01:00:01", alias: "second")

    @Test("info reads what BlueZ knows of a device on an adapter that is off (exit 0, no --power-on needed)")
    func infoOnPoweredOffAdapter() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            let scan = try await bus.runBluectl(["scan", "--count", "1", "--timeout", "10"])
            #expect(scan.exitCode == 0, "\(scan)")
            try await bus.setPowered("hci0", false)
            let r = try await bus.runBluectl(["info", heartRateAddress])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdoutLines.contains("device      \(heartRateAddress)"), "\(r)")
            let trust = try await bus.runBluectl(["trust", heartRateAddress])
            #expect(trust.exitCode == 0 && trust.stdout == "trusted \(heartRateAddress)\n", "\(trust)")
        }
    }

    @Test("devices over several adapters starts each line with its adapter; with --adapter, it does not")
    func devicesNameTheirAdapter() async throws {
        try await withPrivateBus(adapters: [.hci0, Self.hci1]) { bus in
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:01", [.name("zero"), .rssi(-50)])
            try await bus.addAdvertiser("hci1", "AA:BB:CC:DD:EE:02", [.name("one"), .rssi(-50)])
            for adapter in ["hci0", "hci1"] {
                let scan = try await bus.runBluectl(["scan", "--adapter", adapter, "--count", "1", "--timeout", "10"])
                #expect(scan.exitCode == 0, "\(scan)")
            }
            let all = try await bus.runBluectl(["devices"])
            #expect(all.exitCode == 0, "\(all)")
            #expect(all.stdoutLines.count == 2 && all.stdoutLines[0].hasPrefix("hci0  AA:BB:CC:DD:EE:01  ")
                    && all.stdoutLines[1].hasPrefix("hci1  AA:BB:CC:DD:EE:02  "), "\(all)")
            let one = try await bus.runBluectl(["devices", "--adapter", "hci1"])
            #expect(one.stdoutLines.count == 1 && one.stdoutLines[0].hasPrefix("AA:BB:CC:DD:EE:02  "), "\(one)")
        }
    }

    @Test("adapter shows what each setting asked for did")
    func adapterShowsItsChanges() async throws {
        try await withPrivateBus { bus in
            let first = try await bus.runBluectl(["adapter", "hci0", "--discoverable", "on", "--pairable", "on"])
            #expect(first.exitCode == 0, "\(first)")
            #expect(first.stdout.hasSuffix("  bus-tier-host  pairable on (already)  discoverable off->on\n"), "\(first)")
            let again = try await bus.runBluectl(["adapter", "hci0", "--discoverable", "on", "--json"])
            let json = try #require(try again.jsonLines().first)
            #expect(json["discoverable"] == .bool(true) && json["changed"] == .array([]), "\(again)")
            let off = try await bus.runBluectl(["adapter", "hci0", "--discoverable", "off", "--json"])
            #expect(try off.jsonLines().first?["changed"] == .array([.string("discoverable")]), "\(off)")
            // in the order applied: power off last
            let down = try await bus.runBluectl(["adapter", "hci0", "--power", "off", "--pairable", "off"])
            #expect(down.stdout.hasSuffix("  pairable on->off  power on->off\n"), "\(down)")
        }
    }

    @Test("discover of a device without GATT services says so (exit 0)")
    func discoverNothing() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:03", [.name("bare"), .rssi(-50)])
            let r = try await bus.runBluectl(["discover", "AA:BB:CC:DD:EE:03", "--timeout", "15"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout.isEmpty && r.stderr == "bluectl: AA:BB:CC:DD:EE:03 has no GATT services (BlueZ resolved none)\n", "\(r)")
        }
    }

    @Test("BLUECTL_DEBUG=1 shows a scan's steps: the filter, StartDiscovery, StopDiscovery")
    func scanSteps() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:01", [.name("one"), .rssi(-50)])
            let r = try await bus.runBluectl(["scan", "--count", "1", "--timeout", "10", "--service", "180d", "--name", "one"],
                                             environment: ["BLUECTL_DEBUG": "1"])
            #expect(r.exitCode == 0, "\(r)")
            let steps = r.stderrLines.filter { $0.contains("] +") && $0.contains(" scan hci0: ") }
            #expect(steps.contains { $0.hasSuffix("SetDiscoveryFilter transport le, duplicates off, services 180d, name contains \"one\" (checked by bluectl)") },
                    "\(r.stderr)")
            #expect(steps.contains { $0.contains("StartDiscovery answered") && $0.contains("until 1 devices") }, "\(r.stderr)")
            #expect(steps.last?.hasSuffix("scan hci0: StopDiscovery") == true, "\(r.stderr)")
        }
    }

    @Test("a device of several that fails is named by its address, also when it was given by name")
    func failedDeviceByAddress() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            let r = try await bus.runBluectl(["read", "HeartRate,/org/bluez/hci0/dev_11_22_33_44_55_66", "2a99", "--json", "--timeout", "15"])
            #expect(r.exitCode == 68, "\(r)")
            let failed = try r.jsonLines().filter { $0["event"] == .string("failed") }
            #expect(failed.contains { $0["device"] == .string(heartRateAddress) }, "\(r)")
            #expect(r.stderrLines.contains { $0.hasPrefix("bluectl: \(heartRateAddress): characteristic 2a99") }, "\(r)")
            #expect(r.stderrLines.last == "bluectl: 2 of 2 devices failed: \(heartRateAddress), /org/bluez/hci0/dev_11_22_33_44_55_66", "\(r)")
        }
    }
}
