// BTHome v2's objects: one table, read by the decoder (BTHome) and the encoder
// (BTHomeEncoder). Source: bthome.io/format (home-assistant/bthome.io, src/format.html
// as of 2026-04-30, commit 0cf388b); docs/sensors.md lists it with the JSON keys.

/// One object of the BTHome v2 format: its id, the names `bluectl advertise --bthome`
/// takes for it, what it measures and how its bytes encode a value. A class: the decoder
/// looks one up per object of every frame, and a reference is one retain where the
/// struct's names and quantity were four.
package final class BTHomeObject: Sendable {
    /// How the object's bytes hold its value.
    package enum Encoding: Sendable, Equatable {
        /// A little-endian integer times the factor: `SensorValue.number`.
        case number(signed: Bool)
        /// A little-endian integer as it is: `SensorValue.integer` (counts, ids, time).
        case integer(signed: Bool)
        /// One byte, 0 or 1: `SensorValue.flag`.
        case binary
        /// A button's event id.
        case button
        /// A dimmer's event id and its number of steps.
        case dimmer
        /// A length byte (arguments' length in its low 5 bits), an opcode, its arguments.
        case command
        /// A length byte, then that many bytes of UTF-8.
        case text
        /// A length byte, then that many bytes.
        case raw
        /// Version components, the least significant first: `SensorValue.text` (`4.2.1.0`).
        case firmwareVersion
        /// The packet id: not a measurement (`SensorReading.packetID`).
        case packetID
    }

    /// The object id.
    package let id: UInt8
    /// The names it is set by, the first the spec's property in snake_case (`temperature`,
    /// `garage_door`); its quantity's key (`temperature_c`) names it too.
    package let names: [String]
    /// What it measures (its JSON key).
    package let quantity: SensorQuantity
    /// How its bytes hold the value.
    package let encoding: Encoding
    /// Its length in bytes after the id; 0 for the objects with a length byte.
    package let length: Int
    /// The factor as a fraction, `numerator / denominator` (0.01 is 1/100, 0.35 is 35/100):
    /// the value is the integer times it, computed as one division, so that 2506 × 0.01 is
    /// exactly the double nearest 25.06.
    package let numerator: Int64
    /// See `numerator`.
    package let denominator: Int64

    init(_ id: UInt8, _ names: [String], _ quantity: SensorQuantity, _ encoding: Encoding, length: Int = 1,
         factor: (Int64, Int64) = (1, 1)) {
        self.id = id
        self.names = names
        self.quantity = quantity
        self.encoding = encoding
        self.length = length
        (numerator, denominator) = factor
    }

    /// The spec's name for it (the first of `names`).
    package var name: String { names[0] }

    /// Whether a length byte follows the id.
    package var hasLengthByte: Bool {
        switch encoding {
        case .command, .text, .raw: true
        default: false
        }
    }

    /// The smallest and largest integer its bytes hold (fixed-length number objects).
    package var integerRange: ClosedRange<Int64> {
        let bits = Int64(length * 8)
        switch encoding {
        case .number(signed: true), .integer(signed: true): return -(1 << (bits - 1))...((1 << (bits - 1)) - 1)
        default: return 0...((1 << bits) - 1)
        }
    }
}

