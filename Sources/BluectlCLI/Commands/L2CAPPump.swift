// `l2cap`'s copying: stdin to the channel on the central's event loop, the
// channel to stdout, and its event lines on stderr.

import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// Copies stdin to an L2CAP channel and the channel to stdout until the
/// channel ends. stdin is read on the central's event loop (`InputPump`)
/// and offered to the channel there; when the channel has no room (about
/// 256 KiB not yet written: the peer's credits set the pace), stdin is not
/// read until it has. The end of stdin closes the channel once what was
/// read has gone out. The channel's SDUs go to stdout's writer thread as
/// they come; a slow reader of stdout holds the channel back.
final class L2CAPPump: Sendable {
    private let channel: L2CAPChannel
    private let central: CentralManager
    private let events: L2CAPEvents
    private let input: InputPump

    init(channel: L2CAPChannel, central: CentralManager, events: L2CAPEvents) {
        self.channel = channel
        self.central = central
        self.events = events
        input = InputPump(central: central, offer: { channel.offerOnLoop($0) }, whenRoom: { channel.whenRoomOnLoop($0) })
    }

    /// Runs until the channel ends: by the peer, by stdin's end, or failing
    /// (thrown: its `BluetoothError`; stdout gone: exit 141). Returns
    /// whether stdin ended (a later channel then does not read it).
    /// `linger`: after stdin's end and everything sent, how long the
    /// channel stays open for the peer to read and close it first.
    func run(readingStdin: Bool, linger: Duration = .zero) async throws -> Bool {
        let started = ContinuousClock.now
        let channel = channel
        if readingStdin { input.start() }
        // (whether stdin ended, whether this side then closed the channel)
        let closer = Task { [input] () -> (Bool, Bool) in
            guard readingStdin, (try? await input.ended.wait()) != nil else { return (false, false) }
            await channel.flush()
            if linger > .zero {
                try? await Task.sleep(for: linger)
                if Task.isCancelled { return (true, false) }   // the peer closed it meanwhile
            }
            await channel.close(timeout: .zero)
            return (true, true)
        }
        var outcome: Result<Void, any Error> = .success(())
        do {
            try await received()
        } catch {
            outcome = .failure(error)
        }
        input.stop()
        closer.cancel()   // a linger ends with the channel
        let (stdinDone, closedByUs) = await closer.value
        await channel.close(timeout: .zero)
        let counts = await channel.byteCounts
        let by: String
        switch outcome {
        case .success: by = closedByUs ? "local" : "peer"
        case .failure(let error as CLIFailure): by = error.status == .brokenPipe ? "stdout closed" : error.message
        case .failure(is CancellationError): by = "interrupted"
        case .failure(let error): by = "\(error)"
        }
        events.closed(channel, sent: counts.sent, received: counts.received, seconds: (ContinuousClock.now - started).seconds, by: by)
        try outcome.get()
        return stdinDone
    }

