// Sensor readings decoded from advertisements: the typed values a program gets, whatever
// format carried them. The formats' layouts and sources: docs/sensors.md.

/// An advertisement format that carries sensor readings.
public enum SensorFormat: String, Sendable, Equatable, CaseIterable {
    /// BTHome v2: service data of 0xFCD2 (bthome.io), plain or AES-CCM encrypted.
    case bthome
    /// Ruuvi: manufacturer data of 0x0499, data formats 5 (RAWv2) and 3 (RAWv1).
    case ruuvi
    /// Xiaomi MiBeacon: service data of 0xFE95, versions 2 to 5 (4 and 5 may be encrypted).
    case xiaomi
    /// The pvvx custom firmware's format: service data of 0x181A, 15 bytes (11 when
    /// encrypted: a counter, 6 bytes of ciphertext and a 4-byte tag).
    case pvvx
    /// The ATC1441 custom firmware's format: service data of 0x181A, 13 bytes, big-endian
    /// (8 when the pvvx firmware encrypts it).
    case atc1441
    /// SwitchBot meters: service data of 0xFD3D (0x0D00 on older firmware) and manufacturer
    /// data of 0x0969.
    case switchbot
    /// Govee hygrometers (no vendor specification: decoded as Home Assistant's `govee-ble` does).
    case govee
    /// Inkbird hygrometers (no vendor specification: decoded as Home Assistant's `inkbird-ble` does).
    case inkbird

    /// The format's name for people, e.g. `BTHome v2`.
    public var displayName: String {
        switch self {
        case .bthome: "BTHome v2"
        case .ruuvi: "Ruuvi"
        case .xiaomi: "Xiaomi MiBeacon"
        case .pvvx: "pvvx"
        case .atc1441: "ATC1441"
        case .switchbot: "SwitchBot"
        case .govee: "Govee"
        case .inkbird: "Inkbird"
        }
    }

    /// Where the layout bluectl decodes comes from: a published specification, or other
    /// people's reverse engineering (then every field is only as good as theirs).
    public var layout: SensorLayout {
        switch self {
        case .govee, .inkbird: .reverseEngineered
        case .bthome, .ruuvi, .xiaomi, .pvvx, .atc1441, .switchbot: .published
        }
    }
}

/// Where a sensor format's layout comes from.
public enum SensorLayout: String, Sendable, Equatable, CaseIterable {
    /// A specification the format's owner (or the firmware's author) publishes.
    case published
    /// No specification exists; the layout is what others worked out from devices.
    case reverseEngineered = "reverse_engineered"
}

/// What a measurement measures, in which unit: the name of its JSON member (`temperature_c`)
/// and the unit shown after its value (`°C`). Compare with the constants below
/// (`.temperature`, `.humidity`, …); two quantities are equal when their keys are.
public struct SensorQuantity: Hashable, Sendable, CustomStringConvertible {
    /// snake_case, with the unit as its last part where there is one: `temperature_c`,
    /// `humidity_percent`, `button`. Stable: it is the JSON member's name.
    public let key: String
    /// The unit as people write it after a value (`°C`, `%`, `hPa`); empty for counts,
    /// states and events.
    public let unit: String

    /// A quantity with this JSON key and unit.
    public init(key: String, unit: String) {
        self.key = key
        self.unit = unit
    }

    /// The JSON key.
    public var description: String { key }

    /// Equal keys are the same quantity.
    public static func == (lhs: SensorQuantity, rhs: SensorQuantity) -> Bool { lhs.key == rhs.key }

    /// Hashes the key.
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }
}

extension SensorQuantity {
    /// Temperature in degrees Celsius.
    public static let temperature = SensorQuantity(key: "temperature_c", unit: "°C")
    /// Relative humidity in percent.
    public static let humidity = SensorQuantity(key: "humidity_percent", unit: "%")
    /// Air pressure in hectopascals.
    public static let pressure = SensorQuantity(key: "pressure_hpa", unit: "hPa")
    /// Battery charge in percent.
    public static let battery = SensorQuantity(key: "battery_percent", unit: "%")
    /// Battery (or supply) voltage in volts.
    public static let voltage = SensorQuantity(key: "voltage_v", unit: "V")
    /// Illuminance in lux.
    public static let illuminance = SensorQuantity(key: "illuminance_lux", unit: "lx")
    /// Soil moisture in percent.
    public static let moisture = SensorQuantity(key: "moisture_percent", unit: "%")
    /// Carbon dioxide in parts per million.
    public static let co2 = SensorQuantity(key: "co2_ppm", unit: "ppm")
    /// A button's event (`press`, `double_press`, `long_press`, …).
    public static let button = SensorQuantity(key: "button", unit: "")

