// OpenSSL's libcrypto (libssl-dev), used through its EVP interface only:
// AES-CCM for encrypted sensor advertisements (BTHome v2, Xiaomi MiBeacon
// v4/v5); X25519, ChaCha20-Poly1305, SHA-256 and HMAC-SHA256 for the proxy's
// Noise encryption (ESPHome's native API).
#include <openssl/evp.h>
#include <openssl/hmac.h>
