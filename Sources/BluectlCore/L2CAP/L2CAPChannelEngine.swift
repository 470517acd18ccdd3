import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif

/// The loop's side of an open L2CAP channel: its socket, watched in the
/// event loop's poll beside the bus (as an AcquireNotify socket is), what
/// was received and not yet taken, what is to be sent and not yet written,
/// and who waits for either. Everything here runs on the loop; the
/// channel's async API hands requests over (`L2CAPChannel`).
///
/// Back-pressure both ways, with bounded buffers: reading stops while
/// `inboxLimit` bytes wait for the consumer (the kernel's buffer and the
/// peer's LE credits then hold the peer back; but see docs/l2cap.md for
/// what Linux 6.1 does when that buffer fills), and a sender waits
/// while `outboxLimit` bytes wait for the socket (the socket takes more
/// once the peer grants credits and the controller has sent).
package final class L2CAPChannelEngine: Sendable {
    let loop: EventLoop
    let socket: L2CAPSocket
    let sendMTU: Int
    let receiveMTU: Int
    /// What it says in errors: "channel to PSM 0x0080 of AA:…".
    let label: String
    private let state: LoopBound<State>

    /// Bytes received and not yet taken above which the socket is not read.
    let inboxLimit: Int
    /// Bytes handed in and not yet written above which senders wait.
    let outboxLimit: Int

    struct State {
        var closed = false
        var readWatch: EventLoop.WatchID?
        var writeWatch: EventLoop.WatchID?
        /// SDUs received, oldest first, and their bytes.
        var inbox: [[UInt8]] = []
        var inboxBytes = 0
        /// Called once when SDUs or the end arrive (one consumer).
        var onReceived: (() -> Void)?
        /// SDUs to send, oldest at `outboxHead`, and their bytes.
        var outbox: [[UInt8]] = []
        var outboxHead = 0
        var outboxBytes = 0
        /// Called once the outbox is under its limit again (or the channel ended).
        var roomWaiters: [() -> Void] = []
        /// Called once the outbox is empty (or the channel ended).
        var drainWaiters: [() -> Void] = []
        /// Why nothing more comes: nil while open; `.success`: the peer (or
        /// `close`) ended it; a failure: the socket's error.
        var end: Result<Void, BluetoothError>?
        var received = 0
        var sent = 0
        var buffer: [UInt8] = []
    }

    init(loop: EventLoop, socket: L2CAPSocket, sendMTU: Int, receiveMTU: Int, label: String,
         inboxLimit: Int = 1 << 20, outboxLimit: Int = 256 * 1024) {
        self.loop = loop
        self.socket = socket
        self.sendMTU = max(1, sendMTU)
        self.receiveMTU = max(1, receiveMTU)
        self.label = label
        self.inboxLimit = inboxLimit
        self.outboxLimit = outboxLimit
        state = LoopBound(State(), loop: loop)
    }

    // MARK: - Receiving (loop only)

    /// Starts reading (once the channel is handed out).
    func start() {
        socket.enlargeReceiveBuffer()
        state.value.buffer = [UInt8](repeating: 0, count: receiveMTU)
        watchReadable()
    }

    private func watchReadable() {
        guard state.value.readWatch == nil, !state.value.closed, state.value.end == nil else { return }
        state.value.readWatch = loop.watch(socket.fd) { [self] in readable() }
    }

    private func unwatchReadable() {
        if let id = state.value.readWatch { loop.unwatch(id) }
        state.value.readWatch = nil
    }

    /// Reads what is there: at most 64 SDUs a turn (the bus waits meanwhile),
    /// stopping at the inbox's limit.
    private func readable() {
        var got = false
        for _ in 0..<64 {
            if state.value.inboxBytes >= inboxLimit {
                unwatchReadable()
                break
            }
            let result = state.value.buffer.withUnsafeMutableBytes { socket.receive(into: $0) }
            switch result {
            case .success(0):
                finish(.success(()))
                got = true
                break
            case .success(let n):
                state.value.inbox.append(Array(state.value.buffer[0..<n]))
                state.value.inboxBytes += n
                state.value.received += n
                got = true
                continue
            case .failure(let error) where error.code == EINTR:
                continue
            case .failure(let error) where error.wouldBlock:
                break
            case .failure(let error):
                finish(.failure(error.bluetoothError(label)))
                got = true
                break
            }
            break
        }
        if got { wakeReceiver() }
    }

    private func wakeReceiver() {
        guard let wake = state.value.onReceived else { return }
        state.value.onReceived = nil
        wake()
    }

    /// Takes every SDU received so far; `[]` with `end` set: nothing more
    /// will come. With none there and the channel open, `onReceived` is
    /// called when there are (then take again).
    func take(orWhenReceived onReceived: @escaping () -> Void) -> (sdus: [[UInt8]], end: Result<Void, BluetoothError>?)? {
        if !state.value.inbox.isEmpty {
            let sdus = state.value.inbox
            state.value.inbox = []
            state.value.inboxBytes = 0
            watchReadable()
            return (sdus, nil)
        }
        if let end = state.value.end { return ([], end) }
        state.value.onReceived = onReceived
        return nil
    }

    /// Forgets a consumer that stopped waiting.
    func cancelWaitingForData() {
        state.value.onReceived = nil
    }

    // MARK: - Sending (loop only)

    package enum Offer {
        /// Taken; `room`: whether more may be offered now (else wait for `whenRoom`).
        case taken(room: Bool)
        /// The channel has ended: nothing more is sent.
        case ended(BluetoothError)
    }

    /// Queues `bytes` as SDUs of at most the send MTU (so an offer of at
    /// most that many bytes is one SDU) and writes what the socket takes.
    func offer(_ bytes: some Collection<UInt8>) -> Offer {
        if let refusal = refusalToSend { return .ended(refusal) }
        var start = bytes.startIndex
        while start != bytes.endIndex {
            let end = bytes.index(start, offsetBy: sendMTU, limitedBy: bytes.endIndex) ?? bytes.endIndex
            state.value.outbox.append(Array(bytes[start..<end]))
            start = end
        }
        state.value.outboxBytes += bytes.count
        flush()
        if let refusal = refusalToSend { return .ended(refusal) }
        return .taken(room: state.value.outboxBytes < outboxLimit)
    }

    /// Why nothing can be sent any more, if so.
    private var refusalToSend: BluetoothError? {
        switch state.value.end {
        case nil: return state.value.closed ? .disconnected("\(label) is closed") : nil
        case .success: return .disconnected("\(label) was closed by the device")
        case .failure(let error): return error
        }
    }

    /// Calls `body` once senders may offer more (or the channel ended).
    func whenRoom(_ body: @escaping () -> Void) {
        if state.value.outboxBytes < outboxLimit || refusalToSend != nil { return body() }
        state.value.roomWaiters.append(body)
    }

    /// Calls `body` once everything offered is written to the socket (or the channel ended).
    func whenDrained(_ body: @escaping () -> Void) {
        if state.value.outboxBytes == 0 || refusalToSend != nil { return body() }
        state.value.drainWaiters.append(body)
    }

    /// Writes SDUs until the socket is full (then waits for POLLOUT) or none are left.
    private func flush() {
        while state.value.outboxHead < state.value.outbox.count, !state.value.closed {
            let result = state.value.outbox[state.value.outboxHead].withUnsafeBytes { socket.send($0) }
            switch result {
            case .success(let n):
                state.value.outboxHead += 1
                state.value.outboxBytes -= n
                state.value.sent += n
            case .failure(let error) where error.code == EINTR:
                continue
            case .failure(let error) where error.wouldBlock:
                if state.value.writeWatch == nil {
                    state.value.writeWatch = loop.watch(socket.fd, for: .writable) { [self] in flush() }
                }
                notifySenders()
                return
            case .failure(let error):
                finish(.failure(error.bluetoothError(label)))
                return
            }
        }
        if state.value.outboxHead == state.value.outbox.count {
            state.value.outbox.removeAll(keepingCapacity: true)
            state.value.outboxHead = 0
            if let id = state.value.writeWatch { loop.unwatch(id) }
            state.value.writeWatch = nil
        } else if state.value.outboxHead > 256 {
            state.value.outbox.removeFirst(state.value.outboxHead)
            state.value.outboxHead = 0
        }
        notifySenders()
    }

    private func notifySenders() {
        let ended = refusalToSend != nil
        if ended || state.value.outboxBytes < outboxLimit, !state.value.roomWaiters.isEmpty {
            let waiters = state.value.roomWaiters
            state.value.roomWaiters = []
            for waiter in waiters { waiter() }
        }
        if ended || state.value.outboxBytes == 0, !state.value.drainWaiters.isEmpty {
            let waiters = state.value.drainWaiters
            state.value.drainWaiters = []
            for waiter in waiters { waiter() }
        }
    }

    // MARK: - The end (loop only)

    /// Bytes handed in and not yet written to the socket.
    var queuedBytes: Int { state.value.outboxBytes }

    /// Whether the channel has not ended (nor been closed).
    var isOpen: Bool { state.value.end == nil && !state.value.closed }

    /// The bytes written to and read from the socket so far.
    var counts: (sent: Int, received: Int) { (state.value.sent, state.value.received) }

    /// The kernel's bytes not yet handed to the controller (nil: it cannot
    /// say; 0 once the channel ended: nothing more goes out).
    var unsentInKernel: Int? { state.value.closed || state.value.end != nil ? 0 : socket.unsentBytes }

    /// The channel ended (the peer closed it, or the socket failed): stop
    /// watching, wake everyone waiting. The socket stays open until `close`
    /// (what was received is still taken).
    private func finish(_ end: Result<Void, BluetoothError>) {
        guard state.value.end == nil else { return }
        state.value.end = end
        unwatchReadable()
        if let id = state.value.writeWatch { loop.unwatch(id) }
        state.value.writeWatch = nil
        notifySenders()
        wakeReceiver()
    }

    /// Closes the socket (the kernel disconnects the channel); what was not
    /// written is dropped. Received SDUs not yet taken can still be taken.
    func close() {
        guard !state.value.closed else { return }
        finish(.success(()))
        state.value.closed = true
        state.value.outbox = []
        state.value.outboxHead = 0
        state.value.outboxBytes = 0
        socket.close()
    }
}
