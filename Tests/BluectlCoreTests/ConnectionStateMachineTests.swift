import Testing
import BluectlDBus
@testable import BluectlCore

private let failed = "org.bluez.Error.Failed"

@Suite struct ConnectionStateMachineTests {
    @Test func alreadyConnectedSucceedsAtOnce() {
        var m = ConnectionStateMachine()
        #expect(m.handle(.start(alreadyConnected: true)) == [.succeed])
        #expect(m.state == .connected)
        #expect(m.isFinished)
    }

    @Test func connectsOnFirstAttempt() {
        var m = ConnectionStateMachine()
        #expect(m.handle(.start(alreadyConnected: false)) == [.callConnect])
        #expect(m.state == .connecting(attempt: 1))
        #expect(m.handle(.connectedChanged(true)) == [])
        #expect(m.state == .connecting(attempt: 1))
        #expect(m.handle(.connectSucceeded) == [.succeed])
        #expect(m.state == .connected)
    }

    @Test func replyBeforeConnectedPropertyWaitsForIt() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.connectSucceeded) == [.askConnected])
        #expect(m.state == .awaitingConnected(attempt: 1))
        #expect(m.handle(.connectedChanged(false)) == [])
        #expect(m.handle(.connectedChanged(true)) == [.succeed])
        #expect(m.state == .connected)
    }

    /// bluetoothd 5.66 may never signal Connected=true: the machine asks
    /// until it hears yes (or its deadline).
    @Test func awaitingConnectedAsksUntilBluetoothdSaysConnected() {
        var m = ConnectionStateMachine(pollInterval: .milliseconds(250))
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.connectSucceeded) == [.askConnected])
        #expect(m.handle(.polled(connected: false)) == [.schedulePoll(after: .milliseconds(250))])
        #expect(m.handle(.pollTimerFired) == [.askConnected])
        #expect(m.handle(.polled(connected: nil)) == [.schedulePoll(after: .milliseconds(250))])
        #expect(m.handle(.pollTimerFired) == [.askConnected])
        #expect(m.handle(.polled(connected: true)) == [.succeed])
        #expect(m.state == .connected)
        #expect(m.handle(.pollTimerFired) == [], "a late timer after the end changes nothing")
    }

    @Test func pollsAfterGivingUpAreIgnored() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        _ = m.handle(.connectSucceeded)
        #expect(m.handle(.timeout) == [.callDisconnect])
        #expect(m.handle(.polled(connected: true)) == [])
        #expect(m.handle(.pollTimerFired) == [])
        #expect(m.state == .disconnecting(then: .fail(.timeout)))
    }

    @Test func awaitingConnectedTimesOut() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        _ = m.handle(.connectSucceeded)
        #expect(m.handle(.timeout) == [.callDisconnect])
        #expect(m.handle(.disconnectFinished) == [.fail(.timeout)])
    }

    @Test func abortByLocalWhileConnectedWaitsForDisconnectThenRetries() {
        var m = ConnectionStateMachine(maxAttempts: 3)
        _ = m.handle(.start(alreadyConnected: false))
        _ = m.handle(.connectedChanged(true))
        #expect(m.handle(.connectFailed(name: failed, message: "le-connection-abort-by-local")) == [])
        #expect(m.state == .waitingForDisconnect(attempt: 1))
        // Still connected: nothing yet; the retry timer is not this state's event (reported, nothing changes).
        #expect(m.handle(.retryTimerFired) == [.unplanned("waitingForDisconnect(attempt: 1) + retryTimerFired")])
        #expect(m.state == .waitingForDisconnect(attempt: 1))
        #expect(m.handle(.connectedChanged(false)) == [.callConnect])
        #expect(m.state == .connecting(attempt: 2))
        // Connected=false was the last word: ask bluetoothd while waiting for the signal.
        #expect(m.handle(.connectSucceeded) == [.askConnected])
        #expect(m.handle(.connectedChanged(true)) == [.succeed])
    }

    @Test func abortByLocalWhileDisconnectedRetriesAtOnce() {
        var m = ConnectionStateMachine(maxAttempts: 2)
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.connectFailed(name: failed, message: "le-connection-abort-by-local")) == [.callConnect])
        #expect(m.state == .connecting(attempt: 2))
    }

    @Test func abortByLocalOutOfAttemptsFails() {
        var m = ConnectionStateMachine(maxAttempts: 2)
        _ = m.handle(.start(alreadyConnected: false))
        _ = m.handle(.connectFailed(name: failed, message: "le-connection-abort-by-local"))
        let actions = m.handle(.connectFailed(name: failed, message: "le-connection-abort-by-local"))
        #expect(actions == [.fail(.abortedByLocal(attempts: 2))])
        #expect(m.state == .failed(.abortedByLocal(attempts: 2)))
    }

    @Test func inProgressRetriesAfterDelayThenFails() {
        var m = ConnectionStateMachine(maxAttempts: 2, retryDelay: .milliseconds(100))
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.connectFailed(name: "org.bluez.Error.InProgress", message: "")) == [.scheduleRetry(after: .milliseconds(100))])
        #expect(m.state == .retryDelay(attempt: 1))
        #expect(m.handle(.retryTimerFired) == [.callConnect])
        #expect(m.state == .connecting(attempt: 2))
        #expect(m.handle(.connectFailed(name: "org.bluez.Error.InProgress", message: "")) == [.fail(.inProgress(attempts: 2))])
    }

    @Test func dualModeFailsWithoutRetry() {
        var m = ConnectionStateMachine(maxAttempts: 5)
        _ = m.handle(.start(alreadyConnected: false))
        let actions = m.handle(.connectFailed(name: failed, message: "br-connection-profile-unavailable"))
        #expect(actions == [.fail(.dualMode(message: "br-connection-profile-unavailable"))])
        #expect(ConnectionFailure.dualMode(message: "x").description.contains("dual-mode"))
    }

    /// The controller has no free connection slot: trying again at once
    /// would find it as full, so the failure is final and says why.
    @Test func noSlotFailsWithoutRetry() {
        for message in ["le-connection-concurrent-connection-limit", "le-connection-memory-allocation"] {
            var m = ConnectionStateMachine(maxAttempts: 5)
            _ = m.handle(.start(alreadyConnected: false))
            #expect(m.handle(.connectFailed(name: failed, message: message)) == [.fail(.noSlot(message: message))])
            #expect(m.state == .failed(.noSlot(message: message)))
        }
        #expect(ConnectionFailure.noSlot(message: "x").description.contains("no free connection slot"))
    }

    @Test func alreadyConnectedErrorIsSuccess() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        _ = m.handle(.connectedChanged(true))
        #expect(m.handle(.connectFailed(name: "org.bluez.Error.AlreadyConnected", message: "")) == [.succeed])
    }

    @Test func otherErrorsFailWithBlueZsWords() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        let actions = m.handle(.connectFailed(name: "org.bluez.Error.NotReady", message: "Resource Not Ready"))
        #expect(actions == [.fail(.bluez(name: "org.bluez.Error.NotReady", message: "Resource Not Ready"))])
    }

    @Test(arguments: [
        ConnectionStateMachine.State.connecting(attempt: 1), .waitingForDisconnect(attempt: 1), .retryDelay(attempt: 1),
    ])
    func timeoutInAnyPendingStateDisconnectsThenFails(pending: ConnectionStateMachine.State) {
        var m = Self.machine(in: pending)
        #expect(m.handle(.timeout) == [.callDisconnect])
        #expect(m.state == .disconnecting(then: .fail(.timeout)))
        // A late Connect reply changes nothing.
        #expect(m.handle(.connectSucceeded) == [])
        #expect(m.handle(.disconnectFinished) == [.fail(.timeout)])
        #expect(m.state == .failed(.timeout))
    }

    @Test func cancelWhileConnectingDisconnects() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.cancel) == [.callDisconnect])
        #expect(m.handle(.disconnectFinished) == [.reportCancelled])
        #expect(m.state == .cancelled)
    }

    @Test func cancelWhenConnectedDisconnects() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: true))
        #expect(m.handle(.cancel) == [.callDisconnect])
        #expect(m.handle(.disconnectFinished) == [.reportCancelled])
    }

    @Test func hangingDisconnectEndsAtTheNextTimeout() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        _ = m.handle(.cancel)
        #expect(m.handle(.timeout) == [.reportCancelled])
    }

    @Test func deviceRemovedWhileConnectingFails() {
        var m = ConnectionStateMachine()
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.deviceRemoved) == [.fail(.deviceRemoved)])
    }

    /// Connect answered by the bus itself: the device's object was gone
    /// before its removal reached the mirror (seen in the lab after a
    /// bluetoothd restart). The caller hears the device went, as above.
    @Test func unknownObjectReplyIsTheDeviceRemoved() {
        var m = ConnectionStateMachine(maxAttempts: 3)
        _ = m.handle(.start(alreadyConnected: false))
        #expect(m.handle(.connectFailed(name: "org.freedesktop.DBus.Error.UnknownObject",
                                        message: "Method \"Connect\" with signature \"\" on interface \"org.bluez.Device1\" doesn't exist"))
                == [.fail(.deviceRemoved)])
        #expect(m.state == .failed(.deviceRemoved))
    }

    /// libdbus's own error messages end with a newline; a description is one line.
    @Test func remoteErrorMessagesAreOneLine() {
        let error = BluetoothError(DBusError.remote(name: "org.freedesktop.DBus.Error.UnknownMethod",
                                                    message: "Method \"Frob\" with signature \"\" on interface \"org.bluez.Device1\" doesn't exist\n"),
                                   operation: "frob")
        #expect(error == .bluez(name: "org.freedesktop.DBus.Error.UnknownMethod",
                                message: "Method \"Frob\" with signature \"\" on interface \"org.bluez.Device1\" doesn't exist", operation: "frob"))
        #expect(!error.description.contains("\n"), "\(error)")
    }

    @Test("bluetoothd stopping fails a pending connect at once (nothing to disconnect), in every pending state")
    func bluetoothdStoppedFailsWithoutDisconnect() {
        var connecting = ConnectionStateMachine()
        _ = connecting.handle(.start(alreadyConnected: false))
        #expect(connecting.handle(.bluetoothdStopped) == [.fail(.bluetoothdStopped)])
        #expect(connecting.state == .failed(.bluetoothdStopped))
        var awaiting = ConnectionStateMachine()
        _ = awaiting.handle(.start(alreadyConnected: false))
        _ = awaiting.handle(.connectSucceeded)
        #expect(awaiting.state == .awaitingConnected(attempt: 1))
        #expect(awaiting.handle(.bluetoothdStopped) == [.fail(.bluetoothdStopped)])
        var retrying = ConnectionStateMachine()
        _ = retrying.handle(.start(alreadyConnected: false))
        _ = retrying.handle(.connectFailed(name: "org.bluez.Error.InProgress", message: "In Progress"))
        #expect(retrying.state == .retryDelay(attempt: 1))
        #expect(retrying.handle(.bluetoothdStopped) == [.fail(.bluetoothdStopped)])
        var disconnecting = ConnectionStateMachine()
        _ = disconnecting.handle(.start(alreadyConnected: false))
        _ = disconnecting.handle(.timeout)
        #expect(disconnecting.handle(.bluetoothdStopped) == [.fail(.timeout)], "the reason it was disconnecting stands")
        var connected = ConnectionStateMachine()
        _ = connected.handle(.start(alreadyConnected: true))
        #expect(connected.handle(.bluetoothdStopped) == [])
        #expect(connected.state == .connected)
    }

    @Test func impossibleOrLateEventsChangeNothing() {
        var m = ConnectionStateMachine()
        for event: ConnectionStateMachine.Event in [.connectSucceeded, .retryTimerFired, .timeout, .disconnectFinished,
                                                    .connectFailed(name: failed, message: "x"), .deviceRemoved,
                                                    .bluetoothdStopped] {
            #expect(m.handle(event) == [])
            #expect(m.state == .disconnected)
        }
        _ = m.handle(.start(alreadyConnected: true))
        #expect(m.handle(.start(alreadyConnected: false)) == [])
        #expect(m.handle(.timeout) == [])
        #expect(m.handle(.connectFailed(name: failed, message: "le-connection-abort-by-local")) == [])
        #expect(m.state == .connected)
        var failedMachine = ConnectionStateMachine(maxAttempts: 1)
        _ = failedMachine.handle(.start(alreadyConnected: false))
        _ = failedMachine.handle(.connectFailed(name: failed, message: "boom"))
        #expect(failedMachine.handle(.cancel) == [])
        #expect(failedMachine.handle(.connectSucceeded) == [])
    }

    @Test func classifiesErrors() {
        #expect(BlueZ566.connectError(name: failed, message: "le-connection-abort-by-local") == .abortedByLocal)
        #expect(BlueZ566.connectError(name: "org.bluez.Error.InProgress", message: "In Progress") == .inProgress)
        #expect(BlueZ566.connectError(name: failed, message: "br-connection-profile-unavailable") == .dualMode)
        #expect(BlueZ566.connectError(name: "org.bluez.Error.AlreadyConnected", message: "") == .alreadyConnected)
        #expect(BlueZ566.connectError(name: failed, message: "le-connection-concurrent-connection-limit") == .noSlot)
        #expect(BlueZ566.connectError(name: failed, message: "Software caused connection abort") == .other)
    }

    static func machine(in state: ConnectionStateMachine.State) -> ConnectionStateMachine {
        var m = ConnectionStateMachine(maxAttempts: 3)
        _ = m.handle(.start(alreadyConnected: false))
        switch state {
        case .waitingForDisconnect:
            _ = m.handle(.connectedChanged(true))
            _ = m.handle(.connectFailed(name: failed, message: "le-connection-abort-by-local"))
        case .retryDelay:
            _ = m.handle(.connectFailed(name: "org.bluez.Error.InProgress", message: ""))
        default: break
        }
        #expect(m.state == state)
        return m
    }
}

