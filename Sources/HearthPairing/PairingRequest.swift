import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// A device asking to join an account by pairing: the newcomer's side.
///
/// ``start(deviceName:accounts:options:logger:)`` makes this device's Ed25519 key (the one it
/// keeps as its device key) and a self-signed certificate, listens on a TCP port for a member's
/// TLS connection and announces itself on the LAN as `_hearth-pair._tcp` (the device name, the
/// port, a hash of the key). ``waitForGrant(timeout:confirm:)`` then takes one member at a
/// time: once the code is known it asks `confirm` (the person compares it with the member's
/// screen), and on a grant from that member checks it (the member's certificate and the granted
/// one chain to the CA sent, the granted one is for this device's key), stores the account
/// (``AccountStore/importPairing(caCertificate:deviceKey:deviceCertificate:sealedCAKey:)``) and
/// signs in.
///
/// ```swift
/// let request = try await PairingRequest.start(deviceName: "kitchen", accounts: AccountStore())
/// print("waiting on port \(request.port); run hearth device approve on a member")
/// let identity = try await request.waitForGrant(timeout: .seconds(300)) { offer in
///     print("\(offer.deviceName) of \(offer.accountName ?? "?") asks to add this device; code \(offer.code)")
///     return await askPerson("Does it show the same code?") ? .approve : .refuse("the codes differ")
/// }
/// await request.close()
/// print("joined", identity.account.displayName)
/// ```
///
/// A member that connects while another is pairing is told `busy`. A session that ends before
/// its code was shown (a stray connection, a malformed frame, a bad commitment) is logged and
/// the request waits on; once a code was shown, the pairing ends with that session, granted or
/// not, so that whoever connects gets one try per request. `confirm` is asked before anything is
/// stored; it should return when its task is cancelled (the request timed out or the member
/// refused).
package final class PairingRequest: Sendable {
    /// Where to listen, and how long each step may take.
    package struct Options: Sendable {
        /// The address to listen on.
        package var host: String
        /// The TCP port (0: any free one).
        package var port: Int
        /// Whether to announce the request by mDNS (Avahi). Without it, or without an
        /// avahi-daemon, members need the address (`hearth device approve --address`).
        package var announce: Bool
        /// How long a member may take between the messages before the code is shown.
        package var stepTimeout: Duration
        /// How long the TLS handshake may take.
        package var handshakeTimeout: Duration

        package init(host: String = "0.0.0.0", port: Int = 0, announce: Bool = true,
                    stepTimeout: Duration = .seconds(15), handshakeTimeout: Duration = .seconds(10)) {
            self.host = host
            self.port = port
            self.announce = announce
            self.stepTimeout = stepTimeout
            self.handshakeTimeout = handshakeTimeout
        }
    }

    /// The name this device asks to be admitted under (its self-signed certificate's).
    package let deviceName: String
    /// The port members connect to.
    package let port: Int
    /// The key's hash announced in the TXT record (`k`).
    package let keyHash: String
    /// The device ID this device will have in the account (SHA-256 of its new key).
    package let deviceID: DeviceID
    /// Why the request is not announced by mDNS, if it is not (no avahi-daemon, or not asked).
    package let announcementProblem: String?

    private let accounts: AccountStore
    private let tls: PairingTLSConfiguration
    private let listener: PeerListener
    private let discovery: PairingDiscovery?
    private let options: Options
    private let logger: Logger
    private let started = Locked(false)

    private init(deviceName: String, accounts: AccountStore, tls: PairingTLSConfiguration, listener: PeerListener,
                 discovery: PairingDiscovery?, announcementProblem: String?, options: Options, logger: Logger) {
        self.deviceName = deviceName
        self.accounts = accounts
        self.tls = tls
        self.listener = listener
        self.discovery = discovery
        self.announcementProblem = announcementProblem
        self.options = options
        self.logger = logger
        port = listener.port ?? options.port
        keyHash = PairingCode.announcementHash(of: tls.privateKey.publicKey)
        deviceID = DeviceID(publicKey: tls.privateKey.publicKey)
    }

    /// Makes the key, listens, and announces the request.
    ///
    /// - Parameters:
    ///   - deviceName: the name to ask for (the certificate's common name: 1 to 64 characters).
    ///   - accounts: where a granted account is stored.
    /// - Throws: ``IdentityError`` (an unusable name), a socket error (the port is taken).
    ///   No avahi-daemon is not an error: ``announcementProblem`` says so.
    package static func start(deviceName: String, accounts: AccountStore, options: Options = Options(),
                             logger: Logger) async throws -> PairingRequest {
        let tls = try await OffPool.run {
            try PairingTLSConfiguration.selfSigned(deviceName: deviceName, handshakeTimeout: .init(options.handshakeTimeout),
                                                   logger: logger)
        }
        let transport = try PeerTransport(pairing: tls, maximumFrameLength: PairingMessage.maximumFrameLength)
        let listener = try await transport.listen(host: options.host, port: options.port)
        var discovery: PairingDiscovery?
        var problem: String? = options.announce ? nil : "not announced (asked not to)"
        if options.announce, let port = listener.port, let port16 = UInt16(exactly: port) {
            let announcement = PairingAnnouncement(instanceName: deviceName, port: port16,
                                                   keyHash: PairingCode.announcementHash(of: tls.privateKey.publicKey))
            let made = PairingDiscovery(announcing: announcement, logger: logger)
            do {
                try await made.start()
                discovery = made
            } catch {
                problem = "\(error)"
            }
        }
        return PairingRequest(deviceName: deviceName, accounts: accounts, tls: tls, listener: listener, discovery: discovery,
                              announcementProblem: problem, options: options, logger: logger)
    }

    /// Withdraws the announcement and stops listening.
    package func close() async {
        await discovery?.stop()
        await listener.close()
    }

    /// Waits for a member to grant this device a place in its account, and stores it.
    ///
    /// - Parameters:
    ///   - timeout: how long to wait in all, members, people and all.
    ///   - confirm: asked once a member's code is known; the grant is stored only if it says
    ///     ``PairingDecision/approve``. A refusal is sent to the member at once.
    /// - Returns: this device's identity in the account, signed in.
    /// - Throws: ``PairingError``: `.refused` (the person here said no), `.refusedByPeer` (the
    ///   member said no: the codes differ, or its passphrase was wrong), `.invalidGrant`,
    ///   `.timedOut`, `.connectionLost` (the member went away after the code was shown);
    ///   `CancellationError`. In every case nothing was stored.
    package func waitForGrant(timeout: Duration,
                             confirm: @escaping @Sendable (PairingOffer) async -> PairingDecision) async throws -> DeviceIdentity {
        guard started.withLock({ s in defer { s = true }; return !s }) else {
            throw PairingError(code: .malformed, message: "waitForGrant was called twice on one request")
        }
        let deadline = ContinuousClock.now + timeout
        let busy = Locked(false)
        let current = Locked<PairingLink?>(nil)
        let (sessions, sink) = AsyncStream<PeerConnection>.makeStream()
        let logger = self.logger
        let acceptor = Task { [listener] in
            for await connection in listener.connections {
                if busy.withLock({ b in defer { b = true }; return b }) {
                    Task { await Self.refuseBusy(connection, logger: logger) }
                } else {
                    sink.yield(connection)
                }
            }
            sink.finish()
        }
        let watchdog = Task {
            try await Task.sleep(until: deadline)
            sink.finish()
            current.withLock { $0 }?.interrupt(PairingError(code: .timedOut, message: "no member approved this device within \(timeout)"))
        }
        defer {
            acceptor.cancel()
            watchdog.cancel()
        }
        return try await withTaskCancellationHandler {
            for await connection in sessions {
                do {
                    return try await session(connection, deadline: deadline, current: current, confirm: confirm)
                } catch let failure as SessionFailure {
                    switch failure {
                    case .beforeCode(let error):
                        logger.notice("a pairing attempt ended before its code was shown", metadata: [
                            "peer": "\(connection.remoteAddress.map { "\($0)" } ?? "?")", "reason": "\(error)"])
                        busy.withLock { $0 = false }
                    case .afterCode(let error):
                        throw error
                    }
                }
            }
            try Task.checkCancellation()
            throw PairingError(code: .timedOut, message: "no member approved this device within \(timeout)")
        } onCancel: {
            sink.finish()
            current.withLock { $0 }?.interrupt(PairingError(code: .connectionLost, message: "cancelled"))
        }
    }

    private enum SessionFailure: Error {
        /// Nothing was shown to the person: wait for another member.
        case beforeCode(PairingError)
        /// The code was shown: the pairing is over.
        case afterCode(PairingError)
    }

    private static func refuseBusy(_ connection: PeerConnection, logger: Logger) async {
        logger.notice("refusing a second member while pairing", metadata: ["peer": "\(connection.remoteAddress.map { "\($0)" } ?? "?")"])
        _ = try? await PairingLink.run(connection, logger: logger) { link in
            try await link.send(.refused(reason: "busy: this device is pairing with another member"))
        }
    }

    /// One member's session, from its hello to the stored account.
    private func session(_ connection: PeerConnection, deadline: ContinuousClock.Instant, current: Locked<PairingLink?>,
                         confirm: @escaping @Sendable (PairingOffer) async -> PairingDecision) async throws -> DeviceIdentity {
        let memberCertificate = connection.peer.certificate
        guard let memberKey = memberCertificate.publicKey else {
            throw SessionFailure.beforeCode(.malformed("the member's certificate has no Ed25519 key"))
        }
        let myKey = tls.privateKey.publicKey
        let address = connection.remoteAddress?.ipAddress
        let step = options.stepTimeout
        let accounts = self.accounts
        let tls = self.tls
        let logger = self.logger
        return try await PairingLink.run(connection, logger: logger) { link in
            current.withLock { $0 = link }
            defer { current.withLock { $0 = nil } }
            var reader = PairingReader(link)
            let code: PairingCode
            do {
                guard case .hello(let commitment) = try await reader.next(within: step, waitingFor: "pair-hello") else {
                    throw PairingError.malformed("the member did not begin with pair-hello")
                }
                let nonce = PairingCode.nonce()
                try await link.send(.nonce(nonce))
                let message = try await reader.next(within: step, waitingFor: "pair-reveal")
                guard case .reveal(let memberNonce) = message else {
                    if case .refused(let reason) = message { throw PairingError(code: .refusedByPeer, message: reason) }
                    throw PairingError.malformed("expected pair-reveal, got \(message.type)")
                }
                guard PairingCode.commitment(memberKey: memberKey.rawRepresentation, newcomerKey: myKey.rawRepresentation,
                                             memberNonce: memberNonce) == commitment else {
                    await link.refuse("the nonce does not open the commitment", ending: .malformed("commitment"))
                    throw PairingError(code: .commitmentMismatch, message: "the member's nonce does not open its commitment")
                }
                code = PairingCode(memberKey: memberKey, newcomerKey: myKey, memberNonce: memberNonce, newcomerNonce: nonce)
            } catch let error as PairingError {
                throw SessionFailure.beforeCode(error)
            } catch {
                throw SessionFailure.beforeCode(PairingError(code: .connectionLost, message: "\(error)"))
            }

            // The code is shown: from here on this session is the pairing.
            let offer = PairingOffer(code: code, deviceName: memberCertificate.commonName ?? "?",
                                     deviceID: DeviceID(publicKey: memberKey), accountName: memberCertificate.issuerCommonName,
                                     address: address)
            let person = Task { await confirm(offer) }
            // The person may say no before the member says anything: tell the member at once.
            let watcher = Task {
                if case .refuse(let reason)? = await link.decision(of: person) {
                    await link.refuse(reason, ending: PairingError(code: .refused, message: reason))
                }
            }
            defer { person.cancel(); watcher.cancel() }
            do {
                let remaining = max(.zero, deadline - ContinuousClock.now)
                let message = try await reader.next(within: remaining, waitingFor: "grant from the member")
                switch message {
                case .refused(let reason):
                    throw PairingError(code: .refusedByPeer, message: reason)
                case .grant(let grant):
                    guard case .approve? = await link.decision(of: person), link.endReason == nil else {
                        throw link.endReason ?? PairingError(code: .refused, message: "refused here")
                    }
                    let identity: DeviceIdentity
                    do {
                        identity = try await OffPool.run {
                            try Self.store(grant, member: memberCertificate, key: tls.privateKey, accounts: accounts)
                        }
                    } catch {
                        let why = (error as? IdentityError)?.message ?? "\(error)"
                        await link.refuse("the grant does not check out: \(why)", ending: PairingError(code: .invalidGrant, message: why))
                        throw PairingError(code: .invalidGrant, message: why)
                    }
                    try? await link.send(.done)
                    logger.info("joined by pairing", metadata: ["account": "\(identity.account.id.short)",
                                                                "member": "\(DeviceID(publicKey: memberKey).short)"])
                    return identity
                default:
                    await link.refuse("unexpected \(message.type)", ending: .malformed(message.type))
                    throw PairingError.malformed("expected pair-grant or pair-refused, got \(message.type)")
                }
            } catch let error as PairingError {
                // A member still at it hears why, rather than just losing the connection (the
                // link is ended, the connection not yet).
                if error.code == .timedOut { await link.refuse("the new device stopped waiting (\(error.message))", ending: error) }
                throw SessionFailure.afterCode(error)
            } catch {
                throw SessionFailure.afterCode(PairingError(code: .connectionLost, message: "\(error)"))
            }
        }
    }

    /// Checks a grant against what this device saw, and stores it. Blocking (file writes).
    static func store(_ grant: PairingGrant, member: Certificate, key: Ed25519PrivateKey, accounts: AccountStore) throws -> DeviceIdentity {
        let ca = try Certificate(derEncoded: grant.caCertificate)
        let account = try Account(caCertificate: ca)
        // The member that showed the code is a device of the account it grants.
        do {
            try account.trust.validateDevice(member)
        } catch let error as IdentityError {
            throw IdentityError(code: .certificateRejected, message: "the member's own certificate is not of that account (\(error.message))")
        }
        let certificate = try Certificate(derEncoded: grant.certificate)
        guard certificate.publicKey == key.publicKey else {
            throw IdentityError(code: .invalidKey, message: "the certificate granted is for another key")
        }
        let identity = try accounts.importPairing(caCertificate: ca, deviceKey: key, deviceCertificate: certificate,
                                                  sealedCAKey: grant.sealedCAKey)
        if let devices = try? accounts.knownDevices(of: account.id) {
            devices.note(member, seen: true)
            devices.flush()
        }
        return identity
    }
}
