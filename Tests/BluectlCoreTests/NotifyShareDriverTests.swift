import BluectlDBus
import Testing
@testable import BluectlCore

/// The notification share (`NotifyShare`) on an embedded connection: every
/// subscriber of a characteristic in the process shares one BlueZ session;
/// the last one to leave — by `stop()`, or by dropping its session — ends it.
@Suite(.timeLimit(.minutes(1))) struct NotifyShareDriverTests {
    /// Notifications: one StartNotify for two subscribers, every value to
    /// each, the first leaving changes nothing in BlueZ, the last one's
    /// leaving sends StopNotify and waits for its answer.
    @Test func notifySharedByTwoSubscribersAndStoppedByTheLast() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let characteristic = try peripheral.characteristic(.uuid(BluetoothUUID(uint16: 0x2a37)))
        let subscribing = Task { try await peripheral.subscribe(to: characteristic) }
        lab.notify([0xEE])   // before StartNotify's answer: not this session's
        lab.bus.reply(to: try #require(await lab.bus.nextCall("StartNotify")))
        let first = try await subscribing.value
        #expect(first.sharing == NotificationSession.Sharing.own)
        let second = try await peripheral.subscribe(to: characteristic)
        #expect(lab.calls("StartNotify").count == 1, "the second subscriber shares the session")
        lab.notify([1])
        lab.notify([2])
        var firstValues = first.values.makeAsyncIterator()
        var secondValues = second.values.makeAsyncIterator()
        #expect(try await firstValues.next() == [1])
        #expect(try await firstValues.next() == [2])
        #expect(try await secondValues.next() == [1])
        #expect(try await secondValues.next() == [2])
        #expect(peripheral.isNotifying(characteristic))
        await first.stop()
        #expect(lab.calls("StopNotify").isEmpty, "a subscriber is left")
        lab.notify([3])
        #expect(try await secondValues.next() == [3])
        let stopping = Task { await second.stop() }
        lab.bus.reply(to: try #require(await lab.bus.nextCall("StopNotify")))
        await stopping.value
        #expect(try await secondValues.next() == nil)
        #expect(!peripheral.isNotifying(characteristic))
    }

    /// Two subscribers; the second is dropped without `stop()` while the
    /// first stays: the session goes on for the first, and its `stop()`,
    /// now the last subscriber's, ends the session with one StopNotify.
    @Test func aDroppedSubscriberLeavesTheShare() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let characteristic = try peripheral.characteristic(.uuid(BluetoothUUID(uint16: 0x2a37)))
        let first = try await lab.subscribe(peripheral, to: characteristic)
        var second: NotificationSession? = try await peripheral.subscribe(to: characteristic)
        #expect(second?.sharing == .own)
        #expect(lab.calls("StartNotify").count == 1)
        second = nil   // dropped: its stream ends, and with it its share
        var values = first.values.makeAsyncIterator()
        lab.notify([1])
        #expect(try await values.next() == [1], "the session goes on for the subscriber that stayed")
        let stopping = Task { await first.stop() }
        lab.bus.reply(to: try #require(await lab.bus.nextCall("StopNotify"), "the dropped subscriber left: the first is the last"))
        await stopping.value
        #expect(try await values.next() == nil)
        #expect(lab.calls("StopNotify").count == 1)
        #expect(!peripheral.isNotifying(characteristic))
    }

    /// The only subscriber is dropped without `stop()`: the session ends
    /// (StopNotify) all the same, and a new subscriber starts a new one.
    @Test func droppingTheLastSubscriberEndsTheSession() async throws {
        let lab = try await EmbeddedBlueZ.start(EmbeddedBlueZ.sensor())
        defer { lab.close() }
        let peripheral = try lab.peripheral
        let characteristic = try peripheral.characteristic(.uuid(BluetoothUUID(uint16: 0x2a37)))
        var only: NotificationSession? = try await lab.subscribe(peripheral, to: characteristic)
        #expect(only?.sharing == .own)
        only = nil
        lab.bus.reply(to: try #require(await lab.bus.nextCall("StopNotify"), "dropping the last subscriber ends the session"))
        let renewed = try await lab.subscribe(peripheral, to: characteristic)
        var values = renewed.values.makeAsyncIterator()
        lab.notify([5])
        #expect(try await values.next() == [5])
        #expect(lab.calls("StartNotify").count == 2)
    }
}