@Suite struct ServiceDiscoveryStateMachineTests {
    @Test func alreadyResolvedIsDoneAtOnce() {
        var m = ServiceDiscoveryStateMachine()
        #expect(m.handle(.start(connected: true, servicesResolved: true, serviceObjects: 3)) == [.done])
        #expect(m.state == .resolved)
    }

    @Test func notConnectedFails() {
        var m = ServiceDiscoveryStateMachine()
        #expect(m.handle(.start(connected: false, servicesResolved: true, serviceObjects: 3)) == [.fail(.notConnected)])
    }

    @Test func waitsForServicesResolved() {
        var m = ServiceDiscoveryStateMachine()
        #expect(m.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0)) == [.schedulePoll(after: .milliseconds(500))])
        #expect(m.state == .waiting)
        #expect(m.handle(.serviceAdded) == [])
        #expect(m.handle(.servicesResolvedChanged(false, serviceObjects: 2)) == [])
        #expect(m.handle(.servicesResolvedChanged(true, serviceObjects: 2)) == [.done])
    }

    /// Signals can be missing: while waiting, the machine asks bluetoothd.
    @Test func pollingFindsWhatSignalsMissed() {
        var m = ServiceDiscoveryStateMachine(pollInterval: .milliseconds(500))
        _ = m.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        #expect(m.handle(.pollTimerFired) == [.askDevice])
        #expect(m.handle(.polled(nil)) == [.schedulePoll(after: .milliseconds(500))], "no answer: ask again later")
        #expect(m.handle(.pollTimerFired) == [.askDevice])
        #expect(m.handle(.polled(.init(connected: true, servicesResolved: false, serviceObjects: 0))) == [.schedulePoll(after: .milliseconds(500))])
        #expect(m.handle(.pollTimerFired) == [.askDevice])
        #expect(m.handle(.polled(.init(connected: true, servicesResolved: true, serviceObjects: 4))) == [.done])
        #expect(m.state == .resolved)
    }

