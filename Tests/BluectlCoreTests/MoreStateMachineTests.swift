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

/// Disconnecting: Disconnect, then the link reported down by a signal or by
/// asking bluetoothd (5.66 does not always signal it).
@Suite struct DisconnectStateMachineTests {
    @Test func notConnectedIsDoneAtOnce() {
        var m = DisconnectStateMachine()
        #expect(m.handle(.start(connected: false)) == [.succeed])
        #expect(m.state == .done)
    }

    @Test func theSignalEndsTheWait() {
        var m = DisconnectStateMachine()
        #expect(m.handle(.start(connected: true)) == [.callDisconnect])
        #expect(m.handle(.disconnectSucceeded) == [.askConnected])
        #expect(m.handle(.connectedChanged(true)) == [], "still up: no news")
        #expect(m.handle(.connectedChanged(false)) == [.succeed])
        #expect(m.handle(.polled(connected: true)) == [], "a late answer after the end changes nothing")
    }

    @Test func askingFindsTheLinkDownWhenNoSignalComes() {
        var m = DisconnectStateMachine(pollInterval: .milliseconds(300))
        _ = m.handle(.start(connected: true))
        _ = m.handle(.disconnectSucceeded)
        #expect(m.handle(.polled(connected: true)) == [.schedulePoll(after: .milliseconds(300))])
        #expect(m.handle(.pollTimerFired) == [.askConnected])
        #expect(m.handle(.polled(connected: nil)) == [.schedulePoll(after: .milliseconds(300))])
        #expect(m.handle(.pollTimerFired) == [.askConnected])
        #expect(m.handle(.polled(connected: false)) == [.succeed])
    }

    @Test func theDeviceGoingOrTheLinkDroppingBeforeTheReplyIsDone() {
        var gone = DisconnectStateMachine()
        _ = gone.handle(.start(connected: true))
        #expect(gone.handle(.deviceGone) == [.succeed])
        var dropped = DisconnectStateMachine()
        _ = dropped.handle(.start(connected: true))
        #expect(dropped.handle(.connectedChanged(false)) == [.succeed])
        #expect(dropped.handle(.disconnectSucceeded) == [])
    }

    @Test func refusedOrTooSlowFails() {
        var refused = DisconnectStateMachine()
        _ = refused.handle(.start(connected: true))
        #expect(refused.handle(.disconnectFailed(name: "org.bluez.Error.Failed", message: "x"))
                == [.fail(.bluez(name: "org.bluez.Error.Failed", message: "x"))])
        var slow = DisconnectStateMachine()
        _ = slow.handle(.start(connected: true))
        _ = slow.handle(.disconnectSucceeded)
        #expect(slow.handle(.timeout) == [.fail(.timeout)])
    }

    @Test func unplannedEventsAreReportedAndChangeNothing() {
        var m = DisconnectStateMachine()
        #expect(m.handle(.disconnectSucceeded) == [.unplanned("idle + disconnectSucceeded")])
        _ = m.handle(.start(connected: true))
        #expect(m.handle(.pollTimerFired) == [.unplanned("disconnecting + pollTimerFired")])
        #expect(m.state == .disconnecting)
    }
}
