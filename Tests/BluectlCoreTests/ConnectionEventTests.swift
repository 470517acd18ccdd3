import BluectlDBus
import Testing
@testable import BluectlCore

@Suite("Connection events from tree changes (Peripheral.connectionEvents)")
struct ConnectionEventTests {
    static let device = Fixture.device()

    static func event(_ change: BlueZObjectTree.Change, connectedInTree: Bool = false, was: Bool) -> ConnectionEvent? {
        var tree = BlueZObjectTree()
        var properties = Fixture.deviceProperties()
        properties["Connected"] = .boolean(connectedInTree)
        _ = tree.apply(interfacesAdded: Fixture.added(device, [BlueZ.deviceInterface: properties]))
        return Peripheral.connectionEvent(for: change, device: device, in: tree, wasConnected: was)
    }

    static func connected(_ value: Bool) -> BlueZObjectTree.Change {
        .propertiesChanged(device, interface: BlueZ.deviceInterface, changed: ["Connected": .boolean(value)], invalidated: [])
    }

    @Test func eachTransitionOnce() {
        #expect(Self.event(Self.connected(true), was: false) == .connected)
        #expect(Self.event(Self.connected(true), was: true) == nil, "no event without a change")
        #expect(Self.event(Self.connected(false), was: true) == .disconnected(reason: "the link went down"))
        #expect(Self.event(.propertiesChanged(Self.device, interface: BlueZ.deviceInterface, changed: ["RSSI": .int16(-40)],
                                              invalidated: []), was: true) == nil)
        #expect(Self.event(Self.connected(true).withPath(Fixture.device(Fixture.hci0, "11_22_33_44_55_66")), was: false) == nil,
                "another device's change")
    }

    @Test func theDeviceOrBluetoothdGoing() {
        #expect(Self.event(.removed(Self.device, interfaces: [BlueZ.deviceInterface]), was: true)
                == .disconnected(reason: "removed from BlueZ"))
        #expect(Self.event(.removed(Self.device, interfaces: [BlueZ.deviceInterface]), was: false) == nil)
        #expect(Self.event(.cleared, was: true) == .disconnected(reason: "bluetoothd stopped"))
        #expect(Self.event(.replaced, connectedInTree: true, was: false) == .connected, "bluetoothd came back with it connected")
        #expect(Self.event(.added(Self.device, interfaces: [BlueZ.deviceInterface]), connectedInTree: true, was: false) == .connected)
    }
}

extension BlueZObjectTree.Change {
    /// The same property change at another path.
    func withPath(_ path: ObjectPath) -> Self {
        guard case .propertiesChanged(_, let interface, let changed, let invalidated) = self else { return self }
        return .propertiesChanged(path, interface: interface, changed: changed, invalidated: invalidated)
    }
}
