import CHearthOpenSSL
import HearthIdentity
import Logging
import NIOCore

/// An OpenSSL `SSL_CTX` configured for Hearth: TLS 1.3 only, mutual authentication
/// against one CA, ALPN `hearth/1`; or, for pairing, TLS 1.3 with both sides presenting an
/// Ed25519 certificate that is not checked against a CA, ALPN `hearth-pair/1`
/// (``PairingTLSConfiguration``).
///
/// Configured once in `init` and never changed afterwards; OpenSSL allows `SSL_new` on
/// one `SSL_CTX` from several threads, hence Sendable.
package final class SSLContext: @unchecked Sendable {
    /// Whether this context accepts (server) or dials (client).
    package enum Role: Sendable { case server, client }

    let pointer: OpaquePointer
    package let role: Role
    /// The sync configuration; nil for a pairing context.
    package let configuration: TLSConfiguration?
    /// The pairing configuration; nil for a sync context.
    package let pairingConfiguration: PairingTLSConfiguration?
    /// What the handler needs of either configuration.
    let handshakeTimeout: TimeAmount
    let logger: Logger
    let alpnProtocol: String
    /// Held for the verify callback, which reaches it through the context's ex_data.
    private let removals: DeviceRemovals?

    package init(configuration: TLSConfiguration, role: Role) throws {
        _ = OpenSSLRuntime.ready
        guard let context = SSL_CTX_new(TLS_method()) else {
            throw TLSError(code: .configuration, reason: Self.reasons("SSL_CTX_new"))
        }
        pointer = context
        self.role = role
        self.configuration = configuration
        pairingConfiguration = nil
        handshakeTimeout = configuration.handshakeTimeout
        logger = configuration.logger
        alpnProtocol = TLSConfiguration.alpnProtocol
        removals = configuration.removals
        try configure()
    }

    /// A context for pairing connections (docs/protocol.md, "Pairing").
    package init(pairing: PairingTLSConfiguration, role: Role) throws {
        _ = OpenSSLRuntime.ready
        guard let context = SSL_CTX_new(TLS_method()) else {
            throw TLSError(code: .configuration, reason: Self.reasons("SSL_CTX_new"))
        }
        pointer = context
        self.role = role
        configuration = nil
        pairingConfiguration = pairing
        handshakeTimeout = pairing.handshakeTimeout
        logger = pairing.logger
        alpnProtocol = PairingTLSConfiguration.alpnProtocol
        removals = nil
        try configurePairing(pairing)
    }

    deinit { SSL_CTX_free(pointer) }

    /// Whether this is a pairing context (peers not verified against a CA).
    var isPairing: Bool { pairingConfiguration != nil }

    private func check(_ ok: Bool, _ what: String) throws {
        if !ok { throw TLSError(code: .configuration, reason: Self.reasons(what)) }
    }

    private func configure() throws {
        guard let configuration else { return }
        try configureProtocol()
        let identity = configuration.identity
        try useCredential(certificate: identity.certificate, privateKey: identity.privateKey)

        // The account CA is the only trust anchor: not the system's CA bundle.
        guard let store = X509_STORE_new() else { throw TLSError(code: .configuration, reason: Self.reasons("X509_STORE_new")) }
        SSL_CTX_set_cert_store(pointer, store)  // the context owns the store now
        try check(X509_STORE_add_cert(store, configuration.trustAnchor.pointer) == 1, "X509_STORE_add_cert")
        if let parameters = SSL_CTX_get0_param(pointer) {
            _ = X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_X509_STRICT))
        }
        // device → CA; the CA's pathLen 0 rules out intermediates anyway.
        SSL_CTX_set_verify_depth(pointer, 1)
        // Both sides demand and verify the other's certificate. OpenSSL checks the chain,
        // the dates, and the purpose (a client checks serverAuth, a server clientAuth).
        // A removed device's certificate still chains; the callback refuses it by its key. A
        // server with a removal notice lets it finish instead, to hand it the signed record
        // (TLSHandler, once the handshake is done); it never reaches the application.
        if let removals = configuration.removals, !(role == .server && configuration.removalNotice != nil) {
            // The context keeps `removals` alive (a stored property) as long as OpenSSL may call back.
            SSL_CTX_set_ex_data(pointer, 0, Unmanaged.passUnretained(removals).toOpaque())
            SSL_CTX_set_verify(pointer, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, hearthVerifyNotRemoved)
        } else {
            SSL_CTX_set_verify(pointer, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
        try configureALPN(Self.alpnWireFormat, select: hearthSelectALPN)
    }

    /// Pairing: the same protocol settings, no trust anchor, a verify callback that takes the
    /// peer's leaf on its own (``PairingTLSConfiguration``), ALPN `hearth-pair/1`.
    private func configurePairing(_ pairing: PairingTLSConfiguration) throws {
        try configureProtocol()
        try useCredential(certificate: pairing.certificate, privateKey: pairing.privateKey)
        // An empty store: nothing chains, the callback decides. Never the system's CA bundle.
        guard let store = X509_STORE_new() else { throw TLSError(code: .configuration, reason: Self.reasons("X509_STORE_new")) }
        SSL_CTX_set_cert_store(pointer, store)
        SSL_CTX_set_verify_depth(pointer, 0)
        SSL_CTX_set_verify(pointer, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, hearthVerifyPairingLeaf)
        try configureALPN(Self.pairingALPNWireFormat, select: hearthSelectPairingALPN)
    }

    /// What sync and pairing contexts share: TLS 1.3 only, no resumption, one certificate sent.
    private func configureProtocol() throws {
        // TLS 1.3 and nothing else: a 1.2-only peer fails with "unsupported protocol".
        try check(hearth_SSL_CTX_set_min_proto_version(pointer, TLS1_3_VERSION) == 1, "min protocol version")
        try check(hearth_SSL_CTX_set_max_proto_version(pointer, TLS1_3_VERSION) == 1, "max protocol version")
        // No tickets, no session cache: every connection verifies the peer's certificate
        // afresh, and the server sends nothing after its Finished.
        _ = SSL_CTX_set_options(pointer, hearth_SSL_OP_NO_TICKET() | hearth_SSL_OP_NO_RENEGOTIATION()
                                    | hearth_SSL_OP_NO_COMPRESSION() | hearth_SSL_OP_CIPHER_SERVER_PREFERENCE())
        try check(SSL_CTX_set_num_tickets(pointer, 0) == 1, "SSL_CTX_set_num_tickets")
        _ = hearth_SSL_CTX_set_session_cache_mode(pointer, hearth_SSL_SESS_CACHE_OFF())
        // Idle connections give their read/write buffers back; send only the device
        // certificate, not the CA that OpenSSL would otherwise add from the trust store
        // (the peer has it, and a stranger has no use for it).
        _ = hearth_SSL_CTX_set_mode(pointer, hearth_SSL_MODE_RELEASE_BUFFERS() | hearth_SSL_MODE_NO_AUTO_CHAIN())
    }

    private func useCredential(certificate: Certificate, privateKey: Ed25519PrivateKey) throws {
        try check(SSL_CTX_use_certificate(pointer, certificate.pointer) == 1, "SSL_CTX_use_certificate")
        try check(SSL_CTX_use_PrivateKey(pointer, privateKey.pointer) == 1, "SSL_CTX_use_PrivateKey")
        try check(SSL_CTX_check_private_key(pointer) == 1, "SSL_CTX_check_private_key")
    }

    private func configureALPN(_ protocols: [UInt8], select: SSL_CTX_alpn_select_cb_func) throws {
        switch role {
        case .server:
            SSL_CTX_set_alpn_select_cb(pointer, select, nil)
        case .client:
            // SSL_CTX_set_alpn_protos returns 0 on success.
            try check(SSL_CTX_set_alpn_protos(pointer, protocols, UInt32(protocols.count)) == 0, "SSL_CTX_set_alpn_protos")
        }
    }

    /// "hearth/1" as ALPN wire format: a length byte, then the name.
    static let alpnWireFormat: [UInt8] = [UInt8(TLSConfiguration.alpnProtocol.utf8.count)] + Array(TLSConfiguration.alpnProtocol.utf8)
    /// "hearth-pair/1" the same way.
    static let pairingALPNWireFormat: [UInt8] = [UInt8(PairingTLSConfiguration.alpnProtocol.utf8.count)]
        + Array(PairingTLSConfiguration.alpnProtocol.utf8)

    static func reasons(_ what: String) -> String {
        let reasons = OpenSSLErrorQueue.drain()
        return reasons.isEmpty ? what : "\(what): " + reasons.joined(separator: "; ")
    }
}

