// Passive scanning through AdvertisementMonitor1 (bluetoothd 5.66 with
// --experimental; the stand-in started "experimental"): the library's monitor and
// passive scan in this process, and `bluectl gateway` scanning passively when the
// adapter offers monitors, actively otherwise (docs/advertisement-monitor.md,
// docs/gateway.md "The scan").

import BluectlCore
import BluectlDBus
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Passive scanning through AdvertisementMonitor1 (bus tier)", .timeLimit(.minutes(3)))
struct PassiveScanTests {
    static let adapter = "/org/bluez/hci0"
    static let plain = "00:AA:01:00:00:99"

    /// The registered monitor applications on hci0 ("owner path monitors").
    static func monitors(_ bus: PrivateBus) async throws -> [String] {
        try await bus.mock("GetMonitors", [.string("hci0")]).first?.strings ?? []
    }

    @Test("A monitor for BTHome's service data: DeviceFound for the sensor only, nothing registered after stop()")
    func monitorFindsMatchingDevices() async throws {
        try await withPrivateBus(experimental: true) { bus in
            try await bus.addAdvertiser("hci0", sensorAddress, bthome(2000))
            try await bus.addAdvertiser("hci0", Self.plain, [.addressType("public"), .rssi(-50), .name("plain")])
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            #expect(central.advertisementMonitorUnavailability(adapter: adapter) == nil)
            let monitor = try await AdvertisementMonitor.register(
                central: central, adapter: adapter, patterns: [.serviceData(BluetoothUUID(uint16: 0xFCD2))])
            #expect(try await Self.monitors(bus).count == 1)
            let first = await Deadline(after: .seconds(20)).run { () -> AdvertisementMonitorEvent? in
                do { for try await event in monitor.events { return event } } catch {}
                return nil
            }
            #expect(first == .some(.deviceFound(try BluetoothAddress.parse(sensorAddress))))
            // Heard passively: the device exists, no discovery runs.
            #expect(central.devices(on: adapter).map(\.address.description).contains(sensorAddress))
            #expect(!central.devices(on: adapter).map(\.address.description).contains(Self.plain))
            #expect(try await bus.discoverySessions().isEmpty)
            #expect(await monitor.stop() == nil)
            #expect(try await Self.monitors(bus).isEmpty)
            #expect(try await bus.callCount(Self.adapter, "UnregisterMonitor") == 1)
        }
    }

    @Test("16 patterns: three monitor objects of 7, 7 and 2 (bluetoothd 5.66 aborts on more than 7 in one), a device matching two found once")
    func patternsSpreadOverObjects() async throws {
        try await withPrivateBus(experimental: true) { bus in
            // BTHome's service data (the first object's pattern) and a Govee name (the third's)
            let fields = bthome(2000).map { field -> AdField in if case .name = field { return .name("GVH5075_0027") } else { return field } }
            try await bus.addAdvertiser("hci0", sensorAddress, fields)
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            let patterns = SensorFormat.allAdvertisementPatterns
            #expect(patterns.count == 16)
            let monitor = try await AdvertisementMonitor.register(central: central, adapter: adapter, patterns: patterns)
            // one application, its three objects activated; the stand-in (as bluetoothd) alive
            #expect(try await Self.monitors(bus).map { $0.split(separator: " ").last } == ["3"])
            let consumer = Task { () -> [AdvertisementMonitorEvent] in
                var events: [AdvertisementMonitorEvent] = []
                do { for try await event in monitor.events { events.append(event) } } catch {}
                return events
            }
            #expect(try await bus.eventually { central.devices(on: adapter).map(\.address.description).contains(sensorAddress) })
            // a call through the central's connection: its reply follows both objects' DeviceFound
            _ = try await central.connection.callMethod(
                destination: "org.bluez", path: ObjectPath(verified: "/org/bluez/hci0"), interface: "org.freedesktop.DBus.Properties",
                member: "Get", arguments: [.string("org.bluez.Adapter1"), .string("Powered")], timeout: .seconds(20))
            #expect(await monitor.stop() == nil)
            #expect(await consumer.value == [.deviceFound(try BluetoothAddress.parse(sensorAddress))])
            #expect(try await Self.monitors(bus).isEmpty)
        }
    }

    @Test("Without --experimental: no monitor manager, a monitor and a passive scan are refused as not supported")
    func notOffered() async throws {
        try await withPrivateBus { bus in
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            #expect(central.advertisementMonitorUnavailability(adapter: adapter)?.contains("--experimental") == true)
            await #expect(throws: BluetoothError.self) {
                _ = try await AdvertisementMonitor.register(central: central, adapter: adapter, patterns: [.manufacturerData(0x0499)])
            }
            var options = ScanOptions()
            options.passive = [.manufacturerData(0x0499)]
            do {
                _ = try await central.startScan(adapter: adapter, options: options)
                Issue.record("a passive scan started without a monitor manager")
            } catch {
                guard case .notSupported? = error as? BluetoothError else { return #expect(Bool(false), "\(error)") }
            }
            #expect(try await bus.callCount(Self.adapter, "RegisterMonitor") == 0)
        }
    }

