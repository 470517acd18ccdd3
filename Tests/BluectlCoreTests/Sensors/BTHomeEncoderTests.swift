import Testing
@testable import BluectlCore

/// BTHomeEncoder: the frames `bluectl advertise --bthome` sends, checked byte by byte where
/// the spec publishes them and decoded back by `BTHome` everywhere.
@Suite("BTHome v2 encoder")
struct BTHomeEncoderTests {
    static let address = BluetoothAddress("54:48:E6:8F:80:A5")!
    static let key = try! ByteFormats.parseHex("231d39c1d7cc1ab1aee224cd096db932")

    static func decoded(_ encoder: BTHomeEncoder, key: [UInt8]? = nil) throws -> SensorReading {
        try BTHome.frame(encoder.serviceData, address: address, key: key)
    }

    @Test("bthome.io's example values give its bytes (after the packet id), and decode back")
    func plain() throws {
        let encoder = try BTHomeEncoder([("temperature", .number(25.06)), ("humidity", .number(50.55))])
        #expect(ByteFormats.hex(encoder.serviceData) == "40" + "0000" + "02ca09" + "03bf13")
        let reading = try Self.decoded(encoder)
        #expect(reading.packetID == 0)
        #expect(reading.measurements == [SensorMeasurement(.temperature, .number(25.06)), SensorMeasurement(.humidity, .number(50.55))])
    }

