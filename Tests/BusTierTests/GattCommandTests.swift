// End to end: the device commands (connect, disconnect, info, discover,
// read, write, subscribe) of the real bluectl binary against the BlueZ
// stand-in's GATT objects. Contract: README "Talking to a device",
// "Device-command JSON", "Exit codes". Assertions are on bluectl's output
// and on what the stand-in recorded (its call log, the writes it received).

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The heart-rate peripheral's GATT database (StandInTests.heartRate advertising).
struct HeartRateGatt {
    var device = heartRatePath
    var hrService = ""
    var hrm = ""          // 2a37 notify
    var cccd = ""         // 2902 of 2a37
    var location = ""     // 2a38 read, 01
    var control = ""      // 2a39 write
    var battery = ""      // 2a19 read notify, 5c
    var custom = ""       // …def1 read write write-without-response, "Hello"

    static let customService = "12345678-1234-5678-1234-56789abcdef0"
    static let customUUID = "12345678-1234-5678-1234-56789abcdef1"

    /// Registers the advertiser and its database; bluectl finds it by scanning.
    static func install(_ bus: PrivateBus) async throws -> HeartRateGatt {
        var g = HeartRateGatt()
        try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
        g.hrService = try await bus.addGattService("hci0", heartRateAddress, uuid: "180d")
        g.hrm = try await bus.addGattCharacteristic(g.hrService, uuid: "2a37", flags: ["notify"], value: [0x00, 0x48])
        g.cccd = try await bus.addGattDescriptor(g.hrm, uuid: "2902", flags: ["read", "write"], value: [0x01, 0x00])
        g.location = try await bus.addGattCharacteristic(g.hrService, uuid: "2a38", flags: ["read"], value: [0x01])
        g.control = try await bus.addGattCharacteristic(g.hrService, uuid: "2a39", flags: ["write"], value: [])
        let bas = try await bus.addGattService("hci0", heartRateAddress, uuid: "180f")
        g.battery = try await bus.addGattCharacteristic(bas, uuid: "2a19", flags: ["read", "notify"], value: [0x5c])
        let svc = try await bus.addGattService("hci0", heartRateAddress, uuid: customService)
        g.custom = try await bus.addGattCharacteristic(svc, uuid: customUUID, flags: ["read", "write", "write-without-response"],
                                                       value: Array("Hello".utf8))
        return g
    }
}

/// One error line, no crash output, not killed by the harness.
func expectCleanFailure(_ r: ProcessResult, _ code: Int32, _ message: String,
                        sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!r.timedOut, "\(r)", sourceLocation: sourceLocation)
    #expect(r.termination == .exited(code), "\(r)", sourceLocation: sourceLocation)
    #expect(r.stderrLines.count == 1, "\(r)", sourceLocation: sourceLocation)
    #expect(r.stderr.hasPrefix("bluectl: "), "\(r)", sourceLocation: sourceLocation)
    #expect(r.stderr.contains(message), "expected \(message.debugDescription): \(r)", sourceLocation: sourceLocation)
    #expect(!r.stderr.contains("Fatal error") && !r.stderr.contains("Stack dump"), "\(r)", sourceLocation: sourceLocation)
}

@Suite("bluectl device commands against the stand-in's GATT objects", .timeLimit(.minutes(3)))
struct GattCommandTests {

    // MARK: connect, disconnect, info

