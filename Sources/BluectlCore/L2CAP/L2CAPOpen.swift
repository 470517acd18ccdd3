import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

extension Peripheral {
    /// Opens an L2CAP connection-oriented channel to `psm` on this device
    /// (CoreBluetooth's `openL2CAPChannel`), at `security`.
    ///
    /// The kernel carries the channel over the LE link, so the link is
    /// brought up through bluetoothd first when it is down
    /// (`CentralManager.connect`: its queue and retries; docs/l2cap.md says
    /// why not by connect(2) alone). For `encrypted` or `authenticated`, an
    /// unpaired device pairs first (`pair()`, answered by the agent
    /// `preparePairing` registers) when `pairsOnDemand`; the kernel then
    /// encrypts the link with the key before it asks for the channel.
    /// `receiveMTU`: the largest SDU this side takes (23-65535; default the
    /// kernel's). Everything within `timeout`.
    ///
    /// Failures: `.channelRefused` (nothing listens on the PSM, or the
    /// device refused), `.securityFailed`, `.noResources`,
    /// `.disconnected` (the link went down), `.timeout`.
    public func openL2CAPChannel(_ psm: L2CAPPSM, security: L2CAPSecurity = .none, receiveMTU: Int? = nil,
                                 timeout: Duration = .seconds(30)) async throws -> L2CAPChannel {
        let end = ContinuousClock.now + timeout
        if let receiveMTU, !(L2CAPListener.mtuRange).contains(receiveMTU) {
            throw BluetoothError.invalidRequest("invalid receive MTU \(receiveMTU): an LE channel's MTU is 23 to 65535")
        }
        let what = "open an L2CAP channel to PSM \(psm) of \(identifier)"
        guard let device = info else { throw BluetoothError.deviceNotFound(identifier.description) }
        let central = central
        let adapterPath = path.parent
        guard let adapter = await central.mirror.loop.submit({ central.adapters.first { $0.path == adapterPath } }),
              let source = adapter.address
        else { throw BluetoothError.adapterNotFound(adapterPath?.lastComponent ?? "?") }
        if !device.connected {
            try await central.connect(self, timeout: end - ContinuousClock.now)
        }
        if security > .none, info?.paired != true, pairsOnDemand {
            Trace.log("l2cap: \(identifier) is not paired; pairing before a channel at \(security.rawValue)")
            try await pair(timeout: end - ContinuousClock.now)
        }
        let request = L2CAPConnectRequest(
            source: source, sourceType: adapter.addressType ?? .public, adapter: adapter.name, peer: identifier,
            peerType: device.addressType ?? .public, psm: psm, security: security, receiveMTU: receiveMTU, what: what)
        Trace.log("l2cap: connect \(adapter.name) -> \(identifier) (\(request.peerType.rawValue)) PSM \(psm), security \(security.rawValue)")
        return try await request.run(on: central.mirror.loop, timeout: end - ContinuousClock.now)
    }
}

/// One connect(2) of an L2CAP socket, on the loop: the socket is made,
/// bound to the adapter, given its security and MTU, and connected without
/// blocking; the loop's poll says when it is done (writable, or failed), a
/// loop timer when time is up.
struct L2CAPConnectRequest: Sendable {
    let source: BluetoothAddress
    let sourceType: AddressType
    let adapter: String
    let peer: BluetoothAddress
    let peerType: AddressType
    let psm: L2CAPPSM
    let security: L2CAPSecurity
    let receiveMTU: Int?
    let what: String

    /// The attempt's state, the loop's.
    private final class Attempt: Sendable {
        struct State {
            var socket: L2CAPSocket?
            var watch: EventLoop.WatchID?
            var timer: EventLoop.TimerID?
        }
        let state: LoopBound<State>
        init(loop: EventLoop) { state = LoopBound(State(), loop: loop) }

        /// Stops watching and timing; returns the socket, no longer the attempt's.
        func stop(on loop: EventLoop) -> L2CAPSocket? {
            if let watch = state.value.watch { loop.unwatch(watch) }
            if let timer = state.value.timer { loop.cancel(timer) }
            defer { state.value = State() }
            return state.value.socket
        }
    }

    func run(on loop: EventLoop, timeout: Duration) async throws -> L2CAPChannel {
        let answer = HandOff<L2CAPChannel>()
        let attempt = Attempt(loop: loop)
        loop.execute { start(attempt, loop: loop, timeout: timeout, answer: answer) }
        return try await withTaskCancellationHandler {
            try await answer.wait()
        } onCancel: {
            if answer.settle(.failure(CancellationError())) {
                loop.execute { attempt.stop(on: loop)?.close() }
            }
        }
    }

    private func start(_ attempt: Attempt, loop: EventLoop, timeout: Duration, answer: HandOff<L2CAPChannel>) {
        guard !answer.isSettled else { return }
        let socket: L2CAPSocket
        switch L2CAPSocket.make() {
        case .success(let made): socket = made
        case .failure(let error): answer.settle(.failure(error.bluetoothError(what))); return
        }
        func fail(_ error: BluetoothError) {
            _ = attempt.stop(on: loop)
            socket.close()
            answer.settle(.failure(error))
        }
        attempt.state.value.socket = socket
        var code = socket.bind(source, type: sourceType)
        if code != 0 { return fail(L2CAPErrno(code).bluetoothError("\(what): bind to \(adapter) (\(source))", binding: true)) }
        code = socket.setSecurity(security)
        if code != 0 { return fail(L2CAPErrno(code).bluetoothError("\(what): set security \(security.rawValue)")) }
        if let receiveMTU {
            code = socket.setReceiveMTU(UInt16(receiveMTU))
            if code != 0 { return fail(L2CAPErrno(code).bluetoothError("\(what): set the receive MTU")) }
        }
        code = socket.connect(peer, type: peerType, psm: psm.rawValue)
        if code != 0 && code != EINPROGRESS { return fail(L2CAPErrno(code).bluetoothError(what)) }
        attempt.state.value.timer = loop.schedule(after: timeout) {
            fail(.timeout("\(what): no answer within \(timeout)"))
        }
        attempt.state.value.watch = loop.watch(socket.fd, for: .writable) {
            let pending = socket.pendingError
            if pending != 0 { return fail(L2CAPErrno(pending).bluetoothError(what)) }
            guard let sendMTU = socket.sendMTU, let receiveMTU = socket.receiveMTU else {
                // Writable but not connected: a hang-up with no error.
                return fail(.disconnected("\(what): the channel closed while opening"))
            }
            _ = attempt.stop(on: loop)
            let link = socket.security ?? (security, 0)
            let engine = L2CAPChannelEngine(loop: loop, socket: socket, sendMTU: sendMTU, receiveMTU: receiveMTU,
                                            label: "the channel to PSM \(psm) of \(peer)")
            let channel = L2CAPChannel(engine: engine, peer: peer, peerAddressType: peerType, psm: psm, adapter: adapter,
                                       security: link.level, keySize: link.keySize)
            Trace.log("l2cap: open \(channel): MTU out \(sendMTU), in \(receiveMTU), security \(link.level.rawValue), key \(link.keySize)")
            if !answer.settle(.success(channel)) { engine.close() }
        }
    }
}
