// BluectlCore's peripherals as a library user meets them, in this process
// against the stand-in: one object per device, whichever call hands it out,
// so every handle sees the same connection state and notification sessions.

import BluectlCore
import Testing

@Suite("Library: one Peripheral per device (bus tier, in process)")
struct LibraryPeripheralTests {
    @Test("every call hands out the same object; its state and notify sessions are shared")
    func onePeripheralPerDevice() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            let found = try await central.findDevice(heartRateAddress, adapter: adapter, timeout: .seconds(10))
            let address = try BluetoothAddress.parse(heartRateAddress)
            let device = try #require(central.devices(on: adapter).first { $0.address == address })
            let retrieved = try #require(central.retrievePeripherals(withIdentifiers: [address]).first)
            // By identity (a failure shows the two identifiers).
            let one = ObjectIdentifier(found)
            #expect(ObjectIdentifier(central.peripheral(device)) == one)
            #expect(ObjectIdentifier(retrieved) == one)
            #expect(try central.knownDevice(heartRateAddress, adapter: adapter).map(ObjectIdentifier.init) == one)

            try await central.connect(retrieved, timeout: .seconds(10))
            #expect(found.state == .connected)
            try await found.discoverServices(timeout: .seconds(10))
            let hrm = try found.characteristic(.uuid(BluetoothUUID("2a37", kind: .characteristic)))
            try await retrieved.setNotifyValue(true, for: hrm)
            #expect(found.isNotifying(hrm), "the session one handle started is the other's too")
            #expect(found.valueUpdates(for: hrm) != nil)
            try await found.setNotifyValue(true, for: hrm)
            #expect(try await bus.callCount(hrm.pathForTests, "StartNotify") == 1, "turned on once, not once per handle")
            try await found.setNotifyValue(false, for: hrm)
            #expect(!retrieved.isNotifying(hrm))
            try await central.cancelPeripheralConnection(found)
            #expect(retrieved.state == .disconnected)
        }
    }
}

extension GattCharacteristic {
    /// BlueZ's object path, for asking the stand-in about its calls.
    var pathForTests: String { path.rawValue }
}

@Suite("Library: pairing (bus tier, in process)")
struct LibraryPairingTests {
    @Test("pairing a device that is not connected connects it first (Connect, then Pair), and pairs once")
    func pairConnectsFirst() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            let peripheral = try await central.findDevice(heartRateAddress, adapter: adapter, timeout: .seconds(10))
            #expect(peripheral.info?.connected == false)
            try await peripheral.pair(timeout: .seconds(10))
            let calls = try await bus.calls(g.device).filter { ["Connect", "Pair"].contains($0) }
            #expect(calls == ["Connect", "Pair"], "\(calls)")
            #expect(peripheral.info?.paired == true)
            try await peripheral.pair(timeout: .seconds(10))
            #expect(try await bus.callCount(g.device, "Pair") == 2, "pairing again: AlreadyExists from BlueZ, success here")
            try await central.cancelPeripheralConnection(peripheral)
        }
    }
}
