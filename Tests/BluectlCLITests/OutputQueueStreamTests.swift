// OutputQueue.stream, the byte stream that must not lose a byte (`l2cap`'s
// received data), through a real pipe: a reader that stalls holds the
// producer back at `byteLimit`, and gets every byte once it reads; a reader
// that leaves closes the queue. The l2cap command end to end (a kernel
// L2CAP socket) is the lab's: Tests/Lab/checks/l2cap.py.

import Foundation
import Glibc
import Testing
import BluectlCore
@testable import BluectlCLI

/// `count` bytes that repeat nowhere short (an LCG), so a lost, doubled or reordered chunk shows.
private func noise(_ count: Int) -> [UInt8] {
    var x: UInt32 = 0x2545_f491
    return (0..<count).map { _ in
        x = x &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: x >> 24)
    }
}

/// A pipe whose write end the queue writes (one page of pipe buffer) and whose read end the test reads.
private func smallPipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { throw CocoaError(.fileWriteUnknown) }
    _ = fcntl(fds[1], 1031 /* F_SETPIPE_SZ */, 4096)
    return (fds[0], fds[1])
}

/// Reads `fd` to its end on a thread of its own, once `go` is signalled.
private final class PipeReader: Sendable {
    let go = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    /// What was read: the reader thread appends, the test reads once `done` (a lock, not the
    /// semaphore alone: TSan did not see the semaphore's ordering and reported the pair as a race).
    private let received = Locked<[UInt8]>([])
    var bytes: [UInt8] { received.withLock { $0 } }

    init(_ fd: Int32) {
        Thread.detachNewThread { [self] in
            go.wait()
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                received.withLock { $0 += buffer[0..<n] }
            }
            done.signal()
        }
    }
}

@Suite("OutputQueue.stream: bytes that must all go out, held back by a slow reader", .timeLimit(.minutes(2)))
struct OutputQueueStreamTests {
    init() { signal(SIGPIPE, SIG_IGN) }   // as bluectl runs: EPIPE, not a signal

    @Test("a reader that stalls: the producer is held back at byteLimit, hears of room only once the reader reads, and every byte arrives in order")
    func stalledReader() async throws {
        let (readEnd, writeEnd) = try smallPipe()
        defer { close(readEnd) }
        let limit = 64 << 10
        let queue = OutputQueue(fd: writeEnd, byteLimit: limit)
        let data = noise(1 << 20)
        let reader = PipeReader(readEnd)
        let room = DispatchSemaphore(value: 0)
        let counts = Locked((fulls: 0, rooms: 0, acceptedAtFirstFull: 0, waits: 0))
        let produced = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var offset = 0
            while offset < data.count {
                let end = min(offset + 672, data.count)   // an SDU's size
                let outcome = data[offset..<end].withUnsafeBytes { queue.stream($0) }
                offset = end
                if outcome == .full {
                    counts.withLock {
                        if $0.fulls == 0 { $0.acceptedAtFirstFull = offset }
                        $0.fulls += 1
                    }
                    queue.whenRoom {
                        counts.withLock { $0.rooms += 1 }
                        room.signal()
                    }
                    counts.withLock { $0.waits += 1 }
                    room.wait()
                }
            }
            produced.signal()
        }
        // The reader reads nothing yet: the producer fills the queue and stops, waiting for room,
        // and the writer fills the pipe and can write no more (nothing can move until the reader reads).
        #expect(await waitFor { counts.withLock { $0.waits } == 1 && !writable(writeEnd) })
        let stalled = counts.withLock { $0 }
        #expect(stalled.rooms == 0, "room reported while nothing was read")
        #expect(stalled.fulls == 1, "the producer went on past .full")
        // At most byteLimit waited (plus the one page the pipe took and the last SDU).
        #expect(stalled.acceptedAtFirstFull >= limit && stalled.acceptedAtFirstFull < limit + 4096 + 672,
                "\(stalled.acceptedAtFirstFull) bytes taken before .full")
        reader.go.signal()
        await wait(produced)
        #expect(await queue.finish() == false, "the reader is still there")
        close(writeEnd)
        await wait(reader.done)
        #expect(reader.bytes.count == data.count)
        #expect(reader.bytes == data, "a byte lost, doubled or out of order")
        let final = counts.withLock { $0 }
        #expect(final.fulls > 1 && final.rooms == final.fulls, "1 MiB through 64 KiB: held back again and again, each time resumed")
        #expect(queue.writeFailure == nil)
    }

    @Test("the reader leaves while the producer is held back: the queue closes (.closed, EPIPE), readerGone returns true, no room is ever reported")
    func readerGoneWhileHeldBack() async throws {
        let (readEnd, writeEnd) = try smallPipe()
        defer { close(writeEnd) }
        let queue = OutputQueue(fd: writeEnd, byteLimit: 8192)
        let chunk = noise(1000)
        var outcome = OutputQueue.Outcome.queued
        for _ in 0..<20 where outcome != .full {
            outcome = chunk.withUnsafeBytes { queue.stream($0) }
        }
        #expect(outcome == .full)
        let rooms = Locked(0)
        queue.whenRoom { rooms.withLock { $0 += 1 } }
        close(readEnd)
        #expect(await queue.readerGone(), "the reader's leaving is seen without another write")
        #expect(chunk.withUnsafeBytes { queue.stream($0) } == .closed)
        #expect(queue.writeFailure == EPIPE)
        queue.whenRoom { rooms.withLock { $0 += 1 } }
        #expect(rooms.withLock { $0 } == 0)
        #expect(await queue.finish() == true)
    }

    /// Whether `fd` (a pipe's write end) has room for a write now.
    private func writable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLOUT) != 0
    }

    /// Polls `condition` every 10 ms for up to 20 s.
    private func waitFor(_ condition: @Sendable () -> Bool) async -> Bool {
        for _ in 0..<2000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    /// Waits for `semaphore` without holding a thread of the cooperative pool.
    private func wait(_ semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                semaphore.wait()
                continuation.resume()
            }
        }
    }
}
