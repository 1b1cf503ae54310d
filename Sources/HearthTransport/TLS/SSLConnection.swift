import CHearthOpenSSL
import HearthIdentity
import Synchronization

/// One OpenSSL `SSL` object and its two memory BIOs.
///
/// Ciphertext from the network is written into `networkInput`; OpenSSL's output (handshake
/// messages, records, alerts) accumulates in `networkOutput` until the handler moves it to
/// the socket. OpenSSL never touches a file descriptor, so the event loop stays in charge
/// of all I/O. Used only from its channel's event loop, so not Sendable.
final class SSLConnection {
    let ssl: OpaquePointer
    let networkInput: OpaquePointer
    let networkOutput: OpaquePointer
    // Keeps the SSL_CTX alive as long as any SSL made from it.
    private let context: SSLContext

    /// How many exist right now, for leak tests.
    static let live = Atomic<Int>(0)

    init(context: SSLContext) throws {
        guard let ssl = SSL_new(context.pointer) else {
            throw TLSError(code: .configuration, reason: SSLContext.reasons("SSL_new"))
        }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError(code: .configuration, reason: SSLContext.reasons("BIO_new"))
        }
        // An empty input BIO means "no data yet" (retry), not end of file.
        _ = hearth_BIO_set_mem_eof_return(input, -1)
        _ = hearth_BIO_set_mem_eof_return(output, -1)
        SSL_set_bio(ssl, input, output)  // the SSL owns both BIOs from here
        switch context.role {
        case .server: SSL_set_accept_state(ssl)
        case .client: SSL_set_connect_state(ssl)
        }
        self.ssl = ssl
        networkInput = input
        networkOutput = output
        self.context = context
        Self.live.add(1, ordering: .relaxed)
    }

    deinit {
        SSL_free(ssl)
        Self.live.subtract(1, ordering: .relaxed)
    }

    /// Bytes OpenSSL has produced for the network and not yet handed out.
    var pendingOutput: Int { Int(BIO_ctrl_pending(networkOutput)) }
}
