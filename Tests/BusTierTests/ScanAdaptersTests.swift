// End to end: the real bluectl binary against the BlueZ stand-in on a
// private bus (see PrivateBus.swift). Contract: README "bluectl adapters",
// "bluectl scan", "Scan JSON fields", "Exit codes".

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

private let hr180d = "0000180d-0000-1000-8000-00805f9b34fb"
private let hr180f = "0000180f-0000-1000-8000-00805f9b34fb"

/// Another bus client's discovery on hci0, running (BlueZ keeps the devices
/// it finds with an RSSI meanwhile); kill the process to end it.
private func otherClientScanning(_ bus: PrivateBus) async throws -> ChildProcess {
    let scanner = try bus.startPython(pythonPrelude + #"""
    print(json.dumps(call(ADAPTER, A1, 'StartDiscovery')), flush=True)
    pump(30)
    """#)
    #expect(await scanner.waitForStdout(timeout: .seconds(10)) { $0.contains("ok") }, "\(scanner.stderr)")
    return scanner
}

/// What `scan --json` must print for the heart-rate peripheral (StandInTests.heartRate).
private let heartRateEvent: [String: JSONValue] = [
    "event": .string("discovered"),
    "adapter": .string("hci0"),
    "address": .string(heartRateAddress),
    "address_type": .string("public"),
    "name": .string("HeartRate"),
    "alias": .string("HeartRate"),
    "rssi": .int(-52),
    "tx_power": .int(4),
    "service_uuids": .array([.string(hr180d), .string(hr180f)]),
    "manufacturer_data": .object(["0xffff": .string("00010203")]),
    "service_data": .object(["00009999-0000-1000-8000-00805f9b34fb": .string("0001020304")]),
    "flags": .string("06"),
    "path": .string(heartRatePath),
]

private let secondAdapter = AdapterSpec("hci1", address: "00:AA:01:01:00:24", alias: "second-radio", powered: false)

/// Checks each expected key (service_uuids compared as sets).
private func expectFields(_ event: JSONValue?, _ expected: [String: JSONValue],
                          sourceLocation: SourceLocation = #_sourceLocation) {
    guard let event else {
        Issue.record("no event", sourceLocation: sourceLocation)
        return
    }
    for (key, value) in expected {
        if key == "service_uuids" {
            #expect(Set(event[key]?.strings ?? []) == Set(value.strings ?? []), "\(key) in \(event)", sourceLocation: sourceLocation)
        } else {
            #expect(event[key] == value, "\(key) in \(event)", sourceLocation: sourceLocation)
        }
    }
}

private func scanEvents(_ r: ProcessResult) throws -> [JSONValue] {
    let events = try r.jsonLines()
    for e in events {
        #expect(["discovered", "updated"].contains(e["event"]?.string ?? ""), "\(e)")
    }
    return events
}

/// The client that ran discovery: started it, set its filter and stopped it itself.
private func expectStoppedItsOwnDiscovery(_ bus: PrivateBus, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    #expect(try await bus.adapterProperty("hci0", "Discovering") == .bool(false), sourceLocation: sourceLocation)
    #expect(try await bus.discoverySessions().isEmpty, sourceLocation: sourceLocation)
    let log = try await bus.discoveryLog()
    let starts = log.filter { $0.event == "StartDiscovery" }
    #expect(starts.count == 1, "\(log)", sourceLocation: sourceLocation)
    guard let client = starts.first?.client else { return }
    let own = log.filter { $0.client == client }.map(\.event)
    #expect(own.contains("SetDiscoveryFilter"), "\(log)", sourceLocation: sourceLocation)
    #expect(own.last == "StopDiscovery", "bluectl must stop the discovery it started, not leave it to its disconnect: \(log)",
            sourceLocation: sourceLocation)
    #expect(!own.contains("ClientLeft"), "\(log)", sourceLocation: sourceLocation)
}

@Suite("bluectl adapters and scan, end to end", .timeLimit(.minutes(3)))
struct ScanAdaptersTests {

    // MARK: adapters

    @Test("adapters --json: one object per adapter with address, name, alias, powered, discovering, state")
    func adaptersJSON() async throws {
        try await withPrivateBus(adapters: [.hci0, secondAdapter]) { bus in
            let set = try await bus.busctl(["set-property", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "Alias", "s", "kitchen"])
            #expect(set.exitCode == 0, "\(set)")
            let r = try await bus.runBluectl(["adapters", "--json"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stderr.isEmpty, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.count == 2, "\(r)")
            let byName = Dictionary(lines.map { ($0["adapter"]?.string ?? "?", $0) }, uniquingKeysWith: { a, _ in a })
            expectFields(byName["hci0"], [
                "adapter": .string("hci0"), "address": .string("00:AA:01:00:00:23"),
                "name": .string("bus-tier-host"), "alias": .string("kitchen"),
                "powered": .bool(true), "discovering": .bool(false), "state": .string("poweredOn"),
            ])
            expectFields(byName["hci1"], [
                "adapter": .string("hci1"), "address": .string("00:AA:01:01:00:24"),
                "name": .string("second-radio"), "alias": .string("second-radio"),
                "powered": .bool(false), "discovering": .bool(false), "state": .string("poweredOff"),
            ])
        }
    }

    @Test("adapters --json shows discovering=true while another client scans")
    func adaptersShowsDiscovering() async throws {
        try await withPrivateBus { bus in
            let scanner = try await otherClientScanning(bus)
            let r = try await bus.runBluectl(["adapters", "--json"])
            #expect(r.exitCode == 0, "\(r)")
            let line = try #require(try r.jsonLines().first)
            #expect(line["discovering"] == .bool(true))
            #expect(line["powered"] == .bool(true))
            scanner.kill9()
        }
    }

    @Test("adapters (text): a line per adapter with its name and address")
    func adaptersText() async throws {
        try await withPrivateBus(adapters: [.hci0, secondAdapter]) { bus in
            let r = try await bus.runBluectl(["adapters"])
            #expect(r.exitCode == 0, "\(r)")
            let lines = r.stdoutLines
            #expect(lines.count == 2, "\(r)")
            #expect(lines.contains { $0.contains("hci0") && $0.contains("00:AA:01:00:00:23") }, "\(r)")
            #expect(lines.contains { $0.contains("hci1") && $0.contains("00:AA:01:01:00:24") }, "\(r)")
        }
    }

    // MARK: scan output

    @Test("scan --json: every field of a discovered device; keys absent when unknown; stops its discovery")
    func scanReportsFields() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            try await bus.addAdvertiser("hci0", "C0:11:22:33:44:55", [.addressType("random"), .rssi(-70)])
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "3"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(!r.timedOut, "ended by its --timeout, not by the harness's")
            // Not before its --timeout: bluectl's 3 s run inside the span measured here
            // (from before the spawn to the reaping), whatever the machine's speed.
            #expect(r.duration >= .seconds(3), "\(r.duration)")
            let events = try scanEvents(r)
            #expect(events.count == 2, "\(r)")
            #expect(events.allSatisfy { $0["event"] == .string("discovered") })
            expectFields(events.first { $0["address"] == .string(heartRateAddress) }, heartRateEvent)
            let anon = try #require(events.first { $0["address"] == .string("C0:11:22:33:44:55") })
            expectFields(anon, [
                "adapter": .string("hci0"), "address_type": .string("random"), "rssi": .int(-70),
                "path": .string("/org/bluez/hci0/dev_C0_11_22_33_44_55"),
            ])
            for key in ["name", "tx_power", "manufacturer_data", "service_data", "flags", "beacon"] {
                #expect(anon[key] == nil, "\(key) should be absent: \(anon)")
            }
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    @Test("scan (text): a line per device with its address and name")
    func scanText() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let r = try await bus.runBluectl(["scan", "--timeout", "2"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdoutLines == [
                "NEW  \(heartRateAddress)  public  -52 dBm  \"HeartRate\"  tx 4 dBm  services 180d (Heart Rate),180f (Battery Service)"
                    + "  mfr 0xffff (SIG reserved default ID)=00010203  data 9999=0001020304",
            ], "\(r)")
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    // MARK: beacons, RSSI "not available"

    /// iBeacon (Apple's Proximity Beacon Specification layout) beside Nordic data that is no beacon.
    static let iBeaconAddress = "C0:00:00:00:00:01"
    static let iBeacon: [AdField] = [
        .addressType("random"), .rssi(-60), .flags([0x06]),
        .manufacturerData([
            0x004C: [0x02, 0x15, 0xe2, 0xc5, 0x6d, 0xb5, 0xdf, 0xfb, 0x48, 0xd2, 0xb0, 0x60, 0xd0, 0xf5, 0xa7, 0x10, 0x96, 0xe0,
                     0x00, 0x01, 0x00, 0x02, 0xc5],
            0x0059: [0x01, 0x02],
        ]),
    ]
    /// Eddystone-URL, the spec's example URL https://goo.gl/Aq18zF at -18 dBm (github.com/google/eddystone).
    static let eddystoneAddress = "C0:00:00:00:00:02"
    static let eddystone: [AdField] = [
        .addressType("random"), .rssi(-70), .uuids(["feaa"]),
        .serviceData(["feaa": [0x10, 0xee, 0x03] + Array("goo.gl/Aq18zF".utf8)]),
    ]

    @Test("scan --json: iBeacon and Eddystone-URL decoded into beacon; the raw data stays in manufacturer_data / service_data")
    func scanBeaconsJSON() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", Self.iBeaconAddress, Self.iBeacon)
            try await bus.addAdvertiser("hci0", Self.eddystoneAddress, Self.eddystone)
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "2"])
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.count == 2, "\(r)")
            let ibeacon = events.first { $0["address"] == .string(Self.iBeaconAddress) }
            #expect(ibeacon?["beacon"] == .object(["ibeacon": .object([
                "uuid": .string("e2c56db5-dffb-48d2-b060-d0f5a71096e0"), "major": .int(1), "minor": .int(2),
                "measured_power": .int(-59),
            ])]), "\(r)")
            #expect(ibeacon?["manufacturer_data"] == .object([
                "0x004c": .string("0215e2c56db5dffb48d2b060d0f5a71096e000010002c5"), "0x0059": .string("0102"),
            ]), "\(r)")
            let url = events.first { $0["address"] == .string(Self.eddystoneAddress) }
            #expect(url?["beacon"] == .object(["eddystone_url": .object([
                "url": .string("https://goo.gl/Aq18zF"), "tx_power": .int(-18),
            ])]), "\(r)")
            #expect(url?["service_data"] == .object([
                "0000feaa-0000-1000-8000-00805f9b34fb": .string("10ee03676f6f2e676c2f417131387a46"),
            ]), "\(r)")
        }
    }

    @Test("scan (text): a beacon is shown decoded in place of its hex, other data as hex with a short company name")
    func scanBeaconsText() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", Self.iBeaconAddress, Self.iBeacon)
            try await bus.addAdvertiser("hci0", Self.eddystoneAddress, Self.eddystone)
            let r = try await bus.runBluectl(["scan", "--timeout", "2"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(Set(r.stdoutLines) == [
                "NEW  \(Self.iBeaconAddress)  random  -60 dBm  (no name)"
                    + "  iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0 major 1 minor 2, -59 dBm at 1 m"
                    + "  mfr 0x0059 (Nordic Semiconductor)=0102",
                "NEW  \(Self.eddystoneAddress)  random  -70 dBm  (no name)  services feaa (Eddystone)"
                    + "  Eddystone-URL https://goo.gl/Aq18zF, -18 dBm at 0 m",
            ], "\(r)")
            #expect(r.stdoutLines.count == 2, "\(r)")
        }
    }

    @Test("info (text): manufacturer data with short company names, a line per beacon; info --json has the beacon object")
    func infoBeacons() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", Self.iBeaconAddress, Self.iBeacon)
            let r = try await bus.runBluectl(["info", Self.iBeaconAddress])
            #expect(r.exitCode == 0, "\(r)")
            let advertised = r.stdoutLines.filter { $0.hasPrefix("mfr ") || $0.hasPrefix("beacon") }
            #expect(advertised == [
                "beacon      iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0 major 1 minor 2, -59 dBm at 1 m",
                "mfr         0x004c (Apple)=0215e2c56db5dffb48d2b060d0f5a71096e000010002c5",
                "mfr         0x0059 (Nordic Semiconductor)=0102",
            ], "\(r)")
            let j = try await bus.runBluectl(["info", Self.iBeaconAddress, "--json"])
            #expect(try j.jsonLines().first?["beacon"]?["ibeacon"]?["major"] == .int(1), "\(j)")
        }
    }

    @Test("RSSI 127 (HCI's \"not available\") is no reading: absent from scan --json, \"- dBm\" in text")
    func rssiNotAvailable() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "C0:00:00:00:00:7F", [.addressType("random"), .rssi(127), .name("NoRSSI")])
            let j = try await bus.runBluectl(["scan", "--json", "--timeout", "2"])
            #expect(j.exitCode == 0, "\(j)")
            let events = try scanEvents(j)
            #expect(events.count == 1, "\(j)")
            #expect(events.first?["name"] == .string("NoRSSI"), "\(j)")
            #expect(events.first?["rssi"] == nil, "\(j)")
            #expect(!j.stdout.contains("127"), "\(j)")
            let t = try await bus.runBluectl(["scan", "--timeout", "2"])
            #expect(t.stdoutLines == ["NEW  C0:00:00:00:00:7F  random  - dBm  \"NoRSSI\""], "\(t)")
        }
    }

    @Test("scan sends SetDiscoveryFilter: canonical UUIDs, RSSI as n, Transport le, DuplicateData per --duplicates",
          arguments: [false, true])
    func scanSendsFilter(duplicates: Bool) async throws {
        try await withPrivateBus { bus in
            let args = ["scan", "--json", "--timeout", "1", "--service", "180d",
                        "--service", "0000FEAA-0000-1000-8000-00805F9B34FB", "--rssi=-70"]
                + (duplicates ? ["--duplicates"] : [])
            let r = try await bus.runBluectl(args)
            #expect(r.exitCode == 0, "\(r)")
            let f = try await bus.lastDiscoveryFilter()
            #expect(f["UUIDs"]?["type"] == .string("as"), "\(f)")
            #expect(Set(f["UUIDs"]?["data"]?.strings ?? []) == [hr180d, "0000feaa-0000-1000-8000-00805f9b34fb"], "\(f)")
            #expect(f["RSSI"] == .object(["type": .string("n"), "data": .int(-70)]), "\(f)")
            #expect(f["Transport"] == .object(["type": .string("s"), "data": .string("le")]), "\(f)")
            #expect(f["DuplicateData"] == .object(["type": .string("b"), "data": .bool(duplicates)]), "\(f)")
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    @Test("scan without filters still sets Transport le; no RSSI, no UUIDs")
    func scanDefaultFilter() async throws {
        try await withPrivateBus { bus in
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "1"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout.isEmpty, "\(r)")
            let f = try await bus.lastDiscoveryFilter()
            #expect(f["Transport"] == .object(["type": .string("s"), "data": .string("le")]), "\(f)")
            #expect(f["RSSI"] == nil)
            let uuids: [String] = f["UUIDs"]?["data"]?.strings ?? []
            #expect(uuids.isEmpty, "\(f)")
            #expect(f["DuplicateData"]?["data"] != .bool(true), "\(f)")
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    @Test("scan --duplicates: later advertisement changes come as \"updated\" with all fields")
    func scanDuplicatesReportsUpdates() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let scan = try bus.startBluectl(["scan", "--json", "--duplicates", "--timeout", "5"])
            #expect(await scan.waitForStdoutLines(1, timeout: .seconds(10)), "\(scan.stderr)")
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-40), .manufacturerData([0xffff: [0x0a, 0x0b]])])
            #expect(await scan.waitForStdoutLines(2, timeout: .seconds(5)), "\(scan.stdout)")
            let r = await scan.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.count == 2, "\(r)")
            expectFields(events.first, heartRateEvent)
            var updated = heartRateEvent
            updated["event"] = .string("updated")
            updated["rssi"] = .int(-40)
            updated["manufacturer_data"] = .object(["0xffff": .string("0a0b")])
            expectFields(events.dropFirst().first, updated)
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    @Test("scan without --duplicates reports each device once, whatever it advertises later")
    func scanReportsOnce() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let scan = try bus.startBluectl(["scan", "--json", "--timeout", "4"])
            #expect(await scan.waitForStdoutLines(1, timeout: .seconds(10)), "\(scan.stderr)")
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-40)])
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-41), .manufacturerData([0xffff: [0x0c]])])
            let r = await scan.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.count == 1, "\(r)")
            expectFields(events.first, heartRateEvent)
        }
    }

    // MARK: scan filters (re-checked by bluectl: the stand-in reports everything, as when
    // another client scans unfiltered)

    @Test("scan --name: only devices whose name contains the text")
    func scanNameFilter() async throws {
        try await withPrivateBus { bus in
            try await bus.setFilterEnforcement("hci0", false)
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:55", [.name("Thermo-1"), .rssi(-60), .uuids(["1809"])])
            try await bus.addAdvertiser("hci0", "C0:11:22:33:44:55", [.addressType("random"), .rssi(-50)])
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "3", "--name", "eartRa"])
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.map { $0["address"]?.string ?? "" } == [heartRateAddress], "\(r)")
            expectFields(events.first, heartRateEvent)
            // the others were on the bus: bluectl filtered them itself
            let objects = try await bus.managedObjects()
            #expect(objects["/org/bluez/hci0/dev_00_11_22_33_44_55"] != nil)
            #expect(objects["/org/bluez/hci0/dev_C0_11_22_33_44_55"] != nil)
        }
    }

    @Test("scan --service: only devices advertising that service")
    func scanServiceFilter() async throws {
        try await withPrivateBus { bus in
            try await bus.setFilterEnforcement("hci0", false)
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:55", [.name("Thermo-1"), .rssi(-60), .uuids(["1809"])])
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:66", [.name("Battery"), .rssi(-60), .uuids(["180f"])])
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "3", "--service", "1809"])
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.map { $0["address"]?.string ?? "" } == ["00:11:22:33:44:55"], "\(r)")
            expectFields(events.first, ["name": .string("Thermo-1"),
                                        "service_uuids": .array([.string("00001809-0000-1000-8000-00805f9b34fb")])])
            let objects = try await bus.managedObjects()
            #expect(objects[heartRatePath] != nil)
        }
    }

    @Test("scan --rssi: only devices at least that strong")
    func scanRSSIFilter() async throws {
        try await withPrivateBus { bus in
            try await bus.setFilterEnforcement("hci0", false)
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:01", [.name("near"), .rssi(-40)])
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:02", [.name("far"), .rssi(-90)])
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "3", "--rssi=-60"])
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.map { $0["name"]?.string ?? "" } == ["near"], "\(r)")
            expectFields(events.first, ["rssi": .int(-40), "address": .string("00:11:22:33:44:01")])
        }
    }

    @Test("negative numbers as separate arguments: --rssi -80 (README's example) is a value, not an option")
    func negativeRSSIArgument() async throws {
        try await withPrivateBus { bus in
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "1", "--rssi", "-80"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(try await bus.lastDiscoveryFilter()["RSSI"] == .object(["type": .string("n"), "data": .int(-80)]))
        }
    }

    @Test("scan --count N: exits 0 after N distinct devices, well before --timeout")
    func scanCount() async throws {
        try await withPrivateBus { bus in
            for i in 1...3 {
                try await bus.addAdvertiser("hci0", "00:11:22:33:44:0\(i)", [.name("dev\(i)"), .rssi(-50)])
            }
            // --timeout an hour: only --count can end it before the harness kills it as hung.
            let r = try await bus.runBluectl(["scan", "--json", "--count", "2", "--timeout", "3600"])
            #expect(!r.timedOut, "\(r)")
            #expect(r.exitCode == 0, "\(r)")
            let events = try scanEvents(r)
            #expect(events.count == 2, "\(r)")
            #expect(Set(events.compactMap { $0["address"]?.string }).count == 2)
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    @Test("scan --count N with more devices already in range (another client scanning): exactly N lines")
    func scanCountWithDevicesInRange() async throws {
        try await withPrivateBus { bus in
            for i in 1...4 {
                try await bus.addAdvertiser("hci0", "00:11:22:33:44:0\(i)", [.name("dev\(i)"), .rssi(-50)])
            }
            // BlueZ holds the four with an RSSI before bluectl starts.
            let scanner = try await otherClientScanning(bus)
            #expect(try await bus.eventually { try await bus.runBluectl(["devices", "--json"]).stdoutLines.count == 4 })
            let r = try await bus.runBluectl(["scan", "--json", "--count", "2", "--timeout", "3600"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(try scanEvents(r).count == 2, "\(r)")
            scanner.kill9()
        }
    }

    @Test("scan whose StartDiscovery fails prints no device, even of those already in range")
    func scanFailedStartPrintsNothing() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:01", [.name("dev1"), .rssi(-50)])
            let scanner = try await otherClientScanning(bus)
            #expect(try await bus.eventually { try await bus.runBluectl(["devices", "--json"]).stdoutLines.count == 1 })
            try await bus.injectError("/org/bluez/hci0", "StartDiscovery", "org.bluez.Error.Failed", "radio trouble")
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "3"])
            #expect(r.exitCode != 0, "\(r)")
            #expect(r.stdoutLines.isEmpty, "\(r)")
            scanner.kill9()
        }
    }

    // MARK: errors

    @Test("bad input: exit 64, one line on stderr naming the bad value, no discovery",
          arguments: [
            (["scan", "--service", "12x4"], "12x4"),
            (["scan", "--rssi", "abc"], "abc"),
            (["scan", "--timeout", "-1"], "-1"),
            (["scan", "--adapter", "foo"], "foo"),
          ])
    func badInput(args: [String], bad: String) async throws {
        try await withPrivateBus { bus in
            let r = try await bus.runBluectl(args + ["--json"], timeout: .seconds(10))
            #expect(r.exitCode == 64, "\(r)")
            #expect(r.stderrLines.count == 1, "\(r)")
            #expect(r.stderr.contains(bad), "\(r)")
            #expect(r.stdout.isEmpty, "\(r)")
            #expect(try await bus.discoveryLog().isEmpty)
        }
    }

    @Test("adapter hci7 missing: exit 69 naming hci7")
    func missingAdapter() async throws {
        try await withPrivateBus { bus in
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "2", "--adapter", "hci7"], timeout: .seconds(10))
            #expect(r.exitCode == 69, "\(r)")
            #expect(r.stderrLines.count == 1, "\(r)")
            #expect(r.stderr.contains("hci7"), "\(r)")
            #expect(try await bus.discoveryLog().isEmpty)
        }
    }

    @Test("powered-off adapter: exit 69 naming it; no discovery started")
    func poweredOffAdapter() async throws {
        try await withPrivateBus(adapters: [AdapterSpec("hci0", address: "00:AA:01:00:00:23", alias: "off-radio", powered: false)]) { bus in
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "2", "--adapter", "hci0"], timeout: .seconds(10))
            #expect(r.exitCode == 69, "\(r)")
            #expect(r.stderrLines.count == 1, "\(r)")
            #expect(r.stderr.contains("hci0"), "\(r)")
            #expect(!(try await bus.discoveryLog().contains { $0.event == "StartDiscovery" }))
            let noFlag = try await bus.runBluectl(["scan", "--json", "--timeout", "2"], timeout: .seconds(10))
            #expect(noFlag.exitCode == 69, "\(noFlag)")
        }
    }

    @Test("org.bluez not on the bus: exit 69, bluetoothd is not running", arguments: [["adapters"], ["scan", "--json", "--timeout", "2"]])
    func bluezNotRunning(args: [String]) async throws {
        try await withPrivateBus(standIn: false) { bus in
            let r = try await bus.runBluectl(args, timeout: .seconds(10))
            #expect(r.exitCode == 69, "\(r)")
            #expect(r.stderrLines.count == 1, "\(r)")
            #expect(r.stderr.contains("bluetoothd is not running (org.bluez is not on the system bus)"), "\(r)")
        }
    }

    @Test("no system bus at all: exit 69 showing the address tried", arguments: [["adapters"], ["scan", "--json", "--timeout", "2"]])
    func noBus(args: [String]) async throws {
        let r = try await BusTier.runBluectl(args, environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent"],
                                             timeout: .seconds(10))
        #expect(r.exitCode == 69, "\(r)")
        #expect(r.stderrLines.count == 1, "\(r)")
        #expect(r.stderr.contains("unix:path=/nonexistent"), "\(r)")
    }

    // MARK: signals

    @Test("SIGINT → 130, SIGTERM → 143, after stopping the discovery", arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func signalStopsScan(signal: Int32, code: Int32) async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let scan = try bus.startBluectl(["scan", "--json", "--timeout", "60"])
            #expect(await scan.waitForStdoutLines(1, timeout: .seconds(10)), "\(scan.stderr)")
            #expect(try await bus.adapterProperty("hci0", "Discovering") == .bool(true))
            scan.signal(signal)
            let r = await scan.wait(timeout: .seconds(10))
            #expect(r.termination == .exited(code), "\(r)")
            #expect(!r.timedOut)
            let events = try scanEvents(r)
            #expect(events.count == 1)
            try await expectStoppedItsOwnDiscovery(bus)
        }
    }

    // MARK: only org.bluez's owner is believed

    @Test("a rogue client's BlueZ-looking signals change nothing in scan's output")
    func rogueSignalsIgnored() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let scan = try bus.startBluectl(["scan", "--json", "--duplicates", "--timeout", "6"])
            #expect(await scan.waitForStdoutLines(1, timeout: .seconds(10)), "\(scan.stderr)")
            let rogue = try await bus.runRogueEmitter(["--victim", heartRatePath, "--repeat", "3"])
            #expect(rogue.exitCode == 0, "\(rogue)")
            #expect(rogue.stdoutLines.last == "emitted 15")
            // a real change afterwards: bluectl is still listening to the real BlueZ
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-41)])
            #expect(await scan.waitForStdoutLines(2, timeout: .seconds(5)), "\(scan.stdout)")
            let r = await scan.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            #expect(!r.stdout.contains("DE:AD:BE:EF:00:01"), "\(r)")
            #expect(!r.stdout.contains("ROGUE"), "\(r)")
            let events = try scanEvents(r)
            #expect(events.count == 2, "\(r)")
            #expect(events.allSatisfy { $0["address"] == .string(heartRateAddress) && $0["name"] == .string("HeartRate") })
            expectFields(events.first, heartRateEvent)
            expectFields(events.last, ["event": .string("updated"), "rssi": .int(-41), "name": .string("HeartRate")])
        }
    }

    // MARK: throughput

    @Test("scan --duplicates keeps up with a burst: 1,000 devices, 10,000 updates, each reported once")
    func scanBurst() async throws {
        try await scanBurst(devices: 1_000, updates: 10_000)
    }

    @Test("benchmark: 10,000 devices / 100,000 updates (BUS_TIER_BENCHMARK=1)",
          .enabled(if: ProcessInfo.processInfo.environment["BUS_TIER_BENCHMARK"] == "1"))
    func scanBurstBenchmark() async throws {
        try await scanBurst(devices: 10_000, updates: 100_000)
    }

    private func scanBurst(devices: Int, updates: Int) async throws {
        try await withPrivateBus { bus in
            let scan = try bus.startBluectl(["scan", "--json", "--duplicates"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { !(try await bus.discoverySessions().isEmpty) })
            let start = ContinuousClock.now
            let sent = try await bus.emitAdvertisementBurst("hci0", devices: devices, updates: updates)
            #expect(sent.added == devices && sent.updates == updates)
            let emitted = ContinuousClock.now
            let all = await scan.waitForStdoutLines(devices + updates, timeout: .seconds(120))
            let done = ContinuousClock.now
            scan.signal(SIGINT)
            let r = await scan.wait(timeout: .seconds(30))
            let exited = ContinuousClock.now
            #expect(all, "only \(scan.stdoutLineCount) of \(devices + updates) lines")
            #expect(r.exitCode == 130, "\(r.termination) \(r.stderr)")
            let events = try r.jsonLines()
            let parsed = ContinuousClock.now
            #expect(events.count == devices + updates)
            #expect(events.filter { $0["event"] == .string("discovered") }.count == devices)
            #expect(events.filter { $0["event"] == .string("updated") }.count == updates)
            #expect(Set(events.compactMap { $0["address"]?.string }).count == devices)
            // device 7's last update (see the stand-in's EmitAdvertisementBurst)
            let i = (updates - 1 - 7) / devices * devices + 7
            let last = events.last { $0["path"] == .string("/org/bluez/hci0/dev_C0_00_00_00_00_07") }
            expectFields(last, [
                "event": .string("updated"), "rssi": .int(Int64(-40 - i % 50)),
                "manufacturer_data": .object(["0xffff": .string(String(format: "%08x%08x", 7, i))]),
                "name": .string("burst-00007"), "address_type": .string("random"),
            ])
            let seconds = Double((done - start).components.seconds) + Double((done - start).components.attoseconds) / 1e18
            print("scan burst: \(devices) devices + \(updates) updates; stand-in queued them in \(emitted - start), "
                  + "bluectl printed all in \(done - start) (\(Int(Double(devices + updates) / max(seconds, 0.001))) events/s); "
                  + "exit after SIGINT \(exited - done), test's JSON parsing \(parsed - exited)")
        }
    }
}
