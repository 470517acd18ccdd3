import BluectlDBus

/// One BlueZ notification session of a characteristic — StartNotify (each
/// value a PropertiesChanged signal) or AcquireNotify (each value a datagram
/// on a socket BlueZ hands over) — run by its machine on the loop: what the
/// subscribers of a `NotifyShare` share.
///
/// Both kinds are set up by one prologue (`Session`: the values stream, the
/// driver following the tree for the device's disconnect and the
/// characteristic's removal) and run by one runner (`run`), which performs
/// the actions that mean the same for both (`NotifyAction`); each kind adds
/// only how BlueZ is asked and let go: `start` here, `acquire` in
/// NotifyEngine+Acquire.swift.
final class NotifyEngine: Sendable {
    typealias ValueSink = NotificationSession.ValueSink
    typealias SharingSink = NotificationSession.SharingSink
    typealias Sharing = NotificationSession.Sharing

    /// The characteristic notifying.
    let characteristic: GattCharacteristic
    /// How the session started: `.own` or `.joined`.
    let sharing: Sharing
    /// Values when started without a sink; else it only ends or fails.
    let values: AsyncThrowingStream<[UInt8], any Error>
    /// Ends the session and returns once it has ended.
    private let stopper: @Sendable () async -> Void

    private init(characteristic: GattCharacteristic, sharing: Sharing, values: AsyncThrowingStream<[UInt8], any Error>,
                 stop: @escaping @Sendable () async -> Void) {
        self.characteristic = characteristic
        self.sharing = sharing
        self.values = values
        self.stopper = stop
    }

    /// StopNotify, or the socket closed; returns once BlueZ answered (or
    /// the call's deadline passed).
    func stop() async {
        await stopper()
    }

    // MARK: - The prologue and the runner both kinds share

    /// What a session of either kind sets up the same way, before its first
    /// call to BlueZ: its names, the values stream, and its machine's driver,
    /// already following the tree (pitfall 4).
    struct Session<Machine: NotifyMachine>: Sendable {
        let connection: DBusConnection
        let characteristic: GattCharacteristic
        let device: ObjectPath
        /// The characteristic as messages name it.
        let what: String
        let deviceID: BluetoothAddress
        let callTimeout: Duration
        let values: AsyncThrowingStream<[UInt8], any Error>
        let continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation
        /// The subscribers' sink, or the values stream.
        let deliver: ValueSink
        let driver: MachineDriver<Machine, Void>

        init(peripheral: Peripheral, characteristic: GattCharacteristic, onValue: ValueSink?, label: String) {
            let central = peripheral.central
            connection = central.connection
            self.characteristic = characteristic
            device = peripheral.path
            what = characteristic.uuid.label
            deviceID = peripheral.identifier
            callTimeout = central.callTimeout
            (values, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
            deliver = onValue ?? { [continuation] in continuation.yield($0) }
            driver = MachineDriver(mirror: central.mirror, machine: Machine(), label: "\(label) \(what)")
            let (charPath, devicePath) = (characteristic.path, device)
            driver.follow { change, tree in
                switch NotifyEngine.treeEvent(for: change, characteristic: charPath, device: devicePath, in: tree) {
                case .deviceDisconnected?: return [Machine.Event.deviceDisconnected]
                case .characteristicRemoved?: return [Machine.Event.characteristicRemoved]
                case nil: return []
                }
            }
        }

        /// A method call of the characteristic's interface on it.
        func characteristicCall(_ member: String, arguments: [DBusValue] = []) -> DBusMessage {
            DBusMessage.methodCall(destination: BlueZ.service, path: characteristic.path,
                                   interface: BlueZ.characteristicInterface, member: member, arguments: arguments)
        }

        /// The engine whose `stop()` ends this session.
        func engine(sharing: Sharing) -> NotifyEngine {
            NotifyEngine(characteristic: characteristic, sharing: sharing, values: values) { [driver] in
                driver.loop.execute { driver.send(Machine.Event.stop) }
                await driver.ended()
            }
        }
    }

