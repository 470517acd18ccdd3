// Proves the harness and the BlueZ stand-in by talking to them with busctl,
// dbus-monitor and dbus-python — not bluectl.

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Python prelude for client scripts: `bus`, `call()`, signal capture, `pump()`, `out()`.
let pythonPrelude = #"""
import json, os, sys, time
import dbus, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(os.environ['DBUS_SYSTEM_BUS_ADDRESS'])

def plain(v):
    if v is None:
        return None
    if isinstance(v, (dbus.ByteArray, bytes)):
        return bytes(v).hex()
    if isinstance(v, dbus.Array) and v.signature == 'y':
        return bytes(bytearray(int(b) for b in v)).hex()
    if isinstance(v, dict):
        return {str(plain(k)): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, str):
        return str(v)
    return repr(v)

def types(d):
    return {str(k): type(v).__name__ + ('(' + str(v.signature) + ')' if hasattr(v, 'signature') and v.signature else '')
            for k, v in d.items()}

def call(path, iface, method, *args, sig=None, dest='org.bluez'):
    try:
        r = bus.call_blocking(dest, path, iface, method, sig, args, timeout=10)
        return {'ok': plain(r)}
    except dbus.exceptions.DBusException as e:
        return {'error': e.get_dbus_name(), 'message': e.get_dbus_message()}

def mock(method, *args, sig=None):
    return call('/', 'org.freedesktop.DBus.Mock', method, *args, sig=sig)

signals = []
def _on_signal(*args, **kw):
    rec = {'sender': str(kw['sender']), 'path': str(kw['path']), 'interface': str(kw['interface']),
           'member': str(kw['member']), 'args': plain(args)}
    if kw['member'] == 'InterfacesAdded':
        rec['types'] = {str(i): types(p) for i, p in args[1].items()}
    signals.append(rec)
bus.add_signal_receiver(_on_signal, bus_name='org.bluez', sender_keyword='sender', path_keyword='path',
                        interface_keyword='interface', member_keyword='member')

def pump(seconds, until=None):
    ctx = GLib.MainContext.default()
    end = time.time() + seconds
    while time.time() < end:
        if not ctx.iteration(False):
            time.sleep(0.005)
        if until is not None and until():
            return True
    return until is None

def out(**kw):
    print(json.dumps(kw), flush=True)

ADAPTER = '/org/bluez/hci0'
A1 = 'org.bluez.Adapter1'