    @Test("The object: the lowest id that holds the value exactly, else the finest that holds it")
    func objectChoice() throws {
        func frame(_ values: [(String, SensorValue)]) throws -> String {
            ByteFormats.hex(try BTHomeEncoder(values.map { (name: $0.0, value: $0.1) }).serviceData.dropFirst(3))
        }
        #expect(try frame([("temperature", .number(21.5))]) == "026608")
        #expect(try frame([("temperature", .number(400))]) == "45a00f")
        #expect(try frame([("temperature", .number(21.556))]) == "026c08")  // rounded to 21.56
        #expect(try frame([("count", .integer(5))]) == "0905")
        #expect(try frame([("count", .integer(300))]) == "3d2c01")
        #expect(try frame([("count", .integer(-5))]) == "59fb")
        #expect(try frame([("voltage", .number(3))]) == "0cb80b")
        #expect(try frame([("voltage", .number(230))]) == "4afc08")
        #expect(try frame([("power", .number(-12.78))]) == "5c02fbffff")
        // a repeated quantity: each value its object, in the order given
        #expect(try frame([("temperature", .number(21)), ("temperature_2", .number(400))]) == "023408" + "45a00f")
        #expect(try frame([("temperature", .number(400)), ("temperature_2", .number(21)), ("battery", .integer(9))])
                == "0109" + "45a00f" + "023408")
        // objects in id order, whatever the order given
        #expect(try frame([("humidity", .number(40)), ("battery", .integer(97))]) == "0161" + "03a00f")
        #expect(try frame([("door", .flag(true)), ("button", .event("press")), ("dimmer", .event("rotate_left", steps: 3))])
                == "1a01" + "3a01" + "3c0103")
        #expect(try frame([("text", .text("Hi")), ("raw", .bytes([1, 2])), ("firmware_version", .text("4.2.1.0"))])
                == "53024869" + "54020102" + "f100010204")
        #expect(try frame([("command", .event("step_up", steps: 5))]) == "3b010305")
    }

    @Test("Names: spec names, JSON keys, `_2`; the ambiguous and the unknown refused")
    func names() throws {
        #expect(try BTHomeEncoder([("temperature_c", .number(1))]).values == [SensorMeasurement(.temperature, .number(1))])
        #expect(try BTHomeEncoder([("pm2.5", .integer(3))]).values.map(\.quantity) == [.pm25])
        #expect(throws: BluetoothError.invalidRequest("distance names more than one quantity: say which (distance_m, distance_mm)")) {
            try BTHomeEncoder([("distance", .number(1))])
        }
        #expect(throws: BluetoothError.invalidRequest("warmth is not a BTHome v2 object (bthome.io/format; docs/sensors.md lists the names)")) {
            try BTHomeEncoder([("warmth", .number(1))])
        }
        #expect(throws: BluetoothError.invalidRequest("temperature_3: there is no temperature_c number 2 to follow")) {
            try BTHomeEncoder([("temperature", .number(1)), ("temperature_3", .number(2))])
        }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder([("temperature", .number(99999))]) }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder([("button", .event("stroke"))]) }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder([("count", .number(1.5))]) }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder([("packet_id", .integer(1))]) }
    }

    @Test("Values from text, per object")
    func parsing() throws {
        #expect(try BTHomeEncoder.value("21.5", for: "temperature") == .number(21.5))
        #expect(try BTHomeEncoder.value("on", for: "door") == .flag(true))
        #expect(try BTHomeEncoder.value("0", for: "motion") == .flag(false))
        #expect(try BTHomeEncoder.value("rotate_left:3", for: "dimmer") == .event("rotate_left", steps: 3))
        #expect(try BTHomeEncoder.value("0a0b", for: "raw") == .bytes([10, 11]))
        #expect(try BTHomeEncoder.value("7", for: "count") == .integer(7))
        #expect(throws: BluetoothError.invalidRequest("temperature takes a number, not \"warm\"")) {
            try BTHomeEncoder.value("warm", for: "temperature")
        }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder.value("maybe", for: "door") }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder.value("1.5", for: "count") }
    }

    @Test("Each update: the packet id advances; an event is sent once, then none; a command once")
    func updates() throws {
        var encoder = try BTHomeEncoder([("temperature", .number(21)), ("button", .event("press"))], packetID: 255)
        #expect(try Self.decoded(encoder)[.button] == .event("press"))
        try encoder.update([("temperature", .number(21.7))])
        var reading = try Self.decoded(encoder)
        #expect(reading.packetID == 0)
        #expect(reading.measurements == [SensorMeasurement(.temperature, .number(21.7)), SensorMeasurement(.button, .event("none"))])
        try encoder.update([("button", .event("long_press")), ("command", .event("toggle"))])
        reading = try Self.decoded(encoder)
        #expect(reading.packetID == 1)
        #expect(reading[.button] == .event("long_press"))
        #expect(reading[.command] == .event("toggle"))
        try encoder.update([("humidity", .number(40))])
        reading = try Self.decoded(encoder)
        #expect(reading.measurements.map(\.quantity) == [.temperature, .humidity, .button])
        #expect(reading[.button] == .event("none"))
        // a refused update changes nothing
        let before = encoder.serviceData
        #expect(throws: BluetoothError.self) { try encoder.update([("humidity", .text("damp"))]) }
        #expect(encoder.serviceData == before)
    }

    @Test("Encrypted: decodes with the key, the counter advances with each update")
    func encrypted() throws {
        var encoder = try BTHomeEncoder([("temperature", .number(25.06)), ("humidity", .number(50.55))], key: Self.key,
                                        address: Self.address, counter: 1_122_867)
        var reading = try Self.decoded(encoder, key: Self.key)
        #expect(reading.encrypted)
        #expect(reading.counter == 1_122_867)
        #expect(reading[.humidity] == .number(50.55))
        try encoder.update([("temperature", .number(-5))])
        reading = try Self.decoded(encoder, key: Self.key)
        #expect(reading.counter == 1_122_868)
        #expect(reading.packetID == 1)
        #expect(reading[.temperature] == .number(-5))
        #expect(throws: BluetoothError.self) { try BTHomeEncoder([("temperature", .number(1))], key: [1, 2, 3], address: Self.address) }
        #expect(throws: BluetoothError.self) { try BTHomeEncoder([("temperature", .number(1))], key: Self.key) }
    }

    @Test("Every object's spec name encodes a value its decoder gives back")
    func everyObject() throws {
        for object in BTHomeObjects.all where object.encoding != .packetID {
            let value: SensorValue = switch object.encoding {
            case .number: .number(Double(object.numerator) / Double(object.denominator))
            case .integer: .integer(1)
            case .binary: .flag(true)
            case .button: .event("double_press")
            case .dimmer: .event("rotate_right", steps: 2)
            case .command: .event("on")
            case .text: .text("é")
            case .raw: .bytes([0xFF])
            case .firmwareVersion: .text(object.length == 4 ? "1.2.3.4" : "1.2.3")
            case .packetID: .integer(0)
            }
            let encoder = try BTHomeEncoder([(object.quantity.key, value)])
            let reading = try Self.decoded(encoder)
            #expect(reading.measurements == [SensorMeasurement(object.quantity, value)], "\(object.name) 0x\(String(object.id, radix: 16))")
        }
    }
}
