// `l2cap`'s copying: stdin to the channel on the central's event loop, the
// channel to stdout, and its event lines on stderr.

import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// Copies stdin to an L2CAP channel and the channel to stdout until the
/// channel ends. stdin is watched by the central's event loop (as `serve`'s
/// `StandardInputFeed` is) and what is read is offered to the channel there;
/// when the channel has no room (about 256 KiB not yet written: the peer's
/// credits set the pace), stdin is not read until it has, so a fast
/// producer is held back by its pipe. The end of stdin closes the channel
/// once what was read has gone out. The channel's SDUs are written to
/// stdout as they come; a slow reader of stdout holds the channel back.
final class L2CAPPump: Sendable {
    private let channel: L2CAPChannel
    private let central: CentralManager
    private let events: L2CAPEvents
    /// Settled with success at stdin's end, with a failure when the channel ended first.
    private let stdinEnded = HandOff<Void>()
    private let watch: LoopBound<LoopWatch?>

    init(channel: L2CAPChannel, central: CentralManager, events: L2CAPEvents) {
        self.channel = channel
        self.central = central
        self.events = events
        watch = central.loopBound(nil)
    }

    /// Runs until the channel ends: by the peer, by stdin's end, or failing
    /// (thrown: its `BluetoothError`; stdout gone: exit 141). Returns
    /// whether stdin ended (a later channel then does not read it).
    func run(readingStdin: Bool) async throws -> Bool {
        let started = ContinuousClock.now
        let channel = channel
        if readingStdin { central.onLoopSoon { [self] in resume() } }
        let closer = Task { [stdinEnded] in
            guard readingStdin, (try? await stdinEnded.wait()) != nil else { return false }
            await channel.close()
            return true
        }
        var outcome: Result<Void, any Error> = .success(())
        do {
            for try await sdu in channel.received {
                // A blocking write: a slow reader of stdout holds the channel back.
                guard sdu.withUnsafeBytes({ FileDescriptorIO.writeAll(1, $0) }) else {
                    throw errno == EPIPE ? CLIFailure(.brokenPipe, "")
                        : CLIFailure(.ioError, "cannot write to stdout: \(String(cString: strerror(errno)))")
                }
            }
        } catch {
            outcome = .failure(error)
        }
        central.onLoopSoon { [self] in stopReading() }
        stdinEnded.settle(.failure(CancellationError()))
        let closedByUs = await closer.value
        await channel.close(timeout: .zero)
        let counts = await channel.byteCounts
        let by: String
        switch outcome {
        case .success: by = closedByUs ? "local" : "peer"
        case .failure(let error): by = (error as? CLIFailure)?.message ?? "\(error)"
        }
        events.closed(channel, sent: counts.sent, received: counts.received, seconds: (ContinuousClock.now - started).seconds, by: by)
        try outcome.get()
        return closedByUs
    }

    // MARK: - On the loop

    private func resume() {
        guard watch.value == nil, !stdinEnded.isSettled else { return }
        watch.value = central.watch(0) { [self] in readable() }
    }

    private func stopReading() {
        if let id = watch.value { central.unwatch(id) }
        watch.value = nil
    }

    /// Reads what stdin has and offers it; at the end (or a read error:
    /// nothing more can be read) settles `stdinEnded`.
    private func readable() {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR || errno == EAGAIN { return }
        guard n > 0 else {
            stopReading()
            stdinEnded.settle(.success(()))
            return
        }
        switch channel.offerOnLoop(chunk[0..<n]) {
        case .taken(room: true):
            break
        case .taken(room: false):
            stopReading()
            channel.whenRoomOnLoop { [self] in resume() }
        case .ended:
            stopReading()
        }
    }
}

/// `l2cap`'s event lines, on stderr (stdout carries the channel's bytes):
/// text for people, JSON lines with `--json`.
struct L2CAPEvents: Sendable {
    let json: Bool

    private func emit(_ line: EventLine, device: String? = nil) {
        let bytes = line.record(device: device).lineBytes(json: json)
        _ = bytes.withUnsafeBytes { FileDescriptorIO.writeAll(2, $0) }
    }

    /// The listener is up: its PSM (the kernel's pick when none was asked).
    func listening(_ listener: L2CAPListener) {
        emit(EventLine(event: "listening",
                       fields: [("adapter", .string(listener.adapter)), ("psm", .int(Int(listener.psm.rawValue))),
                                ("security", .string(listener.security.rawValue))],
                       text: "listening on \(listener.adapter) PSM \(listener.psm) (\(listener.psm.rawValue))"))
    }

    /// A channel is open: connected to the peer's PSM, or accepted from it.
    func opened(_ channel: L2CAPChannel, accepted: Bool) {
        let event = accepted ? "accepted" : "connected"
        emit(EventLine(event: event, fields: [
            ("adapter", .string(channel.adapter)), ("psm", .int(Int(channel.psm.rawValue))),
            ("address_type", .string(channel.peerAddressType.rawValue)), ("send_mtu", .int(channel.sendMTU)),
            ("receive_mtu", .int(channel.receiveMTU)), ("security", .string(channel.security.rawValue)), ("key_size", .int(channel.keySize)),
        ], text: "\(event) \(accepted ? "from" : "to") \(channel.peer) PSM \(channel.psm): MTU out \(channel.sendMTU), in \(channel.receiveMTU), security \(channel.security.rawValue)"),
        device: channel.peer.description)
    }

    /// The channel ended: bytes each way, how long, and who ended it ("local", "peer", or the failure).
    func closed(_ channel: L2CAPChannel, sent: Int, received: Int, seconds: Double, by: String) {
        let rounded = (seconds * 1000).rounded() / 1000
        emit(EventLine(event: "closed", fields: [
            ("psm", .int(Int(channel.psm.rawValue))), ("sent", .int(sent)), ("received", .int(received)),
            ("seconds", .double(rounded)), ("by", .string(by)),
        ], text: "closed (\(by)): \(sent) bytes sent, \(received) received in \(rounded) s"), device: channel.peer.description)
    }
}

extension Duration {
    /// The duration in seconds, as a Double.
    fileprivate var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
