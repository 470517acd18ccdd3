import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// Standard output for the streaming commands (`scan`, `subscribe`,
/// `serve`, `advertise`): whoever has a line (the central's event loop,
/// where a value or an advertisement arrives, or a task) hands its bytes to
/// a bounded queue and goes on; a writer thread of its own writes them in
/// arrival order. Nothing that produces lines ever makes a system call on
/// stdout, so a slow or stopped reader never holds up the D-Bus side (where
/// bluetoothd would otherwise queue, and eventually drop, signals for us).
///
/// The policy when the reader is slower than the lines (documented in
/// docs/output.md): at most `capacity` lines wait (the pipe's own buffer
/// comes on top); a line that finds the queue full is dropped and counted,
/// nothing is lost silently: the drop is said on stderr when it starts, the
/// count goes into the stream as a line of its own (`gapLine`) once there is
/// room again, and `finish()` says the total on stderr.
///
/// The reader going away is noticed at once, even while nothing is written:
/// the writer waits in poll(2) on stdout as well as on its wake-up, and Linux
/// reports POLLERR on a pipe's write end when its read end closes (POLLHUP on
/// a socket or terminal whose other side went). A write that meets EPIPE
/// (SIGPIPE is ignored) does the same. Then the queue closes (`enqueue`
/// answers `.closed`) and `readerGone()` returns, which the command awaits
/// to end at once (status 141).
///
/// A byte stream that must not lose a byte (`l2cap`'s received data) goes
/// through `stream(_:)` instead: never dropped, bounded by holding the
/// producer back. Past `byteLimit` bytes not yet written it answers `.full`
/// (the bytes are taken all the same), and the producer stops producing
/// until `whenRoom` calls it back, once the writer has brought what waits
/// down to half of `byteLimit`.
public final class OutputQueue: Sendable {
    public enum Outcome: Sendable, Equatable {
        case queued
        /// Queue full: the line was counted as dropped.
        case dropped
        /// The reader went away (or `close()` ran).
        case closed
        /// `stream(_:)`: taken, and `byteLimit` bytes now wait: produce no
        /// more until `whenRoom` calls back.
        case full
    }

    private struct State {
        /// Queued lines, back to back (one buffer: no allocation per line).
        var pending: [UInt8] = []
        /// Lines in `pending` (the capacity counts lines).
        var lines = 0
        /// Bytes the writer has taken from `pending` and not yet written.
        var inHand = 0
        /// A producer of `stream` held back: called once the bytes waiting
        /// are down to `byteLimit / 2` (or the queue ended).
        var roomWaiter: (@Sendable () -> Void)?
        /// Dropped since the last report.
        var unreported = 0
        var droppedTotal = 0
        /// No more lines are taken (`close()`, or the reader went away).
        var closed = false
        /// The writer has lines in hand or lingers for more (producers need not wake it).
        var writing = false
        /// Why the last write failed, or the reader was seen gone (EPIPE).
        var writeError: Int32?
        /// Lines for stderr, written by the writer thread.
        var notices: [String] = []

        /// Queues the line that reports the drops not yet reported (when
        /// the stream has a format for it) and counts them reported.
        mutating func queueGapReport(_ gapLine: (Int) -> [UInt8]?) {
            guard unreported > 0 else { return }
            if let gap = gapLine(unreported) {
                pending.append(contentsOf: gap)
                lines += 1
            }
            unreported = 0
        }
    }

    public let capacity: Int
    /// `stream`: bytes not yet written (queued or in the writer's hand)
    /// from which it answers `.full`.
    public let byteLimit: Int
    /// Milliseconds the writer waits for more after a write before it goes
    /// idle (and a producer must wake it).
    private let linger: Int32
    private let fd: Int32
    /// The one lock of the command line: the hand-off of bytes from whoever
    /// produces lines to the writer thread (any thread may produce a line,
    /// and the writer must not wait for a task or the loop to take them).
    /// Held only to append or to take the whole queue.
    private let state = Locked(State())
    /// Wakes the writer from poll(2): a pipe (both ends non-blocking) a
    /// producer writes a byte into when it finds the writer idle, or with a notice.
    private let wake: (read: Int32, write: Int32)
    /// Whether stdout is a pipe: the writer then writes at most PIPE_BUF
    /// bytes after poll says there is room, which never blocks, so it stays
    /// free to write notices and to see the reader go.
    private let isPipe: Bool
    /// The line that reports `n` dropped lines in the stream's own format
    /// (nil: report on stderr only, e.g. for raw bytes).
    private let gapLine: @Sendable (Int) -> [UInt8]?
    /// Yields once when the reader is found gone; ends when the writer ends.
    private let gone: AsyncStream<Void>
    private let goneContinuation: AsyncStream<Void>.Continuation
    /// Ends when the writer has written everything (or the reader went away).
    private let done: AsyncStream<Void>
    private let doneContinuation: AsyncStream<Void>.Continuation