/// The objects of BTHome v2, by id.
package enum BTHomeObjects {
    private static let u = BTHomeObject.Encoding.number(signed: false)
    private static let s = BTHomeObject.Encoding.number(signed: true)
    private static let countU = BTHomeObject.Encoding.integer(signed: false)
    private static let countS = BTHomeObject.Encoding.integer(signed: true)
    private static let c = (Int64(1), Int64(100))   // 0.01
    private static let m = (Int64(1), Int64(1000))  // 0.001
    private static let d = (Int64(1), Int64(10))    // 0.1
    private static let micro = (Int64(1), Int64(1_000_000))

    /// Every object of the spec, in id order.
    package static let all: [BTHomeObject] = [
        BTHomeObject(0x00, ["packet_id"], SensorQuantity(key: "packet_id", unit: ""), .packetID),
        BTHomeObject(0x01, ["battery"], .battery, u),
        BTHomeObject(0x02, ["temperature"], .temperature, s, length: 2, factor: c),
        BTHomeObject(0x03, ["humidity"], .humidity, u, length: 2, factor: c),
        BTHomeObject(0x04, ["pressure"], .pressure, u, length: 3, factor: c),
        BTHomeObject(0x05, ["illuminance"], .illuminance, u, length: 3, factor: c),
        BTHomeObject(0x06, ["mass_kg", "mass"], .massKilograms, u, length: 2, factor: c),
        BTHomeObject(0x07, ["mass_lb", "mass"], .massPounds, u, length: 2, factor: c),
        BTHomeObject(0x08, ["dewpoint", "dew_point"], .dewPoint, s, length: 2, factor: c),
        BTHomeObject(0x09, ["count"], .count, countU),
        BTHomeObject(0x0A, ["energy"], .energy, u, length: 3, factor: m),
        BTHomeObject(0x0B, ["power"], .power, u, length: 3, factor: c),
        BTHomeObject(0x0C, ["voltage"], .voltage, u, length: 2, factor: m),
        BTHomeObject(0x0D, ["pm2.5", "pm25"], .pm25, u, length: 2),
        BTHomeObject(0x0E, ["pm10"], .pm10, u, length: 2),
        BTHomeObject(0x0F, ["generic_boolean"], .genericBoolean, .binary),
        BTHomeObject(0x10, ["power_on"], .powerOn, .binary),
        BTHomeObject(0x11, ["opening"], .opening, .binary),
        BTHomeObject(0x12, ["co2"], .co2, u, length: 2),
        BTHomeObject(0x13, ["tvoc"], .tvoc, u, length: 2),
        BTHomeObject(0x14, ["moisture"], .moisture, u, length: 2, factor: c),
        BTHomeObject(0x15, ["battery_low"], .batteryLow, .binary),
        BTHomeObject(0x16, ["battery_charging"], .batteryCharging, .binary),
        BTHomeObject(0x17, ["carbon_monoxide"], .carbonMonoxide, .binary),
        BTHomeObject(0x18, ["cold"], .cold, .binary),
        BTHomeObject(0x19, ["connectivity"], .connectivity, .binary),
        BTHomeObject(0x1A, ["door"], .door, .binary),
        BTHomeObject(0x1B, ["garage_door"], .garageDoor, .binary),
        BTHomeObject(0x1C, ["gas_detected"], .gasDetected, .binary),
        BTHomeObject(0x1D, ["heat"], .heat, .binary),
        BTHomeObject(0x1E, ["light"], .light, .binary),
        BTHomeObject(0x1F, ["lock"], .lock, .binary),
        BTHomeObject(0x20, ["wet"], .wet, .binary),
        BTHomeObject(0x21, ["motion"], .motion, .binary),
        BTHomeObject(0x22, ["moving"], .moving, .binary),
        BTHomeObject(0x23, ["occupancy"], .occupancy, .binary),
        BTHomeObject(0x24, ["plug"], .plug, .binary),
        BTHomeObject(0x25, ["presence"], .presence, .binary),
        BTHomeObject(0x26, ["problem"], .problem, .binary),
        BTHomeObject(0x27, ["running"], .running, .binary),
        BTHomeObject(0x28, ["safety"], .safety, .binary),
        BTHomeObject(0x29, ["smoke"], .smoke, .binary),
        BTHomeObject(0x2A, ["sound"], .sound, .binary),
        BTHomeObject(0x2B, ["tamper"], .tamper, .binary),
        BTHomeObject(0x2C, ["vibration"], .vibration, .binary),
        BTHomeObject(0x2D, ["window"], .window, .binary),
        BTHomeObject(0x2E, ["humidity"], .humidity, u),
        BTHomeObject(0x2F, ["moisture"], .moisture, u),
        BTHomeObject(0x3A, ["button"], .button, .button),
        BTHomeObject(0x3B, ["command"], .command, .command, length: 0),
        BTHomeObject(0x3C, ["dimmer"], .dimmer, .dimmer, length: 2),
        BTHomeObject(0x3D, ["count"], .count, countU, length: 2),
        BTHomeObject(0x3E, ["count"], .count, countU, length: 4),
        BTHomeObject(0x3F, ["rotation"], .rotation, s, length: 2, factor: d),
        BTHomeObject(0x40, ["distance_mm", "distance"], .distanceMillimetres, u, length: 2),
        BTHomeObject(0x41, ["distance_m", "distance"], .distanceMetres, u, length: 2, factor: d),
        BTHomeObject(0x42, ["duration"], .duration, u, length: 3, factor: m),
        BTHomeObject(0x43, ["current"], .current, u, length: 2, factor: m),
        BTHomeObject(0x44, ["speed"], .speed, u, length: 2, factor: c),
        BTHomeObject(0x45, ["temperature"], .temperature, s, length: 2, factor: d),
        BTHomeObject(0x46, ["uv_index"], .uvIndex, u, factor: d),
        BTHomeObject(0x47, ["volume"], .volumeLitres, u, length: 2, factor: d),
        BTHomeObject(0x48, ["volume_ml", "volume"], .volumeMillilitres, u, length: 2),
        BTHomeObject(0x49, ["volume_flow_rate"], .volumeFlowRate, u, length: 2, factor: m),
        BTHomeObject(0x4A, ["voltage"], .voltage, u, length: 2, factor: d),
        BTHomeObject(0x4B, ["gas"], .gas, u, length: 3, factor: m),
        BTHomeObject(0x4C, ["gas"], .gas, u, length: 4, factor: m),
        BTHomeObject(0x4D, ["energy"], .energy, u, length: 4, factor: m),
        BTHomeObject(0x4E, ["volume"], .volumeLitres, u, length: 4, factor: m),
        BTHomeObject(0x4F, ["water"], .water, u, length: 4, factor: m),
        BTHomeObject(0x50, ["timestamp"], .timestamp, countU, length: 4),
        BTHomeObject(0x51, ["acceleration"], .acceleration, u, length: 2, factor: m),
        BTHomeObject(0x52, ["gyroscope"], .gyroscope, u, length: 2, factor: m),
        BTHomeObject(0x53, ["text"], .text, .text, length: 0),
        BTHomeObject(0x54, ["raw"], .raw, .raw, length: 0),
        BTHomeObject(0x55, ["volume_storage"], .volumeStorage, u, length: 4, factor: m),
        BTHomeObject(0x56, ["conductivity"], .conductivity, u, length: 2),
        BTHomeObject(0x57, ["temperature"], .temperature, s),
        BTHomeObject(0x58, ["temperature"], .temperature, s, factor: (35, 100)),
        BTHomeObject(0x59, ["count"], .count, countS),
        BTHomeObject(0x5A, ["count"], .count, countS, length: 2),
        BTHomeObject(0x5B, ["count"], .count, countS, length: 4),
        BTHomeObject(0x5C, ["power"], .power, s, length: 4, factor: c),
        BTHomeObject(0x5D, ["current"], .current, s, length: 2, factor: m),
        BTHomeObject(0x5E, ["direction"], .direction, u, length: 2, factor: c),
        BTHomeObject(0x5F, ["precipitation"], .precipitation, u, length: 2, factor: d),
        BTHomeObject(0x60, ["channel"], .channel, countU),
        BTHomeObject(0x61, ["rotational_speed"], .rotationalSpeed, u, length: 2),
        BTHomeObject(0x62, ["speed"], .speed, s, length: 4, factor: micro),
        BTHomeObject(0x63, ["acceleration"], .acceleration, s, length: 4, factor: micro),
        BTHomeObject(0x64, ["light_level"], .lightLevel, countU),
        BTHomeObject(0x65, ["settings_revision"], .settingsRevision, countU),
        BTHomeObject(0xF0, ["device_type_id"], .deviceTypeID, countU, length: 2),
        BTHomeObject(0xF1, ["firmware_version"], .firmwareVersion, .firmwareVersion, length: 4),
        BTHomeObject(0xF2, ["firmware_version"], .firmwareVersion, .firmwareVersion, length: 3),
    ]

    /// `all` by id (nil: an id the spec does not define).
    private static let table: [BTHomeObject?] = {
        var table = [BTHomeObject?](repeating: nil, count: 256)
        for object in all { table[Int(object.id)] = object }
        return table
    }()

    /// The object with this id; nil for an id the spec does not define.
    package static func object(_ id: UInt8) -> BTHomeObject? { table[Int(id)] }

    /// The objects a name sets, in id order: those that list it in `names`, or whose
    /// quantity has it as its key. Empty for a name of none.
    package static func objects(named name: String) -> [BTHomeObject] {
        let name = name.lowercased()
        return all.filter { $0.encoding != .packetID && ($0.names.contains(name) || $0.quantity.key == name) }
    }

    /// The button's events by id (bthome.io: 0x00 is "None", no press; 0x80 `hold_press`).
    package static let buttonEvents: [UInt8: String] = [
        0x00: "none", 0x01: "press", 0x02: "double_press", 0x03: "triple_press", 0x04: "long_press",
        0x05: "long_double_press", 0x06: "long_triple_press", 0x80: "hold_press",
    ]
    /// The dimmer's events by id (a number of steps follows).
    package static let dimmerEvents: [UInt8: String] = [0x00: "none", 0x01: "rotate_left", 0x02: "rotate_right"]
    /// The command object's opcodes (`step_up`/`step_down`: a number of steps as argument).
    package static let commandOpcodes: [UInt8: String] = [
        0x00: "off", 0x01: "on", 0x02: "toggle", 0x03: "step_up", 0x04: "step_down",
    ]

    /// An event id's name: the spec's, or `0x07` for one it does not name (a newer event
    /// is shown, not dropped nor guessed).
    package static func eventName(_ id: UInt8, in names: [UInt8: String]) -> String {
        names[id] ?? "0x" + (id < 16 ? "0" : "") + String(id, radix: 16)
    }
}
