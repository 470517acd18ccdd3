import BluectlCore

/// `bluectl gateway --config FILE` (docs/gateway.md, "The config file"):
///
///     {"advertisements": {"addresses": ["A4:C1:38:00:00:27"], "services": ["fcd2"],
///                         "sensor_formats": ["bthome", "xiaomi"], "min_interval": 10},
///      "devices": {"A4:C1:38:00:00:27": {"subscribe": ["2a37"],
///                                        "read": [{"characteristic": "battery_level", "every": 60}],
///                                        "writable": ["2a39"]}}}
///
/// Every member is optional. `advertisements` says which advertisements are published
/// (all of its filters must hold); `devices` is each device's GATT work. Every problem is
/// reported with its JSON path, as a SPEC's are (`ServeSpec`).
struct GatewayConfig: Sendable, Equatable {
    /// Only these devices (empty: any).
    var addresses: Set<BluetoothAddress> = []
    /// Only devices advertising one of these services (empty: any); also BlueZ's discovery filter.
    var services: [BluetoothUUID] = []
    /// Only advertisements in one of these sensor formats, decoded or not (empty: any).
    var sensorFormats: Set<SensorFormat> = []
    /// At most one reading per device in this many seconds (nil: every distinct reading).
    var minInterval: Double?
    /// Each device's GATT work.
    var devices: [BluetoothAddress: DeviceWork] = [:]

    /// What the gateway does over GATT with one device.
    struct DeviceWork: Sendable, Equatable {
        /// Characteristics whose notifications are published.
        var subscribe: [BluetoothUUID] = []
        /// Characteristics read and published every `every` seconds.
        var read: [Periodic] = []
        /// The only characteristics a command from MQTT may write (default none).
        var writable: [BluetoothUUID] = []
    }

    /// A characteristic read every `every` seconds.
    struct Periodic: Sendable, Equatable {
        var characteristic: BluetoothUUID
        var every: Double
    }

    typealias Problem = ServeSpec.Problem

    /// The config in `path`: exit 64 when it cannot be read, 65 when it is not a valid config
    /// (the message names the file and the JSON path), as `serve`'s SPEC.
    static func load(_ path: String) throws -> GatewayConfig {
        let bytes: [UInt8]
        switch WriteCommand.readFile(path) {
        case .success(let read): bytes = read
        case .failure(let reason):
            throw CLIFailure(.usage, "cannot read --config \(TextSafety.escapedForMessage(path)): \(reason.text)")
        }
        do {
            return try parse(bytes)
        } catch {
            throw CLIFailure(.dataError, "invalid --config \(TextSafety.escapedForMessage(path)): \(error)")
        }
    }

    static func parse(_ data: [UInt8]) throws(Problem) -> GatewayConfig {
        let root: Any
        do {
            root = try JSONInput.parse(data)
        } catch {
            throw Problem(path: "", message: "not valid JSON" + (JSONInput.problem(error).map { " (\($0))" } ?? ""))
        }
        let top = try ServeSpec.object(root, at: "", keys: ["advertisements", "devices"])
        var config = GatewayConfig()
        if let advertisements = top["advertisements"] {
            let fields = try ServeSpec.object(advertisements, at: "advertisements",
                                              keys: ["addresses", "services", "sensor_formats", "min_interval"])
            config.addresses = Set(try list(fields["addresses"], at: "advertisements.addresses", address))
            config.services = try list(fields["services"], at: "advertisements.services") { value, at throws(Problem) in
                try ServeSpec.uuid(value, at: at, kind: .service)
            }
            config.sensorFormats = Set(try list(fields["sensor_formats"], at: "advertisements.sensor_formats") { value, at throws(Problem) in
                let text = try ServeSpec.string(value, at: at)
                guard let format = SensorFormat(rawValue: text) else {
                    throw Problem(path: at, message: "unknown sensor format \"\(TextSafety.escapedForMessage(text))\" (expected \(SensorFormat.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                return format
            })
            config.minInterval = try fields["min_interval"].map { value throws(Problem) in try seconds(value, at: "advertisements.min_interval") }
        }
        if let devices = top["devices"] {
            guard let entries = devices as? [String: Any] else { throw Problem(path: "devices", message: "expected an object of addresses") }
            for key in entries.keys.sorted() {
                let at = "devices.\(key)"
                let device = try address(key, at: at)
                let fields = try ServeSpec.object(entries[key]!, at: at, keys: ["subscribe", "read", "writable"])
                var work = DeviceWork()
                work.subscribe = try list(fields["subscribe"], at: at + ".subscribe", characteristic)
                work.writable = try list(fields["writable"], at: at + ".writable", characteristic)
                work.read = try list(fields["read"], at: at + ".read") { value, at throws(Problem) in
                    let entry = try ServeSpec.object(value, at: at, keys: ["characteristic", "every"])
                    guard let every = entry["every"] else { throw Problem(path: at + ".every", message: "missing") }
                    return Periodic(characteristic: try characteristic(entry["characteristic"], at: at + ".characteristic"),
                                    every: try seconds(every, at: at + ".every"))
                }
                try once(work.subscribe, at: at + ".subscribe")
                try once(work.read.map(\.characteristic), at: at + ".read", suffix: ".characteristic")
                try once(work.writable, at: at + ".writable")
                if work == DeviceWork() { throw Problem(path: at, message: "nothing to do (expected subscribe, read or writable)") }
                config.devices[device] = work
            }
        }
        return config
    }

    /// Whether an advertisement passes the config's filters (services are BlueZ's filter, and
    /// `ScanOptions.matches` checks them again).
    func admits(_ device: DeviceInfo, sensor: Result<SensorReading, SensorDecodingError>?) -> Bool {
        if !addresses.isEmpty, !addresses.contains(device.address) { return false }
        if !sensorFormats.isEmpty {
            let format: SensorFormat? = switch sensor {
            case .success(let reading)?: reading.format
            case .failure(let error)?: error.format
            case nil: nil
            }
            guard let format, sensorFormats.contains(format) else { return false }
        }
        return true
    }

    // MARK: - Pieces

    private static func list<T>(_ value: Any?, at path: String, _ element: (Any, String) throws(Problem) -> T) throws(Problem) -> [T] {
        guard let value else { return [] }
        var result: [T] = []
        for (i, entry) in try ServeSpec.array(value, at: path).enumerated() { result.append(try element(entry, "\(path)[\(i)]")) }
        return result
    }

    /// A characteristic named twice in one list is a slip (one subscription, one read each): refused by path.
    private static func once(_ uuids: [BluetoothUUID], at path: String, suffix: String = "") throws(Problem) {
        for (i, uuid) in uuids.enumerated() where uuids[..<i].contains(uuid) {
            throw Problem(path: "\(path)[\(i)]\(suffix)", message: "\(uuid.label) is listed twice")
        }
    }

    private static func address(_ value: Any, at path: String) throws(Problem) -> BluetoothAddress {
        let text = try ServeSpec.string(value, at: path)
        guard let address = BluetoothAddress(text) else {
            throw Problem(path: path, message: "\"\(TextSafety.escapedForMessage(text))\" is not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
        }
        return address
    }

    private static func characteristic(_ value: Any?, at path: String) throws(Problem) -> BluetoothUUID {
        try ServeSpec.uuid(value, at: path, kind: .characteristic)
    }

    private static func seconds(_ value: Any, at path: String) throws(Problem) -> Double {
        guard let number = value as? Double, number.isFinite, number > 0, number <= 31_536_000 else {
            throw Problem(path: path, message: "expected a positive number of seconds")
        }
        return number
    }
}
