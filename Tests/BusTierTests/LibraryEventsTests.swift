// BluectlCore's observable state as a library user meets it, in this process
// against the stand-in: the central's state and a peripheral's connection
// events as streams, without reading BlueZ's tree.

import BluectlCore
import Testing

@Suite("Library: state and connection events as streams (bus tier, in process)")
struct LibraryEventsTests {
    /// Collects what `stream` yields, in a task of its own, until cancelled.
    final class Collector<Element: Sendable & Equatable>: Sendable {
        let seen = Locked<[Element]>([])
        let task: Task<Void, Never>
        init(_ stream: AsyncStream<Element>) {
            let seen = self.seen
            task = Task { for await element in stream { seen.withLock { $0.append(element) } } }
        }
        var elements: [Element] { seen.withLock { $0 } }
    }

    @Test("stateUpdates: the state now, then each change (power, bluetoothd gone and back)")
    func centralState() async throws {
        try await withPrivateBus { bus in
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let states = Collector(central.stateUpdates())
            defer { states.task.cancel() }
            #expect(try await bus.eventually { states.elements == [.poweredOn] })
            try await bus.setPowered("hci0", false)
            #expect(try await bus.eventually { states.elements == [.poweredOn, .poweredOff] }, "\(states.elements)")
            try await bus.setPowered("hci0", true)
            await bus.stopStandIn()
            #expect(try await bus.eventually { states.elements == [.poweredOn, .poweredOff, .poweredOn, .resetting] },
                    "\(states.elements)")
            try await bus.startStandIn(adapters: [.hci0])
            #expect(try await bus.eventually { states.elements.last == .poweredOn }, "\(states.elements)")
        }
    }

    @Test("connectionEvents: connected and disconnected with a reason, whoever caused them")
    func connectionEvents() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let central = try await CentralManager.open(busAddress: bus.address)
            defer { central.close() }
            let adapter = try central.poweredAdapter(named: "hci0")
            let peripheral = try await central.findDevice(heartRateAddress, adapter: adapter, timeout: .seconds(10))
            let events = Collector(peripheral.connectionEvents())
            defer { events.task.cancel() }
            try await central.connect(peripheral, timeout: .seconds(10))
            #expect(try await bus.eventually { events.elements == [.connected] }, "\(events.elements)")
            try await bus.dropConnection(g.device)   // the device goes away
            #expect(try await bus.eventually { events.elements == [.connected, .disconnected(reason: "the link went down")] },
                    "\(events.elements)")
            try await central.connect(peripheral, timeout: .seconds(10))
            try await central.cancelPeripheralConnection(peripheral)
            #expect(try await bus.eventually { events.elements.count == 4 }, "\(events.elements)")
            #expect(events.elements.suffix(2) == [.connected, .disconnected(reason: "the link went down")])
        }
    }
}