    // BTHome v2's other objects (bthome.io/format; docs/sensors.md). Keys: the spec's
    // property in snake_case with its unit; a binary sensor whose property names a sensor
    // too says its true state (`battery_low`, `power_on`, `wet`, `gas_detected`).

    /// Mass in kilograms.
    public static let massKilograms = SensorQuantity(key: "mass_kg", unit: "kg")
    /// Mass in pounds.
    public static let massPounds = SensorQuantity(key: "mass_lb", unit: "lb")
    /// Dew point in degrees Celsius.
    public static let dewPoint = SensorQuantity(key: "dew_point_c", unit: "°C")
    /// A count (of anything the device counts), signed or not.
    public static let count = SensorQuantity(key: "count", unit: "")
    /// Energy in kilowatt hours.
    public static let energy = SensorQuantity(key: "energy_kwh", unit: "kWh")
    /// Power in watts (negative: delivered).
    public static let power = SensorQuantity(key: "power_w", unit: "W")
    /// Particulate matter up to 2.5 µm, in micrograms per cubic metre.
    public static let pm25 = SensorQuantity(key: "pm25_ug_m3", unit: "µg/m³")
    /// Particulate matter up to 10 µm, in micrograms per cubic metre.
    public static let pm10 = SensorQuantity(key: "pm10_ug_m3", unit: "µg/m³")
    /// Total volatile organic compounds in micrograms per cubic metre.
    public static let tvoc = SensorQuantity(key: "tvoc_ug_m3", unit: "µg/m³")
    /// Rotation (an angle) in degrees.
    public static let rotation = SensorQuantity(key: "rotation_deg", unit: "°")
    /// Distance in millimetres.
    public static let distanceMillimetres = SensorQuantity(key: "distance_mm", unit: "mm")
    /// Distance in metres.
    public static let distanceMetres = SensorQuantity(key: "distance_m", unit: "m")
    /// A duration in seconds.
    public static let duration = SensorQuantity(key: "duration_s", unit: "s")
    /// Electric current in amperes (negative: the other way).
    public static let current = SensorQuantity(key: "current_a", unit: "A")
    /// Speed in metres per second.
    public static let speed = SensorQuantity(key: "speed_m_s", unit: "m/s")
    /// The UV index (no unit).
    public static let uvIndex = SensorQuantity(key: "uv_index", unit: "")
    /// Volume in litres.
    public static let volumeLitres = SensorQuantity(key: "volume_l", unit: "L")
    /// Volume in millilitres.
    public static let volumeMillilitres = SensorQuantity(key: "volume_ml", unit: "mL")
    /// Volume flow rate in cubic metres per hour.
    public static let volumeFlowRate = SensorQuantity(key: "volume_flow_rate_m3_h", unit: "m³/h")
    /// Gas consumed, in cubic metres (a meter's reading).
    public static let gas = SensorQuantity(key: "gas_m3", unit: "m³")
    /// Water consumed, in litres (a meter's reading).
    public static let water = SensorQuantity(key: "water_l", unit: "L")
    /// What is stored, in litres (a tank's content).
    public static let volumeStorage = SensorQuantity(key: "volume_storage_l", unit: "L")
    /// A point in time the device sends, in seconds since 1970-01-01 00:00:00 UTC (an integer).
    public static let timestamp = SensorQuantity(key: "timestamp", unit: "")
    /// Acceleration in metres per second squared.
    public static let acceleration = SensorQuantity(key: "acceleration_m_s2", unit: "m/s²")
    /// Angular velocity in degrees per second.
    public static let gyroscope = SensorQuantity(key: "gyroscope_deg_s", unit: "°/s")
    /// Electrical conductivity in microsiemens per centimetre (soil sensors).
    public static let conductivity = SensorQuantity(key: "conductivity_us_cm", unit: "µS/cm")
    /// A direction (wind's) in degrees.
    public static let direction = SensorQuantity(key: "direction_deg", unit: "°")
    /// Precipitation in millimetres.
    public static let precipitation = SensorQuantity(key: "precipitation_mm", unit: "mm")
    /// Rotational speed in revolutions per minute.
    public static let rotationalSpeed = SensorQuantity(key: "rotational_speed_rpm", unit: "rpm")
    /// Which channel of a multi-channel device the frame's readings are for (an integer).
    public static let channel = SensorQuantity(key: "channel", unit: "")
    /// A light level: 0 dark, 1 twilight, 2 bright (an integer).
    public static let lightLevel = SensorQuantity(key: "light_level", unit: "")
    /// The revision of the device's settings (an integer that changes with them).
    public static let settingsRevision = SensorQuantity(key: "settings_revision", unit: "")
    /// The device's type, a number its maker assigns (an integer).
    public static let deviceTypeID = SensorQuantity(key: "device_type_id", unit: "")
    /// The device's firmware version (text: `4.2.1.0`).
    public static let firmwareVersion = SensorQuantity(key: "firmware_version", unit: "")
    /// Text the device sends.
    public static let text = SensorQuantity(key: "text", unit: "")
    /// Bytes the device sends for its own use (raw).
    public static let raw = SensorQuantity(key: "raw", unit: "")
    /// A dimmer's event (`rotate_left`, `rotate_right`) with its number of steps.
    public static let dimmer = SensorQuantity(key: "dimmer", unit: "")
    /// A command to an actuator (`off`, `on`, `toggle`, `step_up`, `step_down`; steps for the last two).
    public static let command = SensorQuantity(key: "command", unit: "")
    /// A command's arguments when they are not a number of steps (maker-specific bytes).
    public static let commandArguments = SensorQuantity(key: "command_args", unit: "")

