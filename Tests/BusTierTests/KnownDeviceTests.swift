// End to end: devices, pair, unpair/remove, trust/untrust, block/unblock and
// adapter, the real bluectl binary against the BlueZ stand-in. Contract:
// README "Known devices and their lifecycle", "Exit codes". Assertions are on
// bluectl's output and on what the stand-in holds afterwards.

import Foundation
import Testing

private let D = heartRateAddress
private let device = "org.bluez.Device1"

@Suite("bluectl devices, pairing lifecycle and adapter settings, end to end", .timeLimit(.minutes(3)))
struct KnownDeviceTests {

    @Test("devices: nothing known, then the connected device with every field; each filter admits or leaves it out")
    func devicesAndFilters() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let none = try await bus.runBluectl(["devices"])
            #expect(none.exitCode == 0 && none.stdout.isEmpty, "\(none)")
            #expect(none.stderrLines == ["bluectl: no devices known to BlueZ"], "\(none)")
            let noneJSON = try await bus.runBluectl(["devices", "--json", "--connected"])
            #expect(noneJSON.exitCode == 0 && noneJSON.stdout.isEmpty && noneJSON.stderr.isEmpty, "\(noneJSON)")

            let c = try await bus.runBluectl(["connect", D])
            #expect(c.exitCode == 0, "\(c)")
            let all = try await bus.runBluectl(["devices", "--json"])
            #expect(all.exitCode == 0, "\(all)")
            let line = try #require(try all.jsonLines().first)
            #expect(try all.jsonLines().count == 1)
            #expect(line["adapter"] == .string("hci0"))
            #expect(line["address"] == .string(D))
            #expect(line["address_type"] == .string("public"))
            #expect(line["name"] == .string("HeartRate"))
            #expect(line["rssi"] == nil, "the stand-in reports no RSSI once connected")
            #expect(line["connected"] == .bool(true))
            #expect(line["paired"] == .bool(false))
            #expect(line["bonded"] == .bool(false))
            #expect(line["trusted"] == .bool(false))
            #expect(line["blocked"] == .bool(false))
            #expect(line["services_resolved"] == .bool(true))
            #expect(line["path"] == .string(g.device))
            let text = try await bus.runBluectl(["devices"])
            #expect(text.stdoutLines == ["\(D)  public  - dBm  \"HeartRate\"  connected  resolved  services 180d (Heart Rate),180f (Battery Service)"],
                    "\(text)")

            for (filters, admitted) in [
                (["--connected"], true), (["--paired"], false), (["--bonded"], false), (["--trusted"], false),
                (["--service", "heart_rate"], true), (["--service", "1234", "--service", "180f"], true),
                (["--service", "1234"], false), (["--connected", "--service", "180d"], true),
                (["--adapter", "hci0"], true),
                // only in the resolved database, not advertised
                (["--service", HeartRateGatt.customService], true),
            ] {
                let r = try await bus.runBluectl(["devices", "--json"] + filters)
                #expect(r.exitCode == 0, "\(r)")
                #expect(try r.jsonLines().count == (admitted ? 1 : 0), "\(filters): \(r)")
            }
            let filteredOut = try await bus.runBluectl(["devices", "--paired"])
            #expect(filteredOut.stderrLines == ["bluectl: no matching devices known to BlueZ"], "\(filteredOut)")
            expectCleanFailure(try await bus.runBluectl(["devices", "--service", "zz"]), 64, "invalid --service")
            expectCleanFailure(try await bus.runBluectl(["devices", "--adapter", "hci7"]), 69, "adapter hci7 not found")
        }
    }

    @Test("pair: connects, pairs, disconnects the connection it made; again: already paired, exit 0; a refusal: 77")
    func pair() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let p = try await bus.runBluectl(["pair", D])
            #expect(p.exitCode == 0, "\(p)")
            #expect(p.stdoutLines == ["paired \(D) (bonded)"], "\(p)")
            #expect(try await bus.property(g.device, device, "Paired")["data"] == .bool(true))
            #expect(try await bus.property(g.device, device, "Connected")["data"] == .bool(false), "the connection pair made is closed")
            let again = try await bus.runBluectl(["pair", D, "--json"])
            #expect(again.exitCode == 0, "\(again)")
            let line = try #require(try again.jsonLines().first)
            #expect(line["device"] == .string(D))
            #expect(line["paired"] == .bool(true))
            #expect(line["already_paired"] == .bool(true))
            #expect(line["bonded"] == .bool(true))
            #expect(try await bus.callCount(g.device, "Pair") == 1, "already paired: no second Pair")
            let known = try await bus.runBluectl(["devices", "--bonded", "--json"])
            #expect(try known.jsonLines().map { $0["address"] } == [.string(D)], "\(known)")
        }
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            _ = try await bus.runBluectl(["connect", D])
            try await bus.injectError(g.device, "Pair", "org.bluez.Error.AuthenticationRejected", "Authentication Rejected")
            expectCleanFailure(try await bus.runBluectl(["pair", D]), 77, "Authentication Rejected")
        }
    }

    @Test("trust, untrust, block, unblock: set the flag, say so; again: unchanged, exit 0")
    func flags() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            _ = try await bus.runBluectl(["connect", D])
            for (command, property, on, changedText, unchangedText) in [
                ("trust", "Trusted", true, "trusted \(D)", "\(D) already trusted"),
                ("untrust", "Trusted", false, "untrusted \(D)", "\(D) was not trusted"),
                ("block", "Blocked", true, "blocked \(D)", "\(D) already blocked"),
                ("unblock", "Blocked", false, "unblocked \(D)", "\(D) was not blocked"),
            ] {
                let r = try await bus.runBluectl([command, D])
                #expect(r.exitCode == 0 && r.stdoutLines == [changedText], "\(r)")
                #expect(try await bus.property(g.device, device, property)["data"] == .bool(on), "\(command)")
                let again = try await bus.runBluectl([command, D, "--json"])
                #expect(again.exitCode == 0, "\(again)")
                let line = try #require(try again.jsonLines().first)
                #expect(line[property.lowercased()] == .bool(on), "\(again)")
                #expect(line["changed"] == .bool(false), "\(again)")
                let text = try await bus.runBluectl([command, D])
                #expect(text.stdoutLines == [unchangedText], "\(text)")
                if command == "block" {
                    #expect(try await bus.property(g.device, device, "Connected")["data"] == .bool(false), "a blocked device is disconnected")
                }
                if command == "trust" {
                    let trusted = try await bus.runBluectl(["devices", "--trusted", "--json"])
                    #expect(try trusted.jsonLines().count == 1, "\(trusted)")
                }
            }
        }
    }

    @Test("unpair and its alias remove: RemoveDevice, the object is gone; a device BlueZ does not know: exit 0, no scan")
    func unpair() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            _ = try await bus.runBluectl(["pair", D])
            let r = try await bus.runBluectl(["unpair", D])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdoutLines == ["removed \(D) from hci0: its bond and cached GATT database are deleted"], "\(r)")
            #expect(try await bus.managedObjects()[g.device] == nil, "the device object is gone")
            for command in ["unpair", "remove"] {
                let again = try await bus.runBluectl([command, D, "--json"])
                #expect(again.exitCode == 0, "\(again)")
                #expect(again.stderrLines == ["bluectl: \(D) is not known to BlueZ on hci0: nothing to remove"], "\(again)")
                let line = try #require(try again.jsonLines().first)
                #expect(line["removed"] == .bool(false))
            }
            // the address without colons names the same device; no scan for a device to remove
            let bare = try await bus.runBluectl(["remove", D.replacingOccurrences(of: ":", with: "")])
            #expect(bare.exitCode == 0 && bare.stderrLines == ["bluectl: \(D) is not known to BlueZ on hci0: nothing to remove"], "\(bare)")
            #expect(try await bus.discoveryLog().filter { $0.event == "StartDiscovery" }.count == 1, "only pair's own scan")
        }
    }

    @Test("adapter: shows the adapter; sets alias, pairable, discoverable, power (on first, off last); refusals")
    func adapter() async throws {
        try await withPrivateBus { bus in
            let show = try await bus.runBluectl(["adapter", "--json"])
            #expect(show.exitCode == 0, "\(show)")
            #expect(try show.jsonLines().first?["adapter"] == .string("hci0"))
            let set = try await bus.runBluectl(["adapter", "hci0", "--alias", "Gateway 3", "--pairable", "off", "--discoverable", "on", "--json"])
            #expect(set.exitCode == 0, "\(set)")
            let line = try #require(try set.jsonLines().first)
            #expect(line["alias"] == .string("Gateway 3"))
            #expect(line["pairable"] == .bool(false))
            #expect(line["discoverable"] == .bool(true))
            #expect(try await bus.adapterProperty("hci0", "Alias") == .string("Gateway 3"))
            let off = try await bus.runBluectl(["adapter", "hci0", "--discoverable", "off", "--power", "off"])
            #expect(off.exitCode == 0, "\(off)")
            #expect(try await bus.adapterProperty("hci0", "Powered") == .bool(false))
            #expect(try await bus.adapterProperty("hci0", "Discoverable") == .bool(false))
            let offAgain = try await bus.runBluectl(["adapter", "hci0", "--power", "off", "--json"])
            #expect(offAgain.exitCode == 0, "\(offAgain)")
            #expect(try offAgain.jsonLines().first?["powered"] == .bool(false), "\(offAgain)")
            let on = try await bus.runBluectl(["adapter", "hci0", "--power", "on", "--alias", ""])
            #expect(on.exitCode == 0, "\(on)")
            #expect(try await bus.adapterProperty("hci0", "Powered") == .bool(true))
            #expect(try await bus.adapterProperty("hci0", "Alias") == (try await bus.adapterProperty("hci0", "Name")),
                    "an empty alias is the system's name again")
            expectCleanFailure(try await bus.runBluectl(["adapter", "hci9"]), 69, "adapter hci9 not found")
            expectCleanFailure(try await bus.runBluectl(["adapter", "usb0"]), 64, "invalid adapter name \"usb0\"")
            expectCleanFailure(try await bus.runBluectl(["adapter", "--power", "maybe"]), 64, "--power")
            expectCleanFailure(try await bus.runBluectl(["adapter", "--alias", "a\u{1B}b"]), 64, "invalid --alias")
        }
    }
}
