// The functions Noise_NNpsk0_25519_ChaChaPoly_SHA256 names (the Noise Protocol
// Framework, revision 34, section 12), from OpenSSL's libcrypto (EVP): the
// same library BluectlCore's AES-CCM uses, so the proxy adds no crypto
// library of its own. Only the calls are here; the framework's rules are in
// NoiseHandshake.swift.
import BluectlCore
import CCrypto

/// An X25519 key pair (Noise's DH functions, section 12.1), as raw 32-byte strings.
package struct X25519Key: Sendable {
    /// The private key (RFC 7748's scalar, before clamping: OpenSSL clamps).
    let privateKey: [UInt8]
    /// The public key: what is sent as `e`.
    package let publicKey: [UInt8]

    /// A fresh key pair (EVP_PKEY_X25519 keygen); nil only when libcrypto fails (no memory).
    package static func generate() -> X25519Key? {
        guard let crypto = LibCrypto.shared, let ctx = crypto.EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nil) else { return nil }
        defer { crypto.EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard crypto.EVP_PKEY_keygen_init(ctx) == 1, crypto.EVP_PKEY_keygen(ctx, &pkey) == 1, let pkey else { return nil }
        defer { crypto.EVP_PKEY_free(pkey) }
        var priv = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard crypto.EVP_PKEY_get_raw_private_key(pkey, &priv, &length) == 1, length == 32 else { return nil }
        return X25519Key(privateKey: priv)
    }

    /// The pair of a given 32-byte private key (tests fix the ephemeral key); nil for another length.
    package init?(privateKey: [UInt8]) {
        guard privateKey.count == 32, let crypto = LibCrypto.shared,
              let pkey = crypto.EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32) else { return nil }
        defer { crypto.EVP_PKEY_free(pkey) }
        var pub = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard crypto.EVP_PKEY_get_raw_public_key(pkey, &pub, &length) == 1, length == 32 else { return nil }
        self.privateKey = privateKey
        self.publicKey = pub
    }

    /// DH(self, peer): the 32-byte shared secret; nil for a peer key of another
    /// length, or a low-order one (OpenSSL refuses an all-zero result).
    package func sharedSecret(with peer: [UInt8]) -> [UInt8]? {
        guard peer.count == 32, let crypto = LibCrypto.shared,
              let ours = crypto.EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, 32) else { return nil }
        defer { crypto.EVP_PKEY_free(ours) }
        guard let theirs = crypto.EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, peer, 32) else { return nil }
        defer { crypto.EVP_PKEY_free(theirs) }
        guard let ctx = crypto.EVP_PKEY_CTX_new(ours, nil) else { return nil }
        defer { crypto.EVP_PKEY_CTX_free(ctx) }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard crypto.EVP_PKEY_derive_init(ctx) == 1, crypto.EVP_PKEY_derive_set_peer(ctx, theirs) == 1,
              crypto.EVP_PKEY_derive(ctx, &secret, &length) == 1, length == 32 else { return nil }
        return secret
    }
}

/// Noise's cipher and hash functions (sections 12.3 and 12.5) over libcrypto.
enum NoiseCrypto {
    /// ChaCha20-Poly1305 (RFC 8439) with Noise's nonce: 4 zero bytes, then the
    /// 64-bit counter little-endian. Ciphertext then the 16-byte tag; nil when
    /// libcrypto fails (no memory) or the key is not 32 bytes.
    static func seal(_ plaintext: [UInt8], key: [UInt8], n: UInt64, ad: [UInt8]) -> [UInt8]? {
        guard key.count == 32, let crypto = LibCrypto.shared, let ctx = crypto.EVP_CIPHER_CTX_new() else { return nil }
        defer { crypto.EVP_CIPHER_CTX_free(ctx) }
        var length: Int32 = 0
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: 16)
        guard crypto.EVP_EncryptInit_ex(ctx, crypto.EVP_chacha20_poly1305(), nil, key, nonce(n)) == 1,
              crypto.EVP_EncryptUpdate(ctx, nil, &length, ad, Int32(ad.count)) == 1,
              crypto.EVP_EncryptUpdate(ctx, &out, &length, plaintext, Int32(plaintext.count)) == 1,
              crypto.EVP_EncryptFinal_ex(ctx, &tag, &length) == 1,   // a stream cipher: no bytes here
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, &tag) == 1 else { return nil }
        return Array(out.prefix(plaintext.count)) + tag
    }

    /// The plaintext of `sealed` (ciphertext then tag), or nil when the tag does not verify.
    static func open(_ sealed: [UInt8], key: [UInt8], n: UInt64, ad: [UInt8]) -> [UInt8]? {
        guard key.count == 32, sealed.count >= 16, let crypto = LibCrypto.shared, let ctx = crypto.EVP_CIPHER_CTX_new() else { return nil }
        defer { crypto.EVP_CIPHER_CTX_free(ctx) }
        let ciphertext = Array(sealed.dropLast(16))
        var tag = Array(sealed.suffix(16))
        var length: Int32 = 0
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var final = [UInt8](repeating: 0, count: 16)
        guard crypto.EVP_DecryptInit_ex(ctx, crypto.EVP_chacha20_poly1305(), nil, key, nonce(n)) == 1,
              crypto.EVP_DecryptUpdate(ctx, nil, &length, ad, Int32(ad.count)) == 1,
              crypto.EVP_DecryptUpdate(ctx, &out, &length, ciphertext, Int32(ciphertext.count)) == 1,
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, &tag) == 1,
              crypto.EVP_DecryptFinal_ex(ctx, &final, &length) == 1 else { return nil }   // the tag's check
        return Array(out.prefix(ciphertext.count))
    }

    /// The 12-byte nonce of counter `n` (section 12.3).
    static func nonce(_ n: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + (0..<8).map { UInt8(truncatingIfNeeded: n >> (8 * UInt64($0))) }
    }

    /// SHA-256 (section 12.5); nil only when libcrypto fails.
    static func sha256(_ data: [UInt8]) -> [UInt8]? {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard let crypto = LibCrypto.shared, crypto.EVP_Digest(data, data.count, &digest, &length, crypto.EVP_sha256(), nil) == 1, length == 32 else { return nil }
        return digest
    }

    /// HMAC-SHA256 (RFC 2104; Noise's HKDF, section 4.3); nil only when libcrypto fails.
    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8]? {
        var mac = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard let crypto = LibCrypto.shared, crypto.HMAC(crypto.EVP_sha256(), key, Int32(key.count), data, data.count, &mac, &length) != nil, length == 32 else { return nil }
        return mac
    }
}
