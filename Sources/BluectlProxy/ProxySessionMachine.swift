#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
    /// `bluetooth_proxy_feature_flags`: passive scan (bit 0), active
    /// connections (1), remote caching (2: the V3 connects, services sent
    /// only when asked), pairing (3), cache clearing (4), raw
    /// advertisements (5) and the scanner's state and mode (6).
    package static let featureFlags: UInt32 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 1 << 5 | 1 << 6
    /// `legacy_bluetooth_proxy_version` for clients before API 1.9: 5, the
    /// version with connections, caching, pairing and cache clearing.
    package static let legacyProxyVersion: UInt32 = 5
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

    /// What a client asks of one device (by its 48-bit address) through the
    /// proxy: the server's `ProxyLinks` carries it out and answers.
    package enum DeviceRequest: Equatable, Sendable {
        /// Connect (V3): `cached` when the client has the services already
        /// (BlueZ resolves them either way; see docs/proxy.md).
        case connect(cached: Bool)
        /// Disconnect (answered by a connection response, connected=false).
        case disconnect
        /// Pair (`BluetoothDevicePairingResponse`).
        case pair
        /// Unpair (`BluetoothDeviceUnpairingResponse`).
        case unpair
        /// Forget the device's GATT cache (`BluetoothDeviceClearCacheResponse`).
        case clearCache
        /// Send its services (`BluetoothGATTGetServicesResponse`s, then done).
        case services
        /// Read a characteristic.
        case read(handle: UInt32)
        /// Write a characteristic (`response`: a Write Request, answered).
        case write(handle: UInt32, data: [UInt8], response: Bool)
        /// Read a descriptor.
        case readDescriptor(handle: UInt32)
        /// Write a descriptor (always answered, as ESPHome does).
        case writeDescriptor(handle: UInt32, data: [UInt8])
        /// Notifications of a characteristic on or off.
        case notify(handle: UInt32, enable: Bool)
    }

    /// What the server does.
    package enum Action: Equatable, Sendable {
        /// Send this frame to the client.
        case send(PlaintextFrame)
        /// Start forwarding advertisements to this client.
        case subscribeAdvertisements
        /// Stop forwarding them.
        case unsubscribeAdvertisements
        /// Send the scanner's state and mode (`BluetoothScannerStateResponse`),
        /// as ESPHome does to a client subscribing to advertisements.
        case sendScannerState
        /// The client asks for an active (true) or passive scan.
        case setScannerMode(active: Bool)
        /// Carry out a request about the device at `address`.
        case device(address: UInt64, DeviceRequest)
        /// Send the connection slots now and whenever they change.
        case subscribeConnectionsFree
        /// The client is gone: free its connections and notifications.
        case releaseConnections
        /// Log a line at debug level (a request and its outcome).
        case log(String)
        /// Close the connection; `reason` is the one log line (nil: an orderly end).
        case close(reason: String?)
    }

    package private(set) var phase = Phase.awaitingHello
    /// The client's `client_info` from its hello.
    package private(set) var clientInfo = ""
    package private(set) var subscribed = false
    /// Whether the client asked for the connection slots (and each change of them).
    package private(set) var connectionsFreeSubscribed = false
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
        return (subscribed ? [.unsubscribeAdvertisements] : []) + [.releaseConnections]
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
            return [.log("SubscribeBluetoothLEAdvertisementsRequest (raw): forwarding advertisements"), .subscribeAdvertisements,
                    .sendScannerState]
        case let request as BluetoothScannerSetModeRequest:
            return [.log("BluetoothScannerSetModeRequest: \(request.mode)"), .setScannerMode(active: request.mode == .active)]
        case is UnsubscribeBluetoothLEAdvertisementsRequest:
            guard subscribed else { return [.log("UnsubscribeBluetoothLEAdvertisementsRequest: not subscribed")] }
            subscribed = false
            return [.log("UnsubscribeBluetoothLEAdvertisementsRequest: stopped forwarding"), .unsubscribeAdvertisements]
        case is SubscribeBluetoothConnectionsFreeRequest:
            connectionsFreeSubscribed = true
            return [.log("SubscribeBluetoothConnectionsFreeRequest: sending the free slots"), .subscribeConnectionsFree]
        case let request as BluetoothDeviceRequest:
            return deviceRequest(request)
        case is BluetoothGATTGetServicesRequest, is BluetoothGATTReadRequest, is BluetoothGATTWriteRequest,
             is BluetoothGATTReadDescriptorRequest, is BluetoothGATTWriteDescriptorRequest, is BluetoothGATTNotifyRequest:
            return gattRequest(message)
        default:
            // A generated message a client may send that needs no answer.
            return [.log("\(type(of: message).protoMessageName): ignored")]
        }
    }

    private func deviceRequest(_ request: BluetoothDeviceRequest) -> [Action] {
        let kind: DeviceRequest
        switch request.requestType {
        case .connectV3WithCache: kind = .connect(cached: true)
        case .connectV3WithoutCache: kind = .connect(cached: false)
        case .disconnect: kind = .disconnect
        case .pair: kind = .pair
        case .unpair: kind = .unpair
        case .clearCache: kind = .clearCache
        case .connect, .UNRECOGNIZED:
            // V1 connects are gone from ESPHome (aioesphomeapi no longer
            // sends them): refused as a device without them, connected=false.
            var response = BluetoothDeviceConnectionResponse()
            response.address = request.address
            return [.log("BluetoothDeviceRequest \(request.requestType): not a V3 request, refused"), send(response)]
        }
        return [.device(address: request.address, kind)]
    }

    private func gattRequest(_ message: any APIMessage) -> [Action] {
        switch message {
        case let m as BluetoothGATTGetServicesRequest: [.device(address: m.address, .services)]
        case let m as BluetoothGATTReadRequest: [.device(address: m.address, .read(handle: m.handle))]
        case let m as BluetoothGATTWriteRequest:
            [.device(address: m.address, .write(handle: m.handle, data: Array(m.data), response: m.response))]
        case let m as BluetoothGATTReadDescriptorRequest: [.device(address: m.address, .readDescriptor(handle: m.handle))]
        case let m as BluetoothGATTWriteDescriptorRequest:
            [.device(address: m.address, .writeDescriptor(handle: m.handle, data: Array(m.data)))]
        case let m as BluetoothGATTNotifyRequest: [.device(address: m.address, .notify(handle: m.handle, enable: m.enable))]
        default: []
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