    @Test("A monitor bluetoothd releases (RSSI timeouts it refuses): register fails, and the application it kept is unregistered")
    func releasedMonitorUnregistered() async throws {
        try await withPrivateBus(experimental: true) { bus in
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            // bluetoothd 5.66 takes RSSI timeouts of 1 to 300 s: 0 gets the monitor released
            let rssi = AdvertisementMonitorRSSI(high: -50, highTimeout: 0, low: -70, lowTimeout: 5)
            await #expect(throws: BluetoothError.self) {
                _ = try await AdvertisementMonitor.register(
                    central: central, adapter: adapter, patterns: [.serviceData(BluetoothUUID(uint16: 0xFCD2))], rssi: rssi)
            }
            #expect(try await bus.callCount(Self.adapter, "UnregisterMonitor") == 1)
            #expect(try await Self.monitors(bus).isEmpty)
        }
    }

    @Test("A pattern beyond 31 bytes or without bytes is refused before it reaches bluetoothd")
    func badPatterns() {
        #expect(throws: BluetoothError.self) { _ = try AdvertisementPattern(adType: 0x16, offset: 30, bytes: [1, 2]) }
        #expect(throws: BluetoothError.self) { _ = try AdvertisementPattern(adType: 0x16, bytes: []) }
        #expect(AdvertisementPattern.serviceData(BluetoothUUID(uint16: 0xFCD2)).bytes == [0xd2, 0xfc])
        #expect(AdvertisementPattern.manufacturerData(0x0499) == (try? AdvertisementPattern(adType: 0xff, bytes: [0x99, 0x04])))
    }

    @Test("A passive scan: each change of a matching device's advertisement, no StartDiscovery; stop() unregisters")
    func passiveScan() async throws {
        try await withPrivateBus(experimental: true) { bus in
            try await bus.addAdvertiser("hci0", sensorAddress, bthome(2000))
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            var options = ScanOptions()
            options.passive = SensorFormat.bthome.advertisementPatterns
            options.duplicates = true
            options.decodesSensors = true
            let session = try await central.startScan(adapter: adapter, options: options)
            let consumer = Task { () -> [Double] in
                var temperatures: [Double] = []
                do {
                    for try await discovery in session.discoveries {
                        if case .success(let reading)? = discovery.sensor, case .number(let t)? = reading[.temperature] {
                            temperatures.append(t)
                            if temperatures.count == 3 { break }
                        }
                    }
                } catch {}
                return temperatures
            }
            #expect(try await bus.eventually { try await Self.monitors(bus).first?.hasSuffix(" 1") == true })
            try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2010))
            try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2020))
            let seen = await Deadline(after: .seconds(20)).run { await consumer.value }
            #expect(seen == [20.0, 20.1, 20.2])
            #expect(try await bus.callCount(Self.adapter, "StartDiscovery") == 0)
            try await session.stop()
            #expect(try await Self.monitors(bus).isEmpty)
            #expect(try await bus.callCount(Self.adapter, "StopDiscovery") == 0)
        }
    }

    /// A gateway config naming every sensor format (the 16 patterns), in `state`.
    static func everyFormatConfig(_ state: String) throws -> String {
        let path = state + "/formats.json"
        let names = SensorFormat.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        try #"{"advertisements": {"sensor_formats": [\#(names)]}}"#.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    @Test("gateway, --scan auto on bluetoothd 5.66 -E with the sensor formats: passive, said at start, BTHome readings published, nothing registered after SIGTERM")
    func gatewayScansPassively() async throws {
        try await GatewayTests().withScene(brokerUp: true, experimental: true) { bus, broker, reader, state in
            try await bus.addAdvertiser("hci0", Self.plain, [.addressType("public"), .rssi(-50), .name("plain")])
            let gateway = try bus.startBluectl(["gateway", "--broker", broker.url, "--id", "quiet", "--config", try Self.everyFormatConfig(state)],
                                               environment: ["STATE_DIRECTORY": state])
            #expect(await gateway.waitForStderr(timeout: .seconds(20)) {
                $0.contains("scanning hci0 passively (AdvertisementMonitor1): bluetoothd 5.66 offers advertisement monitors")
            }, "\(gateway.stderr)")
            #expect(gateway.stderr.contains("no scan responses"), "\(gateway.stderr)")
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "quiet") == [20.0] }, "\(reader.messages) \(gateway.stderr)")
            try await bus.updateAdvertiser("hci0", sensorAddress, bthome(2010))
            #expect(await reader.wait(timeout: .seconds(20)) { temperatures($0, gateway: "quiet") == [20.0, 20.1] }, "\(reader.messages)")
            #expect(try await Self.monitors(bus).count == 1)
            #expect(try await bus.callCount(Self.adapter, "StartDiscovery") == 0)
            gateway.signal(SIGTERM)
            let result = await gateway.wait(timeout: .seconds(10))
            #expect(result.exitCode == 143, "\(result)")
            // Nothing left registered in bluetoothd; a device in no sensor format was not heard.
            #expect(try await Self.monitors(bus).isEmpty)
            #expect(try await bus.callCount(Self.adapter, "UnregisterMonitor") == 1)
            #expect(!reader.messages.map(\.topic).contains("bluectl/quiet/devices/\(Self.plain)"))
        }
    }

    @Test("gateway --scan passive without --experimental: exit 77, the reason on one line, nothing registered")
    func gatewayPassiveRefused() async throws {
        try await withPrivateBus { bus in
            let state = try stateFolder()
            defer { try? FileManager.default.removeItem(atPath: state) }
            let gateway = try bus.startBluectl(["gateway", "--broker", "mqtt://127.0.0.1:1", "--id", "none", "--scan", "passive"],
                                               environment: ["STATE_DIRECTORY": state])
            let result = await gateway.wait(timeout: .seconds(20))
            #expect(result.exitCode == 77, "\(result)")
            #expect(gateway.stderr.contains("hci0 has no AdvertisementMonitorManager1 (bluetoothd 5.66 offers it only with --experimental)"),
                    "\(gateway.stderr)")
            #expect(try await bus.discoverySessions().isEmpty)
            #expect(try await bus.callCount(Self.adapter, "RegisterMonitor") == 0)
        }
    }

    @Test("gateway: active without --experimental, with --scan active, and with no services or sensor formats in the config, saying why")
    func gatewayScansActively() async throws {
        for (experimental, arguments, reason) in [(false, [String](), "no AdvertisementMonitorManager1 (bluetoothd 5.66 offers it only with --experimental)"),
                                                  (true, ["--scan", "active"], "--scan active"),
                                                  (true, [], "passive scanning is offered, but the config admits every advertisement")] {
            try await withPrivateBus(experimental: experimental) { bus in
                let state = try stateFolder()
                defer { try? FileManager.default.removeItem(atPath: state) }
                // no broker: the scan starts all the same
                let gateway = try bus.startBluectl(["gateway", "--broker", "mqtt://127.0.0.1:1", "--id", "loud"] + arguments,
                                                   environment: ["STATE_DIRECTORY": state])
                #expect(await gateway.waitForStderr(timeout: .seconds(20)) { $0.contains("scanning hci0 actively (StartDiscovery, duplicates on): ") },
                        "\(gateway.stderr)")
                #expect(gateway.stderr.contains(reason), "\(gateway.stderr)")
                #expect(try await bus.discoverySessions().count == 1)
                gateway.signal(SIGTERM)
                _ = await gateway.wait(timeout: .seconds(10))
                #expect(try await Self.monitors(bus).isEmpty)
            }
        }
    }

    @Test("gateway, --scan auto: a monitor bluetoothd refuses at start leaves it scanning actively, saying why (it did not ask for passive)")
    func gatewayAutoFallsBackToActive() async throws {
        try await withPrivateBus(experimental: true) { bus in
            let state = try stateFolder()
            defer { try? FileManager.default.removeItem(atPath: state) }
            try await bus.injectError(Self.adapter, "RegisterMonitor", "org.bluez.Error.Failed", "Failed")
            let gateway = try bus.startBluectl(["gateway", "--broker", "mqtt://127.0.0.1:1", "--id", "fallback", "--config", try Self.everyFormatConfig(state)],
                                               environment: ["STATE_DIRECTORY": state])
            #expect(await gateway.waitForStderr(timeout: .seconds(20)) {
                $0.contains("scanning hci0 actively (StartDiscovery, duplicates on): passive scanning failed at start (")
            }, "\(gateway.stderr)")
            #expect(try await bus.callCount(Self.adapter, "RegisterMonitor") == 1)
            #expect(try await bus.discoverySessions().count == 1)
            gateway.signal(SIGTERM)
            #expect(await gateway.wait(timeout: .seconds(10)).exitCode == 143, "\(gateway.stderr)")
            #expect(try await Self.monitors(bus).isEmpty)
        }
    }
}
