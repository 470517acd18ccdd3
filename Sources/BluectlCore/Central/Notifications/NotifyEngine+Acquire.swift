import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension NotifyEngine {
    /// An AcquireNotify session, run by `AcquireNotifyStateMachine` on the
    /// loop, which also reads the socket (watched in the same poll as the
    /// bus: no thread of its own).
    static func acquire(peripheral: Peripheral, characteristic: GattCharacteristic, onValue: ValueSink?) async throws -> NotifyEngine {
        let session = Session<AcquireNotifyStateMachine>(peripheral: peripheral, characteristic: characteristic,
                                                         onValue: onValue, label: "acquire")
        let socket = LoopBound(AcquiredSocket(), loop: session.driver.loop)
        let callTimeout = session.callTimeout
        try await run(session, start: .start, operation: "acquire notifications of \(session.what)",
                      disconnected: "\(session.deviceID) disconnected (the notification socket of \(session.what) closed)",
                      setUp: { driver in
            driver.onEnd {
                socket.value.close(on: driver.loop)
                session.continuation.finish()
            }
        }, perform: { action, driver in
            switch action {
            case .callAcquireNotify:
                let message = session.characteristicCall("AcquireNotify", arguments: [.stringVariantDictionary([:])])
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
            case .closeSocket:
                // bluetoothd sees the socket close and turns notifications off.
                socket.value.close(on: driver.loop)
            case .reportStarted, .deliver, .finish, .fail, .unplanned, .callStartNotify, .reportTakingOver, .callStopNotify:
                break  // the shared ones: `run`; StartNotify's: not this machine's
            }
        })
        return session.engine(sharing: .own)
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
