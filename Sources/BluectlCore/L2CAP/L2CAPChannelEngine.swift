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
package final class L2CAPChannelEngine: LoopSender {
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
        /// A consumer on the loop (`deliver(to:onEnd:)`): each SDU as read,
        /// from the read buffer; false: stop (the channel is closed).
        var sink: ((UnsafeRawBufferPointer) -> Bool)?
        /// The sink's consumer hears the end here, once.
        var onEnd: ((Result<Void, BluetoothError>) -> Void)?
        /// After a read that found SDUs and then the socket empty, how long the
        /// socket is left before it is read again (`deliver(to:onEnd:batching:)`);
        /// zero: read at every wake-up.
        var batching: Duration = .zero
        /// The timer of such a wait, while one runs.
        var batchTimer: EventLoop.TimerID?
        /// The sink's consumer has no room: the socket is not read until
        /// `resumeReceiving` (the kernel's buffer, then the peer's credits, hold the peer back).
        var paused = false
        /// recv said 0 once: the next 0 is the end (what the kernel still
        /// queued comes in between).
        var endOnce = false
        /// The socket's error (ECONNRESET when the link went), taken by a
        /// recv or a send: nothing more is sent; what the kernel still
        /// queued is read first, then the channel ends with it.
        var failedOnce: L2CAPErrno?
        /// recv failed once: a second failure is the end.
        var recvFailed = false
        /// What was offered and not yet sent, an offer per element (cut
        /// into SDUs as it is sent: no array per SDU), oldest at
        /// `outboxHead`, of which `headSent` bytes are sent; and their bytes.
        var outbox: [[UInt8]] = []
        var outboxHead = 0
        var headSent = 0
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
        /// SDUs written.
        var sentSDUs = 0
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
        guard state.value.readWatch == nil, state.value.batchTimer == nil, !state.value.closed, state.value.end == nil,
              !state.value.paused else { return }
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
        /// SDUs read by this call, and whether it stopped at an empty socket.
        var read = 0, emptied = false
        for _ in 0..<64 {
            if state.value.inboxBytes >= inboxLimit || state.value.paused {
                unwatchReadable()
                break
            }
            let result = state.value.buffer.withUnsafeMutableBytes { socket.receive(into: $0) }
            switch result {
            case .success(0) where !state.value.endOnce && state.value.failedOnce == nil:
                // Linux reports the peer's disconnect (the socket's error,
                // ECONNRESET, taken by this recv) before the SDUs still
                // queued in the socket; the next recv returns them, and 0
                // again once there are none (docs/l2cap.md).
                state.value.endOnce = true
                continue
            case .success(0):
                finish(state.value.failedOnce.map { .failure($0.bluetoothError(label)) } ?? .success(()))
                got = true
            case .success(let n):
                read += 1
                state.value.received += n
                if let sink = state.value.sink {
                    // Straight from the read buffer: no copy, no hand-over.
                    let keep = state.value.buffer.withUnsafeBytes { sink(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                    if !keep { return close() }
                    continue
                }
                state.value.inbox.append(Array(state.value.buffer[0..<n]))
                state.value.inboxBytes += n
                got = true
                continue
            case .failure(let error) where error.code == EINTR:
                continue
            case .failure(let error) where error.wouldBlock:
                if let failure = state.value.failedOnce {
                    // the socket failed and nothing more is queued
                    finish(.failure(failure.bluetoothError(label)))
                    got = true
                } else {
                    emptied = true
                }
            case .failure(let error) where !state.value.recvFailed:
                // The socket's error comes before the SDUs still queued (as
                // the disconnect's 0 above, when the link went rather than
                // the channel): read those, then end with it.
                state.value.recvFailed = true
                if state.value.failedOnce == nil {
                    state.value.failedOnce = error
                    notifySenders()
                }
                continue
            case .failure(let error):
                finish(.failure((state.value.failedOnce ?? error).bluetoothError(label)))
                got = true
            }
            break
        }
        if emptied, read > 0, state.value.batching > .zero { waitForBatch() }
        if got { wakeReceiver() }
    }

    /// Leaves the socket unread for `batching` after a read that found SDUs
    /// and then nothing more: what comes meanwhile is read in one turn, not
    /// one wake-up of the loop per SDU (a wake-up, a context switch into the
    /// process, costs more than the reads: docs/benchmarks.md). Then reads;
    /// when that finds nothing, waits for the socket again.
    private func waitForBatch() {
        unwatchReadable()
        guard state.value.batchTimer == nil else { return }
        state.value.batchTimer = loop.schedule(after: state.value.batching) { [self] in
            state.value.batchTimer = nil
            guard !state.value.closed, state.value.end == nil, !state.value.paused else { return }
            readable()
            if state.value.batchTimer == nil { watchReadable() }
        }
    }

    private func wakeReceiver() {
        if let end = state.value.end, let onEnd = state.value.onEnd {
            state.value.onEnd = nil
            state.value.sink = nil
            onEnd(end)
        }
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

    /// Hands every SDU to `sink` on the loop as it is read (those already
    /// received first), instead of `take`: no copy into the inbox, no
    /// hand-over to another thread per SDU. `sink` holds the loop while it
    /// runs (a blocking consumer holds back the reading, and everything
    /// else on the loop); false from it closes the channel. `onEnd` hears
    /// the channel's end once, after the last SDU. `batching` (zero: none):
    /// after a read that found SDUs and then nothing more, the socket is
    /// left that long before it is read again (`waitForBatch`).
    func deliver(to sink: @escaping (UnsafeRawBufferPointer) -> Bool, onEnd: @escaping (Result<Void, BluetoothError>) -> Void,
                 batching: Duration = .zero) {
        state.value.sink = sink
        state.value.onEnd = onEnd
        state.value.batching = batching
        deliverWaiting()
    }

    /// Hands the sink what waits in the inbox (read before it came, or left
    /// there by a pause), oldest first, until it pauses; once nothing waits
    /// and it has not paused, the end if it came, else the socket's reading.
    private func deliverWaiting() {
        guard let sink = state.value.sink else { return }
        // Taken off the front in one go afterwards (not one removal per SDU: an inbox of a
        // megabyte of small SDUs would be moved once per SDU); nothing is appended meanwhile
        // (with a sink, what is read goes to it).
        var taken = 0
        while !state.value.paused, taken < state.value.inbox.count {
            let sdu = state.value.inbox[taken]
            taken += 1
            state.value.inboxBytes -= sdu.count
            guard sdu.withUnsafeBytes(sink) else {
                state.value.inbox.removeFirst(taken)
                return close()
            }
        }
        state.value.inbox.removeFirst(taken)
        guard state.value.inbox.isEmpty, !state.value.paused else { return }
        if state.value.end != nil { return wakeReceiver() }
        watchReadable()
    }

    /// Stops reading the socket until `resumeReceiving` (a sink's consumer
    /// that has no room, from inside the sink or after it): the SDU the sink
    /// is given is its last until then, the inbox's included.
    func pauseReceiving() {
        state.value.paused = true
        unwatchReadable()
    }

    /// Reads again after `pauseReceiving`: what waits in the inbox first.
    func resumeReceiving() {
        guard state.value.paused else { return }
        state.value.paused = false
        if state.value.sink != nil { return deliverWaiting() }
        watchReadable()
    }

    /// Forgets a consumer that stopped waiting.
    func cancelWaitingForData() {
        state.value.onReceived = nil
    }

    // MARK: - Sending (loop only)

    /// Queues `bytes` as SDUs of at most the send MTU (so an offer of at
    /// most that many bytes is one SDU) and writes what the socket takes.
    func offer(_ bytes: some Collection<UInt8>) -> SendOffer {
        if let refusal = refusalToSend { return .ended(refusal) }
        guard !bytes.isEmpty else { return .taken(room: state.value.outboxBytes < outboxLimit) }
        state.value.outbox.append(Array(bytes))
        state.value.outboxBytes += bytes.count
        flush()
        if let refusal = refusalToSend { return .ended(refusal) }
        return .taken(room: state.value.outboxBytes < outboxLimit)
    }

    /// Why nothing can be sent any more, if so.
    private var refusalToSend: BluetoothError? {
        switch state.value.end {
        case nil:
            if state.value.closed { return .disconnected("\(label) is closed") }
            return state.value.failedOnce?.bluetoothError(label)
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
            let head = state.value.outboxHead, from = state.value.headSent
            let result = state.value.outbox[head].withUnsafeBytes { offer in
                socket.send(UnsafeRawBufferPointer(rebasing: offer[from..<min(from + sendMTU, offer.count)]))
            }
            switch result {
            case .success(let n):
                state.value.headSent += n
                if state.value.headSent >= state.value.outbox[head].count {
                    state.value.outboxHead += 1
                    state.value.headSent = 0
                }
                state.value.outboxBytes -= n
                state.value.sent += n
                state.value.sentSDUs += 1
            case .failure(let error) where error.code == EINTR:
                continue
            case .failure(let error) where error.wouldBlock:
                if state.value.writeWatch == nil {
                    state.value.writeWatch = loop.watch(socket.fd, for: .writable) { [self] in flush() }
                }
                notifySenders()
                return
            case .failure(let error):
                // The socket's error, taken by this send (the link went): the
                // SDUs the kernel still queued to read come after it, so the
                // read side drains them and ends the channel with it.
                if state.value.failedOnce == nil { state.value.failedOnce = error }
                state.value.outbox = []
                state.value.outboxHead = 0
                state.value.headSent = 0
                state.value.outboxBytes = 0
                if let id = state.value.writeWatch { loop.unwatch(id) }
                state.value.writeWatch = nil
                notifySenders()
                if state.value.end == nil, !state.value.paused { readable() }
                return
            }
        }
        if state.value.outboxHead == state.value.outbox.count {
            state.value.outbox.removeAll(keepingCapacity: true)
            state.value.outboxHead = 0
            state.value.headSent = 0
            if let id = state.value.writeWatch { loop.unwatch(id) }
            state.value.writeWatch = nil
        } else if state.value.outboxHead > 64 {
            state.value.outbox.removeFirst(state.value.outboxHead)
            state.value.outboxHead = 0
        }
        notifySenders()
    }

    private func notifySenders() {
        let ended = refusalToSend != nil
        state.wake(\.roomWaiters, if: ended || state.value.outboxBytes < outboxLimit)
        state.wake(\.drainWaiters, if: ended || state.value.outboxBytes == 0)
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
        if let timer = state.value.batchTimer { loop.cancel(timer) }
        state.value.batchTimer = nil
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
        state.value.headSent = 0
        state.value.outboxBytes = 0
        socket.close()
    }
}

/// What became of bytes offered to a `LoopSender`.
package enum SendOffer {
    /// Taken; `room`: whether more may be offered now (else wait for `whenRoom`).
    case taken(room: Bool)
    /// The sender has ended: nothing more is sent.
    case ended(BluetoothError)
}

/// A sender whose queue lives on the event loop (an L2CAP channel's
/// socket, an AcquireWrite socket, WriteValue calls): bytes offered on the
/// loop, a bounded backlog, and waiters for room and for the backlog's end.
/// The async `send` on top is the one for all of them.
protocol LoopSender: AnyObject, Sendable {
    var loop: EventLoop { get }
    /// Queues `bytes` (cut into the sender's units); loop only.
    func offer(_ bytes: some Collection<UInt8>) -> SendOffer
    /// Calls `body` once more may be offered, or the sender ended; loop only.
    func whenRoom(_ body: @escaping () -> Void)
    /// Calls `body` once nothing offered waits to be handed on, or the sender ended; loop only.
    func whenDrained(_ body: @escaping () -> Void)
    /// Whether it still sends; loop only.
    var isOpenSender: Bool { get }
    /// The bytes and the units (SDUs, values) handed on so far; loop only.
    var sentCounts: (bytes: Int, units: Int) { get }
}

extension L2CAPChannelEngine {
    var isOpenSender: Bool { isOpen }
    var sentCounts: (bytes: Int, units: Int) { (state.value.sent, state.value.sentSDUs) }
}

extension LoopSender {
    /// Offers `bytes` from any task; returns once they are queued, having
    /// waited while the backlog was full. Throws once the sender has ended.
    func send(_ bytes: [UInt8]) async throws {
        let answer = HandOff<Void>()
        loop.execute { [self] in
            switch offer(bytes) {
            case .ended(let error): answer.settle(.failure(error))
            case .taken(room: true): answer.settle(.success(()))
            case .taken(room: false): whenRoom { answer.settle(.success(())) }
            }
        }
        try await withTaskCancellationHandler {
            try await answer.wait()
        } onCancel: {
            answer.settle(.failure(CancellationError()))
        }
    }

    /// Waits until `emptied`, asked on the loop now and then every 2 ms by a timer there (not a
    /// hop there and back and a task's sleep per question), answers: true (the kernel's queue
    /// of the socket is empty), false (the sender ended); nil is "not yet". False when cancelled.
    func whenKernelQueueEmpty(_ emptied: @escaping @Sendable () -> Bool?) async -> Bool {
        let answer = HandOff<Bool>()
        let loop = loop
        @Sendable func ask() {
            guard !answer.isSettled else { return }
            if let done = emptied() {
                answer.settle(.success(done))
            } else {
                _ = loop.schedule(after: .milliseconds(2)) { ask() }
            }
        }
        loop.execute { ask() }
        return await withTaskCancellationHandler {
            (try? await answer.wait()) ?? false
        } onCancel: {
            answer.settle(.failure(CancellationError()))
        }
    }

    /// Waits until the backlog is handed on (or the sender ended); false when cancelled.
    func drained() async -> Bool {
        let drained = HandOff<Void>()
        loop.execute { [self] in whenDrained { drained.settle(.success(())) } }
        do {
            try await withTaskCancellationHandler {
                try await drained.wait()
            } onCancel: {
                drained.settle(.failure(CancellationError()))
            }
            return true
        } catch {
            return false
        }
    }
}

extension LoopBound {
    /// When `due`, takes the waiters at `key` out of the value, then calls
    /// them (a waiter may offer more, or wait again). Loop only.
    func wake(_ key: WritableKeyPath<Value, [() -> Void]>, if due: Bool) {
        guard due, !value[keyPath: key].isEmpty else { return }
        let waiters = value[keyPath: key]
        value[keyPath: key] = []
        for waiter in waiters { waiter() }
    }
}

/// Appends `bytes` to `units` cut into pieces of at most `size` bytes (a
/// sender's SDUs or values: data of at most `size` bytes stays one).
func appendCut(_ bytes: some Collection<UInt8>, at size: Int, to units: inout [[UInt8]]) {
    var start = bytes.startIndex
    while start != bytes.endIndex {
        let end = bytes.index(start, offsetBy: size, limitedBy: bytes.endIndex) ?? bytes.endIndex
        units.append(Array(bytes[start..<end]))
        start = end
    }
}
