import Testing
@testable import BluectlCore

private func decode(_ uuid: UInt16, _ bytes: [UInt8]) -> DecodedCharacteristic? {
    CharacteristicDecoding.decode(uuid16: uuid, bytes)
}

private func fields(_ d: DecodedCharacteristic?) -> [String: DecodedFieldValue] {
    Dictionary((d?.fields ?? []).map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
}

private func names(_ d: DecodedCharacteristic?) -> [String] {
    (d?.fields ?? []).map(\.name)
}

@Suite struct BatteryLevelTests {
    @Test func levels() {
        #expect(decode(0x2A19, [87]) == DecodedCharacteristic(
            summary: "87 %", fields: [DecodedField(name: "level_percent", value: .int(87))]))
        #expect(decode(0x2A19, [0])?.summary == "0 %")
        #expect(decode(0x2A19, [100])?.summary == "100 %")
        #expect(fields(decode(0x2A19, [0x64]))["level_percent"] == .int(100))
    }

    @Test(arguments: [[], [101], [0xFF], [50, 0], [0x64, 0x64]] as [[UInt8]])
    func rejected(bytes: [UInt8]) {
        #expect(decode(0x2A19, bytes) == nil)
    }
}

@Suite struct HeartRateMeasurementTests {
    @Test func blueZExampleServer() {
        // example-gatt-server: [0x06, randint(90, 130)], contact supported and detected.
        let d = decode(0x2A37, [0x06, 0x5A])
        #expect(d == DecodedCharacteristic(summary: "90 bpm, sensor contact", fields: [
            DecodedField(name: "bpm", value: .int(90)),
            DecodedField(name: "sensor_contact", value: .string("detected")),
        ]))
        // Every tenth value carries energy expended: flags |= 0x08, uint16 LE.
        let e = decode(0x2A37, [0x0E, 0x82, 0x2C, 0x01])
        #expect(names(e) == ["bpm", "sensor_contact", "energy_expended_kj"])
        #expect(fields(e)["bpm"] == .int(130))
        #expect(fields(e)["energy_expended_kj"] == .int(300))
        #expect(e?.summary == "130 bpm, sensor contact, energy expended 300 kJ")
    }

    @Test func sensorContactBits() {
        #expect(fields(decode(0x2A37, [0x00, 60]))["sensor_contact"] == .string("not supported"))
        #expect(fields(decode(0x2A37, [0x02, 60]))["sensor_contact"] == .string("not supported"))
        #expect(fields(decode(0x2A37, [0x04, 60]))["sensor_contact"] == .string("not detected"))
        #expect(fields(decode(0x2A37, [0x06, 60]))["sensor_contact"] == .string("detected"))
        #expect(decode(0x2A37, [0x00, 60])?.summary == "60 bpm")
        #expect(decode(0x2A37, [0x04, 60])?.summary == "60 bpm, no sensor contact")
        // Reserved bits 5-7 are ignored.
        #expect(decode(0x2A37, [0xE0, 60])?.summary == "60 bpm")
    }

    @Test func uint16Value() {
        let d = decode(0x2A37, [0x01, 0x2C, 0x01])
        #expect(fields(d)["bpm"] == .int(300))
        #expect(decode(0x2A37, [0x01, 0xFF, 0xFF])?.summary == "65535 bpm")
        #expect(decode(0x2A37, [0x00, 0xFF])?.summary == "255 bpm")
    }

    @Test func rrIntervals() {
        // A chest strap: uint8 bpm, contact detected, two RR intervals (1024 → 1000 ms, 819 → 800 ms).
        let d = decode(0x2A37, [0x16, 0x48, 0x00, 0x04, 0x33, 0x03])
        #expect(d == DecodedCharacteristic(summary: "72 bpm, sensor contact, RR 1000, 800 ms", fields: [
            DecodedField(name: "bpm", value: .int(72)),
            DecodedField(name: "sensor_contact", value: .string("detected")),
            DecodedField(name: "rr_intervals_ms", value: .intArray([1000, 800])),
        ]))
        #expect(fields(decode(0x2A37, [0x10, 0x3C, 0x12, 0x04]))["rr_intervals_ms"] == .intArray([1018]))
        #expect(fields(decode(0x2A37, [0x10, 0x3C, 0x00, 0x00, 0xFF, 0xFF]))["rr_intervals_ms"] == .intArray([0, 63999]))
        // Everything at once: uint16 bpm, energy, RR.
        let all = decode(0x2A37, [0x1F, 0x2C, 0x01, 0x10, 0x27, 0x00, 0x04])
        #expect(names(all) == ["bpm", "sensor_contact", "energy_expended_kj", "rr_intervals_ms"])
        #expect(fields(all)["energy_expended_kj"] == .int(10000))
        #expect(all?.summary == "300 bpm, sensor contact, energy expended 10000 kJ, RR 1000 ms")
    }

    @Test(arguments: [
        [], [0x00], [0x01], [0x01, 0x2C], [0x08, 60], [0x08, 60, 0x01], [0x10, 60], [0x10, 60, 0x00],
        [0x10, 60, 0x00, 0x04, 0x01], [0x00, 60, 0x00], [0x06, 0x5A, 0x00], [0x18, 60, 0x01, 0x00],
        [0x19, 0x2C, 0x01, 0x10, 0x27, 0x00], [0x09, 0x2C, 0x01, 0x10],
    ] as [[UInt8]])
    func truncatedOrTrailing(bytes: [UInt8]) {
        #expect(decode(0x2A37, bytes) == nil)
    }
}

