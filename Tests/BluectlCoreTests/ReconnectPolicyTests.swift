import Testing
import BluectlCore

@Suite("Reconnect policy (subscribe --reconnect, and any program's)")
struct ReconnectPolicyTests {
    @Test func delaysDoubleUpToTheMaximum() {
        let policy = ReconnectPolicy()
        #expect((1...8).map { policy.delay(beforeAttempt: $0) } == [
            .zero, .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5), .seconds(5),
        ])
        #expect(policy.delay(beforeAttempt: Int.max) == .seconds(5))
        let quick = ReconnectPolicy(initialDelay: .seconds(2), maximumDelay: .seconds(1))
        #expect(quick.delay(beforeAttempt: 2) == .seconds(2), "a maximum below the first wait is raised to it")
    }

    @Test func failuresThatCanPassAreRecoverable() {
        let policy = ReconnectPolicy()
        let passing: [BluetoothError] = [
            .disconnected("link lost"), .timeout("connect"), .deviceNotFound("AA"), .adapterPoweredOff("hci0"),
            .adapterNotFound("hci1"), .noAdapter, .bluetoothdNotRunning, .bluetoothdStopped("connecting"),
            .inProgress("connect"), .bluez(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local", operation: "connect"),
        ]
        for error in passing {
            #expect(policy.isRecoverable(error, afterSuccess: false), "\(error)")
        }
        let lasting: [BluetoothError] = [
            .busUnavailable(address: "unix:path=/x", reason: "no socket"), .accessDenied("policy"),
            .notPermitted(name: "org.bluez.Error.NotPermitted", message: "Write not permitted"),
            .unexpected("reply"), .invalidRequest("bad value"),
        ]
        for error in lasting {
            #expect(!policy.isRecoverable(error, afterSuccess: true), "\(error)")
        }
    }

    @Test func aMissingCharacteristicIsRecoverableOnlyAfterASuccess() {
        let policy = ReconnectPolicy()
        let missing = BluetoothError.attributeNotFound(kind: "characteristic", what: "2a37", existing: [])
        #expect(!policy.isRecoverable(missing, afterSuccess: false), "the first time it is a wrong name")
        #expect(policy.isRecoverable(missing, afterSuccess: true), "later BlueZ may still be resolving the services")
        #expect(!policy.isRecoverable(BluetoothError.invalidRequest("x"), afterSuccess: true))
        #expect(!policy.isRecoverable(CancellationError(), afterSuccess: true))
        #expect(!policy.isRecoverable(BluetoothError.cancelled("connect"), afterSuccess: true), "the caller gave up")
        #expect(!policy.isRecoverable(BluetoothError.notSupported("not writable"), afterSuccess: true))
    }

    @Test func aCancellationIsNotATimeout() {
        #expect(BluetoothError.from(CancellationError(), operation: "connect") == .cancelled("connect"))
        #expect(BluetoothError.cancelled("connect").description == "cancelled: connect")
        #expect(BluetoothError.timeout("connect").description == "timed out: connect")
        #expect(BluetoothError.bluez(name: "org.bluez.Error.Failed", message: "x", operation: "read").bluezErrorName == "org.bluez.Error.Failed")
        #expect(BluetoothError.timeout("read").bluezErrorName == nil)
    }
}