    // Binary sensors: true is the state the key names (or the spec's "on" state, said here).

    /// The battery is low (true) or normal.
    public static let batteryLow = SensorQuantity(key: "battery_low", unit: "")
    /// The battery is charging.
    public static let batteryCharging = SensorQuantity(key: "battery_charging", unit: "")
    /// Carbon monoxide detected.
    public static let carbonMonoxide = SensorQuantity(key: "carbon_monoxide", unit: "")
    /// Cold (true) or normal.
    public static let cold = SensorQuantity(key: "cold", unit: "")
    /// Connected (true) or disconnected.
    public static let connectivity = SensorQuantity(key: "connectivity", unit: "")
    /// A door is open (true) or closed.
    public static let door = SensorQuantity(key: "door", unit: "")
    /// A garage door is open (true) or closed.
    public static let garageDoor = SensorQuantity(key: "garage_door", unit: "")
    /// Gas detected (true) or clear.
    public static let gasDetected = SensorQuantity(key: "gas_detected", unit: "")
    /// A generic on (true) / off state.
    public static let genericBoolean = SensorQuantity(key: "generic_boolean", unit: "")
    /// Hot (true) or normal.
    public static let heat = SensorQuantity(key: "heat", unit: "")
    /// Light detected (true) or none.
    public static let light = SensorQuantity(key: "light", unit: "")
    /// A lock: true is UNLOCKED, false locked (the spec's and Home Assistant's sense).
    public static let lock = SensorQuantity(key: "lock", unit: "")
    /// Wet (true) or dry.
    public static let wet = SensorQuantity(key: "wet", unit: "")
    /// Motion detected (true) or clear.
    public static let motion = SensorQuantity(key: "motion", unit: "")
    /// Moving (true) or not.
    public static let moving = SensorQuantity(key: "moving", unit: "")
    /// Occupied (true) or clear.
    public static let occupancy = SensorQuantity(key: "occupancy", unit: "")
    /// Open (true) or closed.
    public static let opening = SensorQuantity(key: "opening", unit: "")
    /// Plugged in (true) or unplugged.
    public static let plug = SensorQuantity(key: "plug", unit: "")
    /// Power on (true) or off.
    public static let powerOn = SensorQuantity(key: "power_on", unit: "")
    /// Home (true) or away.
    public static let presence = SensorQuantity(key: "presence", unit: "")
    /// A problem (true) or OK.
    public static let problem = SensorQuantity(key: "problem", unit: "")
    /// Running (true) or not.
    public static let running = SensorQuantity(key: "running", unit: "")
    /// Safe (true) or unsafe.
    public static let safety = SensorQuantity(key: "safety", unit: "")
    /// Smoke detected (true) or clear.
    public static let smoke = SensorQuantity(key: "smoke", unit: "")
    /// Sound detected (true) or clear.
    public static let sound = SensorQuantity(key: "sound", unit: "")
    /// Tampered with (true) or not.
    public static let tamper = SensorQuantity(key: "tamper", unit: "")
    /// Vibration detected (true) or clear.
    public static let vibration = SensorQuantity(key: "vibration", unit: "")
    /// A window is open (true) or closed.
    public static let window = SensorQuantity(key: "window", unit: "")
}

