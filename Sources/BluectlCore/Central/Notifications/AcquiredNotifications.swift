import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Peripheral {
    /// `AcquireNotify`: BlueZ hands over a socket and writes each value to
    /// it, instead of one PropertiesChanged signal per value — fewer
    /// messages and wake-ups. The price (docs/bluez-pitfalls.md, 7;
    /// measured in the lab): bluetoothd drops values silently while the socket is full or
    /// not yet ready. The central's event loop watches the socket in the same
    /// poll as the bus and drains it as soon as it is readable; a loop kept
    /// busy (a slow `onValue`, a burst of signals) widens that window, and
    /// only a sequence check in the values themselves can show a loss.
    /// `onValue`: as for `subscribe(to:onValue:)`, on the loop.
    public func acquireNotifications(for characteristic: GattCharacteristic,
                                     onValue: NotificationSession.ValueSink? = nil) async throws -> NotificationSession {
        guard characteristic.properties.canNotify else {
            throw BluetoothError.notSupported("characteristic \(characteristic.uuid.label) cannot notify or indicate (flags: \(characteristic.flags.joined(separator: ",")))")
        }
        let key = NotifyKey(characteristic: characteristic.path, acquire: true)
        return try await subscribeShared(characteristic, key: key, onValue: onValue, onSharing: nil) { [self] onValue, _ in
            try await NotifyEngine.acquire(peripheral: self, characteristic: characteristic, onValue: onValue)
        }
    }
}

extension NotifyEngine {
    /// An AcquireNotify session, run by `AcquireNotifyStateMachine` on the
    /// loop, which also reads the socket (watched in the same poll as the
    /// bus: no thread of its own).
    static func acquire(peripheral: Peripheral, characteristic: GattCharacteristic, onValue: ValueSink?) async throws -> NotifyEngine {
        let central = peripheral.central
        let (charPath, devicePath) = (characteristic.path, peripheral.path)
        let what = characteristic.uuid.label
        let deviceID = peripheral.identifier
        let callTimeout = central.callTimeout
        let (values, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        let deliver: ValueSink = onValue ?? { continuation.yield($0) }
        let driver = MachineDriver<AcquireNotifyStateMachine, Void>(
            mirror: central.mirror, machine: AcquireNotifyStateMachine(), label: "acquire \(what)")
        driver.follow { change, tree in
            events(for: change, characteristic: charPath, device: devicePath, in: tree).compactMap {
                switch $0 {
                case .deviceDisconnected: return .deviceDisconnected
                case .characteristicRemoved: return .characteristicRemoved
                default: return nil
                }
            }
        }
        let socket = LoopBound(AcquiredSocket(), loop: central.mirror.loop)
        try await driver.run(start: .start, cancel: .stop, setUp: { driver in
            driver.onEnd {
                socket.value.close(on: driver.loop)
                continuation.finish()
            }
        }, perform: { action, driver in
            switch action {
            case .callAcquireNotify:
                let message = DBusMessage.methodCall(
                    destination: BlueZ.service, path: charPath, interface: BlueZ.characteristicInterface,
                    member: "AcquireNotify", arguments: [.stringVariantDictionary([:])])
                driver.call(message, timeout: callTimeout) { [driver] result in
                    switch result {
                    case .success(let reply):
                        guard case .unixFD(let received)? = reply.arguments.first,
                              case .uint16(let mtu)? = reply.arguments.dropFirst().first else {
                            return .acquireFailed(name: "org.freedesktop.DBus.Error.InvalidSignature",
                                                  message: "AcquireNotify returned \(reply.arguments)")
                        }
                        // The session ended while AcquireNotify was out: nobody will read it.
                        guard !driver.hasEnded else { return nil }
                        // Our own descriptor (the message's goes with it).
                        let fd = dup(received.fileDescriptor)
                        guard fd >= 0 else {
                            return .acquireFailed(name: "org.freedesktop.DBus.Error.Failed",
                                                  message: "cannot keep the socket (\(String(cString: strerror(errno))))")
                        }
                        socket.value.fd = fd
                        socket.value.mtu = Int(mtu)
                        return .acquired
                    case .failure(let error):
                        let (name, message) = error.nameAndMessage
                        return .acquireFailed(name: name, message: message)
                    }
                }
            case .watchSocket:
                socket.value.watch(on: driver.loop) { driver.send($0) }
            case .reportStarted:
                driver.answer(.success(()))
            case .deliver(let bytes):
                deliver(bytes)
            case .closeSocket:
                // bluetoothd sees the socket close and turns notifications off.
                socket.value.close(on: driver.loop)
            case .finish:
                continuation.finish()
                driver.answer(.failure(CancellationError()))
            case .fail(let failure):
                let error: any Error
                switch failure {
                case .disconnected:
                    error = BluetoothError.disconnected("\(deviceID) disconnected (the notification socket of \(what) closed)")
                case .removed:
                    error = BluetoothError.disconnected("\(what) of \(deviceID) disappeared")
                case .bluez(let name, let message):
                    error = BluetoothError(DBusError.remote(name: name, message: message), operation: "acquire notifications of \(what)")
                }
                continuation.finish(throwing: error)
                driver.answer(.failure(error))
            case .unplanned(let description):
                Trace.unplanned(driver.label, description)
            }
        })
        return NotifyEngine(characteristic: characteristic, sharing: .own, values: values) {
            driver.loop.execute { driver.send(.stop) }
            await driver.ended()
        }
    }
}

/// The socket of an AcquireNotify session: the loop's (in a `LoopBound`).
private struct AcquiredSocket {
    var fd: Int32 = -1
    var mtu = 23
    var watchID: EventLoop.WatchID?

    /// Reads values as the loop finds the socket readable, each one an
    /// event: at most 64 per wake-up, so the bus is not kept waiting; the
    /// socket's end is `socketClosed`.
    mutating func watch(on loop: EventLoop, _ send: @escaping (AcquireNotifyStateMachine.Event) -> Void) {
        let fd = self.fd
        guard fd >= 0 else { return }
        // bluetoothd makes the pair with SOCK_NONBLOCK; make sure, a read must never block the loop.
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        var buffer = [UInt8](repeating: 0, count: max(mtu, 517))
        var open = true
        watchID = loop.watch(fd) {
            for _ in 0..<64 where open {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    send(.value(Array(buffer[0..<n])))
                } else if n < 0, errno == EINTR {
                    continue
                } else if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    return
                } else {
                    // EOF (or an error): bluetoothd closed it (disconnect, or released).
                    open = false
                    send(.socketClosed)
                }
            }
        }
    }

    /// Stops watching and closes the socket (once).
    mutating func close(on loop: EventLoop) {
        if let watchID { loop.unwatch(watchID) }
        watchID = nil
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }
}