    /// Hands each SDU to stdout's writer (`OutputQueue.stream`) on the loop
    /// as it is read (`receiveOnLoop`: no hop to a task per SDU), until the
    /// channel ends and everything is written (thrown: the channel's
    /// failure, or stdout's). The loop never writes to stdout itself: a
    /// blocking write there would stop the loop's reading, and Linux 6.1
    /// reports a channel's end before the SDUs still queued in its socket,
    /// so a reader behind a slow stdout lost the last ~90 KB of a 1 MiB
    /// transfer in the lab (docs/l2cap.md). Nothing is dropped: once 1 MiB
    /// waits for stdout (as much as `received`'s inbox held) the socket is
    /// not read until half of it is written, and the peer's credits hold it back.
    /// The writer lingers 10 ms after a write: the SDUs of a transfer go out
    /// a few at a time, without a wake-up of the writer per loop turn; and
    /// the loop reads the socket in batches the same way (`batching`, 10 ms:
    /// a wake-up of the loop per SDU cost more than the reads). While
    /// stdout's reader keeps up, a byte received reaches it at most about
    /// 20 ms later.
    private func received() async throws {
        let output = OutputQueue(fd: 1, byteLimit: 1 << 20, linger: 10)
        let end = HandOff<Void>()
        let channel = channel
        channel.receiveOnLoop({ sdu in
            switch output.stream(sdu) {
            case .queued, .dropped:
                return true
            case .full:
                channel.pauseReceivingOnLoop()
                output.whenRoom { channel.resumeReceiving() }
                return true
            case .closed:
                return false   // the reader went away: closes the channel
            }
        }, onEnd: { result in end.settle(result.mapError { $0 as any Error }) }, batching: .milliseconds(10))
        do {
            try await output.endingWhenReaderGone {
                try await withTaskCancellationHandler {
                    _ = try? await end.wait()
                    // everything received goes out before the channel's end is told
                    guard !(await output.finish()) else { throw CLIFailure(.brokenPipe, "") }
                    try await end.wait()
                } onCancel: {
                    end.settle(.failure(CancellationError()))
                }
            }
        } catch let failure as CLIFailure where failure.status == .brokenPipe {
            if let code = output.writeFailure, code != EPIPE {
                throw CLIFailure(.ioError, "cannot write to stdout: \(String(cString: strerror(code)))")
            }
            throw failure
        } catch {
            output.close()   // what was received still goes out, while the command ends
            throw error
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

    func listening(_ listener: L2CAPListener) {
        emit(.l2capListening(adapter: listener.adapter, psm: listener.psm, security: listener.security))
    }

    func opened(_ channel: L2CAPChannel, accepted: Bool) {
        emit(.l2capOpened(accepted: accepted, peer: channel.peer, addressType: channel.peerAddressType, adapter: channel.adapter,
                          psm: channel.psm, sendMTU: channel.sendMTU, receiveMTU: channel.receiveMTU,
                          security: channel.security, keySize: channel.keySize),
             device: channel.peer.description)
    }

    func closed(_ channel: L2CAPChannel, sent: Int, received: Int, seconds: Double, by: String) {
        emit(.l2capClosed(psm: channel.psm, sent: sent, received: received, seconds: seconds, by: by), device: channel.peer.description)
    }
}

extension EventLine {
    /// `l2cap listen`: listening on the adapter's PSM (the kernel's pick when none was asked).
    static func l2capListening(adapter: String, psm: L2CAPPSM, security: L2CAPSecurity) -> EventLine {
        EventLine(event: "listening",
                  fields: [("adapter", .string(adapter)), ("psm", .int(Int(psm.rawValue))), ("security", .string(security.rawValue))],
                  text: "listening on \(adapter) PSM \(psm) (\(psm.rawValue)), security \(security.rawValue)")
    }

    /// `l2cap`: a channel is open, connected to the peer's PSM or accepted from it.
    static func l2capOpened(accepted: Bool, peer: BluetoothAddress, addressType: AddressType, adapter: String, psm: L2CAPPSM,
                            sendMTU: Int, receiveMTU: Int, security: L2CAPSecurity, keySize: Int) -> EventLine {
        let event = accepted ? "accepted" : "connected"
        return EventLine(event: event, fields: [
            ("adapter", .string(adapter)), ("psm", .int(Int(psm.rawValue))), ("address_type", .string(addressType.rawValue)),
            ("send_mtu", .int(sendMTU)), ("receive_mtu", .int(receiveMTU)), ("security", .string(security.rawValue)),
            ("key_size", .int(keySize)),
        ], text: "\(event) \(accepted ? "from" : "to") \(peer) PSM \(psm): MTU out \(sendMTU), in \(receiveMTU), security \(security.rawValue)")
    }

    /// `l2cap`: the channel ended: bytes each way, how long (to the
    /// millisecond), and who ended it ("local": stdin ended; "peer"; or the failure).
    static func l2capClosed(psm: L2CAPPSM, sent: Int, received: Int, seconds: Double, by: String) -> EventLine {
        let rounded = (seconds * 1000).rounded() / 1000
        return EventLine(event: "closed", fields: [
            ("psm", .int(Int(psm.rawValue))), ("sent", .int(sent)), ("received", .int(received)),
            ("seconds", .double(rounded)), ("by", .string(by)),
        ], text: "closed (\(by)): \(sent) bytes sent, \(received) received in \(rounded) s")
    }
}

extension Duration {
    /// The duration in seconds, as a Double.
    fileprivate var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