    /// `capacity`: lines waiting at most (the pipe's own buffer comes on
    /// top). `byteLimit`: bytes of `stream` waiting before it answers `.full`.
    /// `linger`: after a write, milliseconds the writer waits for more
    /// before going idle: what comes meanwhile goes out in one write, without
    /// a wake-up (a longer wait: fewer writes and wake-ups, later bytes).
    /// 5 ms by default: a line after a quiet spell is written at once, and
    /// one of a faster stream at most 5 ms late. Lingering 1 ms (before),
    /// the writer went idle between notifications that came 2–3 ms apart,
    /// and each value cost a wake-up of it and some five system calls
    /// (docs/benchmarks.md, 2026-11-28 evening).
    public init(fd: Int32 = 1, capacity: Int = 100_000, byteLimit: Int = 1 << 20, linger: Int32 = 5,
                gapLine: @escaping @Sendable (Int) -> [UInt8]? = { _ in nil }) {
        self.fd = fd
        self.linger = max(0, linger)
        self.capacity = max(1, capacity)
        self.byteLimit = max(2, byteLimit)
        self.gapLine = gapLine
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends {
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            }
        }
        wake = (ends[0], ends[1])
        var info = stat()
        isPipe = fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO
        (gone, goneContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        (done, doneContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        startThread(name: "bluectl-output") { [self] in writerLoop() }
    }

    deinit {
        for end in [wake.read, wake.write] where end >= 0 { Glibc.close(end) }
    }

    /// Queues `text` plus a newline.
    @discardableResult
    public func line(_ text: String) -> Outcome {
        var text = text
        return text.withUTF8 { bytes in hand(.line(bytes)) }
    }

    /// Queues bytes as they are (one entry).
    @discardableResult
    public func enqueue(_ bytes: [UInt8]) -> Outcome {
        bytes.withUnsafeBufferPointer { hand(.bytes($0)) }
    }

    /// Queues bytes of a stream that must not lose any (no newline, not a
    /// line: never dropped, whatever `capacity` says). `.full`: taken, and
    /// `byteLimit` bytes wait; the caller stops producing until `whenRoom`.
    public func stream(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        hand(.stream(bytes))
    }

    /// Calls `body` (on the writer thread, or here at once) when the bytes
    /// waiting are down to half of `byteLimit`. One waiter: a later one
    /// replaces it. Once the reader has gone, or everything was written
    /// after `close()`, never (nothing more is taken).
    public func whenRoom(_ body: @escaping @Sendable () -> Void) {
        hand(.roomWaiter(body))
    }

    /// Says `text` on stderr (`Output.error`) from the writer thread, so
    /// that the caller (the loop, where a sequence gap is found) makes no
    /// system call; directly once the queue is closed.
    public func notice(_ text: String) {
        if hand(.notice(text)) == .closed { Output.error(text) }
    }

    /// Stops taking lines (a last gap report is queued first); the writer
    /// goes on writing what is queued. Never waits.
    public func close() {
        hand(.close)
    }

    /// What a producer hands the writer: everything that reaches the
    /// writer from outside goes through `hand(_:)`, the one place that
    /// takes the lock on the producers' side.
    private enum Handed {
        /// A line: the bytes and a newline; dropped (and counted) when `capacity` lines wait.
        case line(UnsafeBufferPointer<UInt8>)
        /// Bytes as they are, as one line.
        case bytes(UnsafeBufferPointer<UInt8>)
        /// Bytes never dropped: `.full` past `byteLimit`.
        case stream(UnsafeRawBufferPointer)
        /// A line for stderr.
        case notice(String)
        /// Call back when there is room (`whenRoom`).
        case roomWaiter(@Sendable () -> Void)
        /// No more: `close()`.
        case close
    }

    @discardableResult
    private func hand(_ handed: Handed) -> Outcome {
        var roomNow: (@Sendable () -> Void)?
        let (outcome, signal) = state.withLock { s -> (Outcome, Bool) in
            // A writer that is writing (or lingering) comes back for more by
            // itself: wake it only from idle (a wake-up per line cost more than the write).
            let idle = s.pending.isEmpty && !s.writing
            switch handed {
            case .roomWaiter(let body):
                // (Taken after `close()` too: the writer still reports room until it ends.)
                if s.writeError != nil { return (.closed, false) }
                if s.pending.count + s.inHand <= byteLimit / 2 { roomNow = body } else { s.roomWaiter = body }
                return (.queued, false)
            case .close:
                if s.closed { return (.closed, false) }
                s.queueGapReport(gapLine)
                s.closed = true
                return (.queued, true)
            case .notice(let text):
                if s.closed { return (.closed, false) }
                s.notices.append(text)
                return (.queued, true)
            case .stream(let bytes):
                if s.closed { return (.closed, false) }
                s.pending.append(contentsOf: bytes)
                return (s.pending.count + s.inHand >= byteLimit ? .full : .queued, idle)
            case .line(let bytes), .bytes(let bytes):
                if s.closed { return (.closed, false) }
                guard s.lines < capacity else {
                    s.unreported += 1
                    s.droppedTotal += 1
                    guard s.unreported == 1 else { return (.dropped, false) }
                    s.notices.append("output is too slow: the queue of \(capacity) lines is full, dropping values (each is counted)")
                    return (.dropped, true)
                }
                var signal = idle
                if s.unreported > 0 {
                    s.notices.append("output resumed after \(s.unreported) dropped \(s.unreported == 1 ? "value" : "values")")
                    s.queueGapReport(gapLine)
                    signal = true
                }
                s.pending.append(contentsOf: bytes)
                if case .line = handed { s.pending.append(0x0a) }
                s.lines += 1
                return (.queued, signal)
            }
        }
        if signal { wakeWriter() }
        roomNow?()
        return outcome
    }

    /// The writer has written `count` of the bytes in its hand: a producer
    /// held back hears when there is room again.
    private func wrote(_ count: Int) {
        let waiter = state.withLock { s -> (@Sendable () -> Void)? in
            s.inHand -= count
            guard s.roomWaiter != nil, s.pending.count + s.inHand <= byteLimit / 2 else { return nil }
            defer { s.roomWaiter = nil }
            return s.roomWaiter
        }
        waiter?()
    }

    private func wakeWriter() {
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)   // a full pipe is a wake-up already pending
    }

