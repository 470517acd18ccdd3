// The BlueZ stand-in's control API (org.freedesktop.DBus.Mock on "/" of
// org.bluez, Fixtures/bluez_standin.py) and the values it takes.

import Foundation

// MARK: - Stand-in values

/// An adapter the stand-in creates at start-up.
struct AdapterSpec: Sendable {
    var name: String
    var address: String
    var alias: String
    var powered: Bool

    init(_ name: String, address: String, alias: String, powered: Bool = true) {
        self.name = name; self.address = address; self.alias = alias; self.powered = powered
    }

    static let hci0 = AdapterSpec("hci0", address: "00:AA:01:00:00:23", alias: "bus-tier-host")
}

/// A typed D-Bus value, rendered as busctl's argument syntax.
indirect enum BusValue: Sendable {
    case string(String)
    case objectPath(String)
    case bool(Bool)
    case byte(UInt8)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case bytes([UInt8])
    case strings([String])
    /// a{sv}
    case dict([(String, BusValue)])
    /// a{qv}
    case uint16Dict([(UInt16, BusValue)])

    var signature: String {
        switch self {
        case .string: "s"
        case .objectPath: "o"
        case .bool: "b"
        case .byte: "y"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .bytes: "ay"
        case .strings: "as"
        case .dict: "a{sv}"
        case .uint16Dict: "a{qv}"
        }
    }

    /// busctl's argument words for this value (without its signature).
    var words: [String] {
        switch self {
        case .string(let s), .objectPath(let s): [s]
        case .bool(let b): [b ? "true" : "false"]
        case .byte(let v): [String(v)]
        case .int16(let v): [String(v)]
        case .uint16(let v): [String(v)]
        case .int32(let v): [String(v)]
        case .uint32(let v): [String(v)]
        case .bytes(let b): [String(b.count)] + b.map { String($0) }
        case .strings(let a): [String(a.count)] + a
        case .dict(let entries):
            [String(entries.count)] + entries.flatMap { [$0.0, $0.1.signature] + $0.1.words }
        case .uint16Dict(let entries):
            [String(entries.count)] + entries.flatMap { [String($0.0), $0.1.signature] + $0.1.words }
        }
    }
}

/// Advertisement content of a simulated peripheral (Device1 property names).
enum AdField: Sendable {
    case addressType(String)
    case name(String)
    case rssi(Int16)
    case txPower(Int16)
    case uuids([String])
    case manufacturerData([UInt16: [UInt8]])
    case serviceData([String: [UInt8]])
    case flags([UInt8])
    case appearance(UInt16)
    case connectable(Bool)

    var entry: (String, BusValue) {
        switch self {
        case .addressType(let t): ("AddressType", .string(t))
        case .name(let n): ("Name", .string(n))
        case .rssi(let r): ("RSSI", .int16(r))
        case .txPower(let t): ("TxPower", .int16(t))
        case .uuids(let u): ("UUIDs", .strings(u))
        case .manufacturerData(let m):
            ("ManufacturerData", .uint16Dict(m.keys.sorted().map { ($0, .bytes(m[$0]!)) }))
        case .serviceData(let s):
            ("ServiceData", .dict(s.keys.sorted().map { ($0, .bytes(s[$0]!)) }))
        case .flags(let f): ("AdvertisingFlags", .bytes(f))
        case .appearance(let a): ("Appearance", .uint16(a))
        case .connectable(let c): ("Connectable", .bool(c))
        }
    }
}

extension PrivateBus {
    // MARK: stand-in control (org.freedesktop.DBus.Mock on /)

    @discardableResult
    func mock(_ method: String, _ args: [BusValue] = [], timeout: Duration = .seconds(30)) async throws -> [JSONValue] {
        try await call("org.bluez", "/", "org.freedesktop.DBus.Mock", method, args, timeout: timeout)
    }

    @discardableResult
    func addAdapter(_ spec: AdapterSpec) async throws -> String {
        try await mock("AddAdapter", [.string(spec.name), .string(spec.address), .string(spec.alias), .bool(spec.powered)])
            .first?.string ?? ""
    }

    func removeAdapter(_ name: String) async throws {
        try await mock("RemoveAdapter", [.string(name)])
    }

    /// The adapter stops exporting `interface` (org.bluez.GattManager1 or org.bluez.LEAdvertisingManager1).
    func dropAdapterInterface(_ adapter: String, _ interface: String) async throws {
        _ = try await mock("DropAdapterInterface", [.string(adapter), .string(interface)])
    }

    func setPowered(_ adapter: String, _ powered: Bool) async throws {
        try await mock("SetAdapterPowered", [.string(adapter), .bool(powered)])
    }

