// How a client's bytes become frames and frames become bytes: the plaintext
// framing, or the Noise framing (0x01, a 16-bit big-endian length, then a
// handshake message or, once ready, ChaChaPoly over type (16 bits), length
// (16 bits) and the message). Pure values; the server owns one per client.

/// What a client's bytes gave.
package struct Received: Sendable {
    /// Messages to hand to the session machine, in order.
    package var frames: [PlaintextFrame] = []
    /// Bytes to send back first (the Noise server hello and handshake).
    package var reply: [UInt8] = []
    /// Set when the connection must end: the one log line.
    package var failure: String?
}

/// The framing of one connection.
package enum FrameTransport: Sendable {
    case plain(FrameDecoder)
    case noise(NoiseTransport)

    package mutating func receive(_ bytes: some Collection<UInt8>) -> Received {
        switch self {
        case .plain(var decoder):
            decoder.append(bytes)
            var received = Received()
            do {
                while let frame = try decoder.next() { received.frames.append(frame) }
            } catch {
                received.failure = "\(error)"
            }
            self = .plain(decoder)
            return received
        case .noise(var transport):
            let received = transport.receive(bytes)
            self = .noise(transport)
            return received
        }
    }

    package mutating func encode(_ frame: PlaintextFrame) -> [UInt8] {
        switch self {
        case .plain: return frame.bytes
        case .noise(var transport):
            let bytes = transport.encode(frame)
            self = .noise(transport)
            return bytes
        }
    }
}

/// The Noise framing of one connection, as ESPHome's device speaks it: the
/// client's empty hello frame, our server hello (0x01, name, NUL, MAC, NUL),
/// the client's handshake frame (0x00, then `psk, e`), ours (0x00, then `e, ee`;
/// or 0x01 and the reason when it fails: "Handshake MAC failure" for another
/// key), then encrypted messages.
package struct NoiseTransport: Sendable {
    private enum Phase: Sendable {
        case hello, handshake, ready(receive: NoiseCipher, send: NoiseCipher)
        /// Done; `pending`: a failure met while encoding, which the next receive reports.
        case failed(pending: String?)
    }

    private var buffer: [UInt8] = []
    private var phase = Phase.hello
    private var responder: NoiseResponder
    private let serverHello: [UInt8]

    /// `ephemeral`: our handshake key pair (tests fix it); nil makes a fresh one.
    package init(psk: [UInt8], name: String, mac: String, ephemeral: X25519Key? = nil) {
        responder = NoiseResponder(psk: psk, ephemeral: ephemeral)
        serverHello = [0x01] + Array(name.utf8) + [0] + Array(mac.utf8) + [0]
    }

    /// One Noise frame around `payload`.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        [0x01, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)] + payload
    }

    package mutating func receive(_ bytes: some Collection<UInt8>) -> Received {
        var received = Received()
        if case .failed(let pending) = phase {
            received.failure = pending
            phase = .failed(pending: nil)
            return received
        }
        buffer.append(contentsOf: bytes)
        while buffer.count >= 3 {
            guard buffer[0] == 0x01 else {
                // ESPHome's answer; a plaintext client reports "requires encryption".
                received.reply += Self.frame([0x01] + Array("Bad indicator byte".utf8))
                received.failure = buffer[0] == 0x00
                    ? "the client speaks the plaintext API, this proxy requires encryption (--key-file)"
                    : "bad preamble 0x\(String(buffer[0], radix: 16)) (Noise framing)"
                phase = .failed(pending: nil)
                return received
            }
            let length = Int(buffer[1]) << 8 | Int(buffer[2])
            guard buffer.count >= 3 + length else { break }
            let payload = Array(buffer[3..<(3 + length)])
            buffer.removeFirst(3 + length)
            switch phase {
            case .hello:
                // The client's hello frame (empty; ESPHome ignores what it holds).
                received.reply += Self.frame(serverHello)
                phase = .handshake
            case .handshake:
                guard payload.first == 0x00 else {
                    received.reply += Self.frame([0x01] + Array("Bad handshake error byte".utf8))
                    received.failure = "Noise handshake: bad first byte"
                    phase = .failed(pending: nil)
                    return received
                }
                do {
                    let re = try responder.readMessage(Array(payload.dropFirst()))
                    let (message, receive, send) = try responder.writeMessage(to: re)
                    received.reply += Self.frame([0x00] + message)
                    phase = .ready(receive: receive, send: send)
                } catch {
                    let reason = switch error {
                    case .authenticationFailed: "Handshake MAC failure"
                    case .badHandshakeLength: "Bad handshake packet len"
                    default: "Handshake error"
                    }
                    received.reply += Self.frame([0x01] + Array(reason.utf8))
                    received.failure = error == .authenticationFailed
                        ? "Noise handshake failed: the client's encryption key is not this proxy's"
                        : "Noise handshake: \(error)"
                    phase = .failed(pending: nil)
                    return received
                }
            case .ready(var receive, let send):
                do {
                    let plain = try receive.decrypt(payload)
                    phase = .ready(receive: receive, send: send)
                    guard plain.count >= 4, Int(plain[2]) << 8 | Int(plain[3]) == plain.count - 4 else { throw NoiseError.badFrame }
                    received.frames.append(PlaintextFrame(type: UInt32(plain[0]) << 8 | UInt32(plain[1]), payload: Array(plain[4...])))
                } catch {
                    received.failure = error as? NoiseError == .badFrame
                        ? "a decrypted Noise frame with a wrong header" : "a Noise frame that does not decrypt"
                    phase = .failed(pending: nil)
                    return received
                }
            case .failed:
                return received
            }
        }
        return received
    }

    /// `frame` encrypted in a Noise frame (only once the handshake is done; before, nothing).
    /// When libcrypto fails, nothing more is sent and the next receive reports the failure.
    package mutating func encode(_ frame: PlaintextFrame) -> [UInt8] {
        guard case .ready(let receive, var send) = phase else { return [] }
        let count = frame.payload.count
        let plain = [UInt8(frame.type >> 8 & 0xff), UInt8(frame.type & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)] + frame.payload
        do {
            let sealed = try send.encrypt(plain)
            phase = .ready(receive: receive, send: send)
            return Self.frame(sealed)
        } catch {
            phase = .failed(pending: "Noise: \(error)")
            return []
        }
    }
}
