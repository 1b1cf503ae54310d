import CHearthOpenSSL

/// OpenSSL's one-time initialisation, done by Hearth before any other OpenSSL call so that
/// OpenSSL registers no atexit() cleanup (which crashed a process exiting while another
/// thread still freed a TLS context). Every type that calls OpenSSL first touches ``ready``.
package enum OpenSSLRuntime {
    package static let ready: Void = {
        _ = hearth_openssl_init()
    }()
}
