// JSON values of the bus tier: busctl --json output, bluectl --json lines.

import Foundation

// MARK: - JSON values (busctl --json output, bluectl --json lines)

enum JSONValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses one JSON text (JSONSerialization: fast enough for 100,000 lines).
    static func parse(_ text: String) throws -> JSONValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            throw BusTierError("not JSON: \(text.debugDescription): \(error)")
        }
        return try JSONValue(foundation: object)
    }

    private init(foundation value: Any) throws {
        switch value {
        case is NSNull:
            self = .null
        case let s as String:
            self = .string(s)
        case let n as NSNumber:
            // JSON true/false come as the boolean NSNumber subclass (NSNumber bridges 0/1 to Bool too)
            if String(describing: type(of: n)).contains("Boolean") {
                self = .bool(n.boolValue)
            } else if let i = Int64(exactly: n) {
                self = .int(i)
            } else {
                self = .double(n.doubleValue)
            }
        case let a as [Any]:
            self = .array(try a.map(JSONValue.init(foundation:)))
        case let o as [String: Any]:
            self = .object(try o.mapValues(JSONValue.init(foundation:)))
        default:
            throw BusTierError("unexpected JSON value \(value)")
        }
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    var string: String? { if case .string(let s) = self { return s }; return nil }
    var bool: Bool? { if case .bool(let b) = self { return b }; return nil }
    var int: Int? { if case .int(let i) = self { return Int(i) }; return nil }
    var array: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    var object: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }
    var keys: Set<String> { Set(object?.keys.map { $0 } ?? []) }
    var strings: [String]? { array?.compactMap(\.string) }

    var description: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .string(let s): return s.debugDescription
        case .array(let a): return "[" + a.map(\.description).joined(separator: ",") + "]"
        case .object(let o):
            return "{" + o.keys.sorted().map { "\($0.debugDescription):\(o[$0]!)" }.joined(separator: ",") + "}"
        }
    }
}
