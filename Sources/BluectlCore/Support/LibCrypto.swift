import BluectlDBus
import CCrypto

/// OpenSSL's libcrypto, opened when first used (encrypted sensor advertisements, the
/// proxy's Noise encryption) rather than by the loader at every start, which cost every
/// command 1.4 MB resident (its relocations; docs/benchmarks.md). The functions keep
/// libcrypto's names, with their C types from the headers (`CCrypto`'s `ccrypto_NAME`).
package struct LibCrypto: Sendable {
    /// Debian 12's libssl3 (libcrypto's ABI 3).
    package static let soname = "libcrypto.so.3"

    /// Opening it, once: the library's functions, or the loader's reason. The bus's I/O
    /// thread releases its libcrypto state as it ends (`ThreadEnd`).
    private static let loaded = Result { () throws(DynamicLibraryError) in
        let library = try LibCrypto()
        ThreadEnd.add { library.OPENSSL_thread_stop() }
        return library
    }

    /// The library, or nil when it cannot be opened (`unavailableReason` says why): each
    /// caller then fails as it does when libcrypto refuses (its result nil).
    package static var shared: LibCrypto? { try? loaded.get() }

    /// Why `shared` is nil (the loader's words), or nil: for a command that needs
    /// libcrypto to say so before it starts.
    package static var unavailableReason: String? {
        guard case .failure(let error) = loaded else { return nil }
        return "cannot load OpenSSL's libcrypto: \(error.text)"
    }

    package let EVP_CIPHER_CTX_new: ccrypto_EVP_CIPHER_CTX_new
    package let OPENSSL_thread_stop: ccrypto_OPENSSL_thread_stop
    package let EVP_CIPHER_CTX_free: ccrypto_EVP_CIPHER_CTX_free
    package let EVP_CIPHER_CTX_ctrl: ccrypto_EVP_CIPHER_CTX_ctrl
    package let EVP_DecryptInit_ex: ccrypto_EVP_DecryptInit_ex
    package let EVP_DecryptUpdate: ccrypto_EVP_DecryptUpdate
    package let EVP_DecryptFinal_ex: ccrypto_EVP_DecryptFinal_ex
    package let EVP_EncryptInit_ex: ccrypto_EVP_EncryptInit_ex
    package let EVP_EncryptUpdate: ccrypto_EVP_EncryptUpdate
    package let EVP_EncryptFinal_ex: ccrypto_EVP_EncryptFinal_ex
    package let EVP_aes_128_ccm: ccrypto_EVP_aes_128_ccm
    package let EVP_chacha20_poly1305: ccrypto_EVP_chacha20_poly1305
    package let EVP_sha256: ccrypto_EVP_sha256
    package let EVP_Digest: ccrypto_EVP_Digest
    package let HMAC: ccrypto_HMAC
    package let EVP_PKEY_CTX_new_id: ccrypto_EVP_PKEY_CTX_new_id
    package let EVP_PKEY_CTX_new: ccrypto_EVP_PKEY_CTX_new
    package let EVP_PKEY_CTX_free: ccrypto_EVP_PKEY_CTX_free
    package let EVP_PKEY_keygen_init: ccrypto_EVP_PKEY_keygen_init
    package let EVP_PKEY_keygen: ccrypto_EVP_PKEY_keygen
    package let EVP_PKEY_free: ccrypto_EVP_PKEY_free
    package let EVP_PKEY_get_raw_private_key: ccrypto_EVP_PKEY_get_raw_private_key
    package let EVP_PKEY_get_raw_public_key: ccrypto_EVP_PKEY_get_raw_public_key
    package let EVP_PKEY_new_raw_private_key: ccrypto_EVP_PKEY_new_raw_private_key
    package let EVP_PKEY_new_raw_public_key: ccrypto_EVP_PKEY_new_raw_public_key
    package let EVP_PKEY_derive_init: ccrypto_EVP_PKEY_derive_init
    package let EVP_PKEY_derive_set_peer: ccrypto_EVP_PKEY_derive_set_peer
    package let EVP_PKEY_derive: ccrypto_EVP_PKEY_derive

    private init() throws(DynamicLibraryError) {
        let library = try DynamicLibrary(Self.soname)
        EVP_CIPHER_CTX_new = try library.function("EVP_CIPHER_CTX_new", as: ccrypto_EVP_CIPHER_CTX_new.self)
        OPENSSL_thread_stop = try library.function("OPENSSL_thread_stop", as: ccrypto_OPENSSL_thread_stop.self)
        EVP_CIPHER_CTX_free = try library.function("EVP_CIPHER_CTX_free", as: ccrypto_EVP_CIPHER_CTX_free.self)
        EVP_CIPHER_CTX_ctrl = try library.function("EVP_CIPHER_CTX_ctrl", as: ccrypto_EVP_CIPHER_CTX_ctrl.self)
        EVP_DecryptInit_ex = try library.function("EVP_DecryptInit_ex", as: ccrypto_EVP_DecryptInit_ex.self)
        EVP_DecryptUpdate = try library.function("EVP_DecryptUpdate", as: ccrypto_EVP_DecryptUpdate.self)
        EVP_DecryptFinal_ex = try library.function("EVP_DecryptFinal_ex", as: ccrypto_EVP_DecryptFinal_ex.self)
        EVP_EncryptInit_ex = try library.function("EVP_EncryptInit_ex", as: ccrypto_EVP_EncryptInit_ex.self)
        EVP_EncryptUpdate = try library.function("EVP_EncryptUpdate", as: ccrypto_EVP_EncryptUpdate.self)
        EVP_EncryptFinal_ex = try library.function("EVP_EncryptFinal_ex", as: ccrypto_EVP_EncryptFinal_ex.self)
        EVP_aes_128_ccm = try library.function("EVP_aes_128_ccm", as: ccrypto_EVP_aes_128_ccm.self)
        EVP_chacha20_poly1305 = try library.function("EVP_chacha20_poly1305", as: ccrypto_EVP_chacha20_poly1305.self)
        EVP_sha256 = try library.function("EVP_sha256", as: ccrypto_EVP_sha256.self)
        EVP_Digest = try library.function("EVP_Digest", as: ccrypto_EVP_Digest.self)
        HMAC = try library.function("HMAC", as: ccrypto_HMAC.self)
        EVP_PKEY_CTX_new_id = try library.function("EVP_PKEY_CTX_new_id", as: ccrypto_EVP_PKEY_CTX_new_id.self)
        EVP_PKEY_CTX_new = try library.function("EVP_PKEY_CTX_new", as: ccrypto_EVP_PKEY_CTX_new.self)
        EVP_PKEY_CTX_free = try library.function("EVP_PKEY_CTX_free", as: ccrypto_EVP_PKEY_CTX_free.self)
        EVP_PKEY_keygen_init = try library.function("EVP_PKEY_keygen_init", as: ccrypto_EVP_PKEY_keygen_init.self)
        EVP_PKEY_keygen = try library.function("EVP_PKEY_keygen", as: ccrypto_EVP_PKEY_keygen.self)
        EVP_PKEY_free = try library.function("EVP_PKEY_free", as: ccrypto_EVP_PKEY_free.self)
        EVP_PKEY_get_raw_private_key = try library.function("EVP_PKEY_get_raw_private_key", as: ccrypto_EVP_PKEY_get_raw_private_key.self)
        EVP_PKEY_get_raw_public_key = try library.function("EVP_PKEY_get_raw_public_key", as: ccrypto_EVP_PKEY_get_raw_public_key.self)
        EVP_PKEY_new_raw_private_key = try library.function("EVP_PKEY_new_raw_private_key", as: ccrypto_EVP_PKEY_new_raw_private_key.self)
        EVP_PKEY_new_raw_public_key = try library.function("EVP_PKEY_new_raw_public_key", as: ccrypto_EVP_PKEY_new_raw_public_key.self)
        EVP_PKEY_derive_init = try library.function("EVP_PKEY_derive_init", as: ccrypto_EVP_PKEY_derive_init.self)
        EVP_PKEY_derive_set_peer = try library.function("EVP_PKEY_derive_set_peer", as: ccrypto_EVP_PKEY_derive_set_peer.self)
        EVP_PKEY_derive = try library.function("EVP_PKEY_derive", as: ccrypto_EVP_PKEY_derive.self)
    }
}
