// ESPHome's API encryption: Noise_NNpsk0_25519_ChaChaPoly_SHA256 (the Noise
// Protocol Framework, revision 34: sections 5 (processing rules), 9 (PSK
// mode), 12 (the 25519, ChaChaPoly and SHA256 functions)), with the prologue
// "NoiseAPIInit\0\0", as aioesphomeapi's client speaks it
// (`_frame_helper/noise.py` with the `noise` package) and ESPHome's device
// answers it. This side is always the responder:
//   -> psk, e        (the client's ephemeral key; an empty payload sealed with the PSK-derived key)
//   <- e, ee         (ours; an empty payload sealed with the DH-derived key)
// Primitives from swift-crypto; the rules of the framework are written here.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// Why a Noise handshake or frame failed.
package enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The client's first message is not 32 bytes of key plus a 16-byte tag.
    case badHandshakeLength(Int)
    /// A tag did not verify: in the handshake, the client holds another key.
    case authenticationFailed
    /// A decrypted frame shorter than its 4-byte header, or its length field wrong.
    case badFrame

    package var description: String {
        switch self {
        case .badHandshakeLength(let n): "a handshake message of \(n) bytes (expected 48)"
        case .authenticationFailed: "authentication failed"
        case .badFrame: "a decrypted frame with a wrong header"
        }
    }
}

