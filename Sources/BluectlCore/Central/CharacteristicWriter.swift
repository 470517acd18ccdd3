import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

/// Write without response as a stream (`Peripheral.acquireWriter(for:)`):
/// bytes in, ATT Write Commands out, as fast as the link takes them.
///
/// Through `AcquireWrite` when bluetoothd offers it: a socket whose every
/// datagram bluetoothd sends as one Write Command, so no D-Bus message per
/// value. The socket is watched by the central's event loop (as an
/// AcquireNotify socket is) and a full socket holds `write` back. When
/// bluetoothd refuses AcquireWrite (the characteristic does not list
/// write-without-response, another client holds it), the same values go
/// as `WriteValue` calls with type command, a few at a time (`route` says
/// which, `fallbackReason` why).
///
/// Bluetooth gives no delivery report for a Write Command: `flush` says
/// when bluetoothd has taken everything, not that the device got it.
/// `close()` hands on what was written, then releases the socket
/// (bluetoothd's `WriteAcquired` goes false). Dropping the writer releases
/// it at once, dropping what was not handed on.
public final class CharacteristicWriter: Sendable, CustomStringConvertible {
    /// How values reach bluetoothd.
    public enum Route: String, Sendable {
        /// `AcquireWrite`'s socket: one datagram per value.
        case acquiredSocket = "acquire-write"
        /// `WriteValue` with type command, one call per value (AcquireWrite refused or not offered).
        case writeValueCalls = "write-value"
    }

    /// The characteristic written.
    public let characteristic: GattCharacteristic
    /// The route taken.
    public let route: Route
    /// Why AcquireWrite was not used (bluetoothd's error); nil when it was.
    public let fallbackReason: String?
    /// The largest value one Write Command carries: the ATT MTU less 3, at
    /// most 510 (what bluetoothd 5.66 passes on whole: docs/bluez-pitfalls.md,
    /// 27); `write` cuts longer data into values of this size.
    public let maximumValueLength: Int
    let sender: any LoopSender
    private let release: @Sendable () -> Void

    init(characteristic: GattCharacteristic, route: Route, fallbackReason: String?, maximumValueLength: Int,
         sender: any LoopSender, release: @escaping @Sendable () -> Void) {
        self.characteristic = characteristic
        self.route = route
        self.fallbackReason = fallbackReason
        self.maximumValueLength = maximumValueLength
        self.sender = sender
        self.release = release
    }

    deinit { release() }

    /// "writer to 2a39 (acquire-write)".
    public var description: String { "writer to \(characteristic.uuid.label) (\(route.rawValue))" }

    /// Writes `bytes` as values of at most `maximumValueLength` bytes each
    /// (so data of at most that size is one Write Command). Returns once
    /// they are queued, having waited while the socket (or the calls in
    /// flight) were full. Throws once the writer has ended: `.disconnected`
    /// when bluetoothd closed the socket (the link went down), or the
    /// error of a failed WriteValue call.
    public func write(_ bytes: [UInt8]) async throws {
        try await sender.send(bytes)
    }

    /// Waits (at most `timeout`) until bluetoothd has taken everything
    /// written (read it from the socket, or answered every call). True
    /// when it has; false at the timeout, when cancelled or when the writer
    /// ended first. Flush before closing the central manager: its loop
    /// (timers, the socket's events) ends with it.
    @discardableResult
    public func flush(timeout: Duration = .seconds(30)) async -> Bool {
        let sender = sender
        let done = await Deadline(after: timeout).run { () async -> Bool in
            guard await sender.drained() else { return false }
            guard let socket = sender as? L2CAPChannelEngine else { return await sender.loop.submit { sender.isOpenSender } }
            // Closing the socket with datagrams bluetoothd has not read yet
            // can lose them (its hang-up handler may run first): wait until
            // bluetoothd has read the socket empty.
            return await socket.whenKernelQueueEmpty {
                guard socket.isOpen else { return false }
                return Self.unread(socket.socket.fd) == 0 ? true : nil
            }
        }
        return done ?? false
    }

