// CharacteristicDecoding: values of common Bluetooth SIG characteristics, decoded where the
// meaning is unambiguous. Everything else (and anything malformed) is left to the raw bytes.

/// One decoded value: a one-line summary for people and named fields for JSON.
public struct DecodedCharacteristic: Sendable, Equatable {
    /// For a terminal, e.g. `87 %` or `72 bpm, contact detected`. Strings decoded from the
    /// device (names, revisions) appear as sent: make them safe before printing.
    public var summary: String
    /// In a fixed order per characteristic; optional parts only when present.
    public var fields: [DecodedField]

    /// A decoded value with this summary and these fields.
    public init(summary: String, fields: [DecodedField]) {
        self.summary = summary
        self.fields = fields
    }
}

/// One named field of a decoded value.
public struct DecodedField: Sendable, Equatable {
    /// snake_case, with the unit where there is one (`energy_expended_kj`).
    public var name: String
    /// The field's value.
    public var value: DecodedFieldValue

    /// A field `name` with `value`.
    public init(name: String, value: DecodedFieldValue) {
        self.name = name
        self.value = value
    }
}

/// A decoded field's value, in the JSON type it is rendered as.
public enum DecodedFieldValue: Sendable, Equatable {
    /// A whole number.
    case int(Int)
    /// A number with a fraction (a unit's value, e.g. °C).
    case double(Double)
    /// Text.
    case string(String)
    /// A flag.
    case bool(Bool)
    /// A list of whole numbers (e.g. RR-intervals).
    case intArray([Int])
}

/// Decoders for a few SIG characteristics; `decode` returns nil for any other UUID and for
/// any value that is truncated, too long, or out of its defined range. Never traps.
///
/// | UUID | characteristic | fields |
/// |---|---|---|
/// | 2a19 | Battery Level | `level_percent` |
/// | 2a37 | Heart Rate Measurement | `bpm`, `sensor_contact`, `energy_expended_kj`?, `rr_intervals_ms`? |
/// | 2a38 | Body Sensor Location | `location` |
/// | 2a1c | Temperature Measurement | `temperature` or `special`, `unit`, `timestamp`?, `temperature_type`? |
/// | 2a6e | Temperature | `celsius` or `special` |
/// | 2a1f | Temperature Celsius | `celsius` |
/// | 2a6f | Humidity | `humidity_percent` or `special` |
/// | 2a6d | Pressure | `pressure_hpa` |
/// | 2a7b | Dew Point | `celsius` |
/// | 2a76 | UV Index | `uv_index` |
/// | 2a77 | Irradiance | `irradiance_w_m2` |
/// | 2afb | Illuminance | `illuminance_lux` or `special` |
/// | 2a6c | Elevation | `elevation_m` |
/// | 2a00, 2a24–2a29 | Device Name, Model Number, Serial Number, Firmware/Hardware/Software Revision, Manufacturer Name | `device_name`, `model_number`, `serial_number`, `firmware_revision`, `hardware_revision`, `software_revision`, `manufacturer_name` |
public enum CharacteristicDecoding {
    /// The decoded value of characteristic `uuid16` (on the Bluetooth base UUID), or nil.
    public static func decode(uuid16: UInt16, _ bytes: [UInt8]) -> DecodedCharacteristic? {
        var r = ByteReader(bytes)
        switch uuid16 {
        case 0x2A19: return batteryLevel(&r)
        case 0x2A37: return heartRateMeasurement(&r)
        case 0x2A38: return bodySensorLocation(&r)
        case 0x2A1C: return temperatureMeasurement(&r)
        case 0x2A6E: return temperature(&r)
        case 0x2A1F, 0x2A6F, 0x2A6D, 0x2A7B, 0x2A76, 0x2A77, 0x2AFB, 0x2A6C: return environmentalSensing(uuid16, &r)
        case 0x2A00: return string(bytes, field: "device_name")
        case 0x2A24: return string(bytes, field: "model_number")
        case 0x2A25: return string(bytes, field: "serial_number")
        case 0x2A26: return string(bytes, field: "firmware_revision")
        case 0x2A27: return string(bytes, field: "hardware_revision")
        case 0x2A28: return string(bytes, field: "software_revision")
        case 0x2A29: return string(bytes, field: "manufacturer_name")
        default: return nil
        }
    }

