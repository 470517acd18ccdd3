// One API client's conversation, frame by frame, without a socket: what Home
// Assistant reads (HelloResponse, DeviceInfoResponse), the subscription, the
// device and GATT requests handed to the server, and garbage ending the
// conversation.
import ESPHomeAPI
import Foundation
import SwiftProtobuf
import Testing
@testable import BluectlProxy

private let identity = ProxyIdentity(name: "kitchen", bluetoothAddress: "00:AA:01:00:00:23", version: "0.1.0")

private func frame(_ message: some APIMessage) -> PlaintextFrame { ProxySessionMachine.frame(message) }

/// The messages the actions send, decoded by their frame's type.
private func sent<M: APIMessage>(_ actions: [ProxySessionMachine.Action], as _: M.Type) throws -> [M] {
    try actions.compactMap { action -> M? in
        guard case .send(let frame) = action, frame.type == M.messageID else { return nil }
        return try M(serializedBytes: frame.payload)
    }
}

private func closeReason(_ actions: [ProxySessionMachine.Action]) -> String?? {
    for case .close(let reason) in actions { return .some(reason) }
    return nil
}

@Suite struct ProxySessionMachineTests {
    func helloed() -> ProxySessionMachine {
        var machine = ProxySessionMachine(identity: identity)
        var hello = HelloRequest()
        hello.clientInfo = "Home Assistant"
        hello.apiVersionMajor = 1
        hello.apiVersionMinor = 15
        _ = machine.handle(frame(hello))
        return machine
    }

    @Test func helloAnswered() throws {
        var machine = ProxySessionMachine(identity: identity)
        var hello = HelloRequest()
        hello.clientInfo = "Home Assistant"
        let actions = machine.handle(frame(hello))
        let response = try #require(try sent(actions, as: HelloResponse.self).first)
        #expect(response.apiVersionMajor == 1 && response.apiVersionMinor == 14)
        #expect(response.name == "kitchen")
        #expect(machine.phase == .open && machine.clientInfo == "Home Assistant")
    }