    /// Flushes (`flush(timeout:)`), then releases the socket.
    public func close(timeout: Duration = .seconds(30)) async {
        await flush(timeout: timeout)
        let release = release
        await sender.loop.submit { release() }
    }

    /// The bytes and the values (Write Commands) handed on so far: written
    /// to the socket, or written by calls bluetoothd answered.
    public var counts: (bytes: Int, writes: Int) {
        get async {
            let sender = sender
            let (bytes, units) = await sender.loop.submit { sender.sentCounts }
            return (bytes, units)
        }
    }

    /// A local socket's bytes not yet read by its peer (SIOCOUTQ; 0 when it cannot say).
    private static func unread(_ fd: Int32) -> Int {
        var queued: Int32 = 0
        return ioctl(fd, UInt(TIOCOUTQ), &queued) == 0 ? Int(queued) : 0
    }

    // MARK: - For a pump on the loop (the command line's stdin)

    /// Offers `bytes` on the loop (as `write`, without waiting). Loop only.
    package func offerOnLoop(_ bytes: some Collection<UInt8>) -> SendOffer { sender.offer(bytes) }

    /// Calls `body` on the loop once more may be offered. Loop only.
    package func whenRoomOnLoop(_ body: @escaping () -> Void) { sender.whenRoom(body) }
}

extension Peripheral {
    /// A stream of writes without response to `characteristic`
    /// (`CharacteristicWriter`): through `AcquireWrite`'s socket when
    /// bluetoothd grants it, else through `WriteValue` calls with type
    /// command. Throws when the characteristic cannot be written at all,
    /// or the bus fails.
    public func acquireWriter(for characteristic: GattCharacteristic) async throws -> CharacteristicWriter {
        let p = characteristic.properties
        guard characteristic.flags.isEmpty || p.canWriteWithResponse || p.canWriteWithoutResponse else {
            throw BluetoothError.notSupported("characteristic \(characteristic.uuid.label) is not writable (flags: \(characteristic.flags.joined(separator: ",")))")
        }
        let loop = central.mirror.loop
        let label = "the write socket of \(characteristic.uuid.label) on \(identifier)"
        let reason: String
        do {
            let reply = try await central.connection.callMethod(
                destination: BlueZ.service, path: characteristic.path, interface: BlueZ.characteristicInterface,
                member: "AcquireWrite", arguments: [.stringVariantDictionary([:])], timeout: central.callTimeout)
            guard case .unixFD(let received)? = reply.first, case .uint16(let mtu)? = reply.dropFirst().first else {
                throw BluetoothError.unexpected("AcquireWrite of \(characteristic.uuid.label) returned \(reply)")
            }
            // Our own descriptor (the message's goes with it), never blocking the loop.
            let fd = dup(received.fileDescriptor)
            guard fd >= 0 else { throw BluetoothError.noResources("cannot keep the AcquireWrite socket: \(String(cString: strerror(errno)))") }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let limit = max(1, min(Int(mtu) - 3, BlueZ566.streamedWriteValueLimit))
            // One datagram is one value: the L2CAP engine's SEQPACKET sending, with the value size as its MTU.
            let engine = L2CAPChannelEngine(loop: loop, socket: L2CAPSocket(fd: fd), sendMTU: limit, receiveMTU: 1, label: label)
            loop.execute { engine.start() }   // reads only the end: bluetoothd closing it
            return CharacteristicWriter(characteristic: characteristic, route: .acquiredSocket, fallbackReason: nil,
                                        maximumValueLength: limit, sender: engine) { loop.execute { engine.close() } }
        } catch let error as DBusError {
            guard case .remote(let name, let message) = error else {
                throw BluetoothError(error, operation: "AcquireWrite of \(characteristic.uuid.label)")
            }
            reason = "\(name): \(message)"
        }
        let limit = min(characteristic.maximumWriteValueLength(for: .withoutResponse), BlueZ566.streamedWriteValueLimit)
        let queue = WriteCommandQueue(loop: loop, connection: central.connection, path: characteristic.path,
                                      valueLimit: limit, timeout: central.callTimeout,
                                      label: "write \(characteristic.uuid.label) of \(identifier)")
        return CharacteristicWriter(characteristic: characteristic, route: .writeValueCalls, fallbackReason: reason,
                                    maximumValueLength: limit, sender: queue) { loop.execute { queue.close() } }
    }
}