    /// Registers a simulated peripheral; returns its (future) device path.
    @discardableResult
    func addAdvertiser(_ adapter: String, _ address: String, _ fields: [AdField]) async throws -> String {
        try await mock("AddAdvertiser", [.string(adapter), .string(address), .dict(fields.map(\.entry))])
            .first?.string ?? ""
    }

    /// The peripheral advertises changed data (`removed`: Device1 keys it no longer sends).
    func updateAdvertiser(_ adapter: String, _ address: String, _ fields: [AdField], removed: [String] = []) async throws {
        try await mock("UpdateAdvertiser", [.string(adapter), .string(address), .dict(fields.map(\.entry)), .strings(removed)])
    }

    func removeAdvertiser(_ adapter: String, _ address: String) async throws {
        try await mock("RemoveAdvertiser", [.string(adapter), .string(address)])
    }

    /// The dict of the last accepted SetDiscoveryFilter as busctl shows it:
    /// key → {"type": sig, "data": value}.
    func lastDiscoveryFilter(_ adapter: String = "hci0") async throws -> [String: JSONValue] {
        try await mock("GetLastDiscoveryFilter", [.string(adapter)]).first?.object ?? [:]
    }

    func discoveryFilterCallCount(_ adapter: String = "hci0") async throws -> Int {
        try await mock("GetDiscoveryFilterCallCount", [.string(adapter)]).first?.int ?? -1
    }

    /// Unique names of clients with a running discovery on the adapter.
    func discoverySessions(_ adapter: String = "hci0") async throws -> [String] {
        try await mock("GetDiscoverySessions", [.string(adapter)]).first?.strings ?? []
    }

    /// (event, client) pairs: SetDiscoveryFilter/StartDiscovery/StopDiscovery/ClientLeft/PoweredOff.
    func discoveryLog(_ adapter: String = "hci0") async throws -> [(event: String, client: String)] {
        (try await mock("GetDiscoveryLog", [.string(adapter)]).first?.array ?? []).compactMap {
            guard let e = $0[0]?.string, let c = $0[1]?.string else { return nil }
            return (e, c)
        }
    }

    /// false: report every advertiser whatever the discovery filters (as when
    /// another client scans unfiltered) — for testing bluectl's re-check.
    func setFilterEnforcement(_ adapter: String, _ enforce: Bool) async throws {
        try await mock("SetFilterEnforcement", [.string(adapter), .bool(enforce)])
    }

    /// The controller's scan stalls behind bluetoothd's back (Discovering stays true, nothing is
    /// reported) until the discovery starts again from none (`until: "restart"`) or the adapter is
    /// power-cycled (`"power-cycle"`).
    func stallScan(_ adapter: String, until: String) async throws {
        try await mock("StallScan", [.string(adapter), .string(until)])
    }

    /// Synthetic load (see the stand-in's EmitAdvertisementBurst); returns (devices added, updates sent).
    func emitAdvertisementBurst(_ adapter: String, devices: Int, updates: Int) async throws -> (added: Int, updates: Int) {
        let r = try await mock("EmitAdvertisementBurst", [.string(adapter), .uint32(UInt32(devices)), .uint32(UInt32(updates))],
                               timeout: .seconds(120))
        return (r.first?.int ?? -1, r.dropFirst().first?.int ?? -1)
    }

    @discardableResult
    func addGattService(_ adapter: String, _ address: String, uuid: String, primary: Bool = true) async throws -> String {
        try await mock("AddGattService", [.string(adapter), .string(address), .string(uuid), .bool(primary)]).first?.string ?? ""
    }

    @discardableResult
    func addGattCharacteristic(_ service: String, uuid: String, flags: [String], value: [UInt8]) async throws -> String {
        try await mock("AddGattCharacteristic", [.objectPath(service), .string(uuid), .strings(flags), .bytes(value)]).first?.string ?? ""
    }

    @discardableResult
    func addGattDescriptor(_ characteristic: String, uuid: String, flags: [String], value: [UInt8]) async throws -> String {
        try await mock("AddGattDescriptor", [.objectPath(characteristic), .string(uuid), .strings(flags), .bytes(value)]).first?.string ?? ""
    }

    @discardableResult
    func emitNotification(_ characteristic: String, _ value: [UInt8]) async throws -> Int {
        try await mock("EmitNotification", [.objectPath(characteristic), .bytes(value)]).first?.int ?? -1
    }

    func setGattValue(_ attribute: String, _ value: [UInt8]) async throws {
        try await mock("SetGattValue", [.objectPath(attribute), .bytes(value)])
    }

