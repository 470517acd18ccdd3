// `serve`'s value updates from standard input, read on the central's event loop.

import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// The lines of standard input, each handed to `apply` on the central's
/// event loop: the loop's poll watches stdin beside the bus and reads what
/// is there when it is readable, so no thread blocks in read(2). When
/// `apply` has no room for a line (the bus is backed up), stdin is not
/// read until `waitForRoom` returns: a producer faster than bluetoothd is
/// held back by the pipe, and no update is dropped. The end of stdin ends
/// nothing but the reading.
final class StandardInputFeed: Sendable {
    /// Applies one line (numbered from 1, without its line break); false:
    /// no room now, the same line is offered again after `waitForRoom`.
    typealias Apply = @Sendable (_ line: String, _ number: Int) -> Bool

    private struct State {
        /// Bytes read after the last line break.
        var partial: [UInt8] = []
        /// Complete lines not yet applied.
        var lines: [String] = []
        var number = 0
        var watch: LoopWatch?
        /// stdin has ended (or failed), or `stop()` ran.
        var ended = false
        var waitingForRoom = false
    }

    private let fd: Int32
    private let central: CentralManager
    private let apply: Apply
    private let waitForRoom: @Sendable () async -> Void
    private let state: LoopBound<State>

    init(fd: Int32 = 0, central: CentralManager, apply: @escaping Apply, waitForRoom: @escaping @Sendable () async -> Void) {
        self.fd = fd
        self.central = central
        self.apply = apply
        self.waitForRoom = waitForRoom
        state = central.loopBound(State())
    }

    /// Starts reading.
    func start() {
        central.onLoopSoon { [self] in resume() }
    }

    /// Stops reading (what is read and not applied is left).
    func stop() {
        central.onLoopSoon { [self] in
            state.value.ended = true
            if let watch = state.value.watch { central.unwatch(watch) }
            state.value.watch = nil
        }
    }

    /// On the loop: reads what stdin has, then applies every complete line.
    private func readable() {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR || errno == EAGAIN { return }
        if n <= 0 {
            // The end (or an error: nothing more can be read): a last line without a line break counts.
            if !state.value.partial.isEmpty { state.value.lines.append(Self.text(state.value.partial)) }
            state.value.partial = []
            state.value.ended = true
            if let watch = state.value.watch { central.unwatch(watch) }
            state.value.watch = nil
        } else {
            var start = 0
            for i in 0..<n where chunk[i] == 0x0a {
                state.value.partial.append(contentsOf: chunk[start..<i])
                state.value.lines.append(Self.text(state.value.partial))
                state.value.partial = []
                start = i + 1
            }
            state.value.partial.append(contentsOf: chunk[start..<n])
        }
        applyLines()
    }

    /// On the loop: applies the lines read; at a line with no room, stops
    /// reading until `waitForRoom` returns.
    private func applyLines() {
        while let line = state.value.lines.first {
            guard apply(line, state.value.number + 1) else {
                if let watch = state.value.watch { central.unwatch(watch) }
                state.value.watch = nil
                state.value.waitingForRoom = true
                Task { [self] in
                    await waitForRoom()
                    central.onLoopSoon { [self] in
                        state.value.waitingForRoom = false
                        resume()
                    }
                }
                return
            }
            state.value.number += 1
            state.value.lines.removeFirst()
        }
    }

    /// On the loop: applies what waits, then reads on unless stdin ended.
    private func resume() {
        applyLines()
        guard !state.value.waitingForRoom, !state.value.ended, state.value.watch == nil else { return }
        state.value.watch = central.watch(fd) { [self] in readable() }
    }

    /// A line as `readLine(strippingNewline: true)` gives it: without a
    /// carriage return before the line break, invalid UTF-8 repaired.
    private static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.last == 0x0d ? bytes.dropLast() : bytes[...], as: UTF8.self)
    }
}