    @Test func pollingSeesTheDisconnect() {
        var m = ServiceDiscoveryStateMachine()
        _ = m.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        _ = m.handle(.pollTimerFired)
        #expect(m.handle(.polled(.init(connected: false, servicesResolved: false, serviceObjects: 0))) == [.fail(.disconnected)])
    }

    @Test func pollingResolvedWithoutObjectsSettlesAndKeepsAsking() {
        var m = ServiceDiscoveryStateMachine(settleTime: .milliseconds(300), pollInterval: .milliseconds(500))
        _ = m.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        _ = m.handle(.pollTimerFired)
        #expect(m.handle(.polled(.init(connected: true, servicesResolved: true, serviceObjects: 0)))
                == [.startSettleTimer(.milliseconds(300)), .schedulePoll(after: .milliseconds(500))])
        #expect(m.state == .settling)
        #expect(m.handle(.settleTimerFired) == [.done])
    }

    @Test func resolvedWithoutObjectsSettles() {
        var m = ServiceDiscoveryStateMachine(settleTime: .milliseconds(300))
        _ = m.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        #expect(m.handle(.servicesResolvedChanged(true, serviceObjects: 0)) == [.startSettleTimer(.milliseconds(300))])
        #expect(m.state == .settling)
        // bluetoothd exports the database in a burst: each object restarts the quiet time
        #expect(m.handle(.serviceAdded) == [.startSettleTimer(.milliseconds(200))])
        #expect(m.handle(.serviceAdded) == [.startSettleTimer(.milliseconds(200))])
        #expect(m.state == .settling)
        #expect(m.handle(.settleTimerFired) == [.done])
        #expect(m.state == .resolved)
    }

    @Test func settleTimerEndsSettling() {
        var m = ServiceDiscoveryStateMachine()
        _ = m.handle(.start(connected: true, servicesResolved: true, serviceObjects: 0))
        #expect(m.state == .settling)
        #expect(m.handle(.settleTimerFired) == [.done])
    }

    @Test func settlingFallsBackWhenResolvedFlipsFalse() {
        var m = ServiceDiscoveryStateMachine()
        _ = m.handle(.start(connected: true, servicesResolved: true, serviceObjects: 0))
        #expect(m.handle(.servicesResolvedChanged(false, serviceObjects: 0)) == [])
        #expect(m.state == .waiting)
        #expect(m.handle(.settleTimerFired) == [])
    }

    @Test func racesDisconnectRemovalAndTimeout() {
        var a = ServiceDiscoveryStateMachine()
        _ = a.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        #expect(a.handle(.connectedChanged(false)) == [.fail(.disconnected)])
        #expect(a.handle(.servicesResolvedChanged(true, serviceObjects: 1)) == [])
        var b = ServiceDiscoveryStateMachine()
        _ = b.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        #expect(b.handle(.deviceRemoved) == [.fail(.deviceRemoved)])
        var d = ServiceDiscoveryStateMachine()
        _ = d.handle(.start(connected: true, servicesResolved: true, serviceObjects: 0))
        #expect(d.state == .settling)
        #expect(d.handle(.bluetoothdStopped) == [.fail(.bluetoothdStopped)])
        var c = ServiceDiscoveryStateMachine()
        _ = c.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        #expect(c.handle(.connectedChanged(true)) == [])
        #expect(c.handle(.timeout) == [.fail(.timeout)])
        #expect(c.state == .failed(.timeout))
    }

    @Test func impossibleEventsAreReportedAndChangeNothing() {
        var m = ServiceDiscoveryStateMachine()
        for event: ServiceDiscoveryStateMachine.Event in [.servicesResolvedChanged(true, serviceObjects: 1), .serviceAdded,
                                                          .connectedChanged(false), .deviceRemoved, .bluetoothdStopped,
                                                          .settleTimerFired, .timeout] {
            #expect(m.handle(event) == [.unplanned("idle + \(event)")])
            #expect(m.state == .idle)
        }
        var waiting = ServiceDiscoveryStateMachine()
        _ = waiting.handle(.start(connected: true, servicesResolved: false, serviceObjects: 0))
        #expect(waiting.handle(.start(connected: true, servicesResolved: true, serviceObjects: 1))
                == [.unplanned("waiting + start(connected: true, servicesResolved: true, serviceObjects: 1)")])
        #expect(waiting.state == .waiting)
        _ = m.handle(.start(connected: true, servicesResolved: true, serviceObjects: 1))
        #expect(m.handle(.connectedChanged(false)) == [])
        #expect(m.handle(.start(connected: false, servicesResolved: false, serviceObjects: 0)) == [])
        #expect(m.state == .resolved)
    }
}

