#ifndef CHEARTH_OPENSSL_SHIM_H
#define CHEARTH_OPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#endif