    /// Runs the session's machine until its first answer: the actions that
    /// mean the same for both machines are performed here, the kind's own
    /// by `perform`.
    /// `operation` names a failure BlueZ reports ("start notifications of
    /// …"); `disconnected` describes the device going; `beforeFinish` runs
    /// before the values end normally.
    static func run<Machine: NotifyMachine>(
        _ session: Session<Machine>, start: Machine.Event, operation: String, disconnected: String,
        setUp: @escaping @Sendable (MachineDriver<Machine, Void>) -> Void,
        beforeFinish: @escaping @Sendable () -> Void = {},
        perform: @escaping @Sendable (Machine.Action, MachineDriver<Machine, Void>) -> Void
    ) async throws {
        let (deliver, continuation) = (session.deliver, session.continuation)
        let (what, deviceID) = (session.what, session.deviceID)
        try await session.driver.run(start: start, cancel: Machine.Event.stop, setUp: setUp, perform: { action, driver in
            switch action {
            case .deliver(let bytes):
                deliver(bytes)
            case .reportStarted:
                driver.answer(.success(()))
            case .finish:
                beforeFinish()
                continuation.finish()
                driver.answer(.failure(CancellationError()))
            case .fail(let failure):
                let error: any Error
                switch failure {
                case .disconnected: error = BluetoothError.disconnected(disconnected)
                case .removed: error = BluetoothError.disconnected("\(what) of \(deviceID) disappeared")
                case .bluez(let name, let message):
                    error = BluetoothError(DBusError.remote(name: name, message: message), operation: operation)
                }
                continuation.finish(throwing: error)
                driver.answer(.failure(error))
            case .unplanned(let description):
                Trace.unplanned(driver.label, description)
            default:
                perform(action, driver)
            }
        })
    }

    /// What a change of BlueZ's tree means for a session: the device
    /// disconnecting or going, the characteristic going, bluetoothd
    /// restarting or leaving (the tree replaced). Values come another way:
    /// a signal handler of their own (StartNotify), or the socket (AcquireNotify).
    enum TreeEvent {
        case deviceDisconnected
        case characteristicRemoved
    }

    static func treeEvent(for change: BlueZObjectTree.Change, characteristic charPath: ObjectPath, device devicePath: ObjectPath,
                          in tree: borrowing BlueZObjectTree) -> TreeEvent? {
        switch change {
        case .propertiesChanged(devicePath, BlueZ.deviceInterface, let changed, _):
            return changed["Connected"]?.bool == false ? .deviceDisconnected : nil
        case .removed(let path, let interfaces):
            if path == devicePath, interfaces.contains(BlueZ.deviceInterface) { return .deviceDisconnected }
            if path == charPath, interfaces.contains(BlueZ.characteristicInterface) { return .characteristicRemoved }
            return nil
        case .cleared:
            return .deviceDisconnected
        case .replaced:
            if tree.properties(devicePath, BlueZ.deviceInterface)?["Connected"]?.bool != true { return .deviceDisconnected }
            if tree.properties(charPath, BlueZ.characteristicInterface) == nil { return .characteristicRemoved }
            return nil
        default:
            return nil
        }
    }

    // MARK: - StartNotify