@Suite struct NotifyStateMachineTests {
    @Test func fullLifecycle() {
        var m = NotifyStateMachine()
        #expect(m.handle(.start) == [.callStartNotify])
        #expect(m.state == .starting)
        #expect(m.handle(.value([1])) == [])  // not counted before StartNotify's reply
        #expect(m.handle(.startSucceeded) == [.reportStarted])
        #expect(m.handle(.value([2])) == [.deliver([2])])
        #expect(m.handle(.value([3])) == [.deliver([3])])
        #expect(m.delivered == 2)
        #expect(m.handle(.stop) == [.callStopNotify])
        #expect(m.state == .stopping)
        #expect(m.handle(.value([4])) == [])
        #expect(m.handle(.stopFinished) == [.finish])
        #expect(m.state == .stopped)
        #expect(m.isFinished)
    }

    @Test func startFailure() {
        var m = NotifyStateMachine()
        _ = m.handle(.start)
        let actions = m.handle(.startFailed(name: "org.bluez.Error.NotPermitted", message: "Notify not permitted"))
        #expect(actions == [.fail(.bluez(name: "org.bluez.Error.NotPermitted", message: "Notify not permitted"))])
    }

    @Test func stopWhileStartingStopsAfterTheReply() {
        var m = NotifyStateMachine()
        _ = m.handle(.start)
        #expect(m.handle(.stop) == [])
        #expect(m.handle(.startSucceeded) == [.callStopNotify])
        #expect(m.handle(.stopFinished) == [.finish])
    }

