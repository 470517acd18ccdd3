import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

extension PeripheralManager {
    /// Publishes an L2CAP channel on this manager's adapter
    /// (CoreBluetooth's `publishL2CAPChannel`): a socket listening on `psm`,
    /// or with nil on a dynamic PSM the kernel picks (0x0080-0x00FF; read
    /// it from the listener, and tell centrals, e.g. in a GATT
    /// characteristic as Apple's L2CAP PSM characteristic does). Centrals
    /// connecting to it at a lower security than `security` are asked to
    /// raise it first (their kernel pairs and asks again). `receiveMTU`:
    /// the largest SDU this side takes (23-65535; default the kernel's).
    /// Nothing is registered with bluetoothd: the kernel serves the PSM, on
    /// the link a central makes (this adapter must be connectable:
    /// advertising, or known to the central).
    public func publishL2CAPChannel(psm: L2CAPPSM? = nil, security: L2CAPSecurity = .none,
                                    receiveMTU: Int? = nil) async throws -> L2CAPListener {
        if let receiveMTU, !L2CAPListener.mtuRange.contains(receiveMTU) {
            throw BluetoothError.invalidRequest("invalid receive MTU \(receiveMTU): an LE channel's MTU is 23 to 65535")
        }
        guard let address = adapter.address else { throw BluetoothError.adapterNotFound(adapter.name) }
        let what = "publish an L2CAP channel on \(adapter.name)" + (psm.map { " PSM \($0)" } ?? "")
        let socket: L2CAPSocket
        switch L2CAPSocket.make() {
        case .success(let made): socket = made
        case .failure(let error): throw error.bluetoothError(what)
        }
        func check(_ code: Int32, _ step: String, binding: Bool = false) throws {
            guard code != 0 else { return }
            socket.close()
            throw L2CAPErrno(code).bluetoothError("\(what): \(step)", binding: binding)
        }
        try check(socket.bind(address, type: adapter.addressType ?? .public, psm: psm?.rawValue ?? 0), "bind", binding: true)
        try check(socket.setSecurity(security), "set security \(security.rawValue)")
        if let receiveMTU { try check(socket.setReceiveMTU(UInt16(receiveMTU)), "set the receive MTU") }
        try check(socket.listen(), "listen")
        guard let bound = socket.localPSM.flatMap(L2CAPPSM.init(rawValue:)) else {
            socket.close()
            throw BluetoothError.unexpected("\(what): the kernel gave no LE PSM")
        }
        Trace.log("l2cap: listening on \(adapter.name) PSM \(bound), security \(security.rawValue)")
        return L2CAPListener(socket: socket, psm: bound, adapter: adapter.name, security: security, loop: loop)
    }
}

/// A published L2CAP channel: a socket listening on one PSM of one adapter.
/// `accept()` (or iterating `channels`) takes the next central's channel;
/// until then the kernel keeps a few waiting. `close()`, or dropping it,
/// stops listening; channels already accepted go on.
public final class L2CAPListener: Sendable {
    /// The PSM centrals open channels to (the kernel's choice for a dynamic one).
    public let psm: L2CAPPSM
    /// The adapter it listens on ("hci0").
    public let adapter: String
    /// The security asked of a central's link before its channel is accepted.
    public let security: L2CAPSecurity
    private let loop: EventLoop
    private let state: LoopBound<State>

    /// The MTUs an LE channel may have (Core Specification: at least 23).
    static let mtuRange = 23...65535

    private struct State {
        var socket: L2CAPSocket?
        var watch: EventLoop.WatchID?
        var waiter: HandOff<L2CAPChannel>?
    }

    init(socket: L2CAPSocket, psm: L2CAPPSM, adapter: String, security: L2CAPSecurity, loop: EventLoop) {
        self.psm = psm
        self.adapter = adapter
        self.security = security
        self.loop = loop
        state = LoopBound(State(socket: socket), loop: loop)
    }

    deinit {
        let state = state
        loop.execute { [loop] in Self.stop(state, loop: loop) }
    }

