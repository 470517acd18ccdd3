// Noise's functions from libcrypto against published vectors, and a whole
// NNpsk0 handshake against the `noise` package aioesphomeapi uses
// (noiseprotocol 0.3.1, with both ephemeral keys fixed: the bytes below are
// what it wrote and read).
import Testing
@testable import BluectlProxy

private func hex(_ s: String) -> [UInt8] {
    stride(from: 0, to: s.count, by: 2).map { i in
        UInt8(s[s.index(s.startIndex, offsetBy: i)..<s.index(s.startIndex, offsetBy: i + 2)], radix: 16)!
    }
}

@Suite struct NoiseCryptoTests {
    // RFC 7748, section 6.1.
    let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    let bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
    let alicePublic = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    let bobPublic = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")

    @Test func x25519AsRFC7748() throws {
        let a = try #require(X25519Key(privateKey: alice))
        let b = try #require(X25519Key(privateKey: bob))
        #expect(a.publicKey == alicePublic && b.publicKey == bobPublic)
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(a.sharedSecret(with: bobPublic) == shared && b.sharedSecret(with: alicePublic) == shared)
        #expect(a.sharedSecret(with: [UInt8](repeating: 0, count: 32)) == nil, "a low-order point: OpenSSL refuses")
        #expect(X25519Key(privateKey: [1, 2]) == nil)
    }

    @Test func freshKeysDiffer() throws {
        let one = try #require(X25519Key.generate()), two = try #require(X25519Key.generate())
        #expect(one.publicKey != two.publicKey)
        #expect(X25519Key(privateKey: one.privateKey)?.publicKey == one.publicKey)
    }

    @Test func chachaPolyWithNoiseNonce() {
        // Python's cryptography (ChaCha20Poly1305), nonce 00000000 0500000000000000.
        let sealed = hex("4b6dfa662a052951e2d95c42b60b7fc994977d6a6e09dd49280fa1")
        let key = [UInt8](0..<32)
        #expect(NoiseCrypto.nonce(5) == [0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0])
        #expect(NoiseCrypto.seal(Array("hello noise".utf8), key: key, n: 5, ad: Array("ad".utf8)) == sealed)
        #expect(NoiseCrypto.open(sealed, key: key, n: 5, ad: Array("ad".utf8)) == Array("hello noise".utf8))
        #expect(NoiseCrypto.open(sealed, key: key, n: 6, ad: Array("ad".utf8)) == nil, "another nonce")
        #expect(NoiseCrypto.open(sealed, key: key, n: 5, ad: []) == nil, "other associated data")
        var flipped = sealed
        flipped[0] ^= 1
        #expect(NoiseCrypto.open(flipped, key: key, n: 5, ad: Array("ad".utf8)) == nil)
        #expect(NoiseCrypto.open(Array(sealed.prefix(15)), key: key, n: 5, ad: []) == nil)
    }

    @Test func sha256AndHMAC() {
        #expect(NoiseCrypto.sha256(Array("abc".utf8)) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        // RFC 4231, test case 2.
        #expect(NoiseCrypto.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
            == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test func handshakeAsTheNoisePackage() throws {
        let psk = [UInt8](0..<32)
        let ours: X25519Key = try #require(X25519Key(privateKey: bob))
        var responder = NoiseResponder(psk: psk, ephemeral: ours)
        let fromClient = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a19b4c4c4f75037483e6aa0b7fba0c487")
        #expect(try responder.readMessage(fromClient) == alicePublic)
        let (reply, toUs, toClient) = try responder.writeMessage(to: alicePublic)
        var receive = toUs, send = toClient
        #expect(reply == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f6b35c9c2806be013e0dd4f0776b09464"))
        #expect(try receive.decrypt(hex("9af09f1882c62bbe0eaeb74479367b4e7bd159e8a628")) == [0, 1, 0, 2, 0xaa, 0xbb])
        #expect(try send.encrypt([0, 2, 0, 0]) == hex("1309a2fae6910b3a1a906ad42c2a65d85a6caf0f"))
    }

    @Test func handshakeWithAnotherPSKFails() throws {
        var responder = NoiseResponder(psk: [UInt8](repeating: 7, count: 32), ephemeral: X25519Key(privateKey: bob))
        let fromClient = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a19b4c4c4f75037483e6aa0b7fba0c487")
        #expect(throws: NoiseError.authenticationFailed) { try responder.readMessage(fromClient) }
    }
}