    @Test func stopBeforeStartEnds() {
        var m = NotifyStateMachine()
        #expect(m.handle(.stop) == [.finish])
        #expect(m.state == .stopped)
    }

    @Test func disconnectFailsAndStillStops() {
        var m = NotifyStateMachine()
        _ = m.handle(.start)
        _ = m.handle(.startSucceeded)
        #expect(m.handle(.deviceDisconnected) == [.callStopNotify, .fail(.disconnected)])
        #expect(m.state == .failed(.disconnected))
        #expect(m.handle(.value([1])) == [])
    }

    @Test func disconnectWhileStartingFails() {
        var m = NotifyStateMachine()
        _ = m.handle(.start)
        #expect(m.handle(.deviceDisconnected) == [.callStopNotify, .fail(.disconnected)])
    }

    @Test func characteristicRemovedFails() {
        var m = NotifyStateMachine()
        _ = m.handle(.start)
        _ = m.handle(.startSucceeded)
        #expect(m.handle(.characteristicRemoved) == [.fail(.removed)])
    }

    @Test func disconnectWhileStoppingFinishes() {
        var m = NotifyStateMachine()
        _ = m.handle(.start)
        _ = m.handle(.startSucceeded)
        _ = m.handle(.stop)
        #expect(m.handle(.deviceDisconnected) == [.finish])
    }

    @Test func impossibleEventsAreReportedAndChangeNothing() {
        var m = NotifyStateMachine()
        for event: NotifyStateMachine.Event in [.startSucceeded, .startFailed(name: "x", message: ""), .value([1]),
                                                .stopFinished, .deviceDisconnected, .characteristicRemoved] {
            #expect(m.handle(event) == [.unplanned("idle + \(event)")])
            #expect(m.state == .idle)
        }
        _ = m.handle(.start)
        _ = m.handle(.startSucceeded)
        #expect(m.handle(.start) == [.unplanned("notifying + start")])
        #expect(m.handle(.startSucceeded) == [.unplanned("notifying + startSucceeded")])
        #expect(m.handle(.stopFinished) == [.unplanned("notifying + stopFinished")])
        #expect(m.state == .notifying)
        #expect(m.delivered == 0)
    }
}
