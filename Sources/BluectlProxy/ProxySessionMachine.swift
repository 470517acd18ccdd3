import ESPHomeAPI
import SwiftProtobuf

/// What a proxy tells its API clients about itself (`HelloResponse`, `DeviceInfoResponse`).
package struct ProxyIdentity: Sendable, Equatable {
    /// The node's name (`--name`; ESPHome's `name`, at most 31 bytes there).
    package var name: String
    /// The adapter's address, "AA:BB:CC:DD:EE:FF": both `mac_address` and
    /// `bluetooth_mac_address` (Home Assistant keys the proxy's scanner by the latter).
    package var bluetoothAddress: String
    /// bluectl's version, shown where ESPHome shows its own.
    package var version: String

    package init(name: String, bluetoothAddress: String, version: String) {
        self.name = name
        self.bluetoothAddress = bluetoothAddress
        self.version = version
    }
}

/// One API client's conversation, as a pure state machine: a frame in,
/// the actions out (answers to send, the advertisement subscription to
/// change, the end of the connection). The server performs the actions;
/// nothing here touches a socket, so every exchange is tested without one.
///
/// ESPHome's order is kept: `HelloRequest` first (anything else first ends
/// the connection), then any request. There is no password (ESPHome removed
/// it in 2026.1): an `AuthenticationRequest` from an older client is answered
/// as accepted.
package struct ProxySessionMachine: Sendable {
    /// The API version answered in `HelloResponse`: ESPHome 2026.6's (1.14).
    /// From 1.15 on a client asks `DeviceCapabilitiesRequest` for the proxy's
    /// features, which is not built.
    package static let apiVersion = (major: UInt32(1), minor: UInt32(14))
    /// `bluetooth_proxy_feature_flags`: passive scan (bit 0) and raw
    /// advertisements (bit 5), what is built; no connections, caching,
    /// pairing, or scanner state and mode yet.
    package static let featureFlags: UInt32 = 1 << 0 | 1 << 5
    /// `legacy_bluetooth_proxy_version` for clients before API 1.9: 1, passive only.
    package static let legacyProxyVersion: UInt32 = 1
    /// `SubscribeBluetoothLEAdvertisementsRequest.flags`: raw advertisements.
    package static let rawAdvertisementsFlag: UInt32 = 1 << 0

    /// Where the conversation is.
    package enum Phase: Equatable, Sendable {
        /// Connected, no `HelloRequest` yet.
        case awaitingHello
        /// Said hello: any request.
        case open
        /// Ended (a disconnect or a protocol error): nothing more is handled.
        case closed
    }

    /// What the server does.
    package enum Action: Equatable, Sendable {
        /// Send this frame to the client.
        case send(PlaintextFrame)
        /// Start forwarding advertisements to this client.
        case subscribeAdvertisements
        /// Stop forwarding them.
        case unsubscribeAdvertisements
        /// Log a line at debug level (a request and its outcome).
        case log(String)
        /// Close the connection; `reason` is the one log line (nil: an orderly end).
        case close(reason: String?)
    }

    package private(set) var phase = Phase.awaitingHello
    /// The client's `client_info` from its hello.
    package private(set) var clientInfo = ""
    package private(set) var subscribed = false
    private let identity: ProxyIdentity

    package init(identity: ProxyIdentity) {
        self.identity = identity
    }

    /// The actions for one frame from the client.
    package mutating func handle(_ frame: PlaintextFrame) -> [Action] {
        guard phase != .closed else { return [] }
        guard let type = apiMessageTypes[frame.type] else {
            return handleOther(frame)
        }
        guard type.source != .server else {
            return fail("\(type.protoMessageName) (\(frame.type)) is sent by servers, not clients")
        }
        let message: any APIMessage
        do {
            message = try type.init(serializedBytes: frame.payload, extensions: nil, partial: false, options: BinaryDecodingOptions())
        } catch {
            return fail("\(type.protoMessageName) (\(frame.type), \(frame.payload.count) bytes) does not decode: \(error)")
        }
        if phase == .awaitingHello {
            guard let hello = message as? HelloRequest else {
                return fail("\(type.protoMessageName) before HelloRequest")
            }
            phase = .open
            clientInfo = hello.clientInfo
            var response = HelloResponse()
            response.apiVersionMajor = Self.apiVersion.major
            response.apiVersionMinor = Self.apiVersion.minor
            response.serverInfo = "bluectl \(identity.version)"
            response.name = identity.name
            return [.log("hello from \"\(hello.clientInfo)\" (API \(hello.apiVersionMajor).\(hello.apiVersionMinor))"), send(response)]
        }
        return handleOpen(message)
    }

    /// A message of api.proto without generated Swift (none the proxy answers):
    /// the same checks, its protobuf read as unknown fields, then ignored.
    private mutating func handleOther(_ frame: PlaintextFrame) -> [Action] {
        guard let other = apiOtherMessages[frame.type] else {
            return fail("unknown message type \(frame.type)")
        }
        guard other.source != .server else {
            return fail("\(other.name) (\(frame.type)) is sent by servers, not clients")
        }
        do {
            _ = try Google_Protobuf_Empty(serializedBytes: frame.payload)
        } catch {
            return fail("\(other.name) (\(frame.type), \(frame.payload.count) bytes) does not decode: \(error)")
        }
        guard phase == .open else { return fail("\(other.name) before HelloRequest") }
        // A client's message of the API this proxy does not implement
        // (states, logs, services, …): nothing to report, so no answer,
        // as a device without those components.
        return [.log("\(other.name): not built here, ignored")]
    }

    /// The client's connection ended (closed, reset, or dropped by the server).
    package mutating func ended() -> [Action] {
        guard phase != .closed else { return [] }
        phase = .closed
        return subscribed ? [.unsubscribeAdvertisements] : []
    }

    private mutating func handleOpen(_ message: any APIMessage) -> [Action] {
        switch message {
        case is HelloRequest:
            return fail("a second HelloRequest")
        case is AuthenticationRequest:
            // No password: accepted (ESPHome's answer when none is set).
            return [.log("AuthenticationRequest: no password set, accepted"), send(AuthenticationResponse())]
        case is DisconnectRequest:
            var actions: [Action] = [.log("DisconnectRequest: disconnecting"), send(DisconnectResponse())]
            actions += end(reason: nil)
            return actions
        case is DisconnectResponse:
            return end(reason: nil)
        case is PingRequest:
            return [send(PingResponse())]
        case is PingResponse:
            return []
        case is DeviceInfoRequest:
            return [.log("DeviceInfoRequest: answered"), send(deviceInfo())]
        case is ListEntitiesRequest:
            return [.log("ListEntitiesRequest: no entities"), send(ListEntitiesDoneResponse())]
        case let request as SubscribeBluetoothLEAdvertisementsRequest:
            guard request.flags & Self.rawAdvertisementsFlag != 0 else {
                return [.log("SubscribeBluetoothLEAdvertisementsRequest without the raw flag: only raw batches are built; nothing is sent")]
            }
            guard !subscribed else { return [.log("SubscribeBluetoothLEAdvertisementsRequest: already subscribed")] }
            subscribed = true
            return [.log("SubscribeBluetoothLEAdvertisementsRequest (raw): forwarding advertisements"), .subscribeAdvertisements]
        case is UnsubscribeBluetoothLEAdvertisementsRequest:
            guard subscribed else { return [.log("UnsubscribeBluetoothLEAdvertisementsRequest: not subscribed")] }
            subscribed = false
            return [.log("UnsubscribeBluetoothLEAdvertisementsRequest: stopped forwarding"), .unsubscribeAdvertisements]
        case is SubscribeBluetoothConnectionsFreeRequest:
            // No connection slots are offered (feature flags say so): 0 of 0.
            return [.log("SubscribeBluetoothConnectionsFreeRequest: 0 of 0 slots (connections not built)"),
                    send(BluetoothConnectionsFreeResponse())]
        default:
            // A generated message a client may send that needs no answer.
            return [.log("\(type(of: message).protoMessageName): ignored")]
        }
    }

    private func deviceInfo() -> DeviceInfoResponse {
        var info = DeviceInfoResponse()
        info.name = identity.name
        info.friendlyName = identity.name
        info.macAddress = identity.bluetoothAddress
        info.bluetoothMacAddress = identity.bluetoothAddress
        info.esphomeVersion = identity.version
        info.manufacturer = "bluectl"
        info.model = "Linux (BlueZ)"
        info.bluetoothProxyFeatureFlags = Self.featureFlags
        info.legacyBluetoothProxyVersion = Self.legacyProxyVersion
        return info
    }

    private mutating func fail(_ reason: String) -> [Action] {
        end(reason: reason)
    }

    private mutating func end(reason: String?) -> [Action] {
        var actions = ended()
        actions.append(.close(reason: reason))
        return actions
    }

    private func send(_ message: some APIMessage) -> Action {
        .send(Self.frame(message))
    }

    /// `message` in a frame of its type.
    package static func frame(_ message: some APIMessage) -> PlaintextFrame {
        // Encoding a generated message of set fields cannot fail (only
        // unset required fields of proto2 can, and api.proto is proto3).
        let bytes = (try? message.serializedBytes() as [UInt8]) ?? []
        return PlaintextFrame(type: type(of: message).messageID, payload: bytes)
    }
}
