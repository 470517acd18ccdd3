import BluectlCore

/// A device as `scan` (one line per event) and `info` (a block) show it. JSON field
/// names are documented in docs/output.md and stable.
struct DeviceRecord: OutputRecord {
    let device: DeviceInfo
    let adapter: String
    /// "discovered" or "changed" in a scan; nil in `info`.
    var event: String?
    /// The sensor reading (or why there is none) a scan decoded (docs/sensors.md).
    var sensor: Result<SensorReading, SensorDecodingError>?

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        let device = self.device
        if let event { sink.field("event", .string(event), text: .plain("event", event == "discovered" ? "NEW" : "CHG")) }
        Self.describeIdentity(of: device, adapter: adapter, into: &sink)
        sink.field("tx_power", device.txPower.map { .int($0) }, text: device.txPower.map { .labelled("tx", "\($0) dBm") })
        // the reading next to the name, before the data it comes from (whose hex stays)
        let reading = try? sensor?.get()
        sink.field("sensor", reading.map { .object(Self.sensorObject($0)) },
                   text: reading.map { .labelled("sensor", TextSafety.terminalSafe(Self.sensorSummary($0))) })
        let problem: SensorDecodingError? = if case .failure(let error)? = sensor { error } else { reading?.partial }
        sink.field("sensor_error", problem.map { .object(Self.sensorErrorObject($0)) },
                   text: problem.map { .labelled("sensor error", TextSafety.terminalSafe($0.description)) })
        sink.field("service_uuids", device.serviceUUIDs.isEmpty ? nil : .strings(device.serviceUUIDs.map(\.uuidString)),
                   text: device.serviceUUIDs.isEmpty ? nil : .labelled("services", device.serviceUUIDs.map(\.label).joined(separator: ",")))
        let manufacturerData = device.manufacturerData.sorted(by: { $0.key < $1.key })
        // An entry that holds a beacon is shown decoded (`Beacon.summary`) in its place on a
        // line; a block shows both. JSON has both.
        sink.field("manufacturer_data", manufacturerData.isEmpty ? nil : .object(Self.hexObject(manufacturerData.map { (Self.hex16($0.key), $0.value) })),
                   text: manufacturerData.flatMap { company, bytes in
                       Self.entry(label: "mfr", key: Self.companyLabel(company), bytes: bytes,
                                  beacon: BeaconDecoding.beacon(company: company, data: bytes))
                   })
        let serviceData = device.serviceData.sorted(by: { $0.key < $1.key })
        sink.field("service_data", serviceData.isEmpty ? nil : .object(Self.hexObject(serviceData.map { ($0.key.uuidString, $0.value) })),
                   text: serviceData.flatMap { uuid, bytes in
                       Self.entry(label: "data", key: uuid.shortString, bytes: bytes, beacon: BeaconDecoding.beacon(service: uuid, data: bytes))
                   })
        sink.field("flags", device.advertisingFlags.map { .hex($0) },
                   text: device.advertisingFlags.map { .detail("flags", ByteFormats.hex($0)) })
        sink.field("appearance", device.appearance.map { .int($0) }, text: device.appearance.map { .detail("appearance", String($0)) })
        sink.json("beacon", Self.beaconObject(device))  // the text shows each beacon in place of its data, above
        sink.field("connected", .bool(device.connected), text: .flag("connected", device.connected))
        sink.field("paired", .bool(device.paired), text: .detail("paired", device.paired))
        sink.field("path", .string(device.path.rawValue), text: .detail("path", device.path.rawValue))
    }

    /// Which device this is, where: adapter, address and its type, RSSI, name
    /// and alias (also the start of a `devices` line, which names the adapter
    /// when it lists several: `namesAdapter`).
    static func describeIdentity<Sink: RecordSink>(of device: DeviceInfo, adapter: String, namesAdapter: Bool = false,
                                                   into sink: inout Sink) {
        sink.field("adapter", .string(adapter), text: namesAdapter ? .plain("adapter", adapter) : .detail("adapter", adapter))
        sink.field("address", .string(device.address.description), text: .plain("device", device.address.description))
        sink.field("address_type", device.addressType.map { .string($0.rawValue) },
                   text: .plain("type", device.addressType?.rawValue ?? "-"))
        sink.field("rssi", device.rssi.map { .int($0) }, text: .plain("rssi", device.rssi.map { "\($0) dBm" } ?? "- dBm"))
        sink.field("name", device.name.map { .string($0) },
                   text: .plain("name", device.displayName.map(TextSafety.quoted) ?? "(no name)"))
        sink.json("alias", device.alias.map { .string($0) })  // the text's name is the alias when there is no name
    }

    /// The text of one advertised data entry: "mfr 0x0059 (Nordic Semiconductor)=0102", or the beacon it holds.
    static func entry(label: String, key: String, bytes: [UInt8], beacon: Beacon?) -> [TextPart] {
        let raw = "\(key)=\(ByteFormats.hex(bytes))"
        guard let beacon else { return [.labelled(label, raw)] }
        return [.plain("beacon", beacon.summary), .detail(label, raw)]
    }

    /// {"key": "hex", …}
    static func hexObject(_ entries: [(String, [UInt8])]) -> JSONLine {
        var object = JSONLine()
        for (key, bytes) in entries { object.add(key, hex: bytes) }
        return object
    }

    /// One member per beacon format (the first of a kind when a device repeats one); nil when none.
    static func beaconObject(_ device: DeviceInfo) -> JSONValue? {
        let beacons = BeaconDecoding.beacons(in: device)
        guard !beacons.isEmpty else { return nil }
        var object = JSONLine()
        var kinds = Set<String>()
        for beacon in beacons where kinds.insert(beacon.kind).inserted {
            object.add(beacon.kind, object: JSONLine(fields: beacon.fields))
        }
        return .object(object)
    }

    /// `sensor`: format, model, whether encrypted, the layout when reverse-engineered, packet
    /// id and counter, then one member per measurement (`SensorReading.keyedMeasurements`).
    static func sensorObject(_ reading: SensorReading) -> JSONLine {
        var object = JSONLine()
        object.add("format", reading.format.rawValue)
        if let model = reading.model { object.add("model", model) }
        object.add("encrypted", reading.encrypted)
        if reading.format.layout == .reverseEngineered { object.add("layout", reading.format.layout.rawValue) }
        if let packetID = reading.packetID { object.add("packet_id", packetID) }
        if let counter = reading.counter { object.add("counter", Int(counter)) }
        for (key, value) in reading.keyedMeasurements {
            switch value {
            case .number(let number): object.add(key, number)
            case .integer(let integer): object.add(key, integer)
            case .flag(let on): object.add(key, on)
            case .event(let name, let steps):
                object.add(key, name)
                if let steps { object.add(key + "_steps", steps) }
            case .text(let text): object.add(key, text)
            case .bytes(let bytes): object.add(key, hex: bytes)
            case .notAvailable: object.addNull(key)
            }
        }
        return object
    }

    /// `sensor_error`: the format, the kind (`SensorDecodingError.Kind`) and the one-line reason.
    static func sensorErrorObject(_ error: SensorDecodingError) -> JSONLine {
        var object = JSONLine()
        object.add("format", error.format.rawValue)
        object.add("kind", error.kind.rawValue)
        object.add("reason", error.detail)
        return object
    }

    /// A reading for people: `21.5 °C 48 % 3 V`, `(encrypted)` after it, or `(no measurements)`.
    static func sensorSummary(_ reading: SensorReading) -> String {
        let summary = reading.measurements.isEmpty ? "(no measurements)" : reading.summary
        return reading.encrypted ? summary + " (encrypted)" : summary
    }

    /// "0x004c": how 16-bit identifiers are shown (company identifiers, attribute handles).
    static func hex16(_ value: UInt16) -> String {
        // Written in place: a scan line names a company per manufacturer data entry.
        let digits: StaticString = "0123456789abcdef"
        return digits.withUTF8Buffer { d in
            String(unsafeUninitializedCapacity: 6) { out in
                out[0] = UInt8(ascii: "0")
                out[1] = UInt8(ascii: "x")
                for i in 0..<4 { out[2 + i] = d[Int(value >> UInt16(12 - 4 * i)) & 0xF] }
                return 6
            }
        }
    }

    /// "0x004c (Apple)": the identifier and, when assigned, the company's short name.
    static func companyLabel(_ company: UInt16) -> String {
        let name = CompanyIdentifiers.shortName(for: company).map { " (\(TextSafety.terminalSafe($0)))" } ?? ""
        return hex16(company) + name
    }
}