"""#

/// A successful call without reply values, as the Python prelude's call() reports it.
let ok = JSONValue.object(["ok": .null])

/// The heart-rate peripheral most tests use.
let heartRate: [AdField] = [
    .addressType("public"), .name("HeartRate"), .rssi(-52), .txPower(4),
    .uuids(["180d", "0000180f-0000-1000-8000-00805f9b34fb"]),
    .manufacturerData([0xffff: [0x00, 0x01, 0x02, 0x03]]),
    .serviceData(["9999": [0x00, 0x01, 0x02, 0x03, 0x04]]),
    .flags([0x06]), .appearance(832),
]
let heartRateAddress = "AA:BB:CC:DD:EE:FF"
let heartRatePath = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"

/// Runs a Python client script; its last stdout line must be a JSON object.
func pythonResult(_ bus: PrivateBus, _ body: String, timeout: Duration = .seconds(30)) async throws -> JSONValue {
    let r = try await bus.runPython(pythonPrelude + body, timeout: timeout)
    guard r.exitCode == 0, let last = r.stdoutLines.last else {
        throw BusTierError("python client failed: \(r)")
    }
    return try JSONValue.parse(last)
}

@Suite("Stand-in and harness", .timeLimit(.minutes(3)))
struct StandInTests {

    @Test("harness finds the bluectl executable built next to the tests")
    func findsBluectl() throws {
        let path = try BusTier.bluectlExecutable()
        #expect(FileManager.default.isExecutableFile(atPath: path))
        #expect(URL(fileURLWithPath: path).lastPathComponent == "bluectl")
    }

    @Test("a child that outlives its hard timeout is killed and reported")
    func hardTimeoutKills() async throws {
        let r = try await runProcess("/bin/sleep", ["30"], timeout: .milliseconds(300))
        // Killed, not ended by itself (sleep 30 would exit 0), and said so.
        #expect(r.timedOut)
        #expect(r.termination == .signaled(SIGKILL))
    }

    @Test("children start as a shell would start them: no blocked or ignored signals, no inherited descriptors")
    func cleanChildren() async throws {
        let r = try await runProcess("/bin/sh", ["-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status; ls /proc/self/fd"], timeout: .seconds(10))
        #expect(r.exitCode == 0, "\(r)")
        // signals 1–31 (glibc keeps its internal real-time signals 32/33 as it likes)
        func mask(_ name: String) -> UInt64? {
            r.stdoutLines.first { $0.hasPrefix(name + ":") }.flatMap { UInt64($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces), radix: 16) }
        }
        #expect(mask("SigBlk").map { $0 & 0x7fff_ffff } == 0, "\(r)")
        #expect(mask("SigIgn").map { $0 & 0x7fff_ffff } == 0, "\(r)")
        // 0, 1, 2 and the descriptor ls opens for /proc/self/fd
        #expect(r.stdoutLines.filter { Int($0) != nil }.count <= 4, "\(r)")
    }

    @Test("private bus: dbus-daemon prints its address; teardown removes the socket dir and stops the daemon")
    func privateBusLifecycle() async throws {
        let bus = try await PrivateBus.start(standIn: false)
        #expect(bus.address.hasPrefix("unix:path=\(bus.directory.path)/system_bus_socket"))
        #expect(bus.address.contains("guid="))
        let r = try await bus.busctl(["--json=short", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                      "org.freedesktop.DBus", "ListNames"])
        #expect(r.exitCode == 0, "\(r)")
        #expect(!r.stdout.contains("org.bluez"))
        bus.stop()
        #expect(!FileManager.default.fileExists(atPath: bus.directory.path))
        let after = try await runProcess(BusTier.busctl, ["--address=\(bus.address)", "list"], timeout: .seconds(5))
        #expect(after.exitCode != 0)
    }

    @Test("GetManagedObjects shows BlueZ's layout with the adapter and typed Adapter1 properties")
    func managedObjectsShowAdapter() async throws {
        try await withPrivateBus(adapters: [.hci0, AdapterSpec("hci1", address: "00:AA:01:01:00:24", alias: "second", powered: false)]) { bus in
            let objects = try await bus.managedObjects()
            #expect(Set(objects.keys) == ["/org/bluez", "/org/bluez/hci0", "/org/bluez/hci1"])
            #expect(objects["/org/bluez"]?["org.bluez.AgentManager1"] != nil)
            let a = try #require(objects["/org/bluez/hci0"]?["org.bluez.Adapter1"])
            #expect(a["Address"] == .object(["type": .string("s"), "data": .string("00:AA:01:00:00:23")]))
            #expect(a["AddressType"]?["data"] == .string("public"))
            #expect(a["Name"]?["data"] == .string("bus-tier-host"))
            #expect(a["Alias"]?["data"] == .string("bus-tier-host"))
            #expect(a["Class"]?["type"] == .string("u"))
            #expect(a["Powered"] == .object(["type": .string("b"), "data": .bool(true)]))
            #expect(a["PowerState"]?["data"] == .string("on"))
            #expect(a["Discovering"] == .object(["type": .string("b"), "data": .bool(false)]))
            #expect(a["Discoverable"]?["type"] == .string("b"))
            #expect(a["Pairable"]?["type"] == .string("b"))
            #expect(a["UUIDs"]?["type"] == .string("as"))
            #expect(a["Modalias"]?["type"] == .string("s"))
            let b = try #require(objects["/org/bluez/hci1"]?["org.bluez.Adapter1"])
            #expect(b["Powered"]?["data"] == .bool(false))
            #expect(b["PowerState"]?["data"] == .string("off"))
            #expect(b["Address"]?["data"] == .string("00:AA:01:01:00:24"))
            // advertisers stay off the bus until discovered
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            #expect(try await bus.managedObjects()[heartRatePath] == nil)
        }
    }

    @Test("StartDiscovery: Discovering goes true, then the advertiser appears with real Device1 types")
    func startDiscoveryEmitsDevice() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            try await bus.addAdvertiser("hci0", "C0:11:22:33:44:55", [.addressType("random"), .rssi(-70)])
            let r = try await pythonResult(bus, #"""
            start = call(ADAPTER, A1, 'StartDiscovery')
            pump(5, until=lambda: sum(s['member'] == 'InterfacesAdded' for s in signals) >= 2)
            sessions = mock('GetDiscoverySessions', 'hci0')
            again = call(ADAPTER, A1, 'StartDiscovery')
            out(start=start, again=again, signals=signals, me=bus.get_unique_name(), sessions=sessions)
            """#)
            #expect(r["start"] == ok)
            #expect(r["again"]?["error"] == .string("org.bluez.Error.InProgress"))
            let me = try #require(r["me"]?.string)
            #expect(r["sessions"]?["ok"]?.strings == [me])
            let signals = try #require(r["signals"]?.array)
            let owner = try #require(try await bus.owner(of: "org.bluez"))
            #expect(signals.allSatisfy { $0["sender"]?.string == owner })
            let discovering = signals.first { $0["member"] == .string("PropertiesChanged") && $0["path"] == .string("/org/bluez/hci0") }
            #expect(discovering?["args"]?[1]?["Discovering"] == .bool(true))
            let added = signals.filter { $0["member"] == .string("InterfacesAdded") }
            let hr = try #require(added.first { $0["args"]?[0] == .string(heartRatePath) })
            let d = try #require(hr["args"]?[1]?["org.bluez.Device1"])
            #expect(d["Address"] == .string(heartRateAddress))
            #expect(d["AddressType"] == .string("public"))
            #expect(d["Name"] == .string("HeartRate"))
            #expect(d["Alias"] == .string("HeartRate"))
            #expect(d["RSSI"] == .int(-52))
            #expect(d["TxPower"] == .int(4))
            #expect(d["Appearance"] == .int(832))
            #expect(d["UUIDs"]?.strings == ["0000180d-0000-1000-8000-00805f9b34fb", "0000180f-0000-1000-8000-00805f9b34fb"])
            #expect(d["ManufacturerData"] == .object(["65535": .string("00010203")]))
            #expect(d["ServiceData"] == .object(["00009999-0000-1000-8000-00805f9b34fb": .string("0001020304")]))
            #expect(d["AdvertisingFlags"] == .string("06"))
            #expect(d["Adapter"] == .string("/org/bluez/hci0"))
            #expect(d["Connected"] == .bool(false))
            #expect(d["ServicesResolved"] == .bool(false))
            let t = try #require(hr["types"]?["org.bluez.Device1"])
            #expect(t["RSSI"] == .string("Int16"))
            #expect(t["TxPower"] == .string("Int16"))
            #expect(t["Appearance"] == .string("UInt16"))
            #expect(t["Class"] == nil)
            #expect(t["ManufacturerData"] == .string("Dictionary(qv)"))
            #expect(t["ServiceData"] == .string("Dictionary(sv)"))
            #expect(t["AdvertisingFlags"] == .string("Array(y)"))
            #expect(t["UUIDs"] == .string("Array(s)"))
            #expect(t["Adapter"] == .string("ObjectPath"))
            // a device that advertises no name: Name absent, Alias is the dashed address (bluetoothd)
            let anon = try #require(added.first { $0["args"]?[0] == .string("/org/bluez/hci0/dev_C0_11_22_33_44_55") })
            let ad = try #require(anon["args"]?[1]?["org.bluez.Device1"])
            #expect(ad["Name"] == nil)
            #expect(ad["TxPower"] == nil)
            #expect(ad["ManufacturerData"] == nil)
            #expect(ad["Alias"] == .string("C0-11-22-33-44-55"))
            #expect(ad["AddressType"] == .string("random"))
            // The client left the bus: its session ended (NameOwnerChanged), Discovering
            // is false and RSSI/TxPower were invalidated, as bluetoothd does.
            #expect(try await bus.eventually { try await bus.adapterProperty("hci0", "Discovering") == .bool(false) })
            #expect(try await bus.discoverySessions().isEmpty)
            #expect(try await bus.discoveryLog().map(\.event) == ["StartDiscovery", "ClientLeft"])
            #expect(try await bus.eventually {
                let rssi = try await bus.busctl(["get-property", "org.bluez", heartRatePath, "org.bluez.Device1", "RSSI"])
                return rssi.exitCode != 0 && rssi.stderr.contains("No such property 'RSSI'")
            })
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Name")["data"] == .string("HeartRate"))
        }
    }

    @Test("UpdateAdvertiser during discovery: PropertiesChanged of what changed; StopDiscovery invalidates RSSI")
    func updatesWhileDiscovering() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let client = try bus.startPython(pythonPrelude + #"""
            call(ADAPTER, A1, 'SetDiscoveryFilter', {'DuplicateData': dbus.Boolean(False)}, sig='a{sv}')
            print(json.dumps(call(ADAPTER, A1, 'StartDiscovery')), flush=True)
            pump(3, until=lambda: any(s['member'] == 'InterfacesAdded' for s in signals))
            print('discovered', flush=True)
            pump(30, until=lambda: os.path.exists(sys.argv[1]))
            pump(0.3)
            stop = call(ADAPTER, A1, 'StopDiscovery')
            stop2 = call(ADAPTER, A1, 'StopDiscovery')
            pump(0.5)
            out(signals=signals, stop=stop, stop2=stop2)
            """#, [bus.directory.appendingPathComponent("go").path])
            #expect(await client.waitForStdout(timeout: .seconds(10)) { $0.contains("discovered") }, "\(client.stderr)")
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-45), .name("HeartRate-2")])
            try await bus.updateAdvertiser("hci0", heartRateAddress, [.rssi(-45)])   // nothing new
            _ = FileManager.default.createFile(atPath: bus.directory.appendingPathComponent("go").path, contents: nil)
            let r = await client.wait(timeout: .seconds(15))
            #expect(r.exitCode == 0, "\(r)")
            let result = try JSONValue.parse(try #require(r.stdoutLines.last))
            #expect(result["stop"] == ok)
            #expect(result["stop2"]?["error"] == .string("org.bluez.Error.Failed"))
            #expect(result["stop2"]?["message"] == .string("No discovery started"))
            let changes = (result["signals"]?.array ?? []).filter {
                $0["member"] == .string("PropertiesChanged") && $0["path"] == .string(heartRatePath)
            }
            #expect(changes.count == 2, "\(changes)")
            #expect(changes.first?["args"]?[1] == .object(["RSSI": .int(-45), "Name": .string("HeartRate-2"), "Alias": .string("HeartRate-2")]))
            #expect(changes.last?["args"]?[1] == .object([:]))
            #expect(changes.last?["args"]?[2]?.strings == ["RSSI", "TxPower"])
            #expect(try await bus.adapterProperty("hci0", "Discovering") == .bool(false))
        }
    }

    @Test("SetDiscoveryFilter: unknown keys and wrong types are org.bluez.Error.InvalidArguments; a good filter is recorded as sent")
    func setDiscoveryFilterValidation() async throws {
        try await withPrivateBus { bus in
            let r = try await pythonResult(bus, #"""
            bad = {
              'unknown key': {'Foo': 'bar'},
              'RSSI as int32': {'RSSI': dbus.Int32(-50)},
              'RSSI out of range': {'RSSI': dbus.Int16(-200)},
              'UUIDs not a UUID': {'UUIDs': dbus.Array(['12x4'], signature='s')},
              'UUIDs as bytes': {'UUIDs': dbus.Array([dbus.Byte(1)], signature='y')},
              'Transport usb': {'Transport': 'usb'},
              'DuplicateData as string': {'DuplicateData': 'yes'},
              'RSSI with Pathloss': {'RSSI': dbus.Int16(-50), 'Pathloss': dbus.UInt16(10)},
            }
            res = {k: call(ADAPTER, A1, 'SetDiscoveryFilter', dbus.Dictionary(v, signature='sv'), sig='a{sv}') for k, v in bad.items()}
            good = call(ADAPTER, A1, 'SetDiscoveryFilter', dbus.Dictionary({
                'UUIDs': dbus.Array(['0000180d-0000-1000-8000-00805f9b34fb', '180f'], signature='s'),
                'RSSI': dbus.Int16(-70), 'Transport': 'le', 'DuplicateData': dbus.Boolean(False),
                'Pattern': 'Heart'}, signature='sv'), sig='a{sv}')
            filters = call(ADAPTER, A1, 'GetDiscoveryFilters')
            out(bad=res, good=good, filters=filters)
            """#)
            let bad = try #require(r["bad"]?.object)
            #expect(bad.count == 8)
            for (what, result) in bad {
                #expect(result["error"] == .string("org.bluez.Error.InvalidArguments"), "\(what): \(result)")
            }
            #expect(r["good"] == ok)
            #expect(r["filters"]?["ok"]?.strings == ["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern"])
            let f = try await bus.lastDiscoveryFilter()
            #expect(f["UUIDs"] == .object(["type": .string("as"), "data": .array([.string("0000180d-0000-1000-8000-00805f9b34fb"), .string("180f")])]))
            #expect(f["RSSI"] == .object(["type": .string("n"), "data": .int(-70)]))
            #expect(f["Transport"] == .object(["type": .string("s"), "data": .string("le")]))
            #expect(f["DuplicateData"] == .object(["type": .string("b"), "data": .bool(false)]))
            #expect(f["Pattern"]?["data"] == .string("Heart"))
            #expect(try await bus.discoveryFilterCallCount() == 1)
        }
    }

    @Test("StartDiscovery on a powered-off adapter is NotReady; powering off ends discovery")
    func poweredOffAdapter() async throws {
        try await withPrivateBus { bus in
            try await bus.setPowered("hci0", false)
            #expect(try await bus.adapterProperty("hci0", "PowerState") == .string("off"))
            let r = try await pythonResult(bus, #"""
            off = call(ADAPTER, A1, 'StartDiscovery')
            stop = call(ADAPTER, A1, 'StopDiscovery')
            mock('SetAdapterPowered', 'hci0', True)
            on = call(ADAPTER, A1, 'StartDiscovery')
            discovering = call(ADAPTER, 'org.freedesktop.DBus.Properties', 'Get', A1, 'Discovering')
            mock('SetAdapterPowered', 'hci0', False)
            pump(0.3)
            after = call(ADAPTER, 'org.freedesktop.DBus.Properties', 'Get', A1, 'Discovering')
            stop_after = call(ADAPTER, A1, 'StopDiscovery')
            out(off=off, stop=stop, on=on, discovering=discovering, after=after, stop_after=stop_after)
            """#)
            #expect(r["off"] == .object(["error": .string("org.bluez.Error.NotReady"), "message": .string("Resource Not Ready")]))
            #expect(r["stop"]?["error"] == .string("org.bluez.Error.NotReady"))
            #expect(r["on"] == ok)
            #expect(r["discovering"]?["ok"] == .bool(true))
            #expect(r["after"]?["ok"] == .bool(false))
            #expect(r["stop_after"]?["error"] == .string("org.bluez.Error.NotReady"))
            #expect(try await bus.discoveryLog().map(\.event) == ["StartDiscovery", "PoweredOff"])
        }
    }

    @Test("Powered is writable through org.freedesktop.DBus.Properties.Set; Address is read-only")
    func propertiesSet() async throws {
        try await withPrivateBus { bus in
            let set = try await bus.busctl(["set-property", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "Powered", "b", "false"])
            #expect(set.exitCode == 0, "\(set)")
            #expect(try await bus.adapterProperty("hci0", "Powered") == .bool(false))
            #expect(try await bus.adapterProperty("hci0", "PowerState") == .string("off"))
            let ro = try await bus.busctl(["set-property", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "Address", "s", "00:00:00:00:00:01"])
            #expect(ro.exitCode != 0)
            let wrong = try await bus.busctl(["set-property", "org.bluez", "/org/bluez/hci0", "org.bluez.Adapter1", "Powered", "s", "yes"])
            #expect(wrong.exitCode != 0)
            #expect(try await bus.adapterProperty("hci0", "Address") == .string("00:AA:01:00:00:23"))
        }
    }

    @Test("filters of all clients are merged: a device is reported if any session's filter matches")
    func filterMerging() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            try await bus.addAdvertiser("hci0", "00:11:22:33:44:55", [.name("Thermo"), .rssi(-90), .uuids(["1809"])])
            let r = try await pythonResult(bus, #"""
            call(ADAPTER, A1, 'SetDiscoveryFilter', {'UUIDs': dbus.Array(['180d'], signature='s'), 'RSSI': dbus.Int16(-80)}, sig='a{sv}')
            call(ADAPTER, A1, 'StartDiscovery')
            pump(5, until=lambda: any(s['member'] == 'InterfacesAdded' for s in signals))
            pump(0.5)  # Thermo, were it let through, would be here by now (both come on one 10 ms timer)
            first = sorted(s['args'][0] for s in signals if s['member'] == 'InterfacesAdded')
            mock('SetFilterEnforcement', 'hci0', False)
            pump(3, until=lambda: sum(s['member'] == 'InterfacesAdded' for s in signals) >= 2)
            second = sorted(s['args'][0] for s in signals if s['member'] == 'InterfacesAdded')
            out(first=first, second=second)
            """#)
            #expect(r["first"]?.strings == [heartRatePath])
            #expect(r["second"]?.strings == ["/org/bluez/hci0/dev_00_11_22_33_44_55", heartRatePath])
        }
    }

    @Test("the rogue emitter really broadcasts BlueZ-looking signals, from a name that is not org.bluez's owner")
    func rogueEmitterEmits() async throws {
        try await withPrivateBus { bus in
            let monitor = try await bus.startMonitor(["type='signal'"])
            let rogue = try await bus.runRogueEmitter(["--victim", heartRatePath])
            #expect(rogue.exitCode == 0, "\(rogue)")
            let rogueName = try #require(rogue.stdoutLines.first)
            #expect(rogue.stdoutLines.last == "emitted 5")
            let owner = try #require(try await bus.owner(of: "org.bluez"))
            #expect(rogueName.hasPrefix(":") && rogueName != owner)
            #expect(await monitor.waitForStdout(timeout: .seconds(5)) { $0.contains("member=InterfacesRemoved") })
            monitor.signal(SIGTERM)
            let text = await monitor.wait(timeout: .seconds(5)).stdout
            let headers = text.split(separator: "\n").filter { $0.hasPrefix("signal ") && $0.contains("sender=\(rogueName) ") }
            func sent(_ path: String, _ member: String) -> Bool {
                headers.contains { $0.contains(" path=\(path); ") && $0.hasSuffix("member=\(member)") }
            }
            #expect(sent("/org/bluez/hci0", "PropertiesChanged"))
            #expect(sent("/", "InterfacesAdded"))
            #expect(sent("/org/bluez/hci0/dev_DE_AD_BE_EF_00_01", "PropertiesChanged"))
            #expect(sent(heartRatePath, "PropertiesChanged"))
            #expect(sent("/", "InterfacesRemoved"))
            #expect(text.contains("string \"ROGUE-ADAPTER\""))
            #expect(text.contains("object path \"/org/bluez/hci0/dev_DE_AD_BE_EF_00_01\""))
            #expect(text.contains("string \"ROGUE-DEVICE\""))
            // and the stand-in's state is untouched
            #expect(try await bus.adapterProperty("hci0", "Powered") == .bool(true))
            #expect(try await bus.managedObjects()["/org/bluez/hci0/dev_DE_AD_BE_EF_00_01"] == nil)
        }
    }

    @Test("EmitAdvertisementBurst: N devices then M PropertiesChanged (RSSI + ManufacturerData), all well-formed")
    func advertisementBurst() async throws {
        try await withPrivateBus { bus in
            let client = try bus.startPython(pythonPrelude + #"""
            counts = {'added': 0, 'changed': 0, 'bad': 0}
            last = {}
            def on_added(path, ifaces):
                counts['added'] += 1
            def on_changed(iface, changed, invalidated, path=None):
                counts['changed'] += 1
                if set(changed.keys()) != {'RSSI', 'ManufacturerData'} or not isinstance(changed['RSSI'], dbus.Int16):
                    counts['bad'] += 1
                last[str(path)] = plain(changed)
            bus.add_signal_receiver(on_added, 'InterfacesAdded', 'org.freedesktop.DBus.ObjectManager', 'org.bluez', '/')
            bus.add_signal_receiver(on_changed, 'PropertiesChanged', 'org.freedesktop.DBus.Properties', 'org.bluez',
                                    path_keyword='path')
            call(ADAPTER, A1, 'StartDiscovery')
            print('started', flush=True)
            pump(60, until=lambda: counts['changed'] >= 2001 and counts['added'] >= 200)
            dev7 = '/org/bluez/hci0/dev_C0_00_00_00_00_07'
            state = call(dev7, 'org.freedesktop.DBus.Properties', 'GetAll', 'org.bluez.Device1')
            out(counts=counts, last=last.get(dev7), state=state)
            """#)
            #expect(await client.waitForStdout(timeout: .seconds(10)) { $0.contains("started") }, "\(client.stderr)")
            #expect(try await bus.eventually { try await bus.adapterProperty("hci0", "Discovering") == .bool(true) })
            let (added, updates) = try await bus.emitAdvertisementBurst("hci0", devices: 200, updates: 2000)
            #expect(added == 200)
            #expect(updates == 2000)
            let r = await client.wait(timeout: .seconds(60))
            #expect(r.exitCode == 0, "\(r)")
            let result = try JSONValue.parse(try #require(r.stdoutLines.last))
            #expect(result["counts"]?["added"] == .int(200))
            // 2000 updates + the Discovering change on the adapter
            #expect(result["counts"]?["changed"] == .int(2001))
            #expect(result["counts"]?["bad"] == .int(1))   // the adapter's Discovering change
            // device 7's last update is i = 1807: RSSI -40 - 1807 % 50, data = index(4) + i(4) big-endian
            #expect(result["last"] == .object(["RSSI": .int(-47), "ManufacturerData": .object(["65535": .string("000000070000070f")])]))
            // the stand-in's state matches the last update
            let state = try #require(result["state"]?["ok"])
            #expect(state["RSSI"] == .int(-47))
            #expect(state["ManufacturerData"] == .object(["65535": .string("000000070000070f")]))
            #expect(state["Name"] == .string("burst-00007"))
            #expect(state["AddressType"] == .string("random"))
            // non-connectable devices go when discovery ends (the client left), as with bluetoothd
            #expect(try await bus.eventually { try await bus.managedObjects()["/org/bluez/hci0/dev_C0_00_00_00_00_07"] == nil })
        }
    }

    @Test("GATT: Connect exports the database then ServicesResolved; read, write, notify, AcquireNotify; Disconnect keeps it (BlueZ 5.66, Cache=always)")
    func gattDatabase() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", heartRateAddress, heartRate)
            let svc = try await bus.addGattService("hci0", heartRateAddress, uuid: "180d")
            let hrm = try await bus.addGattCharacteristic(svc, uuid: "2a37", flags: ["notify"], value: [0x00, 0x48])
            let cccd = try await bus.addGattDescriptor(hrm, uuid: "2902", flags: ["read", "write"], value: [0x00, 0x00])
            let loc = try await bus.addGattCharacteristic(svc, uuid: "2a38", flags: ["read"], value: [0x01])
            let ctl = try await bus.addGattCharacteristic(svc, uuid: "2a39", flags: ["write", "write-without-response"], value: [])
            #expect(svc == "\(heartRatePath)/service000a")
            #expect(hrm == "\(svc)/char000b")
            #expect(cccd == "\(hrm)/desc000d")
            let client = try bus.startPython(pythonPrelude + #"""
            import socket
            HR = '/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF'
            SVC, HRM, CCCD, LOC, CTL = sys.argv[1:6]
            D1, C1, P = 'org.bluez.Device1', 'org.bluez.GattCharacteristic1', 'org.freedesktop.DBus.Properties'
            call(ADAPTER, A1, 'StartDiscovery')
            pump(3, until=lambda: any(s['member'] == 'InterfacesAdded' for s in signals))
            res = {}
            res['connect'] = call(HR, D1, 'Connect')
            pump(3, until=lambda: any(s['member'] == 'PropertiesChanged' and s['args'][1].get('ServicesResolved') for s in signals))
            res['order'] = [s['args'][0] if s['member'] == 'InterfacesAdded' else s['member'] + ':' + ','.join(sorted(s['args'][1]))
                            for s in signals if s['path'] == HR or s['member'] == 'InterfacesAdded'][1:]
            res['again'] = call(HR, D1, 'Connect')
            res['read_loc'] = call(LOC, C1, 'ReadValue', {}, sig='a{sv}')
            res['read_offset'] = call(LOC, C1, 'ReadValue', {'offset': dbus.UInt16(1)}, sig='a{sv}')
            res['read_bad_offset'] = call(LOC, C1, 'ReadValue', {'offset': dbus.UInt16(5)}, sig='a{sv}')
            res['read_hrm'] = call(HRM, C1, 'ReadValue', {}, sig='a{sv}')
            res['write_loc'] = call(LOC, C1, 'WriteValue', dbus.ByteArray(b'\x02'), {}, sig='aya{sv}')
            res['write_ctl'] = call(CTL, C1, 'WriteValue', dbus.ByteArray(b'\x01\x02'), {}, sig='aya{sv}')
            res['write_cmd'] = call(CTL, C1, 'WriteValue', dbus.ByteArray(b'\x03'), {'type': 'command'}, sig='aya{sv}')
            res['read_cccd'] = call(CCCD, 'org.bluez.GattDescriptor1', 'ReadValue', {}, sig='a{sv}')
            res['stop_unstarted'] = call(HRM, C1, 'StopNotify')
            res['notify_loc'] = call(LOC, C1, 'StartNotify')
            res['start'] = call(HRM, C1, 'StartNotify')
            res['acquire_busy'] = call(HRM, C1, 'AcquireNotify', {}, sig='a{sv}')
            res['emit'] = mock('EmitNotification', dbus.ObjectPath(HRM), dbus.ByteArray(b'\x00\x50'), sig='oay')
            pump(2, until=lambda: any(s['path'] == HRM and 'Value' in s['args'][1] for s in signals if s['member'] == 'PropertiesChanged'))
            res['values'] = [s['args'][1]['Value'] for s in signals if s['member'] == 'PropertiesChanged' and s['path'] == HRM and 'Value' in s['args'][1]]
            res['stop'] = call(HRM, C1, 'StopNotify')
            fd, mtu = bus.call_blocking('org.bluez', HRM, C1, 'AcquireNotify', 'a{sv}', [{}])
            sock = socket.socket(fileno=fd.take())
            res['mtu'] = int(mtu)
            res['emit_fd'] = mock('EmitNotification', dbus.ObjectPath(HRM), dbus.ByteArray(b'\x00\x51'), sig='oay')
            sock.settimeout(3)
            res['fd_data'] = sock.recv(100).hex()
            res['acquired'] = call(HRM, P, 'Get', C1, 'NotifyAcquired')
            sock.close()
            pump(2, until=lambda: any(s['path'] == HRM and s['args'][1].get('NotifyAcquired') is False for s in signals if s['member'] == 'PropertiesChanged'))
            res['released'] = call(HRM, P, 'Get', C1, 'NotifyAcquired')
            res['disconnect'] = call(HR, D1, 'Disconnect')
            pump(1, until=lambda: any(s['member'] == 'PropertiesChanged' and s['path'] == HR and s['args'][1].get('Connected') is False for s in signals))
            res['removed'] = [s['args'][0] for s in signals if s['member'] == 'InterfacesRemoved']
            res['disconnect2'] = call(HR, D1, 'Disconnect')
            res['read_disconnected'] = call(LOC, C1, 'ReadValue', {}, sig='a{sv}')
            res['mtu_disconnected'] = call(HRM, P, 'Get', C1, 'MTU')
            out(**res)
            """#, [svc, hrm, cccd, loc, ctl])
            let r = await client.wait(timeout: .seconds(40))
            #expect(r.exitCode == 0, "\(r)")
            let g = try JSONValue.parse(try #require(r.stdoutLines.last))
            #expect(g["connect"] == ok)
            #expect(g["order"]?.strings == ["PropertiesChanged:Connected", svc, hrm, cccd, loc, ctl, "PropertiesChanged:ServicesResolved"])
            #expect(g["again"] == ok, "5.66 dev_connect: LE already connected → success")
            #expect(g["read_loc"] == .object(["ok": .string("01")]))
            #expect(g["read_offset"] == .object(["ok": .string("")]))
            #expect(g["read_bad_offset"]?["error"] == .string("org.bluez.Error.InvalidOffset"))
            #expect(g["read_hrm"]?["error"] == .string("org.bluez.Error.NotPermitted"))
            // 5.66 characteristic_write_value: no type, and neither write nor write-without-response → NotSupported
            #expect(g["write_loc"]?["error"] == .string("org.bluez.Error.NotSupported"))
            #expect(g["write_ctl"] == ok)
            #expect(g["write_cmd"] == ok)
            #expect(g["read_cccd"] == .object(["ok": .string("0000")]))
            #expect(g["stop_unstarted"] == .object(["error": .string("org.bluez.Error.Failed"), "message": .string("No notify session started")]))
            #expect(g["notify_loc"]?["error"] == .string("org.bluez.Error.NotSupported"))
            #expect(g["start"] == ok)
            #expect(g["acquire_busy"]?["error"] == .string("org.bluez.Error.InProgress"))
            #expect(g["emit"] == .object(["ok": .int(1)]))
            #expect(g["values"]?.strings == ["0050"])
            #expect(g["stop"] == ok)
            #expect(g["mtu"] == .int(247))
            #expect(g["emit_fd"] == .object(["ok": .int(1)]))
            #expect(g["fd_data"] == .string("0051"))
            #expect(g["acquired"] == .object(["ok": .bool(true)]))
            #expect(g["released"] == .object(["ok": .bool(false)]))
            #expect(g["disconnect"] == ok)
            #expect(g["removed"]?.strings == [], "5.66 keeps the GATT objects of a disconnected device (Cache=always)")
            #expect(g["disconnect2"]?["error"] == .string("org.bluez.Error.NotConnected"))
            #expect(g["read_disconnected"] == .object(["error": .string("org.bluez.Error.Failed"), "message": .string("Not connected")]))
            #expect(g["mtu_disconnected"]?["error"] == .string("org.freedesktop.DBus.Error.InvalidArgs"), "MTU exists only while connected")
            let writes = try await bus.gattWrites(ctl)
            #expect(writes.map(\.hex) == ["0102", "03"])
            #expect(writes.map(\.type) == ["request", "command"])
            #expect(try await bus.managedObjects()[svc] != nil)
        }
    }

    @Test("the stand-in's server side (GattManager1, LEAdvertisingManager1, Mock.Remote*) against a dbus-python application: bluetoothd 5.66's rules")
    func serverSideSelfTest() async throws {
        try await withPrivateBus { bus in
            let r = try await bus.spawn(BusTier.python, [BusTier.fixture("standin_server_selftest.py"), "--address", bus.address])
                .wait(timeout: .seconds(120))
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdout.contains("OK ") && !r.stdout.contains("FAIL"), "\(r)")
        }
    }
}