/// The fallback's sender: each value a `WriteValue(value, {type: command})`
/// call, at most `inFlight` out at once (bluetoothd answers them in order,
/// so the order holds), a bounded backlog. Loop only, but for `init`.
final class WriteCommandQueue: LoopSender {
    let loop: EventLoop
    private let connection: DBusConnection
    private let path: ObjectPath
    private let valueLimit: Int
    private let timeout: Duration
    private let label: String
    private let backlogLimit = 64 * 1024
    private let inFlightLimit = 8
    private let state: LoopBound<State>

    private struct State {
        var values: [[UInt8]] = []
        var head = 0
        var backlog = 0
        var inFlight = 0
        var sent = 0
        var writes = 0
        var end: BluetoothError?
        var roomWaiters: [() -> Void] = []
        var drainWaiters: [() -> Void] = []
    }

    init(loop: EventLoop, connection: DBusConnection, path: ObjectPath, valueLimit: Int, timeout: Duration, label: String) {
        self.loop = loop
        self.connection = connection
        self.path = path
        self.valueLimit = max(1, valueLimit)
        self.timeout = timeout
        self.label = label
        state = LoopBound(State(), loop: loop)
    }

    func offer(_ bytes: some Collection<UInt8>) -> SendOffer {
        if let end = state.value.end { return .ended(end) }
        appendCut(bytes, at: valueLimit, to: &state.value.values)
        state.value.backlog += bytes.count
        pump()
        return .taken(room: state.value.backlog < backlogLimit)
    }

    func whenRoom(_ body: @escaping () -> Void) {
        if state.value.backlog < backlogLimit || state.value.end != nil { return body() }
        state.value.roomWaiters.append(body)
    }

    func whenDrained(_ body: @escaping () -> Void) {
        if state.value.backlog == 0 || state.value.end != nil { return body() }
        state.value.drainWaiters.append(body)
    }

    /// Ends the queue: what was not sent is dropped.
    func close() {
        finish(.disconnected("\(label): the writer is closed"))
    }

    private func pump() {
        while state.value.inFlight < inFlightLimit, state.value.head < state.value.values.count, state.value.end == nil {
            let value = state.value.values[state.value.head]
            state.value.head += 1
            state.value.inFlight += 1
            let message = DBusMessage.methodCall(
                destination: BlueZ.service, path: path, interface: BlueZ.characteristicInterface, member: "WriteValue",
                arguments: [.bytes(value), .stringVariantDictionary(["type": .string(WriteType.withoutResponse.bluezType)])])
            connection.call(message, timeout: timeout) { [self] result in
                state.value.inFlight -= 1
                state.value.backlog -= value.count
                switch result {
                case .success:
                    state.value.sent += value.count
                    state.value.writes += 1
                case .failure(let error): finish(BluetoothError(error, operation: label))
                }
                pump()
                wake()
            }
        }
        if state.value.head == state.value.values.count {
            state.value.values.removeAll(keepingCapacity: true)
            state.value.head = 0
        }
    }

    private func finish(_ error: BluetoothError) {
        guard state.value.end == nil else { return }
        state.value.end = error
        state.value.values = []
        state.value.head = 0
        wake()
    }

    private func wake() {
        let ended = state.value.end != nil
        state.wake(\.roomWaiters, if: ended || state.value.backlog < backlogLimit)
        state.wake(\.drainWaiters, if: ended || state.value.backlog == 0)
    }

    var isOpenSender: Bool { state.value.end == nil }
    var sentCounts: (bytes: Int, units: Int) { (state.value.sent, state.value.writes) }
}
