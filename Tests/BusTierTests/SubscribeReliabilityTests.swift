import Foundation
import Testing

/// `bluectl subscribe` as a long-running logger (issue 5): a reader that goes
/// away, a reader that is too slow, the device / bluetoothd / the adapter
/// going away and coming back, systemd notifications, state restoration.
/// The real binary against the stand-in on a private bus.
@Suite("Subscribe reliability (bus tier)", .serialized)
struct SubscribeReliabilityTests {
    static let streamUUID = "b1ec7100-0000-4000-8000-000000000001"

    /// A connectable peripheral with one notify characteristic; returns its path.
    static func addStreamPeripheral(_ bus: PrivateBus) async throws -> String {
        try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
        let svc = try await bus.addGattService("hci0", heartRateAddress, uuid: "b1ec7100-0000-4000-8000-000000000000")
        return try await bus.addGattCharacteristic(svc, uuid: streamUUID, flags: ["read", "notify"], value: [])
    }

    /// Sequence numbers (uint32 LE at the start of the value) of JSON value lines, and the event lines.
    static func parse(_ lines: [String]) throws -> (seqs: [UInt32], events: [JSONValue]) {
        var seqs: [UInt32] = []
        var events: [JSONValue] = []
        for line in lines {
            let json = try JSONValue.parse(line)
            if json["event"] != nil {
                events.append(json)
                continue
            }
            let hex = try #require(json["value"]?.string)
            let bytes = stride(from: 0, to: min(8, hex.count), by: 2).compactMap { i -> UInt8? in
                let start = hex.index(hex.startIndex, offsetBy: i)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)
            }
            try #require(bytes.count == 4, "value \(hex) has no sequence number")
            seqs.append(bytes.enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) })
        }
        return (seqs, events)
    }

    /// StartNotify / StopNotify calls the stand-in logged for `path`.
    static func notifyCalls(_ bus: PrivateBus, _ path: String) -> (start: Int, stop: Int) {
        let lines = bus.standInLog.split(separator: "\n")
        return (lines.filter { $0.contains("StartNotify \(path) ") }.count,
                lines.filter { $0.contains("StopNotify \(path) ") }.count)
    }

    @Test("a reader that goes away (| head -1): StopNotify and Disconnect, then a quiet exit 141")
    func readerGoesAway() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let bluectl = try BusTier.bluectlExecutable()
            let shell = try bus.spawn("/bin/bash", ["-c", """
                "$0" subscribe \(heartRateAddress) \(Self.streamUUID) --json | head -n 1
                echo "status=${PIPESTATUS[0]}" >&2
                """, bluectl])
            // Notify until the pipeline has ended (bluectl sees EPIPE on the write after head left).
            var sent: UInt32 = 0
            while shell.isRunning, sent < 2000 {
                if Self.notifyCalls(bus, chr).start > 0 {
                    // Once bluectl has left it disconnects, and the characteristic goes: stop sending then.
                    guard (try? await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(sent), .uint32(5)])) != nil else { break }
                    sent += 5
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let r = await shell.wait(timeout: .seconds(10))
            #expect(r.stdoutLines.count == 1, "\(r)")
            #expect(r.stderr.contains("status=141"), "\(r)")
            #expect(!r.stderr.contains("bluectl:"), "a closed pipe is not an error: \(r)")
            #expect(Self.notifyCalls(bus, chr).stop == 1, "\(bus.standInLog.suffix(2000))")
            #expect(try await bus.eventually {
                try await bus.property(heartRatePath, "org.bluez.Device1", "Connected")["data"] == .bool(false)
            }, "bluectl made the connection, so it disconnects")
        }
    }

    @Test("a stopped reader: every value waits in the queue, then arrives complete and in order")
    func slowReaderLosesNothing() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let bluectl = try BusTier.bluectlExecutable()
            // The reader sleeps 4 s: far more than the pipe's 64 KiB piles up meanwhile.
            let shell = try bus.spawn("/bin/bash", ["-c", """
                "$0" subscribe \(heartRateAddress) \(Self.streamUUID) --json --count 5000 | { sleep 4; cat; }
                echo "status=${PIPESTATUS[0]}" >&2
                """, bluectl])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(5000)], timeout: .seconds(60))
            let r = await shell.wait(timeout: .seconds(60))
            let (seqs, events) = try Self.parse(r.stdoutLines)
            #expect(seqs == Array(0..<5000), "received \(seqs.count), events \(events)")
            #expect(events.isEmpty)
            #expect(r.stderr.contains("status=0"), "\(r)")
        }
    }

    @Test("a full queue drops values but counts every one: printed + reported dropped = sent")
    func overflowIsReported() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let bluectl = try BusTier.bluectlExecutable()
            // The reader reads nothing until the flag file exists: made once bluectl said it drops
            // (not after a fixed time, which a slow start could use up).
            let flag = bus.directory.appendingPathComponent("read-now").path
            let shell = try bus.spawn("/bin/bash", ["-c", """
                "$0" subscribe \(heartRateAddress) \(Self.streamUUID) --json --queue 10 --count 3000 \
                  | { while [ ! -e "$1" ]; do sleep 0.05; done; cat; }
                echo "status=${PIPESTATUS[0]}" >&2
                """, bluectl, flag])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(3000)], timeout: .seconds(60))
            #expect(await shell.waitForStderr(timeout: .seconds(30)) { $0.contains("output is too slow") }, "\(shell.stderr)")
            #expect(FileManager.default.createFile(atPath: flag, contents: nil), "cannot write \(flag)")
            let r = await shell.wait(timeout: .seconds(60))
            let (seqs, events) = try Self.parse(r.stdoutLines)
            let dropped = events.filter { $0["event"] == .string("dropped") }.compactMap { $0["count"]?.int }.reduce(0, +)
            #expect(dropped > 0, "the pipe (64 KiB) and 10 queued lines cannot hold 3000 values: \(events)")
            #expect(seqs.count + dropped == 3000, "printed \(seqs.count) + dropped \(dropped)")
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "in order, none twice")
            #expect(r.stderr.contains("dropped"), "\(r)")
            #expect(r.stderr.contains("status=0"), "\(r)")
        }
    }

    @Test("--reconnect: the device drops the link and comes back; values resume once each, gap reported")
    func reconnectAfterDrop() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json", "--reconnect"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(10)])
            #expect(await p.waitForStdoutLines(10, timeout: .seconds(10)))
            try await bus.dropConnection(heartRatePath)
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"reconnected\"") }, "\(p.stderr)")
            // BlueZ 5.66 (Cache=always) would keep the session across the drop and register it
            // again on reconnection (gatt-client.c btd_gatt_client_connected → register_notify).
            // bluectl stops its session when the link drops (a subscriber that gives up while
            // the device is away leaves nothing armed) and starts one after reconnecting:
            // StartNotify, StopNotify, StartNotify — never two sessions of bluectl at once.
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 2 })
            #expect(Self.notifyCalls(bus, chr).stop == 1, "the first session stopped before the second")
            #expect(try await bus.notifyClients(chr).map(\.registered) == [true], "one session")
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(10), .uint32(10)])
            #expect(await p.waitForStdoutLines(22, timeout: .seconds(10)))
            p.signal(SIGTERM)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 143, "\(r)")
            let (seqs, events) = try Self.parse(r.stdoutLines)
            #expect(seqs == Array(0..<20))
            #expect(events.compactMap { $0["event"]?.string } == ["disconnected", "reconnected"])
            let lines = r.stdoutLines
            let gapAt = try #require(lines.firstIndex { $0.contains("\"disconnected\"") })
            #expect(gapAt == 10, "the gap is reported where it happened")
            #expect(events.last?["gap_seconds"] != nil)
            #expect(Self.notifyCalls(bus, chr).stop >= 1, "StopNotify at exit")
        }
    }

    /// Subscribes with `--json`, waits for bluectl's StartNotify; returns the process.
    private static func subscribed(_ bus: PrivateBus, _ chr: String) async throws -> ChildProcess {
        let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json"])
        #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
        return p
    }

    // BlueZ 5.66 sends every subscriber one PropertiesChanged(Value) per StartNotify
    // session per notification (gatt-client.c notify_cb) and one per successful read by
    // anyone (chrc_read_cb → write_characteristic_cb): docs/notifications.md.
    @Test("another client's StartNotify session already on: bluectl shares it (no StartNotify of its own) and prints each value once")
    func sharesAnotherClientsSession() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            #expect(try await bus.runBluectl(["connect", heartRateAddress]).exitCode == 0)
            try await bus.startNotify(chr, as: ":other.1")
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json"])
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"shared_session\"") }, "\(p.stderr)")
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(10)])
            #expect(try await bus.valueSignalCount(chr) == 10, "one session: one Value signal per notification")
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"09000000") }, "\(p.stderr)")
            p.signal(SIGTERM)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 143, "\(r)")
            let (seqs, events) = try Self.parse(r.stdoutLines)
            #expect(seqs == Array(0..<10), "each notification printed once: \(seqs)")
            #expect(events.compactMap { $0["event"]?.string } == ["shared_session"])
            #expect(Self.notifyCalls(bus, chr).start == 0 && Self.notifyCalls(bus, chr).stop == 0,
                    "bluectl registered nothing of its own")
        }
    }

    @Test("the shared session ends: bluectl starts its own and says so; values before and after once each")
    func takesOverWhenTheSharedSessionEnds() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            #expect(try await bus.runBluectl(["connect", heartRateAddress]).exitCode == 0)
            try await bus.startNotify(chr, as: ":other.1")
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json"])
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"shared_session\"") }, "\(p.stderr)")
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(3)])
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"02000000") })
            try await bus.stopNotify(chr, as: ":other.1")
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"own_session\"") })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(3), .uint32(3)])
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"05000000") })
            p.signal(SIGTERM)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 143, "\(r)")
            let (seqs, _) = try Self.parse(r.stdoutLines)
            #expect(seqs == Array(0..<6))
            #expect(Self.notifyCalls(bus, chr).stop == 1, "its own session stopped at exit")
        }
    }

    @Test("another bluectl reads the characteristic while subscribed: no extra value printed")
    func bluectlReadPrintsNothing() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let p = try await Self.subscribed(bus, chr)
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(5)])
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"04000000") })
            let before = try await bus.valueSignalCount(chr)
            for _ in 0..<2 {
                let read = try await bus.runBluectl(["read", heartRateAddress, Self.streamUUID])
                #expect(read.exitCode == 0, "\(read)")
            }
            #expect(try await bus.valueSignalCount(chr) == before + 2, "BlueZ 5.66 chrc_read_cb: a Value signal for every read")
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(5), .uint32(5)])
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"09000000") }, "\(p.stderr)")
            p.signal(SIGTERM)
            let r = await p.wait(timeout: .seconds(10))
            let (seqs, _) = try Self.parse(r.stdoutLines)
            #expect(seqs == Array(0..<10), "the values another bluectl read are not notifications: \(seqs)")
        }
    }

    @Test("--reconnect: bluetoothd restarts (org.bluez changes owner) and the device is found again")
    func reconnectAfterBluetoothdRestart() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json", "--reconnect", "--timeout", "5"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(3)])
            #expect(await p.waitForStdoutLines(3, timeout: .seconds(10)))
            await bus.stopStandIn()
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"disconnected\"") }, "\(p.stderr)")
            try await bus.startStandIn(adapters: [.hci0])
            let chr2 = try await Self.addStreamPeripheral(bus)
            #expect(await p.waitForStdout(timeout: .seconds(30)) { $0.contains("\"reconnected\"") }, "\(p.stderr)")
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr2).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr2), .uint32(3), .uint32(3)])
            #expect(await p.waitForStdoutLines(8, timeout: .seconds(10)))
            p.signal(SIGINT)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 130, "\(r)")
            let (seqs, events) = try Self.parse(r.stdoutLines)
            #expect(seqs == Array(0..<6))
            #expect(events.compactMap { $0["event"]?.string } == ["disconnected", "reconnected"])
        }
    }

    @Test("connect: bluetoothd stops while Connect is pending; bluectl says so on one line, waits for it to come back and connects (exit 0)")
    func connectSurvivesBluetoothdRestart() async throws {
        try await withPrivateBus { bus in
            _ = try await Self.addStreamPeripheral(bus)
            try await bus.hang(heartRatePath, "Connect")
            let p = try bus.startBluectl(["connect", heartRateAddress, "--json", "--timeout", "60"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { try await bus.callCount(heartRatePath, "Connect") == 1 })
            await bus.stopStandIn()   // as bluetoothd 5.66 crashing in the lab
            let warning = "bluectl: bluetoothd stopped (exited or crashed) while connecting to \(heartRateAddress); waiting for it to come back"
            #expect(await p.waitForStderr(timeout: .seconds(10)) { $0.contains(warning) }, "\(p.stderr)")
            try await bus.startStandIn(adapters: [.hci0])
            _ = try await Self.addStreamPeripheral(bus)
            let r = await p.wait(timeout: .seconds(60))
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stderrLines == [warning])
            let line = try JSONValue.parse(try #require(r.stdoutLines.first))
            #expect(line["connected"]?.bool == true, "\(r.stdout)")
            #expect(try await bus.callCount(heartRatePath, "Connect") == 1, "one Connect to the new bluetoothd")
        }
    }

    @Test("read: the link drops between 'connected' and the services (a connection bluetoothd made by itself): bluectl connects again and reads (exit 0)")
    func linkDropsBeforeServices() async throws {
        try await withPrivateBus { bus in
            _ = try await Self.addStreamPeripheral(bus)
            let first = try await bus.runBluectl(["connect", heartRateAddress])
            #expect(first.exitCode == 0, "\(first)")
            let second = try await bus.runBluectl(["disconnect", heartRateAddress])
            #expect(second.exitCode == 0, "\(second)")
            // bluetoothd re-connects the device by itself (bonded, in the lab): bluectl finds it connected
            try await bus.setProperties(heartRatePath, "org.bluez.Device1", [("Connected", .bool(true)), ("ServicesResolved", .bool(false))])
            let connects = try await bus.callCount(heartRatePath, "Connect")
            let p = try bus.startBluectl(["read", heartRateAddress, Self.streamUUID, "--json"], environment: ["BLUECTL_DEBUG": "1"])
            #expect(await p.waitForStderr(timeout: .seconds(10)) { $0.contains("services \(heartRateAddress): start -> waiting") },
                    "\(p.stderr)")
            // … and the link drops again before the services are resolved
            try await bus.setProperties(heartRatePath, "org.bluez.Device1", [("Connected", .bool(false))])
            let r = await p.wait(timeout: .seconds(30))
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdoutLines.count == 1 && r.stdoutLines.first?.contains("\"value\"") == true, "\(r.stdout)")
            #expect(try await bus.callCount(heartRatePath, "Connect") == connects + 1, "one Connect, after the drop")
        }
    }

    @Test("--reconnect: the adapter is powered off and on again")
    func reconnectAfterPowerCycle() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json", "--reconnect", "--timeout", "5"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.setPowered("hci0", false)
            #expect(await p.waitForStdout(timeout: .seconds(10)) { $0.contains("\"disconnected\"") }, "\(p.stderr)")
            // Attempts fail while it is off (reported on stderr), then succeed.
            #expect(await p.waitForStderr(timeout: .seconds(10)) { $0.contains("attempt 1 to reconnect failed") }, "\(p.stderr)")
            try await bus.setPowered("hci0", true)
            #expect(await p.waitForStdout(timeout: .seconds(30)) { $0.contains("\"reconnected\"") }, "\(p.stderr)")
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 2 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(7), .uint32(1)])
            #expect(await p.waitForStdoutLines(3, timeout: .seconds(10)))
            p.signal(SIGTERM)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 143, "\(r)")
            #expect(try Self.parse(r.stdoutLines).seqs == [7])
        }
    }

    @Test("a rogue client's Value, Connected=false and InterfacesRemoved signals change nothing in subscribe's output")
    func rogueSignalsIgnored() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json", "--count", "2"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(1)])
            #expect(await p.waitForStdoutLines(1, timeout: .seconds(10)))
            let rogue = try await bus.runPython(pythonPrelude + #"""
                CHR, DEV = sys.argv[1:3]
                P, OM = 'org.freedesktop.DBus.Properties', 'org.freedesktop.DBus.ObjectManager'
                def emit(path, iface, member, sig, *args):
                    m = dbus.lowlevel.SignalMessage(path, iface, member)
                    m.append(*args, signature=sig)
                    bus.send_message(m)
                emit(CHR, P, 'PropertiesChanged', 'sa{sv}as', 'org.bluez.GattCharacteristic1',
                     {'Value': dbus.ByteArray(b'\xde\xad\xbe\xef')}, [])
                emit(DEV, P, 'PropertiesChanged', 'sa{sv}as', 'org.bluez.Device1', {'Connected': dbus.Boolean(False)}, [])
                emit('/', OM, 'InterfacesRemoved', 'oas', CHR, ['org.bluez.GattCharacteristic1'])
                emit('/', OM, 'InterfacesRemoved', 'oas', DEV, ['org.bluez.Device1'])
                bus.flush()
                print(bus.get_unique_name())
                """#, [chr, heartRatePath])
            #expect(rogue.exitCode == 0, "\(rogue)")
            // A real value afterwards: still subscribed, the rogue's value never printed.
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(1), .uint32(1)])
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 0, "\(r)")
            #expect(try Self.parse(r.stdoutLines).seqs == [0, 1])
            #expect(!r.stdout.contains("deadbeef"))
        }
    }

    @Test("without --reconnect a dropped link ends subscribe with exit 74 and a message")
    func noReconnectExits74() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.dropConnection(heartRatePath)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 74, "\(r)")
            #expect(r.stderrLines.count == 1 && r.stderr.contains("disconnected"), "\(r)")
        }
    }

    @Test("systemd: READY=1 with a STATUS once subscribed, then WATCHDOG=1 pings")
    func systemdNotify() async throws {
        try await withPrivateBus { bus in
            _ = try await Self.addStreamPeripheral(bus)
            let socketPath = bus.directory.appendingPathComponent("notify.sock").path
            let listener = try bus.startPython("""
                import socket, sys, json
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.bind(sys.argv[1])
                print('bound', flush=True)
                s.settimeout(20)
                while True:
                    data = s.recv(4096).decode()
                    print(json.dumps(data), flush=True)
                """, [socketPath])
            #expect(await listener.waitForStdout(timeout: .seconds(10)) { $0.contains("bound") })
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json"],
                                         environment: ["NOTIFY_SOCKET": socketPath, "WATCHDOG_USEC": "400000"])
            #expect(await listener.waitForStdout(timeout: .seconds(15)) { $0.components(separatedBy: "WATCHDOG=1").count > 3 },
                    "\(listener.stdout) / \(p.stderr)")
            p.signal(SIGTERM)
            _ = await p.wait(timeout: .seconds(10))
            listener.kill9()
            let messages = listener.stdout.split(separator: "\n").dropFirst().compactMap { try? JSONValue.parse(String($0)).string }
            let ready = try #require(messages.first { $0.hasPrefix("READY=1") }, "\(messages)")
            #expect(ready.contains("STATUS=subscribed to \(Self.streamUUID) of \(heartRateAddress)"))
            let readyIndex = try #require(messages.firstIndex(of: ready))
            #expect(!messages[..<readyIndex].contains("WATCHDOG=1"), "pings start once ready")
        }
    }

    @Test("--restore-id: kill -9, then a new run with only the id reports what it restored and carries on")
    func restoreAfterKill() async throws {
        try await withPrivateBus { bus in
            let chr = try await Self.addStreamPeripheral(bus)
            let state = bus.directory.appendingPathComponent("state").path
            let env = ["XDG_STATE_HOME": state]
            let p = try bus.startBluectl(["subscribe", heartRateAddress, Self.streamUUID, "--json", "--restore-id", "logger"],
                                         environment: env)
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(1)])
            #expect(await p.waitForStdoutLines(1, timeout: .seconds(10)))
            // The running state is saved after the subscription is up, beside the first value's
            // way to stdout (a hop, an encode, two fsyncs): killed only once it is on disk.
            let file = "\(state)/bluectl/logger.json"
            #expect(try await bus.eventually(timeout: .seconds(10)) {
                guard let bytes = FileManager.default.contents(atPath: file),
                      let saved = try? JSONValue.parse(String(decoding: bytes, as: UTF8.self)) else { return false }
                return saved["subscriptions"]?[0]?["notifying"] == .bool(true) && saved["peripherals"]?[0]?["state"] == .string("connected")
            }, "the running state was never saved")
            p.kill9()
            _ = await p.wait(timeout: .seconds(5))
            let saved = try JSONValue.parse(String(decoding: try #require(FileManager.default.contents(atPath: file)), as: UTF8.self))
            #expect(saved["running"] == .bool(true))
            #expect(saved["peripherals"]?[0]?["state"] == .string("connected"))
            #expect(saved["subscriptions"]?[0]?["characteristic"] == .string(Self.streamUUID))
            #expect(saved["subscriptions"]?[0]?["notifying"] == .bool(true))
            // The killed process left the link up; a new process carries on from the saved state.
            try await bus.dropConnection(heartRatePath)
            let q = try bus.startBluectl(["subscribe", "--restore-id", "logger", "--json", "--count", "1"], environment: env)
            #expect(try await bus.eventually(timeout: .seconds(10)) { Self.notifyCalls(bus, chr).start == 2 }, "\(q.stderr)")
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(42), .uint32(1)])
            let r = await q.wait(timeout: .seconds(10))
            #expect(r.exitCode == 0, "\(r)")
            let lines = try r.jsonLines()
            #expect(lines.first?["event"] == .string("restored"), "reported first: \(r.stdout)")
            #expect(lines.first?["was_running"] == .bool(true))
            #expect(lines.first?["subscriptions"]?.strings == ["\(Self.streamUUID) of \(heartRateAddress)"])
            #expect(try Self.parse(Array(r.stdoutLines.dropFirst())).seqs == [42])
            let after = try JSONValue.parse(String(decoding: try #require(FileManager.default.contents(atPath: file)), as: UTF8.self))
            #expect(after["running"] == .bool(false), "a normal end is saved as such")
        }
    }

    @Test("--restore-id: an id with no saved state and no DEVICE is 68; a bad id is 64")
    func restoreErrors() async throws {
        try await withPrivateBus { bus in
            let env = ["XDG_STATE_HOME": bus.directory.appendingPathComponent("state").path]
            let none = try await bus.runBluectl(["subscribe", "--restore-id", "nothing-here"], environment: env)
            #expect(none.exitCode == 68 && none.stderrLines.count == 1, "\(none)")
            #expect(none.stderr.contains("no saved subscription for --restore-id nothing-here"))
            let bad = try await bus.runBluectl(["subscribe", heartRateAddress, "2a37", "--restore-id", "../etc"], environment: env)
            #expect(bad.exitCode == 64 && bad.stderr.contains("invalid restore id"), "\(bad)")
        }
    }
}

@Suite("systemd unit")
struct SystemdUnitTests {
    @Test("Scripts/systemd/bluectl-subscribe@.service passes systemd-analyze verify, runs subscribe --reconnect as Type=notify with a watchdog")
    func unitVerifies() async throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let unit = try String(contentsOf: repo.appendingPathComponent("Scripts/systemd/bluectl-subscribe@.service"), encoding: .utf8)
        for line in ["Type=notify", "WatchdogSec=", "Restart=on-failure"] { #expect(unit.contains(line), "\(line)") }
        #expect(unit.contains("bluectl subscribe --reconnect --restore-id %i"))
        // Verify a copy whose ExecStart names the bluectl just built (the installed path need not exist here).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-unit-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = directory.appendingPathComponent("bluectl-subscribe@test.service")
        try unit.replacingOccurrences(of: "/usr/local/bin/bluectl", with: try BusTier.bluectlExecutable())
            .write(to: copy, atomically: true, encoding: .utf8)
        let r = try await runProcess("/usr/bin/systemd-analyze", ["verify", copy.path], timeout: .seconds(30))
        #expect(r.exitCode == 0 && r.stderr.isEmpty && r.stdout.isEmpty, "\(r)")
    }
}

@Suite("Subscribe --notify-via acquire and --check-sequence (bus tier)", .serialized)
struct AcquireNotifyTests {
    typealias R = SubscribeReliabilityTests

    @Test("acquire: values come over the socket; a loss bluetoothd causes shows as a gap event and in the summary")
    func acquireWithLossReported() async throws {
        try await withPrivateBus { bus in
            let chr = try await R.addStreamPeripheral(bus)
            // Connected by someone else: the subscriber leaves the link up, so the socket's release is visible.
            let connect = try await bus.runBluectl(["connect", heartRateAddress])
            #expect(connect.exitCode == 0, "\(connect)")
            let p = try bus.startBluectl(["subscribe", heartRateAddress, R.streamUUID, "--json",
                                          "--notify-via", "acquire", "--check-sequence", "u32", "--count", "17"])
            #expect(try await bus.eventually(timeout: .seconds(10)) {
                (try? await bus.property(chr, "org.bluez.GattCharacteristic1", "NotifyAcquired"))?["data"] == .bool(true)
            })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(10)])
            try await bus.mock("DropSocketNotifications", [.objectPath(chr), .uint32(3)])
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(10), .uint32(10)])
            let r = await p.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let (seqs, events) = try R.parse(r.stdoutLines)
            #expect(seqs == Array(0..<10) + Array(13..<20))
            #expect(events.count == 1)
            #expect(events.first?["event"] == .string("gap"))
            #expect(events.first?["expected"] == .int(10) && events.first?["got"] == .int(13) && events.first?["missing"] == .int(3))
            #expect(r.stderr.contains("sequence check of \(R.streamUUID): 17 values, 3 missing, 0 late, 0 repeated"), "\(r)")
            #expect(!bus.standInLog.contains("StartNotify"), "acquire does not StartNotify")
            #expect(try await bus.eventually {
                try await bus.property(chr, "org.bluez.GattCharacteristic1", "NotifyAcquired")["data"] == .bool(false)
            }, "the socket is closed at exit")
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Connected")["data"] == .bool(true),
                    "not bluectl's connection: left up")
        }
    }

    @Test("--check-sequence ended by SIGINT: the summary is still printed on stderr, after the values (exit 130)")
    func sequenceSummaryAfterSignal() async throws {
        try await withPrivateBus { bus in
            let chr = try await R.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, R.streamUUID, "--json", "--check-sequence", "u32"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { R.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(4)])
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(6), .uint32(2)])
            #expect(await p.waitForStdoutLines(7, timeout: .seconds(10)), "\(p.stderr)")
            p.signal(SIGINT)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 130, "\(r)")
            #expect(r.stderr.contains("sequence check of \(R.streamUUID): 6 values, 2 missing, 0 late, 0 repeated"), "\(r)")
        }
    }

    @Test("acquire: the device disconnecting ends it with 74; StartNotify clients block AcquireNotify (a clear error)")
    func acquireDisconnect() async throws {
        try await withPrivateBus { bus in
            let chr = try await R.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, R.streamUUID, "--notify-via", "acquire"])
            #expect(try await bus.eventually(timeout: .seconds(10)) {
                (try? await bus.property(chr, "org.bluez.GattCharacteristic1", "NotifyAcquired"))?["data"] == .bool(true)
            })
            try await bus.dropConnection(heartRatePath)
            let r = await p.wait(timeout: .seconds(10))
            #expect(r.exitCode == 74 && r.stderrLines.count == 1, "\(r)")
            // Someone else has StartNotify on: AcquireNotify is refused by BlueZ (InProgress).
            let other = try bus.startBluectl(["subscribe", heartRateAddress, R.streamUUID])
            #expect(try await bus.eventually(timeout: .seconds(10)) { R.notifyCalls(bus, chr).start == 1 })
            let refused = try await bus.runBluectl(["subscribe", heartRateAddress, R.streamUUID, "--notify-via", "acquire", "--timeout", "5"])
            #expect(refused.exitCode == 75 && refused.stderrLines.count == 1, "\(refused)")
            #expect(refused.stderr.contains("acquire notifications"), "\(refused)")
            other.signal(SIGINT)
            #expect(await other.wait(timeout: .seconds(10)).exitCode == 130)
        }
    }

    @Test("StartNotify with --check-sequence: a peripheral's own gap is reported where it happened")
    func notifySequenceGap() async throws {
        try await withPrivateBus { bus in
            let chr = try await R.addStreamPeripheral(bus)
            let p = try bus.startBluectl(["subscribe", heartRateAddress, R.streamUUID, "--check-sequence", "u32", "--count", "6"])
            #expect(try await bus.eventually(timeout: .seconds(10)) { R.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(3)])
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(5), .uint32(2)])
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(3), .uint32(1)])
            let r = await p.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let lines = r.stdoutLines
            #expect(lines.count == 8, "6 values and 2 events: \(lines)")
            #expect(lines[3].hasSuffix("-- sequence gap in \(R.streamUUID): expected 3, got 5 (2 missing)"), "\(lines)")
            #expect(lines[6].hasSuffix("-- sequence 3 of \(R.streamUUID) arrived late"), "\(lines)")
            #expect(r.stderr.contains("6 values, 1 missing, 1 late, 0 repeated"), "\(r)")
        }
    }
}

@Suite("scan --restore-id (bus tier)")
struct ScanRestoreTests {
    @Test("the filter is saved; a later scan with only the id reports and uses it; filter options given win")
    func restoresFilter() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let env = ["XDG_STATE_HOME": bus.directory.appendingPathComponent("state").path]
            let first = try bus.startBluectl(["scan", "--json", "--restore-id", "s1", "--service", "180d", "--rssi", "-90",
                                              "--name", "Heart", "--timeout", "30"], environment: env)
            #expect(await first.waitForStdoutLines(1, timeout: .seconds(10)), "\(first.stderr)")
            first.kill9()
            _ = await first.wait(timeout: .seconds(5))
            let again = try await bus.runBluectl(["scan", "--json", "--restore-id", "s1", "--count", "1"], environment: env)
            #expect(again.exitCode == 0, "\(again)")
            let lines = try again.jsonLines()
            #expect(lines.first?["event"] == .string("restored"), "\(again.stdout)")
            #expect(lines.first?["was_running"] == .bool(true))
            #expect(lines.first?["used"] == .bool(true))
            #expect(lines.first?["filter"]?.strings == ["service 0000180d-0000-1000-8000-00805f9b34fb", "name contains \"Heart\"",
                                                       "rssi >= -90", "transport le"])
            let filter = try await bus.lastDiscoveryFilter()
            #expect(filter["RSSI"]?["data"] == .int(-90), "the saved filter went to BlueZ: \(filter)")
            #expect(lines.dropFirst().first?["address"] == .string(heartRateAddress))
            // Filter options on the command line win (and are saved instead).
            let other = try await bus.runBluectl(["scan", "--json", "--restore-id", "s1", "--rssi", "-100", "--count", "1"], environment: env)
            let o = try other.jsonLines()
            #expect(o.first?["used"] == .bool(false), "\(other.stdout)")
            #expect(try await bus.lastDiscoveryFilter()["RSSI"]?["data"] == .int(-100))
        }
    }

    @Test("a saved filter bluectl cannot use (a transport or service edited into nonsense) is 65, not dropped")
    func badSavedFilter() async throws {
        try await withPrivateBus { bus in
            let state = bus.directory.appendingPathComponent("state")
            let env = ["XDG_STATE_HOME": state.path]
            let saved = try await bus.runBluectl(["scan", "--restore-id", "s2", "--service", "180d", "--timeout", "0.2"], environment: env)
            #expect(saved.exitCode == 0, "\(saved)")
            let file = state.appendingPathComponent("bluectl/s2.json").path
            let text = String(decoding: try #require(FileManager.default.contents(atPath: file)), as: UTF8.self)
            for (from, to, says) in [("\"le\"", "\"radio\"", "the saved transport \"radio\" is not le, bredr or auto"),
                                     ("0000180d-0000-1000-8000-00805f9b34fb", "not-a-uuid", "the saved service is not a UUID")] {
                try text.replacingOccurrences(of: from, with: to).write(toFile: file, atomically: true, encoding: .utf8)
                let r = try await bus.runBluectl(["scan", "--restore-id", "s2", "--timeout", "0.2"], environment: env)
                #expect(r.exitCode == 65 && r.stderrLines.count == 1 && r.stderr.contains(says), "\(r)")
            }
        }
    }
}
