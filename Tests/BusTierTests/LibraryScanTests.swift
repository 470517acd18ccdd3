// BluectlCore's scan as a library user meets it, in this process against the
// stand-in: the stream ends when the scan ends — by stop(), by the consuming
// task's cancellation, by its duration or its limit — and StopDiscovery goes
// out exactly once whatever ends it.

import BluectlCore
import Testing

@Suite("Library: a scan's stream ends with the scan (bus tier, in process)")
struct LibraryScanTests {
    static let adapter = "/org/bluez/hci0"

    /// Three advertisers on hci0; the central opened on the private bus.
    static func setUp(_ bus: PrivateBus) async throws -> (CentralManager, AdapterInfo) {
        for (n, address) in ["AA:00:00:00:00:01", "AA:00:00:00:00:02", "AA:00:00:00:00:03"].enumerated() {
            try await bus.addAdvertiser("hci0", address, [.name("dev\(n)"), .rssi(-50)])
        }
        let central = try await CentralManager.open(busAddress: bus.address)
        return (central, try central.poweredAdapter(named: "hci0"))
    }

    /// Everything the stream yields until it ends (a hang fails the test after 20 s).
    static func drain(_ session: ScanSession) async -> [Discovery]? {
        await Deadline(after: .seconds(20)).run {
            var seen: [Discovery] = []
            do { for try await discovery in session.discoveries { seen.append(discovery) } } catch {}
            return seen
        }
    }

    @Test("limit: the stream ends after that many devices, with one StopDiscovery")
    func limit() async throws {
        try await withPrivateBus { bus in
            let (central, adapter) = try await Self.setUp(bus)
            defer { central.close() }
            let session = try await central.startScan(adapter: adapter, options: ScanOptions(), limit: 2)
            let seen = try #require(await Self.drain(session), "the stream did not end")
            #expect(seen.map(\.kind) == [.discovered, .discovered])
            try await session.stop()   // waits for the StopDiscovery the limit sent; sends none
            #expect(try await bus.callCount(Self.adapter, "StopDiscovery") == 1)
        }
    }

    @Test("duration: the stream ends by itself, with one StopDiscovery")
    func duration() async throws {
        try await withPrivateBus { bus in
            let (central, adapter) = try await Self.setUp(bus)
            defer { central.close() }
            let session = try await central.startScan(adapter: adapter, options: ScanOptions(), duration: .seconds(2))
            let seen = try #require(await Self.drain(session), "the stream did not end")
            #expect(Set(seen.map(\.device.address)).count == 3)
            #expect(try await bus.eventually { try await bus.callCount(Self.adapter, "StopDiscovery") == 1 })
        }
    }

    @Test("stop(): the consumer's loop ends; stopping twice sends one StopDiscovery")
    func stopEndsTheStream() async throws {
        try await withPrivateBus { bus in
            let (central, adapter) = try await Self.setUp(bus)
            defer { central.close() }
            let session = try await central.startScan(adapter: adapter, options: ScanOptions())
            let consumer = Task { await Self.drain(session) }
            #expect(try await bus.eventually { try await bus.callCount(Self.adapter, "StartDiscovery") == 1 })
            try await session.stop()
            try await session.stop()
            let seen = await consumer.value
            #expect(seen != nil, "the stream ended when the scan was stopped")
            #expect(try await bus.callCount(Self.adapter, "StopDiscovery") == 1)
        }
    }

    @Test("the consuming task cancelled: StopDiscovery goes out")
    func cancellationStopsTheScan() async throws {
        try await withPrivateBus { bus in
            let (central, adapter) = try await Self.setUp(bus)
            defer { central.close() }
            let session = try await central.startScan(adapter: adapter, options: ScanOptions())
            let consumer = Task {
                var count = 0
                do { for try await _ in session.discoveries { count += 1 } } catch {}
                return count
            }
            #expect(try await bus.eventually { try await bus.callCount(Self.adapter, "StartDiscovery") == 1 })
            consumer.cancel()
            _ = await consumer.value
            #expect(try await bus.eventually { try await bus.callCount(Self.adapter, "StopDiscovery") == 1 })
            try await session.stop()
            #expect(try await bus.callCount(Self.adapter, "StopDiscovery") == 1, "stop() after the end sends nothing more")
        }
    }
}
