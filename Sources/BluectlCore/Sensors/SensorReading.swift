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

    /// A reading in `format`.
    public init(format: SensorFormat, model: String? = nil, encrypted: Bool = false, packetID: Int? = nil,
                counter: UInt32? = nil, measurements: [SensorMeasurement] = []) {
        self.format = format
        self.model = model
        self.encrypted = encrypted
        self.packetID = packetID
        self.counter = counter
        self.measurements = measurements
    }

    /// The first value of `quantity`, or nil when the frame has none.
    public subscript(_ quantity: SensorQuantity) -> SensorValue? {
        measurements.first { $0.quantity == quantity }?.value
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
