// A file descriptor (stdin, or a file) copied into a sender on the central's
// event loop: `l2cap`'s stdin into the channel, `write --stream`'s input
// into the characteristic's writer.

import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads `fd` on the central's event loop (the loop's poll watches it
/// beside the bus, as `serve`'s `StandardInputFeed` does stdin) and offers
/// each read to a sender there. When the sender has no room, `fd` is not
/// read until it has, so a fast producer is held back by its pipe.
final class InputPump: Sendable {
    /// Offers bytes on the loop.
    typealias Offer = @Sendable (ArraySlice<UInt8>) -> SendOffer
    /// Calls its argument on the loop once more may be offered.
    typealias WhenRoom = @Sendable (@escaping () -> Void) -> Void

    private let fd: Int32
    private let central: CentralManager
    private let offer: Offer
    private let whenRoom: WhenRoom
    /// Settled with success at the input's end; with the sender's error
    /// when it ended first, or a cancellation from `stop()`.
    let ended = HandOff<Void>()
    /// The bytes read and offered.
    let bytesRead: LoopBound<Int>
    private let watch: LoopBound<LoopWatch?>
    /// The read buffer, kept for the pump's life (the sender copies what it takes).
    private let buffer: LoopBound<[UInt8]>

    init(fd: Int32 = 0, central: CentralManager, offer: @escaping Offer, whenRoom: @escaping WhenRoom) {
        self.fd = fd
        self.central = central
        self.offer = offer
        self.whenRoom = whenRoom
        bytesRead = central.loopBound(0)
        watch = central.loopBound(nil)
        buffer = central.loopBound([UInt8](repeating: 0, count: 65536))
    }

    /// Starts reading.
    func start() {
        central.onLoopSoon { [self] in resume() }
    }

    /// Stops reading (a reader still waiting on `ended` hears a cancellation).
    func stop() {
        central.onLoopSoon { [self] in stopReading() }
        ended.settle(.failure(CancellationError()))
    }

    // MARK: - On the loop

    private func resume() {
        guard watch.value == nil, !ended.isSettled else { return }
        watch.value = central.watch(fd) { [self] in readable() }
    }

    private func stopReading() {
        if let id = watch.value { central.unwatch(id) }
        watch.value = nil
    }

    /// Reads what the input has and offers it; at the end (or a read
    /// error: nothing more can be read) settles `ended`.
    private func readable() {
        let n = buffer.value.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR || errno == EAGAIN { return }
        guard n > 0 else {
            stopReading()
            ended.settle(.success(()))
            return
        }
        bytesRead.value += n
        switch offer(buffer.value[0..<n]) {
        case .taken(room: true):
            break
        case .taken(room: false):
            stopReading()
            whenRoom { [self] in resume() }
        case .ended(let error):
            stopReading()
            ended.settle(.failure(error))
        }
    }
}
