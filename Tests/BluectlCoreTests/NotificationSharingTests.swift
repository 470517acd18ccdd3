import Testing
@testable import BluectlCore

/// Sharing another client's notify session (one Value signal per session
/// in bluetoothd 5.66) and dropping another bluectl's read from the values.
@Suite struct NotificationSharingTests {
    @Test func joinedSessionDeliversWithoutStartNotifyAndStopsWithoutStopNotify() {
        var m = NotifyStateMachine()
        #expect(m.handle(.join) == [.reportStarted])
        #expect(m.state == .joined)
        #expect(m.handle(.value([1])) == [.deliver([1])])
        #expect(m.handle(.stop) == [.finish])
        #expect(m.state == .stopped)
    }

    @Test func whenTheSharedSessionEndsItStartsItsOwn() {
        var m = NotifyStateMachine()
        _ = m.handle(.join)
        #expect(m.handle(.sharedSessionEnded) == [.reportTakingOver, .callStartNotify])
        #expect(m.state == .starting)
        #expect(m.handle(.startSucceeded) == [.reportStarted])
        #expect(m.handle(.value([2])) == [.deliver([2])])
        // our own session: a later Notifying=false is not a shared session ending
        #expect(m.handle(.sharedSessionEnded) == [])
        #expect(m.state == .notifying)
    }

    @Test func aJoinedSessionFailsOnDisconnectWithoutStopNotify() {
        var m = NotifyStateMachine()
        _ = m.handle(.join)
        #expect(m.handle(.deviceDisconnected) == [.fail(.disconnected)])
        var r = NotifyStateMachine()
        _ = r.handle(.join)
        #expect(r.handle(.characteristicRemoved) == [.fail(.removed)])
    }

    private let t0 = ContinuousClock.now

    @Test func valuesPassWhenNoReadIsOpen() {
        var f = ReadCopyFilter()
        #expect(f.value([1], serial: 10, now: t0) == [[1]])
        #expect(f.value([1], serial: 11, now: t0) == [[1]], "a repeated value is a value")
        #expect(f.dropped == 0)
    }

    @Test func theReadsOwnSignalIsDroppedAndTheRestReleasedInOrder() {
        var f = ReadCopyFilter()
        #expect(f.started(by: ":1.7", now: t0) == [])
        #expect(f.value([5], serial: 20, now: t0) == [])     // a notification during the read
        #expect(f.value([5], serial: 21, now: t0) == [])     // the read's own signal (reply is 22)
        #expect(f.value([6], serial: 23, now: t0) == [])     // the next notification
        #expect(f.finished(by: ":1.7", replySerial: 22, value: [5], now: t0) == [[5], [6]])
        #expect(f.dropped == 1)
        #expect(f.held.isEmpty && f.openReads.isEmpty)
    }

    @Test func aFailedReadDropsNothing() {
        var f = ReadCopyFilter()
        _ = f.started(by: ":1.7", now: t0)
        #expect(f.value([5], serial: 20, now: t0) == [])
        #expect(f.finished(by: ":1.7", replySerial: 0, value: [], now: t0) == [[5]])
        #expect(f.dropped == 0)
    }

    @Test func overlappingReadsHoldUntilTheLastEnds() {
        var f = ReadCopyFilter()
        _ = f.started(by: ":1.7", now: t0)
        _ = f.started(by: ":1.8", now: t0)
        #expect(f.value([1], serial: 30, now: t0) == [])       // :1.7's read (reply 31)
        #expect(f.value([2], serial: 32, now: t0) == [])       // :1.8's read (reply 33)
        #expect(f.value([3], serial: 34, now: t0) == [])       // a notification
        #expect(f.finished(by: ":1.7", replySerial: 31, value: [1], now: t0) == [])
        #expect(f.finished(by: ":1.8", replySerial: 33, value: [2], now: t0) == [[3]])
        #expect(f.dropped == 2)
    }

    @Test func aSignalThatIsNotTheReadsIsKeptEvenWithTheSameBytes() {
        var f = ReadCopyFilter()
        _ = f.started(by: ":1.7", now: t0)
        #expect(f.value([9], serial: 40, now: t0) == [])
        // reply 45: the read's signal would be 44, which never came: nothing dropped
        #expect(f.finished(by: ":1.7", replySerial: 45, value: [9], now: t0) == [[9]])
        #expect(f.dropped == 0)
    }

    @Test func aReaderThatNeverFinishesIsForgottenAfterTheHoldLimit() {
        var f = ReadCopyFilter()
        _ = f.started(by: ":1.7", now: t0)
        #expect(f.value([1], serial: 50, now: t0) == [])
        let later = t0 + ReadMarker.holdLimit + .seconds(1)
        #expect(f.value([2], serial: 51, now: later) == [[1], [2]])
        #expect(f.openReads.isEmpty)
    }

    @Test func finishedWithoutStartedChangesNothing() {
        var f = ReadCopyFilter()
        #expect(f.finished(by: ":1.9", replySerial: 5, value: [1], now: t0) == [])
        #expect(f.value([1], serial: 6, now: t0) == [[1]])
    }
}