/// A measurement's value.
public enum SensorValue: Sendable, Equatable {
    /// A number in its quantity's unit (scaled as the format's factor says).
    case number(Double)
    /// A whole number where the format sends one (counts, sequence numbers, identifiers).
    case integer(Int)
    /// A binary sensor's state: true is the state the quantity names (motion detected, door open).
    case flag(Bool)
    /// An event, by its snake_case name (`press`, `rotate_left`), with a count of steps when
    /// the format sends one (a dimmer's).
    case event(String, steps: Int? = nil)
    /// Text the device sent (decoded as UTF-8; make it safe before printing it).
    case text(String)
    /// Bytes the format leaves uninterpreted.
    case bytes([UInt8])
    /// The device says it has no value (its "not available" marker): JSON null.
    case notAvailable
}

/// One measurement of a reading.
public struct SensorMeasurement: Sendable, Equatable {
    /// What it measures.
    public var quantity: SensorQuantity
    /// The value.
    public var value: SensorValue

    /// A measurement of `quantity`.
    public init(_ quantity: SensorQuantity, _ value: SensorValue) {
        self.quantity = quantity
        self.value = value
    }
}

/// The readings of one advertisement frame.
public struct SensorReading: Sendable, Equatable {
    /// The format that carried them.
    public var format: SensorFormat
    /// The device's model when the frame (or its name) says it (`LYWSD03MMC`, `H5075`, `RuuviTag`).
    public var model: String?
    /// Whether the frame was encrypted (and so authenticated with the device's key).
    public var encrypted: Bool
    /// The frame's packet id or frame counter when the format sends one: a repeated id is the
    /// same reading sent again.
    public var packetID: Int?
    /// The encryption counter of an encrypted frame: it must not go backwards for one device.
    public var counter: UInt32?
    /// The measurements in the order the frame carries them. A quantity may occur more than
    /// once (BTHome's repeated objects).
    public var measurements: [SensorMeasurement]
    /// Why part of the frame was not decoded, when it was not; the measurements are the rest.
    /// BTHome's receivers stop at an object id they do not know and keep the objects before it
    /// (bthome.io/format: devices send ids in ascending order so that older receivers can), and
    /// a text that is not UTF-8 is left out, the objects around it kept.
    public var partial: SensorDecodingError?

    /// A reading in `format`.
    public init(format: SensorFormat, model: String? = nil, encrypted: Bool = false, packetID: Int? = nil,
                counter: UInt32? = nil, measurements: [SensorMeasurement] = [], partial: SensorDecodingError? = nil) {
        self.format = format
        self.model = model
        self.encrypted = encrypted
        self.packetID = packetID
        self.counter = counter
        self.measurements = measurements
        self.partial = partial
    }

    /// The first value of `quantity`, or nil when the frame has none.
    public subscript(_ quantity: SensorQuantity) -> SensorValue? {
        measurements.first { $0.quantity == quantity }?.value
    }

    /// The measurements named as scan's JSON names them: the quantity's key, and for the
    /// second and later of a quantity `key_2`, `key_3`, … (bthome.io's postfix), in order.
    public var keyedMeasurements: [(key: String, value: SensorValue)] {
        var seen: [SensorQuantity: Int] = [:]
        return measurements.map { measurement in
            let n = (seen[measurement.quantity] ?? 0) + 1
            seen[measurement.quantity] = n
            return (n == 1 ? measurement.quantity.key : "\(measurement.quantity.key)_\(n)", measurement.value)
        }
    }

