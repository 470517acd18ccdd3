// End to end: scan's sensor decoding (docs/sensors.md, docs/output.md "sensor"), the keys
// files and their refusals, against the BlueZ stand-in on a private bus.

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

private let bthomeUUID = "0000fcd2-0000-1000-8000-00805f9b34fb"
/// bthome.io/format's example: 25.00 °C, 50.55 %.
private let plainFrame: [UInt8] = [0x40, 0x02, 0xC4, 0x09, 0x03, 0xBF, 0x13]
/// bthome.io/encryption's example, for 54:48:E6:8F:80:A5 with the key below.
private let encryptedAddress = "54:48:E6:8F:80:A5"
private let encryptedFrame: [UInt8] = [0x41, 0xE4, 0x45, 0xF3, 0xC9, 0x96, 0x2B, 0x33, 0x22, 0x11, 0x00, 0x6C, 0x7C, 0x45, 0x19]
private let key = "231d39c1d7cc1ab1aee224cd096db932"
private let plainAddress = "A4:C1:38:00:00:01"

private func sensorAdvertiser(_ frame: [UInt8], name: String = "DIY-sensor") -> [AdField] {
    [.addressType("public"), .rssi(-60), .name(name), .flags([0x06]), .serviceData(["fcd2": frame])]
}

/// A folder of its own with `keys.json` holding `text`, of `mode`; removed by the caller.
private func keysFolder(_ text: String, mode: mode_t = 0o600) throws -> (folder: String, file: String) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-keys-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder + "/bluectl", withIntermediateDirectories: true)
    let file = folder + "/bluectl/keys.json"
    try text.write(toFile: file, atomically: false, encoding: .utf8)
    #expect(chmod(file, mode) == 0)
    return (folder, file)
}