    /// Waits for the next central to open a channel to this PSM and
    /// returns it. One caller at a time. Throws `CancellationError` when
    /// the caller is cancelled, and `.disconnected` once the listener is closed.
    public func accept() async throws -> L2CAPChannel {
        let answer = HandOff<L2CAPChannel>()
        let (loop, state, psm, adapter) = (loop, state, psm, adapter)
        loop.execute { Self.attempt(state, loop: loop, psm: psm, adapter: adapter, answer: answer) }
        return try await withTaskCancellationHandler {
            try await answer.wait()
        } onCancel: {
            if answer.settle(.failure(CancellationError())) {
                loop.execute {
                    if let watch = state.value.watch { loop.unwatch(watch) }
                    state.value.watch = nil
                    state.value.waiter = nil
                }
            }
        }
    }

    /// The channels centrals open, one `accept()` per element; ends when the listener is closed.
    public var channels: Channels { Channels(listener: self) }

    /// The channels of a listener (`channels`).
    public struct Channels: AsyncSequence, Sendable {
        /// One accepted channel.
        public typealias Element = L2CAPChannel
        let listener: L2CAPListener

        /// Starts accepting.
        public func makeAsyncIterator() -> Iterator { Iterator(listener: listener) }

        /// Accepts one channel per call.
        public struct Iterator: AsyncIteratorProtocol {
            let listener: L2CAPListener

            /// The next channel; nil once the listener is closed.
            public mutating func next() async throws -> L2CAPChannel? {
                do {
                    return try await listener.accept()
                } catch BluetoothError.disconnected {
                    return nil
                }
            }
        }
    }

    /// Stops listening (no effect when stopped already): centrals are
    /// refused from now on, and a waiting `accept()` throws `.disconnected`.
    public func close() async {
        let (loop, state) = (loop, state)
        await loop.submit { Self.stop(state, loop: loop) }
    }

    // MARK: - On the loop

    private static func stop(_ state: LoopBound<State>, loop: EventLoop) {
        if let watch = state.value.watch { loop.unwatch(watch) }
        state.value.watch = nil
        state.value.socket?.close()
        state.value.socket = nil
        state.value.waiter?.settle(.failure(BluetoothError.disconnected("the L2CAP listener is closed")))
        state.value.waiter = nil
    }

    /// Accepts now, or when the listening socket turns readable.
    private static func attempt(_ state: LoopBound<State>, loop: EventLoop, psm: L2CAPPSM, adapter: String,
                                answer: HandOff<L2CAPChannel>) {
        guard !answer.isSettled else { return }
        guard let socket = state.value.socket else {
            answer.settle(.failure(BluetoothError.disconnected("the L2CAP listener is closed")))
            return
        }
        switch socket.accept() {
        case .success(let (child, peer, peerType)):
            if let watch = state.value.watch { loop.unwatch(watch) }
            state.value.watch = nil
            state.value.waiter = nil
            let label = "the channel from \(peer) on PSM \(psm)"
            guard let sendMTU = child.sendMTU, let receiveMTU = child.receiveMTU else {
                child.close()
                return attempt(state, loop: loop, psm: psm, adapter: adapter, answer: answer)
            }
            let link = child.security ?? (.none, 0)
            let engine = L2CAPChannelEngine(loop: loop, socket: child, sendMTU: sendMTU, receiveMTU: receiveMTU, label: label)
            let channel = L2CAPChannel(engine: engine, peer: peer, peerAddressType: peerType, psm: psm, adapter: adapter,
                                       security: link.level, keySize: link.keySize)
            Trace.log("l2cap: accepted \(label): MTU out \(sendMTU), in \(receiveMTU), security \(link.level.rawValue), key \(link.keySize)")
            if !answer.settle(.success(channel)) { engine.close() }
        case .failure(let error) where error.wouldBlock || error.code == EINTR || error.code == ECONNABORTED:
            state.value.waiter = answer
            guard state.value.watch == nil else { return }
            state.value.watch = loop.watch(socket.fd) {
                guard let waiter = state.value.waiter else { return }
                attempt(state, loop: loop, psm: psm, adapter: adapter, answer: waiter)
            }
        case .failure(let error):
            answer.settle(.failure(error.bluetoothError("accept an L2CAP channel on \(adapter) PSM \(psm)")))
        }
    }
}
