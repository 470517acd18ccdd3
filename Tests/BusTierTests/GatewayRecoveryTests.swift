// The gateway's scan kept going in-process (docs/gateway.md, "The scan"): bluetoothd
// stopping and coming back, the adapter powered off and on, and a scan that stalls behind
// bluetoothd's back (the stand-in's StallScan: Discovering stays true, nothing is reported)
// — each ends in readings flowing again and an event on bluectl/ID/events, with no exit.

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The gateway's events as they arrived (parsed).
private func events(_ reader: MQTTReader, gateway: String) -> [JSONValue] {
    reader.payloads("bluectl/\(gateway)/events").compactMap { try? JSONValue.parse($0) }
}

/// The names of the events, in order.
private func eventNames(_ reader: MQTTReader, gateway: String) -> [String] {
    events(reader, gateway: gateway).compactMap { $0["event"]?.text }
}

extension GatewayTests {
    @Test("bluetoothd stops and comes back: scan_interrupted, then scan_resumed with the gap; readings resume; no exit")
    func survivesBluetoothdRestart() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "gw"], environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "gw") == [20.0] }, "\(reader.messages) \(gateway.stderr)")
            #expect(await gateway.waitForStderr(timeout: .seconds(10)) { $0.contains("bluectl: gateway: scanning hci0 actively (StartDiscovery, duplicates on)") }, "\(gateway.stderr)")
            await bus.stopStandIn()   // as bluetoothd 5.66 crashing in the lab
            #expect(await reader.wait(timeout: .seconds(20)) { eventNames($0, gateway: "gw") == ["scan_interrupted"] }, "\(reader.messages) \(gateway.stderr)")
            try await bus.startStandIn(adapters: [.hci0])
            try await bus.addAdvertiser("hci0", sensorAddress, bthome(2010))
            // The event is published by the scanner's task after the discovery starts, the reading
            // from the loop as it comes: either may be first.
            #expect(await reader.wait(timeout: .seconds(30)) {
                temperatures($0, gateway: "gw") == [20.0, 20.1] && eventNames($0, gateway: "gw").count >= 2
            }, "\(reader.messages) \(gateway.stderr)")
            #expect(eventNames(reader, gateway: "gw") == ["scan_interrupted", "scan_resumed"], "\(reader.messages)")
            let resumed = try #require(events(reader, gateway: "gw").last)
            #expect(resumed["reason"]?.text == "bluetoothd stopped (exited or crashed)")
            #expect((resumed["gap_s"]?.number ?? -1) > 0, "\(resumed)")
            #expect(try await bus.discoverySessions().count == 1, "scanning the new bluetoothd")
            await stillRunningThenStop(gateway)
            #expect(try await bus.discoverySessions().isEmpty)
        }
    }

    @Test("the adapter is powered off and on: scan_interrupted, scan_resumed; readings resume; no exit")
    func survivesAdapterPowerCycle() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "gw"], environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "gw") == [20.0] }, "\(reader.messages) \(gateway.stderr)")
            try await bus.setPowered("hci0", false)
            #expect(await reader.wait(timeout: .seconds(20)) { eventNames($0, gateway: "gw") == ["scan_interrupted"] }, "\(reader.messages) \(gateway.stderr)")
            try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2010))
            try await bus.setPowered("hci0", true)
            #expect(await reader.wait(timeout: .seconds(20)) {
                temperatures($0, gateway: "gw") == [20.0, 20.1] && eventNames($0, gateway: "gw").count >= 2
            }, "\(reader.messages) \(gateway.stderr)")
            #expect(eventNames(reader, gateway: "gw") == ["scan_interrupted", "scan_resumed"], "\(reader.messages)")
            #expect(events(reader, gateway: "gw").first?["reason"]?.text == "hci0 was powered off")
            await stillRunningThenStop(gateway)
            #expect(try await bus.discoverySessions().isEmpty)
        }
    }

    @Test("a scan stalled behind bluetoothd's back (Discovering stays true): the watchdog restarts the discovery; the reading arrives")
    func watchdogRestartsStalledScan() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try await startThenStall(bus, broker, reader, state: state, until: "restart")
            #expect(await reader.wait(timeout: .seconds(30)) {
                temperatures($0, gateway: "gw") == [20.0, 20.1] && eventNames($0, gateway: "gw").contains("scan_recovery")
            }, "\(reader.messages) \(gateway.stderr)")
            let recoveries = events(reader, gateway: "gw").filter { $0["event"]?.text == "scan_recovery" }
            let first = try #require(recoveries.first, "\(reader.messages)")
            #expect(first["action"]?.text == "restart_discovery")
            #expect(first["error"] == nil, "\(first)")
            #expect((first["silent_s"]?.number ?? 0) >= 3, "\(first)")
            #expect(await gateway.waitForStderr(timeout: .seconds(10)) { $0.contains("restarting the discovery") }, "\(gateway.stderr)")
            // The discovery was stopped and started again by the gateway (the stand-in's log).
            let log = try await bus.discoveryLog().map(\.event).filter { $0 != "SetDiscoveryFilter" }
            #expect(Array(log.prefix(3)) == ["StartDiscovery", "StopDiscovery", "StartDiscovery"], "\(log)")
            await stillRunningThenStop(gateway)
        }
    }

    @Test("a stall that a restart does not end: the watchdog power-cycles the adapter next; the reading arrives")
    func watchdogPowerCyclesStalledAdapter() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let gateway = try await startThenStall(bus, broker, reader, state: state, until: "power-cycle")
            let actions = { events(reader, gateway: "gw").filter { $0["event"]?.text == "scan_recovery" }.compactMap { $0["action"]?.text } }
            #expect(await reader.wait(timeout: .seconds(40)) { temperatures($0, gateway: "gw") == [20.0, 20.1] && actions().contains("power_cycle") },
                    "\(reader.messages) \(gateway.stderr)")
            #expect(actions().suffix(2) == ["restart_discovery", "power_cycle"], "\(reader.messages)")
            #expect(await gateway.waitForStderr(timeout: .seconds(10)) { $0.contains("power-cycling hci0") }, "\(gateway.stderr)")
            await stillRunningThenStop(gateway)
        }
    }

    @Test("advertisements the config does not admit, held back on the scan's loop, still keep the watchdog quiet; their end is silence")
    func heldBackKeepsWatchdogQuiet() async throws {
        try await withScene(brokerUp: true) { bus, broker, reader, state in
            let config = state + "/other-device.json"
            try Data(#"{"advertisements": {"addresses": ["11:22:33:44:55:66"]}}"#.utf8).write(to: URL(fileURLWithPath: config))
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "gw", "--scan-watchdog", "3", "--config", config],
                                               environment: ["STATE_DIRECTORY": state])
            #expect(await reader.wait(timeout: .seconds(20)) { $0.payloads("bluectl/gw/status") == ["online"] }, "\(gateway.stderr)")
            // The sensor is heard every half second for 8 s (its RSSI moves), never admitted.
            for step in 0..<16 {
                try await bus.updateAdvertiser("hci0", sensorAddress, [.rssi(Int16(-60 - step % 2))])
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(!eventNames(reader, gateway: "gw").contains("scan_recovery"), "\(reader.messages) \(gateway.stderr)")
            #expect(temperatures(reader, gateway: "gw").isEmpty, "\(reader.messages)")
            // Then nothing is heard: the watchdog's 3 s pass and it restarts the discovery.
            #expect(await reader.wait(timeout: .seconds(15)) { eventNames($0, gateway: "gw").contains("scan_recovery") },
                    "\(reader.messages) \(gateway.stderr)")
            await stillRunningThenStop(gateway)
        }
    }

    /// A gateway with a 3 s watchdog that has published the sensor's 20.0; then the scan stalls
    /// (`until` what ends it) and the sensor steps to 20.1, which the stalled scan does not hear.
    private func startThenStall(_ bus: PrivateBus, _ broker: MosquittoBroker, _ reader: MQTTReader, state: String,
                                until: String) async throws -> ChildProcess {
        let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "gw", "--scan-watchdog", "3"],
                                           environment: ["STATE_DIRECTORY": state])
        #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "gw") == [20.0] }, "\(reader.messages) \(gateway.stderr)")
        try await bus.stallScan("hci0", until: until)
        try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2010))
        return gateway
    }

    /// The gateway did not exit through what happened; then SIGTERM ends it as usual (143).
    private func stillRunningThenStop(_ gateway: ChildProcess) async {
        #expect(gateway.isRunning, "\(gateway.stderr)")
        gateway.signal(SIGTERM)
        let result = await gateway.wait(timeout: .seconds(10))
        #expect(result.exitCode == 143, "\(result)")
    }
}