@Suite("scan decodes sensors; keys files", .timeLimit(.minutes(3)))
struct SensorScanTests {
    @Test("scan --json: a BTHome frame becomes `sensor` beside its hex; the text line shows the summary")
    func plain() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", plainAddress, sensorAdvertiser(plainFrame))
            let (folder, _) = try keysFolder("{}")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let environment = ["XDG_CONFIG_HOME": folder]
            let r = try await bus.runBluectl(["scan", "--json", "--timeout", "2"], environment: environment)
            #expect(r.exitCode == 0, "\(r)")
            let event = try #require(try r.jsonLines().first { $0["address"] == .string(plainAddress) })
            #expect(event["sensor"] == .object(["format": .string("bthome"), "encrypted": .bool(false),
                                               "temperature_c": .int(25), "humidity_percent": .double(50.55)]), "\(r)")
            #expect(event["sensor_error"] == nil, "\(r)")
            #expect(event["service_data"] == .object([bthomeUUID: .string("4002c40903bf13")]), "\(r)")
            let text = try await bus.runBluectl(["scan", "--timeout", "2"], environment: environment)
            #expect(text.stdoutLines.contains { $0.contains("\"DIY-sensor\"  sensor 25 °C 50.55 %") }, "\(text.stdoutLines)")
        }
    }

    @Test("Encrypted: decoded with --keys or the default keys file; without a key, sensor_error no_key and the hex")
    func encrypted() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", encryptedAddress, sensorAdvertiser(encryptedFrame))
            let (folder, file) = try keysFolder("{\"\(encryptedAddress)\": \"\(key)\"}")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let (empty, _) = try keysFolder("{}")
            defer { try? FileManager.default.removeItem(atPath: empty) }
            let expected: JSONValue = .object(["format": .string("bthome"), "encrypted": .bool(true), "counter": .int(1_122_867),
                                               "temperature_c": .double(25.06), "humidity_percent": .double(50.55)])
            let explicit = try await bus.runBluectl(["scan", "--json", "--timeout", "2", "--keys", file], environment: ["XDG_CONFIG_HOME": empty])
            #expect(explicit.exitCode == 0, "\(explicit)")
            #expect(try explicit.jsonLines().first?["sensor"] == expected, "\(explicit)")
            let byDefault = try await bus.runBluectl(["scan", "--json", "--timeout", "2"], environment: ["XDG_CONFIG_HOME": folder])
            #expect(try byDefault.jsonLines().first?["sensor"] == expected, "\(byDefault)")
            let none = try await bus.runBluectl(["scan", "--json", "--timeout", "2"], environment: ["XDG_CONFIG_HOME": empty])
            let event = try #require(try none.jsonLines().first)
            #expect(event["sensor"] == nil, "\(none)")
            #expect(event["sensor_error"] == .object(["format": .string("bthome"), "kind": .string("no_key"),
                                                      "reason": .string("encrypted, and no key for \(encryptedAddress) (--keys)")]), "\(none)")
            #expect(event["service_data"] == .object([bthomeUUID: .string("41e445f3c9962b332211006c7c4519")]), "\(none)")
        }
    }

    @Test("A keys file others may read, or malformed, is refused (exit 78) with one line naming it; a missing --keys file is 64")
    func refusedKeysFiles() async throws {
        try await withPrivateBus { bus in
            let (open, openFile) = try keysFolder("{\"\(encryptedAddress)\": \"\(key)\"}", mode: 0o644)
            defer { try? FileManager.default.removeItem(atPath: open) }
            let readable = try await bus.runBluectl(["scan", "--timeout", "1", "--keys", openFile])
            #expect(readable.exitCode == 78, "\(readable)")
            #expect(readable.stderr == "bluectl: the keys file \(openFile) may be read by others than its owner (mode 644): not used; chmod 600 \(openFile)\n",
                    "\(readable)")
            #expect(readable.stdout.isEmpty, "\(readable)")
            let byDefault = try await bus.runBluectl(["scan", "--timeout", "1"], environment: ["XDG_CONFIG_HOME": open])
            #expect(byDefault.exitCode == 78, "\(byDefault)")
            let (bad, badFile) = try keysFolder("{\"\(encryptedAddress)\": \"231d39\"}")
            defer { try? FileManager.default.removeItem(atPath: bad) }
            let malformed = try await bus.runBluectl(["scan", "--timeout", "1", "--keys", badFile])
            #expect(malformed.exitCode == 78, "\(malformed)")
            #expect(malformed.stderr == "bluectl: the keys file \(badFile): key of \(encryptedAddress): the key is not 32 hex digits (16 bytes)\n",
                    "\(malformed)")
            let (notJSON, notJSONFile) = try keysFolder("{\"A4:C1\"")
            defer { try? FileManager.default.removeItem(atPath: notJSON) }
            let broken = try await bus.runBluectl(["scan", "--timeout", "1", "--keys", notJSONFile])
            #expect(broken.exitCode == 78, "\(broken)")
            #expect(broken.stderr.hasPrefix("bluectl: the keys file \(notJSONFile) is not valid JSON"), "\(broken)")
            let missing = try await bus.runBluectl(["scan", "--timeout", "1", "--keys", "/nonexistent/keys.json"])
            #expect(missing.exitCode == 64, "\(missing)")
            #expect(missing.stderr == "bluectl: cannot read the keys file /nonexistent/keys.json: No such file or directory\n", "\(missing)")
        }
    }

    @Test("scan --sensors: only the devices with a sensor frame; --count counts them")
    func sensorsOnly() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "C0:00:00:00:00:09", [.addressType("random"), .rssi(-40), .name("not-a-sensor"),
                                                                     .serviceData(["9999": [1, 2]])])
            try await bus.addAdvertiser("hci0", plainAddress, sensorAdvertiser(plainFrame))
            let r = try await bus.runBluectl(["scan", "--json", "--sensors", "--count", "1", "--timeout", "5"],
                                             environment: ["XDG_CONFIG_HOME": "/nonexistent"])
            #expect(r.exitCode == 0, "\(r)")
            let events = try r.jsonLines()
            #expect(events.map { $0["address"] } == [.string(plainAddress)], "\(r)")
        }
    }

    @Test("scan --duplicates: each new frame is decoded again")
    func updates() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", plainAddress, sensorAdvertiser(plainFrame))
            let scan = try bus.startBluectl(["scan", "--json", "--duplicates", "--sensors", "--timeout", "10"],
                                            environment: ["XDG_CONFIG_HOME": "/nonexistent"])
            #expect(await scan.waitForStdout(timeout: .seconds(8)) { $0.contains("temperature_c") }, "\(scan.stderr)")
            try await bus.updateAdvertiser("hci0", plainAddress, [.serviceData(["fcd2": [0x40, 0x00, 0x07, 0x02, 0x60, 0xF0]])])
            #expect(await scan.waitForStdout(timeout: .seconds(8)) { $0.contains("-40") }, "\(scan.stdout)")
            scan.signal(SIGINT)
            let r = await scan.wait(timeout: .seconds(10))
            let temperatures = try r.jsonLines().compactMap { $0["sensor"]?["temperature_c"] }
            #expect(temperatures.first == .int(25), "\(r)")
            #expect(temperatures.last == .int(-40), "\(r)")
            #expect(try r.jsonLines().last?["sensor"]?["packet_id"] == .int(7), "\(r)")
        }
    }
}
