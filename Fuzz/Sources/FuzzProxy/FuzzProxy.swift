// Fuzz target: what `bluectl proxy` reads from a client — the plaintext frame
// decoder, the Noise framing and handshake, the encrypted frames after a good
// handshake, and each decoded frame through the session machine (protobuf
// decoding of every message type).
//
// Input: a mode byte, a chunk byte (0: all bytes at once; n: reads of n
// bytes), then the mode's bytes:
//   plain       the client's stream
//   noiseRaw    the client's stream, to a Noise transport (hello, handshake)
//   noiseReady  a good handshake (the `noise` package's message, see
//               NoiseCryptoTests), then records: a length-prefixed plaintext
//               (type, length, message as the client seals it) and a byte
//               whose set bit 0 flips the sealed frame's byte at the next byte
// Properties: the same frames, reply and failure however the bytes are
// split; frames re-encoded decode to the same frames; an encrypted frame
// arrives exactly when its header is right and nothing was flipped, and the
// first bad one ends the connection; every failure is one line.
import FuzzSupport
@testable import BluectlProxy

enum Mode: UInt8, CaseIterable { case plain, noiseRaw, noiseReady }

let psk = [UInt8](0..<32)
/// The handshake the `noise` package wrote with psk 0…31 and a fixed client ephemeral (RFC 7748's Alice).
let clientHandshake: [UInt8] = hexBytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a19b4c4c4f75037483e6aa0b7fba0c487")
/// Our ephemeral private key in that exchange (RFC 7748's Bob).
let ourEphemeral = X25519Key(privateKey: hexBytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))!

func hexBytes(_ s: String) -> [UInt8] {
    let digits = Array(s.utf8).map { $0 <= 0x39 ? $0 - 0x30 : $0 - 0x57 }
    return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}

/// What a connection's bytes gave, as the server acts on it: stop at the first failure.
struct Outcome: Equatable {
    var frames: [PlaintextFrame] = []
    var reply: [UInt8] = []
    var failure: String?
}

func feed(_ transport: inout FrameTransport, _ bytes: [UInt8], chunk: Int) -> Outcome {
    var outcome = Outcome()
    var i = 0
    while i < bytes.count, outcome.failure == nil {
        let end = chunk == 0 ? bytes.count : min(bytes.count, i + chunk)
        let received = transport.receive(bytes[i..<end])
        outcome.frames += received.frames
        outcome.reply += received.reply
        outcome.failure = received.failure
        i = end
    }
    return outcome
}

func isOneLine(_ s: String) -> Bool {
    !s.isEmpty && !s.unicodeScalars.contains { $0.properties.generalCategory == .control }
}

func noiseTransport() -> FrameTransport {
    .noise(NoiseTransport(psk: psk, name: "fuzz", mac: "00:AA:01:00:00:23", ephemeral: ourEphemeral))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let mode = Mode(rawValue: input.byte() % UInt8(Mode.allCases.count))!
    let chunk = Int(input.byte())
    let outcome: Outcome
    switch mode {
    case .plain:
        let stream = input.rest()
        var whole = FrameTransport.plain(FrameDecoder()), split = whole
        outcome = feed(&whole, stream, chunk: 0)
        check(feed(&split, stream, chunk: chunk) == outcome, "plain: another split, another outcome")
        check(outcome.reply.isEmpty, "plain: a reply")
        var again = FrameTransport.plain(FrameDecoder())
        let reencoded = feed(&again, outcome.frames.flatMap(\.bytes), chunk: 0)
        check(reencoded.frames == outcome.frames && reencoded.failure == nil, "plain: frames re-encoded decode otherwise")
    case .noiseRaw:
        let stream = input.rest()
        var whole = noiseTransport(), split = whole
        outcome = feed(&whole, stream, chunk: 0)
        check(feed(&split, stream, chunk: chunk) == outcome, "noise: another split, another outcome")
    case .noiseReady:
        outcome = ready(&input, chunk: chunk)
    }
    if let failure = outcome.failure { check(isOneLine(failure), "failure not one line: \(failure.debugDescription)") }
    var machine = ProxySessionMachine(identity: ProxyIdentity(name: "fuzz", bluetoothAddress: "00:AA:01:00:00:23", version: "0"))
    frames: for frame in outcome.frames {
        for action in machine.handle(frame) {
            if case .close(let reason) = action {
                if let reason { check(isOneLine(reason), "close reason not one line: \(reason.debugDescription)") }
                break frames
            }
        }
    }
    _ = machine.ended()
    return 0
}

/// A good handshake, then the client's sealed records, some flipped.
func ready(_ input: inout FuzzInput, chunk: Int) -> Outcome {
    // The client's sending cipher is the responder's receiving one: a twin responder's copy seals.
    var twin = NoiseResponder(psk: psk, ephemeral: ourEphemeral)
    guard (try? twin.readMessage(clientHandshake)) != nil,
          var seal = (try? twin.writeMessage(to: Array(clientHandshake.prefix(32))))?.receive else {
        check(false, "the recorded handshake no longer reads")
        return Outcome()
    }
    var stream: [UInt8] = [0x01, 0x00, 0x00] + NoiseTransport.frame([0x00] + clientHandshake)
    var expected: [PlaintextFrame] = []
    var spoiled = false
    while !input.isAtEnd {
        let plain = input.lengthPrefixed()
        let flip = input.byte()
        let at = Int(input.byte())
        guard var sealed = try? seal.encrypt(plain) else { check(false, "sealing failed"); break }
        if flip & 1 == 1 { sealed[at % sealed.count] ^= 0x80 }
        stream += NoiseTransport.frame(sealed)
        let headerRight = plain.count >= 4 && Int(plain[2]) << 8 | Int(plain[3]) == plain.count - 4
        if !spoiled, headerRight, flip & 1 == 0 {
            expected.append(PlaintextFrame(type: UInt32(plain[0]) << 8 | UInt32(plain[1]), payload: Array(plain[4...])))
        } else {
            spoiled = true
        }
    }
    var whole = noiseTransport(), split = whole
    let outcome = feed(&whole, stream, chunk: 0)
    check(feed(&split, stream, chunk: chunk) == outcome, "noise ready: another split, another outcome")
    check(outcome.frames == expected, "noise ready: \(outcome.frames.count) frames, expected \(expected.count)")
    check((outcome.failure != nil) == spoiled, "noise ready: failure \(outcome.failure ?? "none"), spoiled \(spoiled)")
    return outcome
}
