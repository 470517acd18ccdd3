// ESPHome's API encryption: Noise_NNpsk0_25519_ChaChaPoly_SHA256 (the Noise
// Protocol Framework, revision 34: sections 5 (processing rules), 9 (PSK
// mode), 12 (the 25519, ChaChaPoly and SHA256 functions)), with the prologue
// "NoiseAPIInit\0\0", as aioesphomeapi's client speaks it
// (`_frame_helper/noise.py` with the `noise` package) and ESPHome's device
// answers it. This side is always the responder:
//   -> psk, e        (the client's ephemeral key; an empty payload sealed with the PSK-derived key)
//   <- e, ee         (ours; an empty payload sealed with the DH-derived key)
// Its functions (X25519, ChaChaPoly, SHA-256) are libcrypto's (NoiseCrypto.swift);
// the rules of the framework are written here.

/// Why a Noise handshake or frame failed.
package enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The client's first message is not 32 bytes of key plus a 16-byte tag.
    case badHandshakeLength(Int)
    /// A tag did not verify: in the handshake, the client holds another key.
    case authenticationFailed
    /// A decrypted frame shorter than its 4-byte header, or its length field wrong.
    case badFrame
    /// libcrypto failed a call that does not fail on good input (it ran out of memory).
    case cryptoFailure

    package var description: String {
        switch self {
        case .badHandshakeLength(let n): "a handshake message of \(n) bytes (expected 48)"
        case .authenticationFailed: "authentication failed"
        case .badFrame: "a decrypted frame with a wrong header"
        case .cryptoFailure: "libcrypto failed (out of memory?)"
        }
    }
}

/// One direction's cipher after the handshake: ChaChaPoly with a counter nonce.
package struct NoiseCipher: Sendable {
    private let key: [UInt8]
    private var n: UInt64 = 0

    init(key: [UInt8]) { self.key = key }

    /// Encrypts the next message (no associated data after the handshake).
    package mutating func encrypt(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let sealed = NoiseCrypto.seal(plaintext, key: key, n: n, ad: []) else { throw .cryptoFailure }
        n += 1
        return sealed
    }

    /// Decrypts the next message.
    package mutating func decrypt(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let plaintext = NoiseCrypto.open(ciphertext, key: key, n: n, ad: []) else { throw .authenticationFailed }
        n += 1
        return plaintext
    }
}

/// The responder's side of Noise_NNpsk0_25519_ChaChaPoly_SHA256: a pure value
/// (its ephemeral key may be given, for tests).
package struct NoiseResponder: Sendable {
    package static let protocolName = "Noise_NNpsk0_25519_ChaChaPoly_SHA256"
    package static let prologue: [UInt8] = Array("NoiseAPIInit".utf8) + [0, 0]

    private var ck: [UInt8] = []
    private var h: [UInt8] = []
    private var k: [UInt8]?
    private var n: UInt64 = 0
    private let psk: [UInt8]
    private let ephemeral: X25519Key?

    /// `ephemeral`: our key pair (tests fix it); nil makes a fresh one for the handshake.
    package init(psk: [UInt8], ephemeral: X25519Key? = nil) {
        self.psk = psk
        self.ephemeral = ephemeral
    }

    /// Reads the client's `psk, e` message (its handshake frame after the 0x00 byte):
    /// the client's ephemeral public key.
    package mutating func readMessage(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard message.count == 48 else { throw .badHandshakeLength(message.count) }
        // InitializeSymmetric (section 5.2): the name is longer than 32 bytes, so h = SHA256(name).
        h = try Self.sha256(Array(Self.protocolName.utf8))
        ck = h
        try mixHash(Self.prologue)
        try mixKeyAndHash(psk)
        let re = Array(message[0..<32])
        try mixHash(re)
        try mixKey(re)   // PSK mode: "e" also mixes the key (section 9.2)
        _ = try decryptAndHash(Array(message[32...]))
        return re
    }

    /// Writes our `e, ee` message and splits: (what the client sends, what we send).
    package mutating func writeMessage(to re: [UInt8]) throws(NoiseError) -> (message: [UInt8], receive: NoiseCipher, send: NoiseCipher) {
        guard let ephemeral = ephemeral ?? X25519Key.generate() else { throw .cryptoFailure }
        let e = ephemeral.publicKey
        try mixHash(e)
        try mixKey(e)
        // A low-order peer key (OpenSSL refuses its all-zero result) yields zeros, which the
        // client's own DH then matches (nothing is secret then, nothing is gained).
        try mixKey(ephemeral.sharedSecret(with: re) ?? [UInt8](repeating: 0, count: 32))
        let payload = try encryptAndHash([])
        let (k1, k2) = try Self.hkdf(ck, [])
        return (e + payload, NoiseCipher(key: k1), NoiseCipher(key: k2))
    }

    // MARK: The SymmetricState (section 5.2)

    private mutating func mixHash(_ data: [UInt8]) throws(NoiseError) {
        h = try Self.sha256(h + data)
    }

    private mutating func mixKey(_ ikm: [UInt8]) throws(NoiseError) {
        (ck, k) = try Self.hkdf(ck, ikm)
        n = 0
    }

    private mutating func mixKeyAndHash(_ ikm: [UInt8]) throws(NoiseError) {
        let (next, tempH, tempK) = try Self.hkdf3(ck, ikm)
        ck = next
        try mixHash(tempH)
        k = tempK
        n = 0
    }

    private mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let k else { try mixHash(plaintext); return plaintext }
        guard let sealed = NoiseCrypto.seal(plaintext, key: k, n: n, ad: h) else { throw .cryptoFailure }
        n += 1
        try mixHash(sealed)
        return sealed
    }

    private mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let k else { try mixHash(ciphertext); return ciphertext }
        guard let plaintext = NoiseCrypto.open(ciphertext, key: k, n: n, ad: h) else { throw .authenticationFailed }
        n += 1
        try mixHash(ciphertext)
        return plaintext
    }

    // MARK: HKDF (section 4.3): HMAC-SHA256 chained

    private static func sha256(_ data: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let digest = NoiseCrypto.sha256(data) else { throw .cryptoFailure }
        return digest
    }

    private static func hmac(_ key: [UInt8], _ data: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let mac = NoiseCrypto.hmacSHA256(key: key, data) else { throw .cryptoFailure }
        return mac
    }

    /// HKDF with two outputs.
    static func hkdf(_ ck: [UInt8], _ ikm: [UInt8]) throws(NoiseError) -> ([UInt8], [UInt8]) {
        let temp = try hmac(ck, ikm)
        let first = try hmac(temp, [0x01])
        return (first, try hmac(temp, first + [0x02]))
    }

    /// HKDF with three outputs.
    static func hkdf3(_ ck: [UInt8], _ ikm: [UInt8]) throws(NoiseError) -> ([UInt8], [UInt8], [UInt8]) {
        let temp = try hmac(ck, ikm)
        let first = try hmac(temp, [0x01])
        let second = try hmac(temp, first + [0x02])
        return (first, second, try hmac(temp, second + [0x03]))
    }
}
