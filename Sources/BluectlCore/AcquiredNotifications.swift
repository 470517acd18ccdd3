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
    /// not yet ready. A reader thread of its own drains the socket at once to
    /// keep that window small; only a sequence check in the values
    /// themselves can show a loss.
    /// `onValue`: as for `subscribe(to:onValue:)`, on the reader thread.
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
    static func acquire(peripheral: Peripheral, characteristic: GattCharacteristic, onValue: ValueSink?) async throws -> NotifyEngine {
        let central = peripheral.central
        let (_, changes) = central.mirror.changes()
        let channel = EventChannel<NotifyStateMachine.Event>()
        let (charPath, devicePath, mirror) = (characteristic.path, peripheral.path, central.mirror)
        channel.follow(changes) { change in
            events(for: change, characteristic: charPath, device: devicePath, in: mirror.tree)
        }
        let what = characteristic.uuid.label
        let reply: [DBusValue]
        do {
            reply = try await central.connection.callMethod(
                destination: BlueZ.service, path: charPath, interface: BlueZ.characteristicInterface,
                member: "AcquireNotify", arguments: [.stringVariantDictionary([:])], timeout: central.callTimeout)
        } catch {
            channel.close()
            throw BluetoothError.from(error, operation: "acquire notifications of \(what)")
        }
        guard case .unixFD(let received)? = reply.first, case .uint16(let mtu)? = reply.dropFirst().first else {
            channel.close()
            throw BluetoothError.unexpected("AcquireNotify returned \(reply)")
        }
        // Our own descriptor: only the reader thread closes it, once it has
        // stopped reading (so a number is never reused under its feet).
        let fd = dup(received.fileDescriptor)
        guard fd >= 0 else {
            channel.close()
            throw BluetoothError.unexpected("AcquireNotify: cannot keep the socket (\(String(cString: strerror(errno))))")
        }
        // bluetoothd makes the pair with SOCK_NONBLOCK; our reader blocks in read().
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        let (values, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        let deliver: ValueSink = onValue ?? { continuation.yield($0) }
        let deviceID = peripheral.identifier
        let socketClosed = Locked(false)
        startThread(name: "bluectl-acq-notify") {
            var buffer = [UInt8](repeating: 0, count: max(Int(mtu), 517))
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    deliver(Array(buffer[0..<n]))
                } else if n < 0, errno == EINTR {
                    continue
                } else if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    // Still non-blocking (fcntl refused): wait for data instead.
                    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    _ = poll(&p, 1, -1)
                    continue
                } else {
                    // EOF: bluetoothd closed it (disconnect, or released), or we shut it down.
                    channel.send(.deviceDisconnected)
                    break
                }
            }
            socketClosed.withLock { closed in
                closed = true
                close(fd)
            }
        }
        let loop = Task {
            var iterator = channel.stream.makeAsyncIterator()
            var failure: (any Error)?
            while let event = await iterator.next() {
                switch event {
                case .stop:
                    break
                case .deviceDisconnected:
                    failure = BluetoothError.disconnected("\(deviceID) disconnected (the notification socket of \(what) closed)")
                case .characteristicRemoved:
                    failure = BluetoothError.disconnected("\(what) of \(deviceID) disappeared")
                default:
                    continue
                }
                break
            }
            // Wakes the reader (read returns 0); it closes the socket, and
            // bluetoothd then turns notifications off.
            socketClosed.withLock { closed in
                if !closed { shutdown(fd, Int32(SHUT_RDWR)) }
            }
            channel.close()
            if let failure { continuation.finish(throwing: failure) } else { continuation.finish() }
        }
        return NotifyEngine(characteristic: characteristic, sharing: .own, values: values) {
            channel.send(.stop)
            _ = await firstValue(within: .seconds(5)) { await loop.value }
        }
    }
}
