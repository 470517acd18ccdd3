// End to end: `bluectl advertise --bthome` on one adapter of the stand-in, heard and decoded
// by `bluectl scan` on another; values changed on stdin (docs/sensors.md, docs/peripheral.md).

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

private let advertiserAddress = "00:AA:01:00:00:23"
private let key = "231d39c1d7cc1ab1aee224cd096db932"
private let scannerAdapter = AdapterSpec("hci1", address: "00:AA:01:00:00:24", alias: "bus-tier-scanner")

@Suite("advertise --bthome: a BTHome sensor another adapter decodes", .timeLimit(.minutes(3)))
struct BTHomeAdvertiseTests {
    @Test("Plain: the values reach a scanner decoded; a stdin line changes them and advances the packet id")
    func plain() async throws {
        try await withPrivateBus(adapters: [.hci0, scannerAdapter]) { bus in
            let ad = try bus.startBluectl(["advertise", "--adapter", "hci0", "--bthome", "temperature=21.5", "--bthome", "humidity=40",
                                           "--json", "--duration", "40"], input: true)
            #expect(await ad.waitForStdoutLines(1, timeout: .seconds(15)), "\(ad.stderr)")
            let first = try JSONValue.parse(ad.stdout.split(separator: "\n").first.map(String.init) ?? "")
            #expect(first["service_data"] == .object(["0000fcd2-0000-1000-8000-00805f9b34fb": .string("40000002660803a00f")]), "\(first)")
            #expect(first["sensor"] == .object(["format": .string("bthome"), "encrypted": .bool(false), "packet_id": .int(0),
                                               "temperature_c": .double(21.5), "humidity_percent": .int(40)]), "\(first)")
            let scan = try bus.startBluectl(["scan", "--adapter", "hci1", "--json", "--duplicates", "--sensors", "--timeout", "30"],
                                            environment: ["XDG_CONFIG_HOME": "/nonexistent"])
            #expect(await scan.waitForStdout(timeout: .seconds(10)) { $0.contains("\"temperature_c\":21.5") }, "\(scan.stdout)\(scan.stderr)")
            #expect(ad.writeInput("{\"temperature\": 22.25, \"door\": true}\n"))
            #expect(await ad.waitForStdout(timeout: .seconds(10)) { $0.contains("\"updated\"") }, "\(ad.stdout)\(ad.stderr)")
            #expect(await scan.waitForStdout(timeout: .seconds(10)) { $0.contains("22.25") }, "\(scan.stdout)")
            #expect(ad.writeInput("{\"temperature\": \"warm\"}\n"))
            // too long for the advertisement: refused, and the values stay as they were
            #expect(ad.writeInput("{\"text\": \"\(String(repeating: "x", count: 20))\"}\n"))
            #expect(ad.writeInput("{\"button\": \"press\"}\n"))
            #expect(await scan.waitForStdout(timeout: .seconds(10)) { $0.contains("\"button\":\"press\"") }, "\(scan.stdout)")
            scan.signal(SIGINT)
            let scanned = await scan.wait(timeout: .seconds(10))
            let last = try #require(try scanned.jsonLines().last?["sensor"])
            #expect(last == .object(["format": .string("bthome"), "encrypted": .bool(false), "packet_id": .int(2),
                                     "temperature_c": .double(22.25), "humidity_percent": .int(40), "door": .bool(true),
                                     "button": .string("press")]), "\(scanned)")
            ad.signal(SIGTERM)
            let advertised = await ad.wait(timeout: .seconds(10))
            #expect(advertised.termination == .exited(143), "\(advertised)")
            let errors = advertised.stderr.split(separator: "\n").map(String.init)
            #expect(errors.count == 2, "\(advertised)")
            #expect(errors.first == "bluectl: stdin line 2: temperature takes a number, not \"warm\"", "\(advertised)")
            #expect(errors.last?.hasPrefix("bluectl: stdin line 3: advertisement of ") == true, "\(advertised)")
            #expect(try await bus.registered("RegisteredAdvertisements").isEmpty)
        }
    }

    @Test("Encrypted with --bthome-key: a scanner with the key decodes it, the counter rising; one without reports no_key")
    func encrypted() async throws {
        try await withPrivateBus(adapters: [.hci0, scannerAdapter]) { bus in
            let keys = try bus.temporaryFile("{\"\(advertiserAddress)\": \"\(key)\"}", name: "keys.json")
            #expect(chmod(keys, 0o600) == 0)
            let ad = try bus.startBluectl(["advertise", "--adapter", "hci0", "--bthome", "temperature=-7.5", "--bthome-key", key,
                                           "--json", "--duration", "40"], input: true)
            #expect(await ad.waitForStdoutLines(1, timeout: .seconds(15)), "\(ad.stderr)")
            let first = try JSONValue.parse(ad.stdout.split(separator: "\n").first.map(String.init) ?? "")
            let counter = try #require(first["sensor"]?["counter"]?.int, "\(first)")
            let scan = try bus.startBluectl(["scan", "--adapter", "hci1", "--json", "--duplicates", "--sensors", "--keys", keys,
                                             "--timeout", "30"])
            #expect(await scan.waitForStdout(timeout: .seconds(10)) { $0.contains("-7.5") }, "\(scan.stdout)\(scan.stderr)")
            #expect(ad.writeInput("{\"temperature\": -8}\n"))
            #expect(await scan.waitForStdout(timeout: .seconds(10)) { $0.contains("\"temperature_c\":-8") }, "\(scan.stdout)")
            scan.signal(SIGINT)
            let sensors = try await scan.wait(timeout: .seconds(10)).jsonLines().compactMap { $0["sensor"] }
            #expect(sensors.first?["encrypted"] == .bool(true))
            #expect(sensors.first?["counter"] == .int(Int64(counter)))
            #expect(sensors.last?["counter"] == .int(Int64(counter + 1)), "\(sensors)")
            let keyless = try await bus.runBluectl(["scan", "--adapter", "hci1", "--json", "--sensors", "--timeout", "3"],
                                                   environment: ["XDG_CONFIG_HOME": "/nonexistent"])
            #expect(try keyless.jsonLines().first?["sensor_error"]?["kind"] == .string("no_key"), "\(keyless)")
            ad.signal(SIGTERM)
            #expect(await ad.wait(timeout: .seconds(10)).termination == .exited(143))
        }
    }

    @Test("Refused before anything is registered: unknown names, values, keys")
    func refusals() async throws {
        try await withPrivateBus { bus in
            expectCleanFailure(try await bus.runBluectl(["advertise", "--bthome", "warmth=1"]), 64,
                               "warmth is not a BTHome v2 object")
            expectCleanFailure(try await bus.runBluectl(["advertise", "--bthome", "temperature"]), 64, "expected NAME=VALUE")
            expectCleanFailure(try await bus.runBluectl(["advertise", "--bthome", "door=maybe"]), 64, "door takes true or false")
            expectCleanFailure(try await bus.runBluectl(["advertise", "--bthome", "temperature=1", "--bthome-key", "0102"]), 64,
                               "expected 32 hex digits")
            expectCleanFailure(try await bus.runBluectl(["advertise", "--bthome-key", key]), 64, "--bthome-key needs --bthome")
            expectCleanFailure(try await bus.runBluectl(["advertise", "--bthome", "text=\(String(repeating: "x", count: 30))"]), 64,
                               "longer than the adapter's 31")
            #expect(try await bus.registered("RegisteredAdvertisements").isEmpty)
        }
    }
}