@Suite struct BodySensorLocationTests {
    @Test func locations() {
        let expected = ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"]
        for (i, name) in expected.enumerated() {
            let d = decode(0x2A38, [UInt8(i)])
            #expect(d == DecodedCharacteristic(summary: name, fields: [DecodedField(name: "location", value: .string(name))]))
        }
    }

    @Test(arguments: [[], [7], [0xFF], [1, 0]] as [[UInt8]])
    func rejected(bytes: [UInt8]) {
        #expect(decode(0x2A38, bytes) == nil)
    }
}

@Suite struct TemperatureMeasurementTests {
    @Test func celsius() {
        // 36.5 °C: mantissa 365, exponent -1 → 0xFF00016D, little-endian.
        let d = decode(0x2A1C, [0x00, 0x6D, 0x01, 0x00, 0xFF])
        #expect(d == DecodedCharacteristic(summary: "36.5 °C", fields: [
            DecodedField(name: "temperature", value: .double(36.5)),
            DecodedField(name: "unit", value: .string("celsius")),
        ]))
        // 3650 × 10^-2 keeps the device's precision in the summary.
        let p = decode(0x2A1C, [0x00, 0x42, 0x0E, 0x00, 0xFE])
        #expect(p?.summary == "36.50 °C")
        #expect(fields(p)["temperature"] == .double(36.5))
    }

    @Test func fahrenheitWithTimestampAndType() {
        // 98.6 °F (986 × 10^-1), 2024-05-01 12:30:00, type Body (general).
        let d = decode(0x2A1C, [0x07, 0xDA, 0x03, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x01, 0x0C, 0x1E, 0x00, 0x02])
        #expect(d == DecodedCharacteristic(summary: "98.6 °F, 2024-05-01T12:30:00, Body (general)", fields: [
            DecodedField(name: "temperature", value: .double(98.6)),
            DecodedField(name: "unit", value: .string("fahrenheit")),
            DecodedField(name: "timestamp", value: .string("2024-05-01T12:30:00")),
            DecodedField(name: "temperature_type", value: .string("Body (general)")),
        ]))
        // Unknown date parts are zeros; a reserved type is named as such.
        let u = decode(0x2A1C, [0x06, 0x6D, 0x01, 0x00, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x17, 0x3B, 0x3B, 0x00])
        #expect(fields(u)["timestamp"] == .string("0000-00-00T23:59:59"))
        #expect(fields(u)["temperature_type"] == .string("reserved (0)"))
        let types = decode(0x2A1C, [0x04, 0x6D, 0x01, 0x00, 0xFF, 0x09])
        #expect(names(types) == ["temperature", "unit", "temperature_type"])
        #expect(fields(types)["temperature_type"] == .string("Tympanum (ear drum)"))
        #expect(fields(decode(0x2A1C, [0x04, 0x6D, 0x01, 0x00, 0xFF, 0x0A]))["temperature_type"] == .string("reserved (10)"))
    }

    @Test func signsAndExponents() {
        // -40.0: mantissa -400 (0xFFFE70), exponent -1.
        let n = decode(0x2A1C, [0x00, 0x70, 0xFE, 0xFF, 0xFF])
        #expect(n?.summary == "-40.0 °C")
        #expect(fields(n)["temperature"] == .double(-40))
        // 5 × 10^2.
        #expect(decode(0x2A1C, [0x00, 0x05, 0x00, 0x00, 0x02])?.summary == "500 °C")
        #expect(fields(decode(0x2A1C, [0x00, 0x05, 0x00, 0x00, 0x02]))["temperature"] == .double(500))
        // -5 × 10^-3 = -0.005.
        #expect(decode(0x2A1C, [0x00, 0xFB, 0xFF, 0xFF, 0xFD])?.summary == "-0.005 °C")
        // Extreme exponents decode without trapping.
        let big = decode(0x2A1C, [0x00, 0xFD, 0xFF, 0x7F, 0x7F])
        #expect(fields(big)["temperature"] == .double(8_388_605e127))
        #expect(big?.summary == "8388605e127 °C")
        let tiny = decode(0x2A1C, [0x00, 0x03, 0x00, 0x80, 0x80]) // mantissa -8388605, exponent -128
        #expect(fields(tiny)["temperature"] == .double(-8_388_605e-128))
        #expect(tiny?.summary == "-8388605e-128 °C")
    }

    @Test func specialValues() {
        let cases: [([UInt8], String)] = [
            ([0xFF, 0xFF, 0x7F, 0x00], "NaN"), ([0x00, 0x00, 0x80, 0x00], "NRes"),
            ([0xFE, 0xFF, 0x7F, 0x00], "+INF"), ([0x02, 0x00, 0x80, 0x00], "-INF"),
            ([0x01, 0x00, 0x80, 0x00], "reserved"),
        ]
        for (float, name) in cases {
            let d = decode(0x2A1C, [0x00] + float)
            #expect(d == DecodedCharacteristic(summary: "\(name) °C", fields: [
                DecodedField(name: "special", value: .string(name)),
                DecodedField(name: "unit", value: .string("celsius")),
            ]))
        }
    }

    @Test(arguments: [
        [], [0x00], [0x00, 0x6D, 0x01, 0x00], [0x00, 0x6D, 0x01, 0x00, 0xFF, 0x00],
        [0x02, 0x6D, 0x01, 0x00, 0xFF], [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x01, 0x0C, 0x1E],
        [0x04, 0x6D, 0x01, 0x00, 0xFF], [0x06, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x01, 0x0C, 0x1E, 0x00],
        // Out-of-range date time: month 13, day 32, hour 24, minute 60, second 60, year 1000.
        [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x0D, 0x01, 0x0C, 0x1E, 0x00],
        [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x20, 0x0C, 0x1E, 0x00],
        [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x01, 0x18, 0x1E, 0x00],
        [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x01, 0x0C, 0x3C, 0x00],
        [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x07, 0x05, 0x01, 0x0C, 0x1E, 0x3C],
        [0x02, 0x6D, 0x01, 0x00, 0xFF, 0xE8, 0x03, 0x05, 0x01, 0x0C, 0x1E, 0x00],
    ] as [[UInt8]])
    func truncatedOrMalformed(bytes: [UInt8]) {
        #expect(decode(0x2A1C, bytes) == nil)
    }

    @Test func decimalHelpers() {
        #expect(CharacteristicDecoding.decimalString(3650, -2) == "36.50")
        #expect(CharacteristicDecoding.decimalString(5, -3) == "0.005")
        #expect(CharacteristicDecoding.decimalString(-5, -3) == "-0.005")
        #expect(CharacteristicDecoding.decimalString(0, -2) == "0.00")
        #expect(CharacteristicDecoding.decimalString(0, 5) == "0")
        #expect(CharacteristicDecoding.decimalString(12, 0) == "12")
        #expect(CharacteristicDecoding.decimalString(12, 3) == "12000")
        #expect(CharacteristicDecoding.decimalString(12, 7) == "12e7")
        #expect(CharacteristicDecoding.decimalString(-12, -13) == "-12e-13")
        #expect(CharacteristicDecoding.decimalDouble(3650, -2) == 36.5)
        #expect(CharacteristicDecoding.decimalDouble(1, -1) == 0.1)
        #expect(CharacteristicDecoding.decimalDouble(986, -1) == 98.6)
    }
}

