import Foundation
import Testing
@testable import BluectlCore

/// bluectl's sensor decoders against the reference decoders, frame by frame: the frames and
/// the reference's readings come from `Tests/SensorReference/gen_*.py` (README there).
@Suite("Sensor decoders agree with the reference decoders (Tests/SensorReference)")
struct ReferenceDecoderTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let folder = repository.appendingPathComponent("Tests/SensorReference")

    /// Every generator, by file name.
    static let generators: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
        .filter { $0.hasPrefix("gen_") && $0.hasSuffix(".py") }.sorted()

    @Test("There are generators to run")
    func generatorsExist() {
        #expect(!Self.generators.isEmpty, "no Tests/SensorReference/gen_*.py")
    }

    @Test("Every frame decodes as the reference decodes it", arguments: generators)
    func agrees(_ generator: String) throws {
        let lines = try Self.run(generator)
        #expect(lines.count > 0, "\(generator) printed no frames")
        var decoder = SensorDecoder()
        for line in lines {
            let frame = try ReferenceFrame(line)
            decoder.keys = try frame.sensorKeys
            let result = decoder.decode(try frame.advertisement)
            for problem in frame.disagreements(with: result) {
                Issue.record("\(generator): \(frame.case): \(problem)")
            }
        }
    }

    /// The generator's output lines, run with the test virtualenv's python.
    static func run(_ generator: String) throws -> [String] {
        let python = repository.appendingPathComponent(".venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw ReferenceError("no .venv/bin/python: run Scripts/deps, which makes the test virtualenv")
        }
        let process = Process()
        process.executableURL = python
        process.arguments = [folder.appendingPathComponent(generator).path]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let messages = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ReferenceError("\(generator) exited \(process.terminationStatus): \(String(decoding: messages, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

struct ReferenceError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A JSON value of an `expected` member, its type kept (true is not 1).
enum ReferenceValue: Decodable, CustomStringConvertible {
    case bool(Bool), number(Double), string(String), null

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else { self = .string(try c.decode(String.self)) }
    }

    var description: String {
        switch self {
        case .bool(let b): "\(b)"
        case .number(let d): "\(d)"
        case .string(let s): "\"\(s)\""
        case .null: "null"
        }
    }
}

/// One line of a generator (the README's format).
struct ReferenceFrame: Decodable {
    var `case`: String
    var reference: String?
    var address: String
    var name: String?
    var manufacturer_data: [String: String]?
    var service_data: [String: String]?
    var keys: [String: String]?
    /// nil (or absent): the reference decodes nothing.
    var expected: [String: ReferenceValue]?
    var expected_error: String?
    var extra_ok: [String]?
    var note: String?

    init(_ line: String) throws {
        self = try JSONDecoder().decode(ReferenceFrame.self, from: Data(line.utf8))
    }

    var advertisement: SensorAdvertisement {
        get throws {
            guard let address = BluetoothAddress(address) else { throw ReferenceError("\(`case`): address \(address)") }
            var manufacturerData: [UInt16: [UInt8]] = [:]
            for (key, hex) in manufacturer_data ?? [:] {
                guard key.hasPrefix("0x"), let company = UInt16(key.dropFirst(2), radix: 16) else {
                    throw ReferenceError("\(`case`): company \(key)")
                }
                manufacturerData[company] = hex.isEmpty ? [] : try ByteFormats.parseHex(hex)
            }
            var serviceData: [BluetoothUUID: [UInt8]] = [:]
            for (key, hex) in service_data ?? [:] {
                serviceData[try BluetoothUUID(key, kind: .service)] = hex.isEmpty ? [] : try ByteFormats.parseHex(hex)
            }
            return SensorAdvertisement(address: address, name: name, manufacturerData: manufacturerData, serviceData: serviceData)
        }
    }

    var sensorKeys: SensorKeys { get throws { try SensorKeys(hex: keys ?? [:]) } }

    /// What differs between bluectl's result and the reference's, one line each.
    func disagreements(with result: Result<SensorReading, SensorDecodingError>?) -> [String] {
        if let expected_error {
            guard case .failure(let error) = result else { return ["expected \(expected_error), got \(String(describing: result))"] }
            return error.kind.rawValue == expected_error ? [] : ["expected \(expected_error), got \(error)"]
        }
        guard let expected else {
            if case .success(let reading) = result { return ["the reference decodes nothing; bluectl decoded \(reading)"] }
            return []
        }
        guard case .success(let reading) = result else { return ["the reference decodes it; bluectl gives \(String(describing: result))"] }
        var problems: [String] = []
        if case .string(let format)? = expected["format"], format != reading.format.rawValue {
            problems.append("format \(reading.format.rawValue), reference \(format)")
        }
        if case .string(let model)? = expected["model"], model != reading.model {
            problems.append("model \(reading.model ?? "nil"), reference \(model)")
        }
        if case .bool(let encrypted)? = expected["encrypted"], encrypted != reading.encrypted {
            problems.append("encrypted \(reading.encrypted), reference \(encrypted)")
        }
        // bluectl's measurements by key, a repeated quantity as key, key_2, …
        var ours: [String: SensorValue] = [:]
        var seen: [String: Int] = [:]
        for m in reading.measurements {
            let n = (seen[m.quantity.key] ?? 0) + 1
            seen[m.quantity.key] = n
            ours[n == 1 ? m.quantity.key : "\(m.quantity.key)_\(n)"] = m.value
        }
        for (key, want) in expected.sorted(by: { $0.key < $1.key }) where !["format", "model", "encrypted"].contains(key) {
            guard let got = ours.removeValue(forKey: key) else {
                problems.append("\(key): missing (reference \(want))")
                continue
            }
            if !Self.agree(got, want) { problems.append("\(key): \(got), reference \(want)") }
        }
        for (key, value) in ours.sorted(by: { $0.key < $1.key }) where !(extra_ok ?? []).contains(key) {
            problems.append("\(key): \(value), which the reference does not report")
        }
        return problems
    }

    static func agree(_ value: SensorValue, _ reference: ReferenceValue) -> Bool {
        switch (value, reference) {
        case (.number(let d), .number(let r)): abs(d - r) <= 1e-6
        case (.integer(let i), .number(let r)): Double(i) == r
        case (.flag(let b), .bool(let r)): b == r
        case (.event(let name, _), .string(let r)): name == r
        case (.text(let text), .string(let r)): text == r
        case (.bytes(let bytes), .string(let r)): ByteFormats.hex(bytes) == r
        case (.notAvailable, .null): true
        default: false
        }
    }
}
