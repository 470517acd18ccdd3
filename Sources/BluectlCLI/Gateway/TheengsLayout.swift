import BluectlCore

/// A device's state in Theengs Gateway's layout (`--layout theengs`): Theengs Decoder's
/// field names for what both decode, so dashboards made for Theengs keep working.
/// `id` and `mac` the address, `name`, `rssi`, `model`, then each measurement: under
/// Theengs' name where one is known (`KEYS`), else under scan's key.
struct TheengsRecord: OutputRecord {
    let device: DeviceInfo
    let reading: SensorReading?

    /// scan's measurement keys → Theengs Decoder's property names, as theengsdecoder 2.5.0
    /// names the same readings of the frames in Tests/SensorReference (theengs_compare.py).
    static let keys: [String: String] = [
        SensorQuantity.temperature.key: "tempc", SensorQuantity.humidity.key: "hum", SensorQuantity.pressure.key: "pres",
        SensorQuantity.battery.key: "batt", SensorQuantity.voltage.key: "volt", SensorQuantity.illuminance.key: "lux",
        SensorQuantity.moisture.key: "moi", "movement_counter": "mov", SensorQuantity.rotation.key: "rot",
    ]

    /// The field a measurement has in this layout.
    static func field(_ key: String) -> String { keys[key] ?? key }

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.json("id", .string(device.address.description))
        sink.json("mac", .string(device.address.description))
        sink.json("name", device.name.map { .string($0) })
        sink.json("rssi", device.rssi.map { .int($0) })
        sink.json("model", reading.map { .string($0.model ?? $0.format.rawValue) })
        for (key, value) in reading?.keyedMeasurements ?? [] {
            let json: JSONValue? = switch value {
            case .number(let number): .double(number)
            case .integer(let integer): .int(integer)
            case .flag(let on): .bool(on)
            case .event(let name, _): .string(name)
            case .text(let text): .string(text)
            case .bytes(let bytes): .hex(bytes)
            case .notAvailable: nil
            }
            sink.json(Self.field(key), json)
            // Theengs gives Fahrenheit beside Celsius.
            if key == SensorQuantity.temperature.key, case .number(let celsius) = value {
                sink.json("tempf", .double(((celsius * 1.8 + 32) * 10).rounded() / 10))
            }
        }
    }
}