@Suite struct TemperatureTests {
    @Test func values() {
        #expect(decode(0x2A6E, [0x2C, 0x09]) == DecodedCharacteristic(
            summary: "23.48 °C", fields: [DecodedField(name: "celsius", value: .double(23.48))]))
        #expect(decode(0x2A6E, [0xFB, 0xFF])?.summary == "-0.05 °C")
        #expect(fields(decode(0x2A6E, [0xFB, 0xFF]))["celsius"] == .double(-0.05))
        #expect(decode(0x2A6E, [0x00, 0x00])?.summary == "0.00 °C")
        #expect(decode(0x2A6E, [0x64, 0x00])?.summary == "1.00 °C")
        #expect(decode(0x2A6E, [0xFF, 0x7F])?.summary == "327.67 °C")
        #expect(decode(0x2A6E, [0x4D, 0x95])?.summary == "-273.15 °C")
        // Below -273.15 °C the GATT Specification Supplement prohibits the value: not decoded.
        #expect(decode(0x2A6E, [0x4C, 0x95]) == nil)
        #expect(decode(0x2A6E, [0x01, 0x80]) == nil)
        #expect(decode(0x2A6E, [0x00, 0x80]) == DecodedCharacteristic(
            summary: "unknown", fields: [DecodedField(name: "special", value: .string("unknown"))]))
    }

    @Test(arguments: [[], [0x2C], [0x2C, 0x09, 0x00]] as [[UInt8]])
    func rejected(bytes: [UInt8]) {
        #expect(decode(0x2A6E, bytes) == nil)
    }
}