    @Test("connect, connect again (already connected), info, disconnect, disconnect again")
    func connectInfoDisconnect() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let c = try await bus.runBluectl(["connect", heartRateAddress])
            #expect(c.exitCode == 0, "\(c)")
            #expect(c.stdoutLines == ["connected \(heartRateAddress) \"HeartRate\", 3 services"], "\(c)")
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(true))
            let again = try await bus.runBluectl(["connect", heartRateAddress, "--json"])
            #expect(again.exitCode == 0, "\(again)")
            let line = try #require(try again.jsonLines().first)
            #expect(line["already_connected"] == .bool(true))
            #expect(line["services"] == .int(3))
            #expect(line["mtu"] == .int(247))
            #expect(try await bus.callCount(g.device, "Connect") == 1)

            let info = try await bus.runBluectl(["info", heartRateAddress, "--json"])
            #expect(info.exitCode == 0, "\(info)")
            let i = try #require(try info.jsonLines().first)
            #expect(i["address"] == .string(heartRateAddress))
            #expect(i["connected"] == .bool(true))
            #expect(i["services_resolved"] == .bool(true))
            #expect(i["mtu"] == .int(247))
            #expect(Set(i["gatt_services"]?.strings ?? []) == [
                "0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb", HeartRateGatt.customService])
            let text = try await bus.runBluectl(["info", heartRateAddress])
            #expect(text.stdoutLines.contains("connected   yes"), "\(text)")
            #expect(text.stdoutLines.contains("mtu         247"), "\(text)")
            #expect(text.stdoutLines.contains("state       connected"), "the text shows what the JSON has: \(text)")

            let d = try await bus.runBluectl(["disconnect", heartRateAddress])
            #expect(d.exitCode == 0, "\(d)")
            #expect(d.stdoutLines == ["disconnected \(heartRateAddress)"])
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(false))
            let d2 = try await bus.runBluectl(["disconnect", heartRateAddress])
            #expect(d2.exitCode == 0, "\(d2)")
            #expect(d2.stdoutLines == ["\(heartRateAddress) was not connected"])
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)
            // info does not connect
            _ = try await bus.runBluectl(["info", heartRateAddress])
            #expect(try await bus.callCount(g.device, "Connect") == 1)
        }
    }

    @Test("a process that starts while the device is away gets the link's MTU once it connects (5.66 brings MTU back unsignalled)")
    func mtuAfterReconnect() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            #expect(try await bus.runBluectl(["connect", heartRateAddress]).exitCode == 0)
            #expect(try await bus.runBluectl(["disconnect", heartRateAddress]).exitCode == 0)
            // The cached characteristics stay, without MTU (5.66's characteristic_mtu_exists).
            let cached = try await bus.managedObjects().filter {
                $0.key.hasPrefix(g.device + "/") && $0.value["org.bluez.GattCharacteristic1"] != nil
            }
            #expect(!cached.isEmpty && cached.allSatisfy { $0.value["org.bluez.GattCharacteristic1"]?["MTU"] == nil }, "\(cached)")
            // A new process reads the tree now (no MTU), then connects: bluetoothd's MTU comes back without a signal.
            let c = try await bus.runBluectl(["connect", heartRateAddress, "--json"])
            #expect(c.exitCode == 0, "\(c)")
            let line = try #require(try c.jsonLines().first)
            #expect(line["mtu"] == .int(247), "the link's MTU, asked for: \(c)")
            #expect(try await bus.callCount(g.device, "Connect") == 2)
        }
    }

    // MARK: discover

    @Test("discover: text tree, --json per attribute, --service filter; disconnects the connection it made")
    func discover() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let r = try await bus.runBluectl(["discover", heartRateAddress])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdoutLines == [
                "service 180d (Heart Rate)  handle 0x000a",
                "  characteristic 2a37 (Heart Rate Measurement)  [notify]  handle 0x000b",
                "    descriptor 2902 (Client Characteristic Configuration)  handle 0x000d",
                "  characteristic 2a38 (Body Sensor Location)  [read]  handle 0x000e",
                "  characteristic 2a39 (Heart Rate Control Point)  [write]  handle 0x0010",
                "service 180f (Battery Service)  handle 0x0012",
                "  characteristic 2a19 (Battery Level)  [read, notify]  handle 0x0013",
                "service \(HeartRateGatt.customService)  handle 0x0015",
                "  characteristic \(HeartRateGatt.customUUID)  [read, write, write-without-response]  handle 0x0016",
            ], "\(r)")
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)

            let j = try await bus.runBluectl(["discover", heartRateAddress, "--json", "--service", "battery_service"])
            #expect(j.exitCode == 0, "\(j)")
            let lines = try j.jsonLines()
            #expect(lines.map { $0["type"]?.string ?? "" } == ["service", "characteristic"])
            #expect(lines[0]["uuid"] == .string("0000180f-0000-1000-8000-00805f9b34fb"))
            #expect(lines[0]["primary"] == .bool(true))
            #expect(lines[1]["path"] == .string(g.battery))
            #expect(lines[1]["handle"] == .int(0x13))
            #expect(lines[1]["flags"]?.strings == ["read", "notify"])
            #expect(lines[1]["name"] == .string("Battery Level"))

            let none = try await bus.runBluectl(["discover", heartRateAddress, "--service", "1816"])
            expectCleanFailure(none, 68, "180d (Heart Rate)")
        }
    }

    // MARK: read

    @Test("read by 16-bit UUID, SIG name, 128-bit UUID, path and handle: the value, one ReadValue, connect + disconnect",
          arguments: ["2a38", "body_sensor_location", "00002a38-0000-1000-8000-00805f9b34fb",
                      "\(heartRatePath)/service000a/char000e", "handle:14", "handle:0x000e"])
    func readForms(selector: String) async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            try await bus.setGattValue(g.location, [0x03])
            let r = try await bus.runBluectl(["read", heartRateAddress, selector])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout == "03 (Finger)\n", "\(r)")
            #expect(try await bus.callCount(g.location, "ReadValue") == 1)
            #expect(try await bus.callCount(g.device, "Connect") == 1)
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)
        }
    }

    @Test("read of a connected device: one ReadValue and nothing else on bluetoothd (no agent, no GetAll); pairing registers the agent first")
    func readConnectedIsLean() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let c = try await bus.runBluectl(["connect", heartRateAddress])
            #expect(c.exitCode == 0, "\(c)")
            let before = try await bus.calls("")
            let r = try await bus.runBluectl(["read", heartRateAddress, "2a38"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout == "01 (Chest)\n", "\(r)")
            let made = Array(try await bus.calls("").dropFirst(before.count))
            #expect(made == ["\(g.location) ReadValue"], "\(made)")

            // A read refused for lack of encryption pairs on demand: the agent is registered just before Pair.
            try await bus.injectError(g.location, "ReadValue", "org.bluez.Error.NotPermitted", "Not paired", times: 1)
            let mark = try await bus.calls("").count
            let p = try await bus.runBluectl(["read", heartRateAddress, "2a38"])
            #expect(p.exitCode == 0, "\(p)")
            let pairing = Array(try await bus.calls("").dropFirst(mark)).filter { !$0.hasSuffix(" GetAll") }
            #expect(pairing == ["\(g.location) ReadValue", "/org/bluez RegisterAgent", "\(g.device) Pair",
                                "\(g.location) ReadValue", "/org/bluez UnregisterAgent"], "\(pairing)")
        }
    }

    @Test("read --descriptor, --offset, and every --format")
    func readOptions() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            _ = try await bus.runBluectl(["connect", heartRateAddress])
            let d = try await bus.runBluectl(["read", heartRateAddress, "2a37", "--descriptor", "2902"])
            #expect(d.stdout == "0100\n", "\(d)")
            #expect(try await bus.callCount(g.cccd, "ReadValue") == 1)
            #expect(try await bus.callCount(g.hrm, "ReadValue") == 0)
            let c = HeartRateGatt.customUUID
            let off = try await bus.runBluectl(["read", heartRateAddress, c, "--offset", "2"])
            #expect(off.stdout == "6c6c6f\n", "\(off)")
            let utf8 = try await bus.runBluectl(["read", heartRateAddress, c, "--format", "utf8"])
            #expect(utf8.stdout == "Hello\n", "\(utf8)")
            let raw = try await bus.runBluectl(["read", heartRateAddress, c, "--format", "raw"])
            #expect(raw.stdout == "Hello", "\(raw)")
            let hex = try await bus.runBluectl(["read", heartRateAddress, c, "--format", "hex"])
            #expect(hex.stdout.hasPrefix("48 65 6c 6c 6f") || hex.stdout.hasPrefix("48656c6c6f"), "\(hex)")
            #expect(hex.stdout.contains("Hello"), "\(hex)")
            let json = try await bus.runBluectl(["read", heartRateAddress, "battery_level", "--format", "json"])
            let j = try #require(try json.jsonLines().first)
            #expect(j["device"] == .string(heartRateAddress))
            #expect(j["characteristic"] == .string("00002a19-0000-1000-8000-00805f9b34fb"))
            #expect(j["value"] == .string("5c"))
            #expect(j["decoded"]?["level_percent"] == .int(92))
            let decoded = try await bus.runBluectl(["read", heartRateAddress, "battery_level", "--format", "decoded"])
            #expect(decoded.stdout == "92 %\n", "\(decoded)")
            // the connection was there before: bluectl leaves it up
            #expect(try await bus.callCount(g.device, "Disconnect") == 0)
            #expect(try await bus.property(g.device, "org.bluez.Device1", "Connected")["data"] == .bool(true))
        }
    }

    @Test("read (text): a value bluectl decodes shows its meaning beside the hex (5c is 92 %, not 5c or 92); others stay hex")
    func readTextShowsDecoded() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            _ = try await bus.runBluectl(["connect", heartRateAddress])
            let battery = try await bus.runBluectl(["read", heartRateAddress, "battery_level"])
            #expect(battery.stdout == "5c (92 %)\n", "\(battery)")
            let location = try await bus.runBluectl(["read", heartRateAddress, "2a38"])
            #expect(location.stdout == "01 (Chest)\n", "\(location)")
            let hex = try await bus.runBluectl(["read", heartRateAddress, "battery_level", "--format", "hex"])
            #expect(hex.stdout == "5c  |\\| (92 %)\n", "\(hex)")
            let custom = try await bus.runBluectl(["read", heartRateAddress, HeartRateGatt.customUUID])
            #expect(custom.stdout == "48656c6c6f\n", "\(custom)")
            // --json keeps its fields: value (hex) and decoded
            let json = try await bus.runBluectl(["read", heartRateAddress, "battery_level", "--json"])
            #expect(json.stdout == #"{"device":"\#(heartRateAddress)","characteristic":"00002a19-0000-1000-8000-00805f9b34fb","value":"5c","decoded":{"level_percent":92}}"# + "\n", "\(json)")
        }
    }

    // MARK: write

    @Test("write: hex forms all send 01 02, as a request when the flags allow it",
          arguments: ["0x0102", "0102", "01 02", "01:02"])
    func writeHexForms(value: String) async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let r = try await bus.runBluectl(["write", heartRateAddress, "2a39", value])
            #expect(r.exitCode == 0, "\(r)")
            let writes = try await bus.gattWrites(g.control)
            #expect(writes.map(\.hex) == ["0102"])
            #expect(writes.map(\.type) == ["request"])
            #expect(writes.first?.options["type"]?["data"] == .string("request"))
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)
        }
    }

    @Test("write --utf8 / --file PATH / --file - with --with-response / --without-response: BlueZ type request / command")
    func writeSourcesAndTypes() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let c = HeartRateGatt.customUUID
            let a = try await bus.runBluectl(["write", heartRateAddress, c, "--utf8", "Hi", "--without-response", "--json"])
            #expect(a.exitCode == 0, "\(a)")
            #expect(try a.jsonLines().first?["type"] == .string("without-response"))
            let b = try await bus.runBluectl(["write", heartRateAddress, c, "--utf8", "Yo", "--with-response"])
            #expect(b.exitCode == 0, "\(b)")
            let file = bus.directory.appendingPathComponent("value.bin")
            try Data([0x00, 0xff, 0x10]).write(to: file)
            let f = try await bus.runBluectl(["write", heartRateAddress, c, "--file", file.path])
            #expect(f.exitCode == 0, "\(f)")
            // stdin: through a shell pipe (the harness gives children /dev/null)
            let exe = try BusTier.bluectlExecutable()
            let s = await (try bus.spawn("/bin/sh", ["-c", "printf 'ab' | \"$0\" write \(heartRateAddress) \(c) --file -", exe]))
                .wait(timeout: .seconds(20))
            #expect(s.exitCode == 0, "\(s)")
            let writes = try await bus.gattWrites(g.custom)
            #expect(writes.map(\.hex) == ["4869", "596f", "00ff10", "6162"])
            #expect(writes.map(\.type) == ["command", "request", "request", "request"])
        }
    }

    @Test("write longer than the limit is refused naming it, before any WriteValue (exit 65)")
    func writeTooLong() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let long = String(repeating: "ab", count: 245)   // MTU 247 − 3 = 244
            let r = try await bus.runBluectl(["write", heartRateAddress, HeartRateGatt.customUUID, long, "--without-response"])
            expectCleanFailure(r, 65, "write limit of 244 bytes")
            // The first run disconnected, and 5.66 keeps the GATT objects of a disconnected
            // device without their MTU property (gatt-client.c characteristic_mtu_exists); MTU
            // comes back on reconnection without a PropertiesChanged: bluectl asks for it
            // before refusing a write on the 23-byte default.
            let ok = try await bus.runBluectl(["write", heartRateAddress, HeartRateGatt.customUUID, String(long.dropLast(2)), "--without-response"])
            #expect(ok.exitCode == 0, "\(ok)")
            #expect(try await bus.gattWrites(g.custom).map { $0.hex.count / 2 } == [244])
            #expect(try await bus.callCount(g.custom, "WriteValue") == 1)
        }
    }

    // MARK: subscribe

    /// Starts `subscribe` and waits until the stand-in shows Notifying on `chr`.
    private func startSubscribe(_ bus: PrivateBus, _ chr: String, _ extra: [String]) async throws -> ChildProcess {
        let sub = try bus.startBluectl(["subscribe", heartRateAddress] + extra)
        let notifying = try await bus.eventually(timeout: .seconds(15)) {
            return (try? await bus.property(chr, "org.bluez.GattCharacteristic1", "Notifying")["data"]) == .bool(true)
        }
        #expect(notifying, "\(sub.stderr)")
        return sub
    }

    @Test("subscribe --count 3: three lines as they arrive, StopNotify, disconnect")
    func subscribeCount() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let sub = try await startSubscribe(bus, g.hrm, ["heart_rate_measurement", "--count", "3"])
            for bpm: UInt8 in [60, 61, 62] {
                _ = try await bus.emitNotification(g.hrm, [0x00, bpm])
                _ = await sub.waitForStdoutLines(Int(bpm) - 59, timeout: .seconds(5))
            }
            let r = await sub.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            // Each line: time, characteristic, value in hex and decoded.
            let values = r.stdoutLines.map { $0.components(separatedBy: "(Heart Rate Measurement)  ").last ?? "" }
            #expect(values == ["003c (60 bpm)", "003d (61 bpm)", "003e (62 bpm)"], "\(r)")
            #expect(r.stdoutLines.allSatisfy { $0.contains("2a37 (Heart Rate Measurement)") }, "\(r)")
            #expect(try await bus.calls(g.hrm) == ["StartNotify", "StopNotify"])
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)
        }
    }

    @Test("subscribe --json --duration: JSON lines with decoded values, ends by itself, StopNotify")
    func subscribeJSONDuration() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let sub = try await startSubscribe(bus, g.battery, ["battery_level", "--json", "--duration", "3"])
            _ = try await bus.emitNotification(g.battery, [0x50])
            #expect(await sub.waitForStdoutLines(1, timeout: .seconds(5)))
            let r = await sub.wait(timeout: .seconds(20))
            #expect(r.exitCode == 0, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.count == 1)
            #expect(lines.first?["value"] == .string("50"))
            #expect(lines.first?["decoded"]?["level_percent"] == .int(80))
            #expect(lines.first?["device"] == .string(heartRateAddress))
            #expect(lines.first?["time"]?.string?.hasSuffix("Z") == true)
            #expect(try await bus.calls(g.battery) == ["StartNotify", "StopNotify"])
        }
    }

    @Test("subscribe: SIGINT → 130, SIGTERM → 143, after StopNotify and Disconnect",
          arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func subscribeSignals(signal: Int32, code: Int32) async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let sub = try await startSubscribe(bus, g.hrm, ["2a37"])
            _ = try await bus.emitNotification(g.hrm, [0x00, 0x40])
            #expect(await sub.waitForStdoutLines(1, timeout: .seconds(5)))
            sub.signal(signal)
            let r = await sub.wait(timeout: .seconds(15))
            #expect(r.termination == .exited(code), "\(r)")
            #expect(r.stderr.isEmpty, "\(r)")
            #expect(try await bus.calls(g.hrm) == ["StartNotify", "StopNotify"])
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)
        }
    }

    @Test("subscribe: the device disconnecting mid-stream → one line saying so, exit 74")
    func subscribeDisconnect() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let sub = try await startSubscribe(bus, g.hrm, ["2a37", "--json"])
            _ = try await bus.emitNotification(g.hrm, [0x00, 0x40])
            #expect(await sub.waitForStdoutLines(1, timeout: .seconds(5)))
            try await bus.dropConnection(g.device)
            let r = await sub.wait(timeout: .seconds(15))
            expectCleanFailure(r, 74, "disconnected")
            #expect(try r.jsonLines().count == 1)
        }
    }

    // MARK: flags, ambiguity, not found

    @Test("flags are checked before BlueZ is asked: not readable / writable / notifiable → no call made",
          arguments: [(["read", heartRateAddress, "2a39"], "not readable", "ReadValue"),
                      (["write", heartRateAddress, "2a38", "01"], "not writable", "WriteValue"),
                      (["subscribe", heartRateAddress, "2a38"], "cannot notify", "StartNotify")])
    func flagsRefusal(args: [String], message: String, method: String) async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let r = try await bus.runBluectl(args)
            expectCleanFailure(r, 77, message)
            #expect(try await bus.callCount(g.control, method) == 0)
            #expect(try await bus.callCount(g.location, method) == 0)
            #expect(try await bus.callCount(g.device, "Disconnect") == 1)
        }
    }

    @Test("duplicate UUIDs: ambiguity error listing both paths (exit 64); then each read by path and by handle")
    func duplicateUUIDs() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let svc = try await bus.addGattService("hci0", heartRateAddress, uuid: "fff0")
            let one = try await bus.addGattCharacteristic(svc, uuid: "fff1", flags: ["read"], value: [0x11])
            let two = try await bus.addGattCharacteristic(svc, uuid: "fff1", flags: ["read"], value: [0x22])
            let r = try await bus.runBluectl(["read", heartRateAddress, "fff1"])
            expectCleanFailure(r, 64, "ambiguous")
            #expect(r.stderr.contains(one) && r.stderr.contains(two), "\(r)")
            #expect(r.stderr.contains("handle:0x0019 (") && r.stderr.contains("handle:0x001b ("), "\(r)")  // 25 and 27, in hex as discover shows them
            let byPath = try await bus.runBluectl(["read", heartRateAddress, two])
            #expect(byPath.stdout == "22\n", "\(byPath)")
            let byHandle = try await bus.runBluectl(["read", heartRateAddress, "handle:25"])
            #expect(byHandle.stdout == "11\n", "\(byHandle)")
            #expect(try await bus.callCount(one, "ReadValue") == 1)
            #expect(try await bus.callCount(two, "ReadValue") == 1)
            _ = g
        }
    }

    @Test("characteristic not found → 68 listing what exists")
    func characteristicNotFound() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            let r = try await bus.runBluectl(["read", heartRateAddress, "2a99"])
            expectCleanFailure(r, 68, "characteristic 2a99")
            for existing in ["2a37 (Heart Rate Measurement)", "2a38 (Body Sensor Location)", "2a19 (Battery Level)", HeartRateGatt.customUUID] {
                #expect(r.stderr.contains(existing), "\(existing): \(r)")
            }
        }
    }

    // MARK: connection handling

    @Test("connect retries after le-connection-abort-by-local; gives up after --retries")
    func connectRetry() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            try await bus.injectError(g.device, "Connect", "org.bluez.Error.Failed", "le-connection-abort-by-local", times: 1)
            let r = try await bus.runBluectl(["read", heartRateAddress, "2a38"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout == "01 (Chest)\n")
            #expect(try await bus.callCount(g.device, "Connect") == 2)

            try await bus.injectError(g.device, "Connect", "org.bluez.Error.Failed", "le-connection-abort-by-local", times: 5)
            let fail = try await bus.runBluectl(["read", heartRateAddress, "2a38", "--retries", "1"])
            expectCleanFailure(fail, 1, "le-connection-abort-by-local")
            #expect(try await bus.callCount(g.device, "Connect") == 4)
        }
    }

    @Test("InProgress: Connect retried, then 75; ReadValue retried until it goes through")
    func inProgress() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            try await bus.injectError(g.device, "Connect", "org.bluez.Error.InProgress", "Operation already in progress")
            let r = try await bus.runBluectl(["read", heartRateAddress, "2a38", "--retries", "2"])
            expectCleanFailure(r, 75, "in progress")
            #expect(try await bus.callCount(g.device, "Connect") == 3)
            try await bus.injectError(g.device, "Connect", "")

            try await bus.injectError(g.location, "ReadValue", "org.bluez.Error.InProgress", "Operation already in progress", times: 3)
            let read = try await bus.runBluectl(["read", heartRateAddress, "2a38"])
            #expect(read.exitCode == 0, "\(read)")
            #expect(read.stdout == "01 (Chest)\n")
            #expect(try await bus.callCount(g.location, "ReadValue") == 4)
        }
    }

    @Test("NotPermitted / NotAuthorized from BlueZ → 77 with its message",
          arguments: [("ReadValue", "org.bluez.Error.NotPermitted", ["read", heartRateAddress, "2a38"]),
                      ("WriteValue", "org.bluez.Error.NotAuthorized", ["write", heartRateAddress, "2a39", "01"])])
    func notPermitted(method: String, error: String, args: [String]) async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let path = method == "ReadValue" ? g.location : g.control
            try await bus.injectError(path, method, error, "Refused by the test")
            let r = try await bus.runBluectl(args)
            expectCleanFailure(r, 77, "Refused by the test")
            #expect(r.stderr.contains(error), "\(r)")
            #expect(try await bus.callCount(path, method) == 1)
        }
    }
}

