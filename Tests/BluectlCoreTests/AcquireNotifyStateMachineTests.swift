import Testing
@testable import BluectlCore

/// AcquireNotify: the socket BlueZ hands over is watched by the loop, and
/// its end is the session's end.
@Suite struct AcquireNotifyStateMachineTests {
    @Test func acquiredThenValuesThenStopClosesTheSocket() {
        var m = AcquireNotifyStateMachine()
        #expect(m.handle(.start) == [.callAcquireNotify])
        #expect(m.handle(.value([0])) == [], "nothing is read before the socket is watched")
        #expect(m.handle(.acquired) == [.watchSocket, .reportStarted])
        #expect(m.handle(.value([1])) == [.deliver([1])])
        #expect(m.handle(.value([2])) == [.deliver([2])])
        #expect(m.delivered == 2)
        #expect(m.handle(.stop) == [.closeSocket, .finish])
        #expect(m.state == .closed)
        #expect(m.handle(.value([3])) == [], "a finished session delivers nothing more")
    }

    @Test func theSocketClosingFailsTheSessionAsADisconnect() {
        var m = AcquireNotifyStateMachine()
        _ = m.handle(.start)
        _ = m.handle(.acquired)
        #expect(m.handle(.socketClosed) == [.closeSocket, .fail(.disconnected)])
        #expect(m.isFinished)
    }

    @Test func aStopWhileAcquiringClosesTheSocketAsSoonAsItComes() {
        var m = AcquireNotifyStateMachine()
        _ = m.handle(.start)
        #expect(m.handle(.stop) == [])
        #expect(m.handle(.acquired) == [.closeSocket, .finish])
        #expect(m.state == .closed)
    }

    @Test func refusedOrGoneWhileAcquiring() {
        var refused = AcquireNotifyStateMachine()
        _ = refused.handle(.start)
        #expect(refused.handle(.acquireFailed(name: "org.bluez.Error.NotPermitted", message: "Notify acquired"))
                == [.fail(.bluez(name: "org.bluez.Error.NotPermitted", message: "Notify acquired"))])
        var gone = AcquireNotifyStateMachine()
        _ = gone.handle(.start)
        #expect(gone.handle(.characteristicRemoved) == [.fail(.removed)])
        // AcquireNotify's late answer after the end changes nothing (the driver closes its socket)
        #expect(gone.handle(.acquired) == [])
    }

    @Test func theDeviceGoingWhileReadingClosesAndFails() {
        var m = AcquireNotifyStateMachine()
        _ = m.handle(.start)
        _ = m.handle(.acquired)
        #expect(m.handle(.deviceDisconnected) == [.closeSocket, .fail(.disconnected)])
        var r = AcquireNotifyStateMachine()
        _ = r.handle(.start)
        _ = r.handle(.acquired)
        #expect(r.handle(.characteristicRemoved) == [.closeSocket, .fail(.removed)])
    }

    @Test func unplannedEventsAreReportedAndChangeNothing() {
        var m = AcquireNotifyStateMachine()
        #expect(m.handle(.acquired) == [.unplanned("idle + acquired")])
        #expect(m.state == .idle)
        _ = m.handle(.start)
        _ = m.handle(.acquired)
        #expect(m.handle(.start) == [.unplanned("reading + start")])
        #expect(m.handle(.acquired) == [.unplanned("reading + acquired")])
        #expect(m.state == .reading)
    }
}
