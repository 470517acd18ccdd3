import BluectlDBus
import Testing
@testable import BluectlCore

/// A scan's sink (`startScan(onDiscovery:)`, what `bluectl scan` renders
/// from) on an embedded connection: results wait on the loop until
/// StartDiscovery succeeded, none is delivered once the scan ended, and the
/// limit (`--count`) ends the scan at its last device. The test plays
/// bluetoothd and moves the loop's clock.
@Suite(.timeLimit(.minutes(1))) struct ScanSinkDriverTests {
    /// What the sink was handed, in order (it runs on the loop; the test reads from its own thread).
    final class Sink: Sendable {
        private let found = Locked<[BluetoothAddress]>([])
        func take(_ discovery: Discovery) { found.withLock { $0.append(discovery.device.address) } }
        var addresses: [BluetoothAddress] { found.withLock { $0 } }
    }

    static func address(_ n: Int) -> BluetoothAddress { BluetoothAddress("AA:BB:CC:DD:EE:0\(n)")! }
    static func path(_ n: Int) -> ObjectPath { Fixture.device(Fixture.hci0, "AA_BB_CC_DD_EE_0\(n)") }

    /// Device `n` in range (with an RSSI).
    static func device(_ n: Int) -> [String: [String: DBusValue]] {
        var properties = Fixture.deviceProperties(name: "Sensor \(n)")
        properties["Address"] = .string(address(n).description)
        return [BlueZ.deviceInterface: properties]
    }

    /// An adapter and devices `inRange` already seen by a discovery (they carry an RSSI).
    static func start(inRange: [Int]) async throws -> EmbeddedBlueZ {
        var objects: [ObjectPath: [String: [String: DBusValue]]] = [
            Fixture.hci0: [BlueZ.adapterInterface: ["Address": .string("00:AA:01:00:00:01"), "Powered": .boolean(true)]],
        ]
        for n in inRange { objects[path(n)] = device(n) }
        return try await EmbeddedBlueZ.start(objects)
    }

    /// Starts a scan into `sink`; returns it with StartDiscovery not yet answered.
    static func scanning(_ lab: EmbeddedBlueZ, into sink: Sink, duration: Duration? = nil, limit: Int? = nil)
        async throws -> (Task<ScanSession, any Error>, DBusMessage) {
        let adapter = try lab.central.adapter(named: "hci0")
        let starting = Task {
            try await lab.central.startScan(adapter: adapter, options: ScanOptions(), duration: duration, limit: limit,
                                            onDiscovery: { sink.take($0) })
        }
        lab.bus.reply(to: try #require(await lab.bus.nextCall("SetDiscoveryFilter")))
        return (starting, try #require(await lab.bus.nextCall("StartDiscovery")))
    }

    /// Waits until the loop has run everything handed to it so far (a read
    /// through `loop.sync` queues behind it).
    static func settle(_ lab: EmbeddedBlueZ) {
        _ = lab.central.adapters
    }

    /// A device in range and one found while StartDiscovery is out reach
    /// the sink only once it succeeded, in the order found, before anything later.
    @Test func resultsWaitUntilStartDiscoverySucceeded() async throws {
        let lab = try await Self.start(inRange: [1])
        defer { lab.close() }
        let sink = Sink()
        let (starting, startDiscovery) = try await Self.scanning(lab, into: sink)
        lab.added(Self.path(2), Self.device(2))
        Self.settle(lab)
        #expect(sink.addresses.isEmpty, "nothing before StartDiscovery succeeded")
        lab.bus.reply(to: startDiscovery)
        let session = try await starting.value
        lab.added(Self.path(3), Self.device(3))
        Self.settle(lab)
        #expect(sink.addresses == [Self.address(1), Self.address(2), Self.address(3)])
        let stopping = Task { try await session.stop() }
        lab.bus.reply(to: try #require(await lab.bus.nextCall("StopDiscovery")))
        try await stopping.value
    }

    /// StartDiscovery fails: what was held is never delivered, nor what comes after.
    @Test func aFailedStartDiscoveryDeliversNothing() async throws {
        let lab = try await Self.start(inRange: [1])
        defer { lab.close() }
        let sink = Sink()
        let (starting, startDiscovery) = try await Self.scanning(lab, into: sink)
        lab.bus.fail(startDiscovery, name: "org.bluez.Error.NotReady", message: "Resource Not Ready")
        await #expect(throws: BluetoothError.self) { try await starting.value }
        lab.added(Self.path(2), Self.device(2))
        Self.settle(lab)
        #expect(sink.addresses.isEmpty)
        #expect(lab.calls("StopDiscovery").isEmpty, "no discovery to stop")
    }

    /// The scan's duration passes on the loop's clock: StopDiscovery goes
    /// out, and a device found after that (while it is out, and after its
    /// answer) is not delivered.
    @Test func nothingIsDeliveredOnceTheScanEnded() async throws {
        let lab = try await Self.start(inRange: [])
        defer { lab.close() }
        let sink = Sink()
        let (starting, startDiscovery) = try await Self.scanning(lab, into: sink, duration: .seconds(5))
        lab.bus.reply(to: startDiscovery)
        let session = try await starting.value
        lab.added(Self.path(1), Self.device(1))
        #expect(await lab.bus.untilTimerScheduled())
        lab.bus.advance(by: .seconds(4))
        #expect(lab.calls("StopDiscovery").isEmpty, "not before the duration")
        lab.bus.advance(by: .seconds(1))
        let stop = try #require(await lab.bus.nextCall("StopDiscovery"))
        lab.added(Self.path(2), Self.device(2))
        lab.bus.reply(to: stop)
        lab.added(Self.path(3), Self.device(3))
        Self.settle(lab)
        #expect(sink.addresses == [Self.address(1)])
        for try await _ in session.discoveries {}   // the stream ended with the scan
        try await session.stop()                      // the same end: no second StopDiscovery
        #expect(lab.calls("StopDiscovery").count == 1)
    }

    /// `limit` 2 (`scan --count 2`) with four devices already in range: the
    /// sink gets two, the scan ends there (one StopDiscovery), and neither
    /// the other two nor a device found later reach the sink.
    @Test func theLimitEndsTheScanAtItsLastDevice() async throws {
        let lab = try await Self.start(inRange: [1, 2, 3, 4])
        defer { lab.close() }
        let sink = Sink()
        let (starting, startDiscovery) = try await Self.scanning(lab, into: sink, limit: 2)
        lab.bus.reply(to: startDiscovery)
        let session = try await starting.value
        let stop = try #require(await lab.bus.nextCall("StopDiscovery"))
        lab.added(Self.path(5), Self.device(5))
        lab.bus.reply(to: stop)
        Self.settle(lab)
        #expect(sink.addresses.count == 2)
        #expect(Set(sink.addresses).isSubset(of: (1...4).map(Self.address)))
        for try await _ in session.discoveries {}
        #expect(lab.calls("StopDiscovery").count == 1)
    }
}