    /// A StartNotify session, run by `NotifyStateMachine`: the
    /// characteristic's value signals come through a signal handler of
    /// their own (not the mirror's listeners: one hand-over per value, to
    /// the consumer), and only what the machine says to deliver is delivered.
    static func start(peripheral: Peripheral, characteristic: GattCharacteristic, onValue: ValueSink?,
                      onSharing: SharingSink?) async throws -> NotifyEngine {
        let session = Session<NotifyStateMachine>(peripheral: peripheral, characteristic: characteristic,
                                                  onValue: onValue, label: "notify")
        let (driver, connection, deliver) = (session.driver, session.connection, session.deliver)
        // The reads another bluectl makes while values flow (ReadMarker): the loop's.
        let reads = LoopBound(ReadCopyFilter(), loop: driver.loop)
        let tokens: (values: DBusConnection.SubscriptionToken, markers: DBusConnection.SubscriptionToken)
        do {
            tokens = try await listen(to: characteristic.path, driver: driver, reads: reads, timeout: session.callTimeout)
        } catch {
            driver.abandon()
            throw BluetoothError.from(error, operation: "listen for values of \(session.what)")
        }
        // Another client's StartNotify session already on: share it (see
        // NotifyStateMachine), or every value would arrive twice.
        let joining = await driver.snapshot().properties(characteristic.path, BlueZ.characteristicInterface)?["Notifying"]?.bool == true
        let callTimeout = session.callTimeout
        try await run(session, start: joining ? .join : .start, operation: "start notifications of \(session.what)",
                      disconnected: "\(session.deviceID) disconnected", setUp: { driver in
            driver.onEnd {
                // values held for another bluectl's read came before the end
                for bytes in reads.value.releaseAll() { deliver(bytes) }
                session.continuation.finish()
                connection.dropSubscription(tokens.values)
                connection.dropSubscription(tokens.markers)
            }
        }, beforeFinish: {
            for bytes in reads.value.releaseAll() { deliver(bytes) }
        }, perform: { action, driver in
            switch action {
            case .callStartNotify:
                driver.call(session.characteristicCall("StartNotify"), timeout: callTimeout) { result in
                    switch result {
                    case .success: return .startSucceeded
                    case .failure(let error):
                        let (name, message) = error.nameAndMessage
                        return .startFailed(name: name, message: message)
                    }
                }
            case .reportTakingOver:
                onSharing?(.tookOver)
            case .callStopNotify:
                // At most a few seconds: a process that stops may be about to exit.
                driver.call(session.characteristicCall("StopNotify"), timeout: min(callTimeout, .seconds(5))) { _ in .stopFinished }
            case .reportStarted, .deliver, .finish, .fail, .unplanned, .callAcquireNotify, .watchSocket, .closeSocket:
                break  // the shared ones: `run`; AcquireNotify's: not this machine's
            }
        })
        return session.engine(sharing: joining ? .joined : .own)
    }

    /// Listens first (pitfall 4) to the characteristic's value signals and to
    /// other bluectls' read markers; the handlers run on the loop, and what
    /// comes before the machine has started is held by the driver.
    private static func listen(to charPath: ObjectPath, driver: MachineDriver<NotifyStateMachine, Void>,
                               reads: LoopBound<ReadCopyFilter>, timeout: Duration) async throws
        -> (values: DBusConnection.SubscriptionToken, markers: DBusConnection.SubscriptionToken) {
        let connection = driver.connection
        let valueFilter = SignalFilter(sender: BlueZ.service, interface: BlueZ.properties, member: "PropertiesChanged", path: charPath)
        let markerFilter = SignalFilter(interface: ReadMarker.interface, path: charPath)
        let values = try await connection.subscribe(valueFilter, timeout: timeout) { message in
            // The one decode of the message, which the mirror applied too.
            guard let change = changes(in: message) else { return }
            if change.notifying == false { driver.send(.sharedSessionEnded) }
            guard let value = change.value else { return }
            for bytes in reads.value.value(value, serial: message.serial, now: driver.loop.now) { driver.send(.value(bytes)) }
        }
        do {
            let markers = try await connection.subscribe(markerFilter, timeout: timeout) { message in
                guard let reader = message.sender else { return }
                let now = driver.loop.now
                let release: [[UInt8]]
                switch message.member {
                case ReadMarker.started?:
                    release = reads.value.started(by: reader, now: now)
                case ReadMarker.finished?:
                    let arguments = message.arguments
                    guard arguments.count == 2, case .uint32(let serial) = arguments[0].unwrapped, let bytes = arguments[1].bytes else { return }
                    release = reads.value.finished(by: reader, replySerial: serial, value: bytes, now: now)
                default:
                    return
                }
                for bytes in release { driver.send(.value(bytes)) }
            }
            return (values, markers)
        } catch {
            connection.dropSubscription(values)
            throw error
        }
    }

    /// What a characteristic's PropertiesChanged says: its `Value` and its
    /// `Notifying`, when present (nil: not the characteristic interface's).
    static func changes(in message: DBusMessage) -> (value: [UInt8]?, notifying: Bool?)? {
        message.withPropertiesChanged { change -> (value: [UInt8]?, notifying: Bool?)? in
            guard change.interface == BlueZ.characteristicInterface else { return nil }
            var result: (value: [UInt8]?, notifying: Bool?) = (nil, nil)
            for property in change.changed {
                switch property.name {
                case "Value": result.value = property.value.bytes
                case "Notifying": result.notifying = property.value.bool
                default: break
                }
            }
            return result
        } ?? nil
    }
}
