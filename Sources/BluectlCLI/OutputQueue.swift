import BluectlCore
import Dispatch
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Standard output for event streams (`subscribe`, `scan`): lines wait in a
/// bounded queue and a writer thread of their own writes them in arrival
/// order, so a slow or stopped reader never holds up the D-Bus side (where
/// bluetoothd would otherwise queue, and eventually drop, signals for us).
///
/// When lines come one at a time (none in the last millisecond), nothing is
/// queued and stdout can take the line at once (poll says writable, and the
/// line is at most PIPE_BUF bytes, so the write cannot block), the producer
/// writes it itself: one write instead of a wake-up of the writer thread and
/// a context switch per line, which at a paced stream (a notification every
/// few milliseconds) was most of subscribe's CPU. In a burst the writer
/// thread writes them in batches as before.
///
/// Nothing is lost silently: when the queue is full a line is dropped and
/// counted, and the count is reported — on stderr, and as a line of its own
/// in the stream (`gapLine`) once there is room again. A reader that goes
/// away (EPIPE; SIGPIPE is ignored) closes the queue: `enqueue` then returns
/// `.closed` and the command stops quietly.
public final class OutputQueue: Sendable {
    public enum Outcome: Sendable, Equatable {
        case queued
        /// Queue full: the line was counted as dropped.
        case dropped
        /// The reader went away (or `close()` ran).
        case closed
    }

    private struct State {
        /// Queued lines, back to back (one buffer: no allocation per line).
        var pending: [UInt8] = []
        /// Lines in `pending` (the capacity counts lines).
        var lines = 0
        /// Dropped since the last report.
        var unreported = 0
        var droppedTotal = 0
        var closed = false
        var writing = false
        var writeError: Int32?
        /// When the last line came (a burst goes to the writer thread).
        var lastLine = ContinuousClock.now - .seconds(1)
    }

    public let capacity: Int
    private let fd: Int32
    private let state = Locked(State())
    private let wakeWriter = DispatchSemaphore(value: 0)
    private let drained = DispatchSemaphore(value: 0)
    /// The line that reports `n` dropped lines in the stream's own format
    /// (nil: report on stderr only, e.g. for raw bytes).
    private let gapLine: @Sendable (Int) -> [UInt8]?

    /// `capacity`: lines waiting at most (the pipe's own buffer comes on top).
    public init(fd: Int32 = 1, capacity: Int = 100_000, gapLine: @escaping @Sendable (Int) -> [UInt8]? = { _ in nil }) {
        self.fd = fd
        self.capacity = max(1, capacity)
        self.gapLine = gapLine
        startThread(name: "bluectl-output") { [self] in writerLoop() }
    }

    /// Queues `text` plus a newline.
    @discardableResult
    public func line(_ text: String) -> Outcome {
        var text = text
        return text.withUTF8 { bytes in append(bytes, newline: true) }
    }

    /// Queues bytes as they are (one entry).
    @discardableResult
    public func enqueue(_ bytes: [UInt8]) -> Outcome {
        bytes.withUnsafeBufferPointer { append($0, newline: false) }
    }

    private func append(_ bytes: UnsafeBufferPointer<UInt8>, newline: Bool) -> Outcome {
        var wake = false
        let (outcome, report) = state.withLock { s -> (Outcome, Int?) in
            if s.closed { return (.closed, nil) }
            guard s.lines < capacity else {
                s.unreported += 1
                s.droppedTotal += 1
                return (.dropped, s.unreported == 1 ? 0 : nil)
            }
            let now = ContinuousClock.now
            let paced = now - s.lastLine > .milliseconds(1)
            s.lastLine = now
            if paced, s.pending.isEmpty, !s.writing, s.unreported == 0, bytes.count < Int(PIPE_BUF), canWriteNow() {
                if writeNow(bytes, newline: newline) { return (.queued, nil) }
                s.writeError = errno
                s.closed = true
                return (.closed, nil)
            }
            // A writer that is writing comes back for more by itself: wake
            // it only from idle (a futex wake per line cost more than the write).
            wake = s.pending.isEmpty && !s.writing
            var report: Int?
            if s.unreported > 0, let gap = gapLine(s.unreported) {
                s.pending.append(contentsOf: gap)
                s.lines += 1
                report = s.unreported
                s.unreported = 0
            }
            s.pending.append(contentsOf: bytes)
            if newline { s.pending.append(0x0a) }
            s.lines += 1
            return (.queued, report)
        }
        switch (outcome, report) {
        case (.dropped, 0?):
            Output.error("output is too slow: the queue of \(capacity) lines is full, dropping values (each is counted)")
        case (.queued, let n?):
            Output.error("output resumed after \(n) dropped \(n == 1 ? "value" : "values")")
        default: break
        }
        if wake { wakeWriter.signal() }
        return outcome
    }

