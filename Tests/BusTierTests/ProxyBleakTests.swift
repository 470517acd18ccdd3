// A plain Bleak program through `bluectl proxy` against the stand-in, set up
// as Home Assistant sets it up: habluetooth's manager with bleak-esphome's
// remote scanner registered (Tests/ProxyClient/bleak_client.py), then
// bleak.BleakScanner and bleak.BleakClient: the device found with its
// advertisement data, services, a read, a write read back, a notification.

import Foundation
import Testing

@Suite(.serialized) struct ProxyBleakTests {
    static let client = ReferenceDecoderTests.repository.appendingPathComponent("Tests/ProxyClient/bleak_client.py").path

    /// The device heard again with RSSI `heard`, which Bleak sees as
    /// `seen`: 127 is HCI's "not available" (the lab's controllers report
    /// no strength), forwarded as the weakest reading rather than dropped.
    @Test(arguments: [(-50, -50), (127, -127)])
    func bleakThroughTheProxy(heard: Int, seen: Int) async throws {
        try await withPrivateBus { bus in
            let (proxy, port) = try await ProxyTests.startProxy(bus)
            let g = try await HeartRateGatt.install(bus)
            let child = try bus.spawn(try ProxyTests.python(), [Self.client, "run", "127.0.0.1", port, heartRateAddress])
            guard await child.waitForStdout(timeout: .seconds(60), { $0.contains("\"subscribed\": true") }) else {
                throw BusTierError("bleak_client.py did not register the proxy: \(await child.wait(timeout: .seconds(2))) \(proxy.stderr)")
            }
            // The device heard again (a new RSSI) after the scanner subscribed: the proxy forwards what BlueZ
            // signals from then on, as an ESP32 forwards what its radio hears.
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(Int16(heard))])
            guard await child.waitForStdout(timeout: .seconds(90), { $0.contains("\"notifying\": true") }) else {
                throw BusTierError("bleak_client.py did not start notifications: \(await child.wait(timeout: .seconds(2))) \(proxy.stderr)")
            }
            #expect(try await bus.emitNotification(g.hrm, [0x06, 0x4b]) == 1, "one StartNotify session")
            let result = await child.wait(timeout: .seconds(60))
            #expect(result.termination == .exited(0), "\(result) \(proxy.stderr)")
            let lines = try result.jsonLines()
            let line = try #require(lines.last)
            // The scanner's source is the adapter's address, as DeviceInfoResponse gives it.
            let source = try #require(lines.first?["source"]?.string)
            #expect(source == AdapterSpec.hci0.address, "\(lines)")
            // Found by address through bleak.BleakScanner, with the stand-in's advertisement.
            #expect(line["address"]?.string == heartRateAddress)
            #expect(line["source"]?.string == source, "the BLEDevice came from the proxy's scanner")
            #expect(line["name"]?.string == "HeartRate")
            #expect(line["rssi"]?.int == seen)
            #expect(line["service_uuids"]?.array?.compactMap(\.string) == ["0000180d-0000-1000-8000-00805f9b34fb",
                                                                           "0000180f-0000-1000-8000-00805f9b34fb"])
            #expect(line["manufacturer_data"]?["65535"]?.string == "00010203")
            #expect(line["service_data"]?["00009999-0000-1000-8000-00805f9b34fb"]?.string == "0001020304")
            #expect(line["tx_power"]?.int == 4)
            // bleak.BleakClient went through bleak-esphome's backend.
            #expect(line["backend"]?.string == "ESPHomeClient")
            #expect(line["mtu"]?.int == 247, "BlueZ's MTU of the link")
            let services = line["services"]?.array ?? []
            #expect(services.compactMap { $0["uuid"]?.string } == ["0000180d-0000-1000-8000-00805f9b34fb",
                                                                  "0000180f-0000-1000-8000-00805f9b34fb", HeartRateGatt.customService])
            let hr = services.first?["characteristics"]?.array ?? []
            #expect(hr.compactMap { $0["uuid"]?.string }.map { String($0.prefix(8)) } == ["00002a37", "00002a38", "00002a39"])
            #expect(hr.first?["properties"]?.array?.compactMap(\.string) == ["notify"])
            #expect(hr.first?["descriptors"]?[0]?["uuid"]?.string == "00002902-0000-1000-8000-00805f9b34fb")
            // The read, the write (reaching BlueZ) and its read-back, the notification.
            #expect(line["battery"]?.string == "5c")
            #expect(line["written"]?.string == "627965", "\"bye\"")
            #expect(try await bus.gattWrites(g.custom).map(\.hex) == ["627965"])
            #expect(line["notified"]?["uuid"]?.string == "00002a37-0000-1000-8000-00805f9b34fb")
            #expect(line["notified"]?["data"]?.string == "064b")
            // bleak-esphome finds the CCCD by its UUID and writes it after StartNotify: the proxy turns that into the
            // notify session, and no write reaches BlueZ (whose sessions own the descriptor).
            #expect(try await bus.callCount(g.hrm, "StartNotify") == 1)
            #expect(try await bus.gattWrites(g.cccd).isEmpty)
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(false))
            await ProxyGattTests.stop(proxy)
            #expect(!proxy.stderr.contains("[warning]"), "\(proxy.stderr)")
        }
    }
}
