// OpenSSL's libcrypto (libssl-dev), used through its EVP interface only:
// AES-CCM for encrypted sensor advertisements (BTHome v2, Xiaomi MiBeacon
// v4/v5); X25519, ChaCha20-Poly1305, SHA-256 and HMAC-SHA256 for the proxy's
// Noise encryption (ESPHome's native API).
//
// The library is opened when first used (BluectlCore's `LibCrypto`), so each
// function used is named here as a pointer type taken from its own
// declaration (`__typeof__`): no symbol is referenced, nothing can disagree.
// No logic.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>

#define CCRYPTO_FUNCTION(name) typedef __typeof__(&name) ccrypto_##name;
CCRYPTO_FUNCTION(EVP_CIPHER_CTX_new)
CCRYPTO_FUNCTION(EVP_CIPHER_CTX_free)
CCRYPTO_FUNCTION(EVP_CIPHER_CTX_ctrl)
CCRYPTO_FUNCTION(EVP_DecryptInit_ex)
CCRYPTO_FUNCTION(EVP_DecryptUpdate)
CCRYPTO_FUNCTION(EVP_DecryptFinal_ex)
CCRYPTO_FUNCTION(EVP_EncryptInit_ex)
CCRYPTO_FUNCTION(EVP_EncryptUpdate)
CCRYPTO_FUNCTION(EVP_EncryptFinal_ex)
CCRYPTO_FUNCTION(EVP_aes_128_ccm)
CCRYPTO_FUNCTION(EVP_chacha20_poly1305)
CCRYPTO_FUNCTION(EVP_sha256)
CCRYPTO_FUNCTION(EVP_Digest)
CCRYPTO_FUNCTION(HMAC)
CCRYPTO_FUNCTION(EVP_PKEY_CTX_new_id)
CCRYPTO_FUNCTION(EVP_PKEY_CTX_new)
CCRYPTO_FUNCTION(EVP_PKEY_CTX_free)
CCRYPTO_FUNCTION(EVP_PKEY_keygen_init)
CCRYPTO_FUNCTION(EVP_PKEY_keygen)
CCRYPTO_FUNCTION(EVP_PKEY_free)
CCRYPTO_FUNCTION(EVP_PKEY_get_raw_private_key)
CCRYPTO_FUNCTION(EVP_PKEY_get_raw_public_key)
CCRYPTO_FUNCTION(EVP_PKEY_new_raw_private_key)
CCRYPTO_FUNCTION(EVP_PKEY_new_raw_public_key)
CCRYPTO_FUNCTION(EVP_PKEY_derive_init)
CCRYPTO_FUNCTION(EVP_PKEY_derive_set_peer)
CCRYPTO_FUNCTION(EVP_PKEY_derive)
CCRYPTO_FUNCTION(OPENSSL_thread_stop)
#undef CCRYPTO_FUNCTION
