#ifndef CHEARTH_OPENSSL_SHIM_H
#define CHEARTH_OPENSSL_SHIM_H
// OpenSSL 3 through one header. Swift imports functions and plain integer constants, but
// not function-like macros; the static inline wrappers below stand in for the macros
// HearthIdentity and HearthTransport need. No crypto happens here: every primitive is
// OpenSSL's own (EVP, X509, SSL).
#include <stdint.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/bn.h>
#include <openssl/rand.h>

// MARK: Initialisation

// OpenSSL registers an atexit() cleanup by default; a thread still freeing a TLS context
// while exit() runs it crashes in libcrypto. Initialised once with NO_ATEXIT instead: the
// process's memory goes back to the kernel at exit anyway.
static inline int hearth_openssl_init(void) {
    return OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL);
}

// MARK: SSL_CTX / SSL macros

static inline int hearth_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int hearth_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

static inline long hearth_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

static inline long hearth_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline int hearth_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

// SSL_OP_* are built from SSL_OP_BIT(n), which Swift does not import.
static inline uint64_t hearth_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline uint64_t hearth_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t hearth_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t hearth_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline long hearth_SSL_SESS_CACHE_OFF(void) { return SSL_SESS_CACHE_OFF; }
static inline long hearth_SSL_MODE_RELEASE_BUFFERS(void) { return SSL_MODE_RELEASE_BUFFERS; }
static inline long hearth_SSL_MODE_NO_AUTO_CHAIN(void) { return SSL_MODE_NO_AUTO_CHAIN; }

// MARK: BIO macros

static inline long hearth_BIO_pending(BIO *bio) { return (long)BIO_pending(bio); }

/// A memory BIO normally reports EOF when empty; -1 makes an empty BIO mean "retry later",
/// which is what a BIO fed from the network needs.
static inline long hearth_BIO_set_mem_eof_return(BIO *bio, int value) {
    return BIO_set_mem_eof_return(bio, value);
}

static inline long hearth_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

// MARK: misc macros

static inline void hearth_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

static inline int hearth_MBSTRING_UTF8(void) { return MBSTRING_UTF8; }

static inline int hearth_ERR_GET_LIB(unsigned long e) { return ERR_GET_LIB(e); }
static inline int hearth_ERR_GET_REASON(unsigned long e) { return ERR_GET_REASON(e); }

static inline uint32_t hearth_KU_DIGITAL_SIGNATURE(void) { return KU_DIGITAL_SIGNATURE; }
static inline uint32_t hearth_KU_KEY_CERT_SIGN(void) { return KU_KEY_CERT_SIGN; }

/// Adds one X.509v3 extension written in OpenSSL's config syntax ("critical,CA:FALSE"),
/// with `issuer` and `subject` set so that authorityKeyIdentifier and
/// subjectKeyIdentifier can be derived. Returns 1 on success.
static inline int hearth_X509_add_ext_conf(X509 *subject, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, subject, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) return 0;
    int ok = X509_add_ext(subject, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/// A passphrase with an explicit length, for `hearth_pem_passphrase_callback`.
typedef struct hearth_passphrase {
    const char *bytes;
    int length;
} hearth_passphrase;

/// PEM passphrase callback: copies the passphrase in `u` (a `hearth_passphrase *`), or
/// fails when there is none. Passing it (instead of NULL) also keeps OpenSSL from ever
/// prompting on the terminal for an unexpectedly encrypted file.
static inline int hearth_pem_passphrase_callback(char *buf, int size, int rwflag, void *u) {
    (void)rwflag;
    const hearth_passphrase *pass = (const hearth_passphrase *)u;
    if (pass == NULL || pass->bytes == NULL || pass->length > size) return -1;
    memcpy(buf, pass->bytes, (size_t)pass->length);
    return pass->length;
}

static inline pem_password_cb *hearth_pem_passphrase_callback_pointer(void) {
    return hearth_pem_passphrase_callback;
}

#endif