    /// The decoded value of characteristic `uuid`, if it is a 16-bit SIG one `decode(uuid16:_:)` knows.
    public static func decode(uuid: BluetoothUUID, _ bytes: [UInt8]) -> DecodedCharacteristic? {
        guard let short = uuid.uint16Value else { return nil }
        return decode(uuid16: short, bytes)
    }

    /// Whether `decode` has a decoder for `uuid16`.
    public static func canDecode(uuid16: UInt16) -> Bool {
        switch uuid16 {
        case 0x2A19, 0x2A37, 0x2A38, 0x2A1C, 0x2A6E, 0x2A00, 0x2A24...0x2A29: true
        case 0x2A1F, 0x2A6F, 0x2A6D, 0x2A7B, 0x2A76, 0x2A77, 0x2AFB, 0x2A6C: true
        default: false
        }
    }

    // MARK: - Decoders

    /// 2A19: uint8, 0...100 %.
    private static func batteryLevel(_ r: inout ByteReader) -> DecodedCharacteristic? {
        guard let level = r.uint8(), r.atEnd, level <= 100 else { return nil }
        return DecodedCharacteristic(summary: "\(level) %", fields: [field("level_percent", .int(Int(level)))])
    }

    /// 2A37: flags; uint8 or uint16 bpm; uint16 energy expended (kJ) if flag bit 3;
    /// uint16 RR intervals (1/1024 s) filling the rest if flag bit 4 (at least one).
    private static func heartRateMeasurement(_ r: inout ByteReader) -> DecodedCharacteristic? {
        guard let flags = r.uint8() else { return nil }
        let bpm: Int
        if flags & 0x01 != 0 {
            guard let v = r.uint16() else { return nil }
            bpm = Int(v)
        } else {
            guard let v = r.uint8() else { return nil }
            bpm = Int(v)
        }
        var parts = ["\(bpm) bpm"]
        var fields = [field("bpm", .int(bpm))]

        let contact: String
        switch (flags >> 1) & 0x03 {
        case 0b10: contact = "not detected"; parts.append("no sensor contact")
        case 0b11: contact = "detected"; parts.append("sensor contact")
        default: contact = "not supported"
        }
        fields.append(field("sensor_contact", .string(contact)))

        if flags & 0x08 != 0 {
            guard let energy = r.uint16() else { return nil }
            fields.append(field("energy_expended_kj", .int(Int(energy))))
            parts.append("energy expended \(energy) kJ")
        }
        if flags & 0x10 != 0 {
            var intervals: [Int] = []
            while !r.atEnd {
                guard let v = r.uint16() else { return nil }
                // 1/1024 s to ms, rounded to nearest.
                intervals.append((Int(v) * 1000 + 512) / 1024)
            }
            guard !intervals.isEmpty else { return nil }
            fields.append(field("rr_intervals_ms", .intArray(intervals)))
            parts.append("RR " + intervals.map(String.init).joined(separator: ", ") + " ms")
        }
        guard r.atEnd else { return nil }
        return DecodedCharacteristic(summary: parts.joined(separator: ", "), fields: fields)
    }

    static let bodySensorLocations = ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"]

    /// 2A38: uint8 enumeration 0...6.
    private static func bodySensorLocation(_ r: inout ByteReader) -> DecodedCharacteristic? {
        guard let v = r.uint8(), r.atEnd, Int(v) < bodySensorLocations.count else { return nil }
        let name = bodySensorLocations[Int(v)]
        return DecodedCharacteristic(summary: name, fields: [field("location", .string(name))])
    }

    static let temperatureTypes = [
        1: "Armpit", 2: "Body (general)", 3: "Ear (usually earlobe)", 4: "Finger",
        5: "Gastro-intestinal Tract", 6: "Mouth", 7: "Rectum", 8: "Toe", 9: "Tympanum (ear drum)",
    ]