@Suite struct StringCharacteristicTests {
    @Test func names() {
        let table: [(UInt16, String)] = [
            (0x2A29, "manufacturer_name"), (0x2A24, "model_number"), (0x2A25, "serial_number"),
            (0x2A26, "firmware_revision"), (0x2A27, "hardware_revision"), (0x2A28, "software_revision"),
            (0x2A00, "device_name"),
        ]
        for (uuid, name) in table {
            #expect(decode(uuid, Array("Acme 1.0".utf8)) == DecodedCharacteristic(
                summary: "Acme 1.0", fields: [DecodedField(name: name, value: .string("Acme 1.0"))]))
            #expect(CharacteristicDecoding.canDecode(uuid16: uuid))
        }
    }

    @Test func contents() {
        #expect(decode(0x2A00, Array("Héllo 🙂".utf8))?.summary == "Héllo 🙂")
        #expect(decode(0x2A00, [])?.summary == "")
        #expect(decode(0x2A00, [0x41, 0x42, 0x00, 0x00, 0x00])?.summary == "AB")        // NUL padding
        #expect(decode(0x2A00, [0x00, 0x00])?.summary == "")
        #expect(decode(0x2A00, [0x41, 0x00, 0x42])?.summary == "A\u{0}B")              // inner NUL kept
        #expect(decode(0x2A00, [0x41, 0xFF, 0xC3])?.summary == "A\u{FFFD}\u{FFFD}")
        #expect(decode(0x2A29, [0x1B, 0x5B, 0x32, 0x4A])?.summary == "\u{1B}[2J")       // escaping is the caller's
        #expect(fields(decode(0x2A29, [0xED, 0xA0, 0x80]))["manufacturer_name"]
            .map { if case let .string(s) = $0 { s.unicodeScalars.allSatisfy { $0 == "\u{FFFD}" } } else { false } } == true)
    }
}

@Suite struct CharacteristicDecodingDispatchTests {
    @Test func unknownUUIDs() {
        for uuid: UInt16 in [0x0000, 0x2A01, 0x2A23, 0x2A2A, 0x2A39, 0x2A70, 0x180D, 0xFFFF] {
            #expect(decode(uuid, [0x01]) == nil)
            #expect(!CharacteristicDecoding.canDecode(uuid16: uuid))
        }
    }

    @Test func byBluetoothUUID() throws {
        #expect(CharacteristicDecoding.decode(uuid: BluetoothUUID(uint16: 0x2A19), [87])?.summary == "87 %")
        #expect(CharacteristicDecoding.decode(uuid: try BluetoothUUID("battery_level"), [87])?.summary == "87 %")
        let vendor = try BluetoothUUID("12345678-1234-5678-1234-56789abc2a19")
        #expect(CharacteristicDecoding.decode(uuid: vendor, [87]) == nil)
        #expect(CharacteristicDecoding.decode(uuid: BluetoothUUID(uint32: 0x0001_2A19), [87]) == nil)
    }

    /// Every decoder, on every value of up to two bytes and on many pseudo-random longer ones,
    /// returns without trapping; what it returns is well-formed.
    @Test func neverTraps() {
        let uuids: [UInt16] = [0x2A19, 0x2A37, 0x2A38, 0x2A1C, 0x2A6E, 0x2A00, 0x2A24, 0x2A25, 0x2A26, 0x2A27, 0x2A28, 0x2A29]
        var decoded = 0
        for uuid in uuids.prefix(5) { // the string decoders take any bytes
            _ = decode(uuid, [])
            for a in 0...255 {
                if decode(uuid, [UInt8(a)]) != nil { decoded += 1 }
                for b in 0...255 where decode(uuid, [UInt8(a), UInt8(b)]) != nil { decoded += 1 }
            }
        }
        #expect(decoded > 0)

        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        var empty = 0
        for _ in 0..<5_000 {
            let count = Int(next() % 40)
            let bytes = (0..<count).map { _ in next() }
            for uuid in uuids {
                if let d = decode(uuid, bytes), d.fields.isEmpty { empty += 1 }
            }
        }
        #expect(empty == 0)
    }
}
