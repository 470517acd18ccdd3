// `bluectl serve SPEC.json`: the GATT database file, and the value updates read on stdin.

import BluectlCore

/// A GATT database described in JSON (docs/peripheral.md):
///
///     {"services":[{"uuid":"heart_rate","primary":true,"characteristics":[
///       {"uuid":"2a37","flags":["notify"],"value":"0040",
///        "descriptors":[{"uuid":"2901","flags":["read"],"value":"6872"}]}]}]}
///
/// UUIDs as everywhere in bluectl (16/32/128-bit hex or a SIG name); values
/// as hex (as `write` takes them). Every problem is reported with its JSON
/// path (`services[0].characteristics[1].flags[0]`), before anything is
/// registered. A characteristic without "value" starts empty.
enum ServeSpec {
    struct Problem: Error, CustomStringConvertible {
        let path: String
        let message: String
        var description: String { path.isEmpty ? message : "\(path): \(message)" }
    }

    static func parse(_ data: [UInt8]) throws(Problem) -> [MutableService] {
        let root: Any
        do {
            root = try JSONInput.parse(data)
        } catch {
            throw Problem(path: "", message: "not valid JSON" + (JSONInput.problem(error).map { " (\($0))" } ?? ""))
        }
        let top = try object(root, at: "", keys: ["services"])
        guard let list = top["services"] else { throw Problem(path: "", message: "no \"services\"") }
        let services = try array(list, at: "services")
        if services.isEmpty { throw Problem(path: "services", message: "empty; a SPEC serves at least one service") }
        var result: [MutableService] = []
        for (s, entry) in services.enumerated() {
            let at = "services[\(s)]"
            let fields = try object(entry, at: at, keys: ["uuid", "primary", "characteristics"])
            var service = MutableService(uuid: try uuid(fields["uuid"], at: at + ".uuid", kind: .service))
            if let primary = fields["primary"] {
                guard let flag = primary as? Bool else {
                    throw Problem(path: at + ".primary", message: "expected true or false")
                }
                service.isPrimary = flag
            }
            for (c, entry) in try array(fields["characteristics"] ?? [Any](), at: at + ".characteristics").enumerated() {
                let at = "\(at).characteristics[\(c)]"
                let fields = try object(entry, at: at, keys: ["uuid", "flags", "value", "descriptors"])
                var characteristic = MutableCharacteristic(
                    uuid: try uuid(fields["uuid"], at: at + ".uuid", kind: .characteristic),
                    flags: try flags(fields["flags"], at: at + ".flags"),
                    value: try value(fields["value"], at: at + ".value") ?? [])
                for (d, entry) in try array(fields["descriptors"] ?? [Any](), at: at + ".descriptors").enumerated() {
                    let at = "\(at).descriptors[\(d)]"
                    let fields = try object(entry, at: at, keys: ["uuid", "flags", "value"])
                    characteristic.descriptors.append(MutableDescriptor(
                        uuid: try uuid(fields["uuid"], at: at + ".uuid", kind: .descriptor),
                        flags: try flags(fields["flags"], at: at + ".flags"),
                        value: try value(fields["value"], at: at + ".value") ?? []))
                }
                service.characteristics.append(characteristic)
            }
            do {
                try service.validate()
            } catch {
                throw Problem(path: at, message: "\(error)")   // "characteristics[1].flags: …" under the service's path
            }
            result.append(service)
        }
        return result
    }

    /// One line of stdin: `{"characteristic":"2a37","value":"0e5e"}`, with
    /// "service" when the characteristic's UUID is served more than once.
    struct Update {
        let characteristic: PublishedCharacteristic
        let value: [UInt8]
    }

    static func update(_ line: String, served: [PublishedService]) throws(Problem) -> Update {
        let root: Any
        do {
            root = try JSONInput.parse(Array(line.utf8))
        } catch {
            throw Problem(path: "", message: "not a JSON object")
        }
        let fields = try object(root, at: "", keys: ["characteristic", "value", "service"])
        let wanted = try uuid(fields["characteristic"], at: "characteristic", kind: .characteristic)
        let service = try fields["service"].map { value throws(Problem) in try uuid(value, at: "service", kind: .service) }
        let matches = served.filter { service == nil || $0.uuid == service }.flatMap(\.characteristics).filter { $0.uuid == wanted }
        guard let characteristic = matches.first else {
            throw Problem(path: "characteristic", message: "\(wanted.label) is not served\(service.map { " in service \($0.label)" } ?? "")")
        }
        if matches.count > 1 {
            throw Problem(path: "characteristic", message: "\(wanted.label) is served in \(matches.count) services; add \"service\"")
        }
        guard let bytes = try value(fields["value"], at: "value") else { throw Problem(path: "value", message: "missing") }
        if bytes.count > MutableService.maximumValueLength {
            throw Problem(path: "value", message: "\(bytes.count) bytes, longer than ATT's \(MutableService.maximumValueLength)")
        }
        return Update(characteristic: characteristic, value: bytes)
    }

    // MARK: - Pieces (also read `bluectl gateway`'s config: GatewayConfig)

    static func object(_ value: Any, at path: String, keys: [String]) throws(Problem) -> [String: Any] {
        guard let object = value as? [String: Any] else { throw Problem(path: path, message: "expected an object") }
        if let unknown = object.keys.sorted().first(where: { !keys.contains($0) }) {
            throw Problem(path: path, message: "unknown key \"\(TextSafety.escapedForMessage(unknown))\" (expected \(keys.joined(separator: ", ")))")
        }
        return object
    }

    static func array(_ value: Any, at path: String) throws(Problem) -> [Any] {
        guard let array = value as? [Any] else { throw Problem(path: path, message: "expected an array") }
        return array
    }

    static func string(_ value: Any?, at path: String) throws(Problem) -> String {
        guard let value else { throw Problem(path: path, message: "missing") }
        guard let text = value as? String else { throw Problem(path: path, message: "expected a string") }
        return text
    }

    static func uuid(_ value: Any?, at path: String, kind: BluetoothUUID.Kind) throws(Problem) -> BluetoothUUID {
        let text = try string(value, at: path)
        do {
            return try BluetoothUUID(text, kind: kind)
        } catch {
            throw Problem(path: path, message: "\(error)")
        }
    }

    private static func flags(_ value: Any?, at path: String) throws(Problem) -> Set<GattFlag> {
        guard let value else { throw Problem(path: path, message: "missing (e.g. [\"read\", \"notify\"])") }
        var flags: Set<GattFlag> = []
        for (i, entry) in try array(value, at: path).enumerated() {
            let text = try string(entry, at: "\(path)[\(i)]")
            guard let flag = GattFlag(rawValue: text) else {
                throw Problem(path: "\(path)[\(i)]", message: "unknown flag \"\(TextSafety.escapedForMessage(text))\" (BlueZ's flags: \(GattFlag.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            flags.insert(flag)
        }
        return flags
    }

    private static func value(_ value: Any?, at path: String) throws(Problem) -> [UInt8]? {
        guard let value else { return nil }
        let text = try string(value, at: path)
        if text.isEmpty { return [] }
        do {
            return try ByteFormats.parseHex(text)
        } catch {
            throw Problem(path: path, message: "\(error)")
        }
    }
}
