// BluectlCore's notifications as a library user meets them, in this process
// against the stand-in: subscribers of one characteristic share one BlueZ
// session; each gets every value; the last one to leave — however it
// leaves — ends the session.

import BluectlCore
import Testing

@Suite("Library: one notify session per characteristic, shared (bus tier, in process)")
struct LibraryNotifyTests {
    /// The heart-rate device connected, its services resolved; its 2a37.
    static func connected(_ bus: PrivateBus) async throws -> (CentralManager, Peripheral, GattCharacteristic, HeartRateGatt) {
        let g = try await HeartRateGatt.install(bus)
        let central = try await CentralManager.open(busAddress: bus.address)
        let adapter = try central.poweredAdapter(named: "hci0")
        let peripheral = try await central.findDevice(heartRateAddress, adapter: adapter, timeout: .seconds(10))
        try await central.connect(peripheral, timeout: .seconds(10))
        try await peripheral.discoverServices(timeout: .seconds(10))
        let hrm = try peripheral.characteristic(.uuid(BluetoothUUID("2a37", kind: .characteristic)))
        return (central, peripheral, hrm, g)
    }

    /// The first `count` values of `session` (nil when they do not come within 10 s).
    static func take(_ count: Int, from session: NotificationSession) async -> [[UInt8]]? {
        await Deadline(after: .seconds(10)).run {
            var seen: [[UInt8]] = []
            do {
                for try await value in session.values {
                    seen.append(value)
                    if seen.count == count { break }
                }
            } catch {}
            return seen
        }
    }

    @Test("two subscribers: one StartNotify, every value to each, StopNotify when the second leaves")
    func twoSubscribersShareOneSession() async throws {
        try await withPrivateBus { bus in
            let (central, peripheral, hrm, g) = try await Self.connected(bus)
            defer { central.close() }
            let first = try await peripheral.subscribe(to: hrm)
            let second = try await peripheral.subscribe(to: hrm)
            #expect(try await bus.callCount(g.hrm, "StartNotify") == 1)
            #expect(first.sharing == .own && second.sharing == .own)
            async let a = Self.take(2, from: first)
            async let b = Self.take(2, from: second)
            _ = try await bus.emitNotification(g.hrm, [0x00, 60])
            _ = try await bus.emitNotification(g.hrm, [0x00, 61])
            let (fromFirst, fromSecond) = await (a, b)
            #expect(fromFirst == [[0x00, 60], [0x00, 61]])
            #expect(fromSecond == [[0x00, 60], [0x00, 61]])
            await first.stop()
            #expect(try await bus.callCount(g.hrm, "StopNotify") == 0, "the second subscriber is still there")
            #expect(peripheral.isNotifying(hrm))
            await second.stop()
            #expect(try await bus.callCount(g.hrm, "StopNotify") == 1)
            #expect(!peripheral.isNotifying(hrm))
            let again = try await peripheral.subscribe(to: hrm)
            #expect(try await bus.callCount(g.hrm, "StartNotify") == 2, "a new session after the last one ended")
            await again.stop()
        }
    }

    @Test("a subscriber whose task is cancelled leaves; the last one leaving ends the session")
    func cancelledSubscriberLeaves() async throws {
        try await withPrivateBus { bus in
            let (central, peripheral, hrm, g) = try await Self.connected(bus)
            defer { central.close() }
            let session = try await peripheral.subscribe(to: hrm)
            let consumer = Task { do { for try await _ in session.values {} } catch {} }
            consumer.cancel()
            await consumer.value
            #expect(try await bus.eventually { try await bus.callCount(g.hrm, "StopNotify") == 1 })
            #expect(!peripheral.isNotifying(hrm))
        }
    }

    @Test("a subscription dropped without stop() ends its share")
    func droppedSubscriptionLeaves() async throws {
        try await withPrivateBus { bus in
            let (central, peripheral, hrm, g) = try await Self.connected(bus)
            defer { central.close() }
            _ = try await peripheral.subscribe(to: hrm)
            #expect(try await bus.eventually { try await bus.callCount(g.hrm, "StopNotify") == 1 })
            #expect(!peripheral.isNotifying(hrm))
        }
    }

    @Test("AcquireNotify: two subscribers share one socket")
    func acquireIsSharedToo() async throws {
        try await withPrivateBus { bus in
            let (central, peripheral, hrm, g) = try await Self.connected(bus)
            defer { central.close() }
            let first = try await peripheral.acquireNotifications(for: hrm)
            let second = try await peripheral.acquireNotifications(for: hrm)
            #expect(try await bus.callCount(g.hrm, "AcquireNotify") == 1)
            async let a = Self.take(1, from: first)
            async let b = Self.take(1, from: second)
            _ = try await bus.emitNotification(g.hrm, [0x00, 70])
            let (fromFirst, fromSecond) = await (a, b)
            #expect(fromFirst == [[0x00, 70]] && fromSecond == [[0x00, 70]])
            await first.stop()
            await second.stop()
            #expect(!peripheral.isNotifying(hrm))
        }
    }
}
