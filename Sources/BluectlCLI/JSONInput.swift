// JSON read from the user (a SPEC, stdin lines, a keys file), as JSONSerialization gives it.

#if canImport(FoundationEssentials)
import FoundationEssentials   // not Foundation: its JSONSerialization links ICU's data into the binary (a 4 MB .deb becomes 15 MB)
#else
import Foundation
#endif

enum JSONInput {
    /// A JSON null, kept apart from a missing member.
    struct Null {}

    /// JSON as JSONSerialization gives it (objects [String: Any], arrays [Any], String, Bool,
    /// Double; null a `Null`), from FoundationEssentials' JSONDecoder.
    static func parse(_ bytes: [UInt8]) throws -> Any {
        try JSONDecoder().decode(AnyJSON.self, from: Data(bytes)).value
    }

    /// What JSONDecoder found wrong, when it says more than that the data is not JSON.
    static func problem(_ error: any Error) -> String? {
        guard case DecodingError.dataCorrupted(let context) = error else { return "\(error)" }
        return context.underlyingError.map { "\($0)" }
    }

    private struct AnyJSON: Decodable {
        let value: Any

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() { value = Null() }
            else if let flag = try? single.decode(Bool.self) { value = flag }
            else if let number = try? single.decode(Double.self) { value = number }
            else if let text = try? single.decode(String.self) { value = text }
            else if let array = try? single.decode([AnyJSON].self) { value = array.map(\.value) }
            else { value = try single.decode([String: AnyJSON].self).mapValues(\.value) }
        }
    }
}
