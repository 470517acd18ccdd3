// OpenSSL's libcrypto (libssl-dev): AES-CCM for encrypted sensor advertisements
// (BTHome v2, Xiaomi MiBeacon v4/v5). Used through its EVP interface only.
#include <openssl/evp.h>