    /// 2A1C: flags (bit 0 Fahrenheit, bit 1 time stamp present, bit 2 temperature type present);
    /// IEEE-11073 32-bit FLOAT; date time (7 bytes); uint8 temperature type (2A1D).
    private static func temperatureMeasurement(_ r: inout ByteReader) -> DecodedCharacteristic? {
        guard let flags = r.uint8(), let raw = r.uint32() else { return nil }
        let fahrenheit = flags & 0x01 != 0
        let unitSymbol = fahrenheit ? "°F" : "°C"
        var fields: [DecodedField] = []
        var parts: [String] = []
        switch IEEE11073Float(raw) {
        case let .value(mantissa, exponent):
            fields.append(field("temperature", .double(decimalDouble(mantissa, exponent))))
            parts.append(decimalString(mantissa, exponent) + " " + unitSymbol)
        case let .special(name):
            fields.append(field("special", .string(name)))
            parts.append(name + " " + unitSymbol)
        }
        fields.append(field("unit", .string(fahrenheit ? "fahrenheit" : "celsius")))
        if flags & 0x02 != 0 {
            guard let stamp = dateTime(&r) else { return nil }
            fields.append(field("timestamp", .string(stamp)))
            parts.append(stamp)
        }
        if flags & 0x04 != 0 {
            guard let type = r.uint8() else { return nil }
            let name = temperatureTypes[Int(type)] ?? "reserved (\(type))"
            fields.append(field("temperature_type", .string(name)))
            parts.append(name)
        }
        guard r.atEnd else { return nil }
        return DecodedCharacteristic(summary: parts.joined(separator: ", "), fields: fields)
    }

    /// 2A6E: sint16 in 0.01 °C, -273.15…327.67; 0x8000 is "value is not known", values below
    /// -273.15 °C are prohibited.
    private static func temperature(_ r: inout ByteReader) -> DecodedCharacteristic? {
        guard let raw = r.uint16(), r.atEnd else { return nil }
        let v = Int(Int16(bitPattern: raw))
        if raw == 0x8000 { return unknown }
        guard v >= -27315 else { return nil }
        return DecodedCharacteristic(
            summary: decimalString(v, -2) + " °C",
            fields: [field("celsius", .double(Double(v) / 100))]
        )
    }

    /// The Environmental Sensing Service's characteristics (GATT Specification Supplement):
    /// a fixed-point number, its field and unit, and the "value is not known" marker where the
    /// specification defines one (values it prohibits give nil).
    private static func environmentalSensing(_ uuid16: UInt16, _ r: inout ByteReader) -> DecodedCharacteristic? {
        func number(_ raw: Int, _ exponent: Int, _ name: String, _ unit: String) -> DecodedCharacteristic? {
            guard r.atEnd else { return nil }
            return DecodedCharacteristic(summary: decimalString(raw, exponent) + " " + unit,
                                         fields: [field(name, .double(decimalDouble(raw, exponent)))])
        }
        switch uuid16 {
        case 0x2A1F:  // Temperature Celsius: sint16, 0.1 °C
            guard let v = r.uint16() else { return nil }
            return number(Int(Int16(bitPattern: v)), -1, "celsius", "°C")
        case 0x2A6F:  // Humidity: uint16, 0.01 %, 0…100.00; 0xFFFF not known
            guard let v = r.uint16(), r.atEnd else { return nil }
            if v == 0xFFFF { return unknown }
            guard v <= 10_000 else { return nil }
            return number(Int(v), -2, "humidity_percent", "%")
        case 0x2A6D:  // Pressure: uint32, 0.1 Pa (shown in hPa, 0.001 hPa steps)
            guard let v = r.uint32() else { return nil }
            return number(Int(v), -3, "pressure_hpa", "hPa")
        case 0x2A7B:  // Dew Point: sint8, 1 °C
            guard let v = r.uint8() else { return nil }
            return number(Int(Int8(bitPattern: v)), 0, "celsius", "°C")
        case 0x2A76:  // UV Index: uint8
            guard let v = r.uint8(), r.atEnd else { return nil }
            return DecodedCharacteristic(summary: "UV index \(v)", fields: [field("uv_index", .int(Int(v)))])
        case 0x2A77:  // Irradiance: uint16, 0.1 W/m²
            guard let v = r.uint16() else { return nil }
            return number(Int(v), -1, "irradiance_w_m2", "W/m²")
        case 0x2AFB:  // Illuminance: uint24, 0.01 lx, 0…167772.14; 0xFFFFFF not known
            guard let v = r.uint24(), r.atEnd else { return nil }
            if v == 0xFF_FFFF { return unknown }
            return number(Int(v), -2, "illuminance_lux", "lx")
        case 0x2A6C:  // Elevation: sint24, 0.01 m
            guard let v = r.uint24() else { return nil }
            return number(Int(Int32(bitPattern: v << 8) >> 8), -2, "elevation_m", "m")
        default:
            return nil
        }
    }

    /// A characteristic's "value is not known" marker.
    private static let unknown = DecodedCharacteristic(summary: "unknown", fields: [field("special", .string("unknown"))])