/// Server ALPN selection: `hearth/1` or a fatal no_application_protocol alert. A plain C
/// function (no captures, no actor isolation) because OpenSSL calls it from the event
/// loop thread in the middle of `SSL_do_handshake`.
private func hearthSelectALPN(
    _ ssl: OpaquePointer?,
    _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?,
    _ input: UnsafePointer<UInt8>?,
    _ inputLength: UInt32,
    _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    selectALPN(SSLContext.alpnWireFormat, out, outLength, input, inputLength)
}

/// The same for pairing contexts: `hearth-pair/1` or the alert.
private func hearthSelectPairingALPN(
    _ ssl: OpaquePointer?,
    _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?,
    _ input: UnsafePointer<UInt8>?,
    _ inputLength: UInt32,
    _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    selectALPN(SSLContext.pairingALPNWireFormat, out, outLength, input, inputLength)
}

private func selectALPN(
    _ wanted: [UInt8],
    _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?,
    _ input: UnsafePointer<UInt8>?,
    _ inputLength: UInt32
) -> Int32 {
    guard let input, let out, let outLength else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    var offset = 0
    let total = Int(inputLength)
    while offset < total {
        let length = Int(input[offset])
        let start = offset + 1
        guard start + length <= total else { break }
        if length == wanted.count - 1, (0..<length).allSatisfy({ input[start + $0] == wanted[1 + $0] }) {
            out.pointee = input + start
            outLength.pointee = UInt8(length)
            return SSL_TLSEXT_ERR_OK
        }
        offset = start + length
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}

/// The verify callback when the account has removals: after OpenSSL's own checks pass, the
/// leaf certificate's device must not be removed. A removed one fails with
/// `X509_V_ERR_CERT_REVOKED`, which OpenSSL turns into a `certificate_revoked` alert to the
/// peer. A plain C function, as OpenSSL calls it from the event loop mid-handshake.
private func hearthVerifyNotRemoved(_ preverified: Int32, _ store: OpaquePointer?) -> Int32 {
    guard preverified == 1, let store else { return preverified }
    // Only the leaf names a device (depth 1 is the account CA).
    guard X509_STORE_CTX_get_error_depth(store) == 0, let x509 = X509_STORE_CTX_get_current_cert(store),
          let ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()),
          let context = SSL_get_SSL_CTX(OpaquePointer(ssl)), let opaque = SSL_CTX_get_ex_data(context, 0) else { return 1 }
    let removals = Unmanaged<DeviceRemovals>.fromOpaque(opaque).takeUnretainedValue()
    guard !removals.isEmpty, let key = Certificate(retaining: x509).publicKey else { return 1 }
    guard removals.isRemoved(DeviceID(publicKey: key)) else { return 1 }
    X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REVOKED)
    return 0
}

/// The verify callback of pairing contexts. Neither side has a CA to check the other against
/// (the newcomer has no account yet; the member is about to admit a key it has never seen), so
/// the leaf stands alone: the only errors forgiven are those that say its issuer is unknown or
/// that it signed itself. Anything else OpenSSL finds (dates, key usage, purpose, a CA
/// certificate) still fails, as does a certificate whose key is not Ed25519 and any chain
/// beyond the leaf. Who the peer is, the pairing code decides. A plain C function, as OpenSSL
/// calls it from the event loop mid-handshake.
private func hearthVerifyPairingLeaf(_ preverified: Int32, _ store: OpaquePointer?) -> Int32 {
    guard let store else { return 0 }
    guard X509_STORE_CTX_get_error_depth(store) == 0, let x509 = X509_STORE_CTX_get_current_cert(store) else {
        return 0
    }
    guard Certificate(retaining: x509).publicKey != nil else {
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
        return 0
    }
    if preverified == 1 { return 1 }
    switch X509_STORE_CTX_get_error(store) {
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
         X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED:
        return 1
    default:
        return 0
    }
}