    /// The measurements for people, in order: `21.5 °C 48 % 3 V motion yes button press`.
    /// A number is followed by its unit (a whole one without `.0`); what has no unit follows
    /// its key. Text is as sent: make it safe before printing it.
    public var summary: String {
        measurements.map { measurement in
            let unit = measurement.quantity.unit
            let key = measurement.quantity.key
            switch measurement.value {
            case .number(let value):
                return unit.isEmpty ? "\(key) \(Self.shortest(value))" : "\(Self.shortest(value)) \(unit)"
            case .integer(let value): return unit.isEmpty ? "\(key) \(value)" : "\(value) \(unit)"
            case .flag(let on): return "\(key) \(on ? "yes" : "no")"
            case .event(let name, let steps): return "\(key) \(name)" + (steps.map { " \($0)" } ?? "")
            case .text(let text): return "\(key) \"\(text)\""
            case .bytes(let bytes): return "\(key) \(ByteFormats.hex(bytes))"
            case .notAvailable: return unit.isEmpty ? "\(key) n/a" : "n/a \(unit)"
            }
        }.joined(separator: " ")
    }

    /// `21.5`, `48` (not `48.0`), `0.001`.
    private static func shortest(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return value.description
    }
}

/// Why an advertisement of a sensor format gave no reading. A value describing one frame,
/// returned beside the frame's bytes (which are still shown as hex), not thrown.
public struct SensorDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of failure, to switch on.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// The frame ends inside an object or field.
        case truncated
        /// An object id (or frame type) the format's specification does not define.
        case unknownObject = "unknown_object"
        /// A version or variant of the format that is not decoded.
        case unsupported
        /// A value outside what the format allows.
        case invalid
        /// An encrypted frame and no key for its device.
        case noKey = "no_key"
        /// An encrypted frame whose tag does not authenticate it with the key (wrong key or
        /// altered frame): nothing is decoded from it.
        case authenticationFailed = "authentication_failed"
        /// An encrypted frame whose counter is lower than one already accepted from the
        /// device: reported (a replay, or a device that was reset), not accepted.
        case counterWentBack = "counter_went_back"
    }

    /// The format the frame claims to be.
    public var format: SensorFormat
    /// What went wrong.
    public var kind: Kind
    /// One line saying where and why, e.g. `object 0x02 at byte 5 needs 2 bytes, 1 left`.
    public var detail: String

    /// A failure to decode a frame of `format`.
    public init(_ format: SensorFormat, _ kind: Kind, _ detail: String) {
        self.format = format
        self.kind = kind
        self.detail = detail
    }

    /// `BTHome v2: truncated: object 0x02 at byte 5 needs 2 bytes, 1 left`.
    public var description: String { "\(format.displayName): \(kind.rawValue.replacingUnderscores): \(detail)" }
}

private extension String {
    var replacingUnderscores: String { String(map { $0 == "_" ? " " : $0 }) }
}

// The quantities of the Ruuvi, Xiaomi, pvvx, ATC1441, SwitchBot, Govee and Inkbird formats
// that the constants above do not cover.
extension SensorQuantity {
    /// Acceleration along the sensor's x axis, in standard gravity (g). Ruuvi sends milli-g.
    public static let accelerationX = SensorQuantity(key: "acceleration_x_g", unit: "g")
    /// Acceleration along the sensor's y axis, in standard gravity (g).
    public static let accelerationY = SensorQuantity(key: "acceleration_y_g", unit: "g")
    /// Acceleration along the sensor's z axis, in standard gravity (g).
    public static let accelerationZ = SensorQuantity(key: "acceleration_z_g", unit: "g")
    /// The transmit power the device says it advertises with, in dBm.
    public static let txPower = SensorQuantity(key: "tx_power_dbm", unit: "dBm")
    /// A count of movements the accelerometer detected (Ruuvi's movement counter; it rolls over).
    public static let movementCounter = SensorQuantity(key: "movement_counter", unit: "")
    /// The state of the reed switch (or button) input of the pvvx firmware: true when the input is high.
    public static let reedSwitch = SensorQuantity(key: "reed_switch", unit: "")
    /// The state of the pvvx firmware's trigger output pin (its temperature/humidity switch).
    public static let triggerOutput = SensorQuantity(key: "trigger_output", unit: "")
}