    /// UTF-8 text (ill-formed sequences → U+FFFD), trailing NUL padding dropped.
    private static func string(_ bytes: [UInt8], field name: String) -> DecodedCharacteristic? {
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[end - 1] == 0 { end -= 1 }
        let text = String(decoding: bytes[..<end], as: UTF8.self)
        return DecodedCharacteristic(summary: text, fields: [field(name, .string(text))])
    }

    // MARK: - Pieces

    private static func field(_ name: String, _ value: DecodedFieldValue) -> DecodedField {
        DecodedField(name: name, value: value)
    }

    /// Date Time (2A08): uint16 year (1582...9999, 0 unknown), month (1...12, 0 unknown),
    /// day (1...31, 0 unknown), hours 0...23, minutes 0...59, seconds 0...59, as
    /// `YYYY-MM-DDThh:mm:ss` (unknown parts as zeros); nil when out of range.
    private static func dateTime(_ r: inout ByteReader) -> String? {
        guard let year = r.uint16(), let month = r.uint8(), let day = r.uint8(),
              let hours = r.uint8(), let minutes = r.uint8(), let seconds = r.uint8()
        else { return nil }
        guard year == 0 || (1582...9999).contains(year), month <= 12, day <= 31,
              hours <= 23, minutes <= 59, seconds <= 59
        else { return nil }
        func pad(_ v: some BinaryInteger, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(seconds, 2))"
    }

    enum IEEE11073Float: Equatable {
        case value(mantissa: Int, exponent: Int)
        case special(String)

        /// A 32-bit FLOAT: signed 8-bit exponent (high byte), signed 24-bit mantissa.
        /// The reserved mantissas are special values whatever the exponent.
        init(_ raw: UInt32) {
            let exponent = Int(Int8(truncatingIfNeeded: raw >> 24))
            let m24 = Int(raw & 0x00FF_FFFF)
            switch m24 {
            case 0x7F_FFFF: self = .special("NaN")
            case 0x80_0000: self = .special("NRes")
            case 0x7F_FFFE: self = .special("+INF")
            case 0x80_0002: self = .special("-INF")
            case 0x80_0001: self = .special("reserved")
            default:
                let mantissa = m24 >= 0x80_0000 ? m24 - 0x100_0000 : m24
                self = .value(mantissa: mantissa, exponent: exponent)
            }
        }
    }

    /// mantissa × 10^exponent, correctly rounded.
    static func decimalDouble(_ mantissa: Int, _ exponent: Int) -> Double {
        // The standard library's decimal conversion rounds correctly; the text is always valid.
        Double("\(mantissa)e\(exponent)") ?? Double(mantissa)
    }

    /// mantissa × 10^exponent written out with the digits the exponent implies
    /// (`3650`, -2 → `36.50`); in scientific notation when that would be long.
    static func decimalString(_ mantissa: Int, _ exponent: Int) -> String {
        let negative = mantissa < 0
        let digits = String(mantissa.magnitude)
        let sign = negative ? "-" : ""
        if exponent >= 0 {
            if mantissa == 0 || exponent == 0 { return sign + digits }
            if exponent <= 6 { return sign + digits + String(repeating: "0", count: exponent) }
            return sign + digits + "e" + String(exponent)
        }
        let places = -exponent
        if places > 12 { return sign + digits + "e" + String(exponent) }
        if digits.count > places {
            let cut = digits.index(digits.endIndex, offsetBy: -places)
            return sign + digits[..<cut] + "." + digits[cut...]
        }
        return sign + "0." + String(repeating: "0", count: places - digits.count) + digits
    }
}

/// Little-endian reads that fail (nil) instead of running off the end.
private struct ByteReader {
    private let bytes: [UInt8]
    private var index: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    var atEnd: Bool { index >= bytes.endIndex }

    mutating func uint8() -> UInt8? {
        guard index < bytes.endIndex else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func uint16() -> UInt16? {
        guard bytes.endIndex - index >= 2 else { return nil }
        defer { index += 2 }
        return UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
    }

    mutating func uint24() -> UInt32? {
        guard bytes.endIndex - index >= 3 else { return nil }
        defer { index += 3 }
        return UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]) << 16
    }

    mutating func uint32() -> UInt32? {
        guard bytes.endIndex - index >= 4 else { return nil }
        defer { index += 4 }
        return UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8
            | UInt32(bytes[index + 2]) << 16 | UInt32(bytes[index + 3]) << 24
    }
}
