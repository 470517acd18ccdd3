// The Noise framing's refusals, as ESPHome's device words them (aioesphomeapi
// turns "Handshake MAC failure" into InvalidEncryptionKeyAPIError and a frame
// starting 0x01 at a plaintext client into RequiresEncryptionAPIError). The
// handshake that succeeds is proven against aioesphomeapi on the bus tier
// (ProxyTests.noiseEncryptionWithTheRightKeyOnly).
import Testing
@testable import BluectlProxy

@Suite struct NoiseTransportTests {
    let psk = [UInt8](0..<32)
    func transport() -> NoiseTransport { NoiseTransport(psk: psk, name: "n", mac: "00:AA:01:00:00:23") }
    let clientHello: [UInt8] = [0x01, 0x00, 0x00]
    let serverHello: [UInt8] = [0x01, 0x00, 0x15, 0x01, 0x6e, 0x00] + Array("00:AA:01:00:00:23".utf8) + [0x00]

    @Test func serverHelloNamesTheNodeAndMAC() {
        var t = transport()
        let received = t.receive(clientHello)
        #expect(received.reply == serverHello)
        #expect(received.failure == nil && received.frames.isEmpty)
    }

    @Test func anotherKeyIsAMACFailure() {
        var t = transport()
        // A client's `psk, e` message sealed with a key this side does not hold (any 48 bytes).
        let handshake: [UInt8] = [0x01, 0x00, 0x31, 0x00] + [UInt8](repeating: 0x42, count: 48)
        let received = t.receive(clientHello + handshake)
        #expect(received.reply == serverHello + [0x01, 0x00, 0x16, 0x01] + Array("Handshake MAC failure".utf8))
        #expect(received.failure == "Noise handshake failed: the client's encryption key is not this proxy's")
        #expect(t.receive(clientHello).reply.isEmpty, "nothing after a failure")
    }

    @Test func shortHandshakeRefused() {
        var t = transport()
        let received = t.receive(clientHello + [0x01, 0x00, 0x02, 0x00, 0x01])
        #expect(received.reply.suffix(24) == Array("Bad handshake packet len".utf8)[...])
        #expect(received.failure == "Noise handshake: a handshake message of 1 bytes (expected 48)")
    }

    @Test func plaintextClientToldEncryptionIsRequired() {
        var t = transport()
        let received = t.receive([0x00, 0x00, 0x01])   // a plaintext HelloRequest's header
        #expect(received.reply == [0x01, 0x00, 0x13, 0x01] + Array("Bad indicator byte".utf8))
        #expect(received.failure?.hasPrefix("the client speaks the plaintext API") == true)
    }

    @Test func nothingEncodedBeforeTheHandshake() {
        var t = transport()
        #expect(t.encode(PlaintextFrame(type: 8, payload: [])).isEmpty)
    }
}
