import CCrypto

/// AES-128 in CCM mode (RFC 3610, NIST SP 800-38C), as BLE sensors use it to encrypt their
/// advertisements: BTHome v2 (13-byte nonce, 4-byte tag) and Xiaomi MiBeacon v4/v5 (12-byte
/// nonce, 4-byte tag, one byte of associated data). The mode is OpenSSL's (libcrypto's EVP
/// interface, opened when first used: `LibCrypto`), not written here; nil when libcrypto
/// cannot be opened, as when it refuses.
package enum AESCCM {
    /// The plaintext of `ciphertext`, or nil when its tag does not authenticate it (a wrong
    /// key, a corrupted frame) or an argument is outside what CCM allows: a 16-byte key, a
    /// nonce of 7 to 13 bytes, a tag of 4 to 16 bytes (even).
    package static func open(ciphertext: [UInt8], tag: [UInt8], key: [UInt8], nonce: [UInt8],
                             associatedData: [UInt8] = []) -> [UInt8]? {
        guard key.count == 16, (7...13).contains(nonce.count), (4...16).contains(tag.count), tag.count % 2 == 0,
              let crypto = LibCrypto.shared, let ctx = crypto.EVP_CIPHER_CTX_new() else { return nil }
        defer { crypto.EVP_CIPHER_CTX_free(ctx) }
        var tag = tag
        var length: Int32 = 0
        var plaintext = [UInt8](repeating: 0, count: max(ciphertext.count, 1))
        // The order CCM decryption needs: cipher, nonce length and expected tag, key and nonce,
        // the total length, the associated data, then the ciphertext (whose update checks the tag).
        guard crypto.EVP_DecryptInit_ex(ctx, crypto.EVP_aes_128_ccm(), nil, nil, nil) == 1,
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil) == 1,
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), &tag) == 1,
              crypto.EVP_DecryptInit_ex(ctx, nil, nil, key, nonce) == 1,
              crypto.EVP_DecryptUpdate(ctx, nil, &length, nil, Int32(ciphertext.count)) == 1 else { return nil }
        if !associatedData.isEmpty {
            guard crypto.EVP_DecryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else { return nil }
        }
        guard crypto.EVP_DecryptUpdate(ctx, &plaintext, &length, ciphertext, Int32(ciphertext.count)) == 1 else { return nil }
        return Array(plaintext.prefix(Int(length)))
    }

    /// `plaintext` encrypted, and its tag of `tagLength` bytes (what a sensor sends; `bluectl
    /// advertise --bthome-key` uses it). Nil for arguments outside what CCM allows.
    package static func seal(plaintext: [UInt8], key: [UInt8], nonce: [UInt8], tagLength: Int,
                             associatedData: [UInt8] = []) -> (ciphertext: [UInt8], tag: [UInt8])? {
        guard key.count == 16, (7...13).contains(nonce.count), (4...16).contains(tagLength), tagLength % 2 == 0,
              let crypto = LibCrypto.shared, let ctx = crypto.EVP_CIPHER_CTX_new() else { return nil }
        defer { crypto.EVP_CIPHER_CTX_free(ctx) }
        var length: Int32 = 0
        var ciphertext = [UInt8](repeating: 0, count: max(plaintext.count, 1))
        var tag = [UInt8](repeating: 0, count: tagLength)
        guard crypto.EVP_EncryptInit_ex(ctx, crypto.EVP_aes_128_ccm(), nil, nil, nil) == 1,
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil) == 1,
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), nil) == 1,
              crypto.EVP_EncryptInit_ex(ctx, nil, nil, key, nonce) == 1,
              crypto.EVP_EncryptUpdate(ctx, nil, &length, nil, Int32(plaintext.count)) == 1 else { return nil }
        if !associatedData.isEmpty {
            guard crypto.EVP_EncryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else { return nil }
        }
        guard crypto.EVP_EncryptUpdate(ctx, &ciphertext, &length, plaintext, Int32(plaintext.count)) == 1 else { return nil }
        let produced = Int(length)
        guard crypto.EVP_EncryptFinal_ex(ctx, &ciphertext, &length) == 1,
              crypto.EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), &tag) == 1 else { return nil }
        return (Array(ciphertext.prefix(produced)), tag)
    }
}
