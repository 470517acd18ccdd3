import SwiftProtobuf

/// A message of ESPHome's native API that travels in a frame of its own:
/// one with an `(id)` option in api.proto. The conformances are generated
/// (`Generated/api_message_ids.swift`, by Scripts/gen-esphome-proto).
public protocol APIMessage: SwiftProtobuf.Message {
    /// The frame's message type (`option (id)`).
    static var messageID: UInt32 { get }
    /// Which side may send it (`option (source)`).
    static var source: APIMessageSource { get }
}

/// Who sends a message (`APIMessage.source`).
public enum APIMessageSource: Sendable {
    /// Only the API client (Home Assistant).
    case client
    /// Only the server (the device, here `bluectl proxy`).
    case server
    /// Either side.
    case both
}