    /// Whether `fd` takes a write now without blocking (a pipe with a free
    /// page, a terminal not stopped, a regular file).
    private func canWriteNow() -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return poll(&p, 1, 0) == 1 && p.revents & Int16(POLLOUT) != 0 && p.revents & Int16(POLLERR | POLLHUP | POLLNVAL) == 0
    }

    /// One line straight to `fd` (under the state lock, so lines keep their order).
    private func writeNow(_ bytes: UnsafeBufferPointer<UInt8>, newline: Bool) -> Bool {
        guard newline else { return Output.writeAll(fd, UnsafeRawBufferPointer(bytes)) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bytes.count + 1) { line in
            _ = line.initialize(fromContentsOf: bytes)
            line[bytes.count] = 0x0a
            return Output.writeAll(fd, UnsafeRawBufferPointer(line))
        }
    }

    /// Lines dropped so far because the queue was full.
    public var droppedTotal: Int { state.withLock { $0.droppedTotal } }

    /// Whether the reader went away.
    public var readerGone: Bool { state.withLock { $0.writeError != nil } }

    /// Writes what is queued (and a last gap report), then stops accepting
    /// lines. Waits until everything is written or the reader went away;
    /// a signal's 2 s watchdog bounds this when stdout is stuck.
    public func finish() {
        let waiting = state.withLock { s -> Bool in
            if !s.closed, s.unreported > 0, let gap = gapLine(s.unreported) {
                s.pending.append(contentsOf: gap)
                s.lines += 1
                s.unreported = 0
            }
            s.closed = true
            return !s.pending.isEmpty || s.writing
        }
        wakeWriter.signal()
        if waiting { drained.wait() }
        let total = droppedTotal
        if total > 0 { Output.error("\(total) \(total == 1 ? "value was" : "values were") dropped in all: output too slow") }
    }

    /// `finish()` off the cooperative thread pool (it blocks until written).
    public func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            startThread(name: "bluectl-finish") { [self] in
                finish()
                continuation.resume()
            }
        }
    }

    private func writerLoop() {
        // Two buffers change places: the writer writes one while lines go
        // into the other, and both keep their capacity.
        var batch: [UInt8] = []
        while true {
            wakeWriter.wait()
            // After a write, linger a millisecond (still `writing`, so nobody
            // wakes us) before going idle: in a burst the next lines come
            // meanwhile and go out together, instead of a futex wake and a
            // write every few lines (that was 10 % of a scan burst's CPU).
            // Lines that come one at a time never wait for this: they are
            // written directly (`append`).
            var lingered = false
            while true {
                let got = state.withLock { s -> Bool? in
                    guard s.writeError == nil else {
                        s.writing = false
                        return false
                    }
                    if s.pending.isEmpty {
                        if s.writing, !lingered, !s.closed { return nil }
                        s.writing = false
                        return false
                    }
                    swap(&batch, &s.pending)
                    s.lines = 0
                    s.writing = true
                    return true
                }
                if got == nil {
                    lingered = true
                    usleep(1000)
                    continue
                }
                guard got == true else { break }
                lingered = false
                let ok = batch.withUnsafeBytes { Output.writeAll(fd, $0) }
                let code = errno
                // Keep a small buffer's room; give a burst's back.
                if batch.capacity > 1 << 20 { batch = [] } else { batch.removeAll(keepingCapacity: true) }
                if !ok {
                    state.withLock { s in
                        s.writeError = code
                        s.closed = true
                        s.pending = []
                        s.lines = 0
                        s.writing = false
                    }
                    break
                }
            }
            let done = state.withLock { $0.closed && $0.pending.isEmpty && !$0.writing }
            if done {
                drained.signal()
                return
            }
        }
    }
}