    /// Writes the peripheral received: (value hex, type, options).
    func gattWrites(_ attribute: String) async throws -> [(hex: String, type: String, options: JSONValue)] {
        (try await mock("GetGattWrites", [.objectPath(attribute)]).first?.array ?? []).compactMap { w in
            guard let bytes = w[0]?.array, let type = w[1]?.string else { return nil }
            let hex = bytes.compactMap(\.int).map { String(format: "%02x", $0) }.joined()
            return (hex, type, w[2] ?? .null)
        }
    }

    func dropConnection(_ device: String) async throws {
        try await mock("DropConnection", [.objectPath(device)])
    }

    /// Later calls of `method` on `path` fail with `errorName` ("" clears).
    func injectError(_ path: String, _ method: String, _ errorName: String, _ message: String = "") async throws {
        try await mock("InjectError", [.string(path), .string(method), .string(errorName), .string(message)])
    }

    /// The next `count` calls of `method` on `path` fail with `errorName`; later ones succeed.
    func injectError(_ path: String, _ method: String, _ errorName: String, _ message: String = "", times count: Int) async throws {
        try await mock("InjectErrorTimes", [.string(path), .string(method), .string(errorName), .string(message), .uint32(UInt32(count))])
    }

    /// BlueZ API methods called on `path`, in order (the stand-in's call log).
    func calls(_ path: String) async throws -> [String] {
        try await mock("GetCalls", [.string(path)]).first?.strings ?? []
    }

    /// How often `method` was called on `path`.
    func callCount(_ path: String, _ method: String) async throws -> Int {
        try await calls(path).filter { $0 == method }.count
    }

    /// Calls of ReadValue/WriteValue on `path` are never answered (until the device disconnects).
    func hang(_ path: String, _ method: String, _ hang: Bool = true) async throws {
        try await mock("HangMethod", [.string(path), .string(method), .bool(hang)])
    }

    /// Sets properties to any value (also wrongly typed ones) and removes others; one PropertiesChanged.
    func setProperties(_ path: String, _ interface: String, _ changed: [(String, BusValue)], removed: [String] = []) async throws {
        try await mock("SetProperties", [.string(path), .string(interface), .dict(changed), .strings(removed)])
    }

    /// How Device1.Pair on `device` asks the agent ("" = just works).
    func setPairing(_ device: String, _ method: String, _ value: UInt32 = 0) async throws {
        try await mock("SetPairing", [.objectPath(device), .string(method), .uint32(value)])
    }

    /// Agent calls Pair made: (method, device, outcome).
    func agentLog() async throws -> [(method: String, device: String, outcome: String)] {
        (try await mock("GetAgentLog").first?.array ?? []).compactMap {
            guard let m = $0[0]?.string, let d = $0[1]?.string, let o = $0[2]?.string else { return nil }
            return (m, d, o)
        }
    }

    /// Device1.Pair calls: (device, caller, agent owner, IO capability BlueZ would use).
    func pairLog() async throws -> [(device: String, caller: String, agentOwner: String, capability: String)] {
        (try await mock("GetPairLog").first?.array ?? []).compactMap {
            guard let d = $0[0]?.string, let c = $0[1]?.string, let a = $0[2]?.string, let k = $0[3]?.string else { return nil }
            return (d, c, a, k)
        }
    }

    /// PropertiesChanged(Value) signals `characteristic` has emitted (each notification
    /// once per registered StartNotify session, plus one per successful ReadValue).
    func valueSignalCount(_ characteristic: String) async throws -> Int {
        try await mock("GetValueSignalCount", [.objectPath(characteristic)]).first?.int ?? -1
    }

    /// Another (non-bluectl) client calls StartNotify / StopNotify on `characteristic`.
    func startNotify(_ characteristic: String, as client: String) async throws {
        try await mock("StartNotifyAs", [.objectPath(characteristic), .string(client)])
    }

    func stopNotify(_ characteristic: String, as client: String) async throws {
        try await mock("StopNotifyAs", [.objectPath(characteristic), .string(client)])
    }

    /// Another client reads `characteristic` (BlueZ emits PropertiesChanged(Value) for it).
    @discardableResult
    func readValue(_ characteristic: String, asOtherClient: Void = ()) async throws -> [Int] {
        (try await mock("ReadValueAs", [.objectPath(characteristic)]).first?.array ?? []).compactMap(\.int)
    }

    /// StartNotify sessions on `characteristic`: (client, registered).
    func notifyClients(_ characteristic: String) async throws -> [(client: String, registered: Bool)] {
        (try await mock("GetNotifyClients", [.objectPath(characteristic)]).first?.array ?? []).compactMap {
            guard let c = $0[0]?.string, let r = $0[1]?.bool else { return nil }
            return (c, r)
        }
    }
}