/// One direction's cipher after the handshake: ChaChaPoly with a counter nonce.
package struct NoiseCipher: Sendable {
    private let key: SymmetricKey
    private var n: UInt64 = 0

    init(key: SymmetricKey) { self.key = key }

    /// The 12-byte nonce: 4 zero bytes, the counter little-endian (Noise's ChaChaPoly).
    static func nonce(_ n: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { bytes[4 + i] = UInt8(truncatingIfNeeded: n >> (8 * UInt64(i))) }
        return try! ChaChaPoly.Nonce(data: bytes)   // 12 bytes: always valid
    }

    static func seal(_ plaintext: [UInt8], key: SymmetricKey, n: UInt64, ad: [UInt8]) -> [UInt8] {
        // Sealing with a 32-byte key and a valid nonce does not fail.
        let box = try! ChaChaPoly.seal(plaintext, using: key, nonce: nonce(n), authenticating: ad)
        return Array(box.ciphertext) + Array(box.tag)
    }

    static func open(_ sealed: [UInt8], key: SymmetricKey, n: UInt64, ad: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard sealed.count >= 16 else { throw .authenticationFailed }
        do {
            let box = try ChaChaPoly.SealedBox(nonce: nonce(n), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
            return Array(try ChaChaPoly.open(box, using: key, authenticating: ad))
        } catch {
            throw .authenticationFailed
        }
    }

    /// Encrypts the next message (no associated data after the handshake).
    package mutating func encrypt(_ plaintext: [UInt8]) -> [UInt8] {
        defer { n += 1 }
        return Self.seal(plaintext, key: key, n: n, ad: [])
    }

    /// Decrypts the next message.
    package mutating func decrypt(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let plaintext = try Self.open(ciphertext, key: key, n: n, ad: [])
        n += 1
        return plaintext
    }
}

/// The responder's side of Noise_NNpsk0_25519_ChaChaPoly_SHA256: a pure value
/// (its ephemeral key may be given, for tests).
package struct NoiseResponder: Sendable {
    package static let protocolName = "Noise_NNpsk0_25519_ChaChaPoly_SHA256"
    package static let prologue: [UInt8] = Array("NoiseAPIInit".utf8) + [0, 0]

    private var ck: [UInt8]
    private var h: [UInt8]
    private var k: SymmetricKey?
    private var n: UInt64 = 0
    private let psk: [UInt8]
    private let ephemeral: Curve25519.KeyAgreement.PrivateKey

    package init(psk: [UInt8], ephemeral: Curve25519.KeyAgreement.PrivateKey = .init()) {
        // The name is longer than 32 bytes: h = SHA256(name) (section 5.2, InitializeSymmetric).
        h = Array(SHA256.hash(data: Array(Self.protocolName.utf8)))
        ck = h
        self.psk = psk
        self.ephemeral = ephemeral
        mixHash(Self.prologue)
    }

    /// Reads the client's `psk, e` message (its handshake frame after the 0x00 byte).
    package mutating func readMessage(_ message: [UInt8]) throws(NoiseError) -> Curve25519.KeyAgreement.PublicKey {
        guard message.count == 48 else { throw .badHandshakeLength(message.count) }
        mixKeyAndHash(psk)
        let re = Array(message[0..<32])
        mixHash(re)
        mixKey(re)   // PSK mode: "e" also mixes the key (section 9.2)
        _ = try decryptAndHash(Array(message[32...]))
        // 32 bytes checked above: a valid X25519 public key representation.
        return try! Curve25519.KeyAgreement.PublicKey(rawRepresentation: re)
    }

    /// Writes our `e, ee` message and splits: (what the client sends, what we send).
    package mutating func writeMessage(to re: Curve25519.KeyAgreement.PublicKey) -> (message: [UInt8], receive: NoiseCipher, send: NoiseCipher) {
        let e = Array(ephemeral.publicKey.rawRepresentation)
        mixHash(e)
        mixKey(e)
        // X25519 of a valid key pair; a low-order peer key yields zeros, which the
        // client's own DH then matches (nothing is secret then, nothing is gained).
        let shared = (try? ephemeral.sharedSecretFromKeyAgreement(with: re)).map { $0.withUnsafeBytes { Array($0) } }
            ?? [UInt8](repeating: 0, count: 32)
        mixKey(shared)
        let payload = encryptAndHash([])
        let (k1, k2) = Self.hkdf(ck, [], 2)
        return (e + payload, NoiseCipher(key: SymmetricKey(data: k1)), NoiseCipher(key: SymmetricKey(data: k2!)))
    }

    // MARK: The SymmetricState (section 5.2)

    private mutating func mixHash(_ data: [UInt8]) {
        h = Array(SHA256.hash(data: h + data))
    }

    private mutating func mixKey(_ ikm: [UInt8]) {
        let (next, key) = Self.hkdf(ck, ikm, 2)
        ck = next
        k = SymmetricKey(data: key!)
        n = 0
    }

    private mutating func mixKeyAndHash(_ ikm: [UInt8]) {
        let (next, tempH, tempK) = Self.hkdf3(ck, ikm)
        ck = next
        mixHash(tempH)
        k = SymmetricKey(data: tempK)
        n = 0
    }

    private mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8] {
        guard let k else { mixHash(plaintext); return plaintext }
        let sealed = NoiseCipher.seal(plaintext, key: k, n: n, ad: h)
        n += 1
        mixHash(sealed)
        return sealed
    }

    private mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let k else { mixHash(ciphertext); return ciphertext }
        let plaintext = try NoiseCipher.open(ciphertext, key: k, n: n, ad: h)
        n += 1
        mixHash(ciphertext)
        return plaintext
    }

    // MARK: HKDF (section 4.3): HMAC-SHA256 chained

    private static func hmac(_ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)))
    }

    static func hkdf(_ ck: [UInt8], _ ikm: [UInt8], _ outputs: Int) -> ([UInt8], [UInt8]?) {
        let temp = hmac(ck, ikm)
        let first = hmac(temp, [0x01])
        return (first, outputs >= 2 ? hmac(temp, first + [0x02]) : nil)
    }

    static func hkdf3(_ ck: [UInt8], _ ikm: [UInt8]) -> ([UInt8], [UInt8], [UInt8]) {
        let temp = hmac(ck, ikm)
        let first = hmac(temp, [0x01])
        let second = hmac(temp, first + [0x02])
        return (first, second, hmac(temp, second + [0x03]))
    }
}