    @Test func deviceInfoCarriesWhatHomeAssistantReads() throws {
        var machine = helloed()
        let info = try #require(try sent(machine.handle(frame(DeviceInfoRequest())), as: DeviceInfoResponse.self).first)
        #expect(info.name == "kitchen")
        #expect(info.macAddress == "00:AA:01:00:00:23" && info.bluetoothMacAddress == "00:AA:01:00:00:23")
        #expect(info.bluetoothProxyFeatureFlags == 0b111_1111,
                "passive scan, connections, remote caching, pairing, cache clearing, raw advertisements, scanner state and mode")
        #expect(info.legacyBluetoothProxyVersion == 5)
        #expect(!info.usesPassword)
    }

    @Test func pingListEntitiesAndFreeSlots() throws {
        var machine = helloed()
        #expect(try sent(machine.handle(frame(PingRequest())), as: PingResponse.self).count == 1)
        #expect(try sent(machine.handle(frame(ListEntitiesRequest())), as: ListEntitiesDoneResponse.self).count == 1)
        #expect(!machine.connectionsFreeSubscribed)
        // The slots are the server's (all clients share them): it answers, and again at each change.
        #expect(machine.handle(frame(SubscribeBluetoothConnectionsFreeRequest())).contains(.subscribeConnectionsFree))
        #expect(machine.connectionsFreeSubscribed)
        #expect(machine.phase == .open)
    }

    @Test func deviceRequestsHandedToTheServer() throws {
        var machine = helloed()
        let address: UInt64 = 0xAABB_CCDD_EEFF
        let kinds: [(BluetoothDeviceRequestType, ProxySessionMachine.DeviceRequest)] = [
            (.connectV3WithCache, .connect(cached: true)), (.connectV3WithoutCache, .connect(cached: false)),
            (.disconnect, .disconnect), (.pair, .pair), (.unpair, .unpair), (.clearCache, .clearCache),
        ]
        for (type, kind) in kinds {
            var request = BluetoothDeviceRequest()
            (request.address, request.requestType, request.hasAddressType_p, request.addressType) = (address, type, true, 1)
            #expect(machine.handle(frame(request)) == [.device(address: address, kind)], "\(type)")
        }
        // The V1 connect ESPHome removed: answered connected=false at once, nothing carried out.
        var v1 = BluetoothDeviceRequest()
        (v1.address, v1.requestType) = (address, .connect)
        let actions = machine.handle(frame(v1))
        #expect(!actions.contains { if case .device = $0 { true } else { false } })
        let refused = try #require(try sent(actions, as: BluetoothDeviceConnectionResponse.self).first)
        #expect(refused.address == address && !refused.connected)
        #expect(machine.phase == .open)
    }

    @Test func gattRequestsHandedToTheServer() {
        var machine = helloed()
        let address: UInt64 = 0x1122_3344_5566
        var services = BluetoothGATTGetServicesRequest()
        services.address = address
        #expect(machine.handle(frame(services)) == [.device(address: address, .services)])
        var read = BluetoothGATTReadRequest()
        (read.address, read.handle) = (address, 11)
        #expect(machine.handle(frame(read)) == [.device(address: address, .read(handle: 11))])
        var write = BluetoothGATTWriteRequest()
        (write.address, write.handle, write.response, write.data) = (address, 14, true, Data([1, 2]))
        #expect(machine.handle(frame(write)) == [.device(address: address, .write(handle: 14, data: [1, 2], response: true))])
        write.response = false
        #expect(machine.handle(frame(write)) == [.device(address: address, .write(handle: 14, data: [1, 2], response: false))])
        var readDescriptor = BluetoothGATTReadDescriptorRequest()
        (readDescriptor.address, readDescriptor.handle) = (address, 12)
        #expect(machine.handle(frame(readDescriptor)) == [.device(address: address, .readDescriptor(handle: 12))])
        var writeDescriptor = BluetoothGATTWriteDescriptorRequest()
        (writeDescriptor.address, writeDescriptor.handle, writeDescriptor.data) = (address, 12, Data([1, 0]))
        #expect(machine.handle(frame(writeDescriptor)) == [.device(address: address, .writeDescriptor(handle: 12, data: [1, 0]))])
        var notify = BluetoothGATTNotifyRequest()
        (notify.address, notify.handle, notify.enable) = (address, 11, true)
        #expect(machine.handle(frame(notify)) == [.device(address: address, .notify(handle: 11, enable: true))])
        notify.enable = false
        #expect(machine.handle(frame(notify)) == [.device(address: address, .notify(handle: 11, enable: false))])
    }

    @Test func theEndReleasesTheClientsConnections() {
        var machine = helloed()
        // However it ends (the client's disconnect, garbage, the socket closing), once.
        #expect(machine.handle(frame(DisconnectRequest())).contains(.releaseConnections))
        #expect(machine.ended().isEmpty)
        var dropped = helloed()
        #expect(dropped.ended() == [.releaseConnections])
        var garbage = helloed()
        #expect(garbage.handle(PlaintextFrame(type: 1011, payload: [])).contains(.releaseConnections))
    }

    @Test func gattResponsesFromAClientEndIt() {
        // What only a server sends (a read's answer, a notification) ends a client that sends it.
        var machine = helloed()
        let actions = machine.handle(frame(BluetoothGATTNotifyDataResponse()))
        #expect((closeReason(actions) ?? nil)?.hasPrefix("BluetoothGATTNotifyDataResponse (79) is sent by servers") == true)
    }

    @Test func subscribeAndUnsubscribe() {
        var machine = helloed()
        var raw = SubscribeBluetoothLEAdvertisementsRequest()
        raw.flags = 1
        let subscribing = machine.handle(frame(raw))
        #expect(subscribing.contains(.subscribeAdvertisements))
        #expect(subscribing.contains(.sendScannerState), "ESPHome tells a subscriber the scanner's state")
        #expect(machine.subscribed)
        #expect(!machine.handle(frame(raw)).contains(.subscribeAdvertisements), "subscribed once")
        #expect(machine.handle(frame(UnsubscribeBluetoothLEAdvertisementsRequest())).contains(.unsubscribeAdvertisements))
        #expect(!machine.subscribed)
        // Without the raw flag (the legacy parsed form): not built, nothing subscribed.
        #expect(!machine.handle(frame(SubscribeBluetoothLEAdvertisementsRequest())).contains(.subscribeAdvertisements))
        #expect(!machine.subscribed)
    }

    @Test func scannerModeHandedToTheServer() {
        var machine = helloed()
        var request = BluetoothScannerSetModeRequest()
        request.mode = .passive
        #expect(machine.handle(frame(request)).contains(.setScannerMode(active: false)))
        request.mode = .active
        #expect(machine.handle(frame(request)).contains(.setScannerMode(active: true)))
    }

    @Test func disconnectRequestAnsweredThenClosed() throws {
        var machine = helloed()
        var raw = SubscribeBluetoothLEAdvertisementsRequest()
        raw.flags = 1
        _ = machine.handle(frame(raw))
        let actions = machine.handle(frame(DisconnectRequest()))
        #expect(try sent(actions, as: DisconnectResponse.self).count == 1)
        #expect(actions.contains(.unsubscribeAdvertisements))
        #expect(closeReason(actions) == .some(nil), "an orderly end: no warning")
        #expect(machine.phase == .closed)
        #expect(machine.handle(frame(PingRequest())).isEmpty, "nothing after the end")
    }

    @Test func garbageEndsTheConversation() {
        let cases: [(PlaintextFrame, String)] = [
            (PlaintextFrame(type: 1011, payload: []), "unknown message type 1011"),
            (PlaintextFrame(type: 1, payload: [0x0a, 0x10, 0x61]), "HelloRequest (1, 3 bytes) does not decode"),
            (PlaintextFrame(type: 7, payload: []), "PingRequest before HelloRequest"),
            (PlaintextFrame(type: 2, payload: []), "HelloResponse (2) is sent by servers"),
        ]
        for (bad, reason) in cases {
            var machine = ProxySessionMachine(identity: identity)
            let actions = machine.handle(bad)
            let got = closeReason(actions) ?? nil
            #expect(got?.hasPrefix(reason) == true, "\(bad): \(String(describing: got))")
            #expect(machine.phase == .closed)
        }
        var open = helloed()
        #expect((closeReason(open.handle(frame(HelloRequest()))) ?? nil) == "a second HelloRequest")
    }

    @Test func unbuiltRequestsIgnoredNotFatal() {
        var machine = helloed()
        // SubscribeStatesRequest (20) and ExecuteServiceRequest (42, a key and an empty string):
        // no Swift is generated for them (Scripts/gen-esphome-proto.d/trim.py).
        for unbuilt in [PlaintextFrame(type: 20, payload: []), PlaintextFrame(type: 42, payload: [0x0d, 1, 0, 0, 0, 0x12, 0])] {
            let actions = machine.handle(unbuilt)
            #expect(closeReason(actions) == nil)
            #expect(!actions.contains { if case .send = $0 { true } else { false } })
            #expect(machine.phase == .open)
        }
    }

    @Test func unbuiltMessagesCheckedAsTheOthers() {
        let cases: [(PlaintextFrame, String)] = [
            (PlaintextFrame(type: 20, payload: []), "SubscribeStatesRequest before HelloRequest"),
            (PlaintextFrame(type: 20, payload: [0x0a, 0x10, 0x61]), "SubscribeStatesRequest (20, 3 bytes) does not decode"),
            (PlaintextFrame(type: 12, payload: []), "ListEntitiesBinarySensorResponse (12) is sent by servers"),
        ]
        for (bad, reason) in cases {
            var machine = ProxySessionMachine(identity: identity)
            let got = closeReason(machine.handle(bad)) ?? nil
            #expect(got?.hasPrefix(reason) == true, "\(bad): \(String(describing: got))")
            #expect(machine.phase == .closed)
        }
    }
}