    /// Closes, then waits until everything queued is written or the reader
    /// went away (the caller bounds the wait: `Deadline.run`), and says on
    /// stderr how many lines were dropped in all, if any. Returns whether
    /// the reader went away.
    @discardableResult
    public func finish() async -> Bool {
        close()
        for await _ in done {}
        let (total, error) = status
        if total > 0 { Output.error("\(total) \(total == 1 ? "value was" : "values were") dropped in all: output too slow") }
        return error != nil
    }

    /// Why writing failed (errno: EPIPE when the reader went away), once it did.
    public var writeFailure: Int32? { status.error }

    /// Lines dropped in all, and why writing failed: what `finish` reports.
    private var status: (dropped: Int, error: Int32?) { state.withLock { ($0.droppedTotal, $0.writeError) } }

    /// Runs `body` until it ends, or until stdout's reader goes away: then
    /// `body` is cancelled and this throws the quiet 141 (`.brokenPipe`).
    /// Uses `readerGone()`: one such wait per queue.
    public func endingWhenReaderGone<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask { [self] in
                if await readerGone() { throw CLIFailure(.brokenPipe, "") }
                return nil
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let value = next { return value }
            }
            throw CancellationError()   // not reached: `body` answers first unless the reader went
        }
    }

    /// Returns when the reader has gone away (true), or when the writer
    /// ended without that (false: everything written). One waiter only.
    public func readerGone() async -> Bool {
        for await _ in gone { return true }
        return false
    }

    // MARK: - The writer thread

    private enum Step {
        case write
        /// Nothing queued just now: wait `linger` ms for more before going idle.
        case linger
        case idle
        /// Everything written after `close()`, or the reader gone (true).
        case end(readerGone: Bool)
    }

    private func writerLoop() {
        // Two buffers change places: the writer writes one while lines go
        // into the other, and both keep their capacity.
        var batch: [UInt8] = []
        var lingered = false
        /// Why stdout failed (EPIPE: the reader went away), to record.
        var failure: Int32?
        while true {
            var notices: [String] = []
            let step = state.withLock { s -> Step in
                swap(&notices, &s.notices)
                if let failure, s.writeError == nil {
                    // Nothing more is taken or written.
                    s.writeError = failure
                    s.closed = true
                    s.pending = []
                    s.lines = 0
                    s.inHand = 0
                    s.writing = false
                    s.roomWaiter = nil
                }
                if s.writeError != nil { return .end(readerGone: true) }
                if !s.pending.isEmpty {
                    swap(&batch, &s.pending)
                    s.lines = 0
                    s.inHand = batch.count
                    s.writing = true
                    return .write
                }
                if s.closed {
                    s.roomWaiter = nil
                    return .end(readerGone: false)
                }
                // After a write, linger (`linger` ms; still `writing`, so
                // nobody wakes us) before going idle: in a burst the next
                // lines come meanwhile and go out together, instead of a
                // wake-up and a write every few lines.
                if s.writing, !lingered { return .linger }
                s.writing = false
                return .idle
            }
            for notice in notices { Output.error(notice) }
            switch step {
            case .write:
                lingered = false
                if !write(batch) { failure = errno }
                // Keep a small buffer's room; give a burst's back.
                if batch.capacity > 1 << 20 { batch = [] } else { batch.removeAll(keepingCapacity: true) }
            case .linger:
                lingered = true
                if !waitForWork(timeout: linger) { failure = EPIPE }
            case .idle:
                lingered = false
                if !waitForWork(timeout: -1) { failure = EPIPE }
            case .end(let readerGone):
                if readerGone { goneContinuation.yield() }
                goneContinuation.finish()
                doneContinuation.finish()
                return
            }
        }
    }

    /// Writes `bytes` whole; false when the reader went away (or any
    /// other write error). To a pipe, only as much as poll says fits.
    private func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                // (A file or terminal: 64 KiB at a time, so that a held-back
                // `stream` producer hears of the progress.)
                if isPipe, !waitForRoom() {
                    errno = EPIPE
                    return false
                }
                let chunk = min(isPipe ? Int(PIPE_BUF) : 1 << 16, buffer.count - offset)
                guard Output.writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + chunk])) else { return false }
                offset += chunk
                wrote(chunk)
            }
            return true
        }
    }

    /// Waits until the pipe has room (POLLOUT: a free page, so PIPE_BUF
    /// bytes go in without blocking), writing notices meanwhile; false when
    /// the reader went away.
    private func waitForRoom() -> Bool {
        while true {
            var fds = [pollfd(fd: fd, events: Int16(POLLOUT), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue }; return false }
            if fds[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return false }
            if fds[1].revents & Int16(POLLIN) != 0 {
                drainWake()
                let notices = state.withLock { s -> [String] in
                    defer { s.notices = [] }
                    return s.notices
                }
                for notice in notices { Output.error(notice) }
            }
            if fds[0].revents & Int16(POLLOUT) != 0 { return true }
        }
    }

    /// Sleeps until a producer wakes the writer or `timeout` ms pass (-1:
    /// no limit), watching stdout for its reader going away; false when it did.
    private func waitForWork(timeout: Int32) -> Bool {
        while true {
            var fds = [pollfd(fd: fd, events: 0, revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            // (Without a wake-up pipe, which pipe(2) may refuse, look every millisecond.)
            let n = poll(&fds, 2, wake.read < 0 ? 1 : timeout)
            if n < 0 { if errno == EINTR { continue }; return true }
            if fds[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return false }
            if fds[1].revents & Int16(POLLIN) != 0 { drainWake() }
            return true
        }
    }

    private func drainWake() {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while read(wake.read, &bytes, 32) == 32 {}
    }
}
