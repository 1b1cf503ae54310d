import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthTransport
import Logging
import NIOCore

/// A pairing request to approve: where a newcomer listens, found by mDNS
/// (``init(peer:)``) or given by hand (``init(name:host:port:)``).
package struct PairingCandidate: Sendable, Hashable, CustomStringConvertible {
    /// The name it announces (its mDNS instance name), or what the caller calls it.
    package var name: String
    /// Addresses to try in order (IPv4 first; IPv6 link-local ones with their scope).
    package var hosts: [String]
    package var port: Int
    /// The key hash its announcement carries (TXT `k`): the device reached must present a key
    /// with this hash. Nil when given by hand.
    package var keyHash: String?

    package init(name: String, host: String, port: Int) {
        self.name = name
        hosts = [host]
        self.port = port
        keyHash = nil
    }

    /// The request an mDNS peer announces (``PairingDiscovery``), or nil when it is not one.
    package init?(peer: DiscoveredPeer) {
        guard let announcement = PairingAnnouncement(peer: peer), !peer.addresses.isEmpty else { return nil }
        name = peer.name
        hosts = peer.addresses.map(\.connectHost)
        port = Int(peer.port)
        keyHash = announcement.keyHash
    }

    package var description: String { "\(name) at \(hosts.first ?? "?") port \(port)" }
}

/// What a member did when a newcomer accepted its grant.
package struct PairingApproval: Sendable {
    /// The device certificate issued for the newcomer's key.
    package let certificate: Certificate
    /// The newcomer's device ID in the account.
    package let deviceID: DeviceID
    /// Its name in the certificate.
    package let deviceName: String
    /// Whether the grant carried the sealed account key (so the newcomer too can admit and
    /// remove devices, with the passphrase).
    package let sentCAKey: Bool
}

/// A member admitting a newcomer by pairing: the member's side.
///
/// It dials the newcomer's pairing listener over TLS with its own device certificate, learns the
/// newcomer's key from the handshake, and runs the code exchange. Once the code is known it asks
/// `confirm` (the person compares it with the newcomer's screen); only then does it unlock the
/// account key (with the passphrase, on a thread of its own: a second of scrypt), issue a device
/// certificate for the newcomer's key and name, and send it with the account CA certificate and,
/// unless asked not to, the account key as this device stores it (sealed under the passphrase).
/// It returns once the newcomer says it stored them, and notes the newcomer among the account's
/// known devices. A code the person refuses, a wrong passphrase or a newcomer that refuses admits
/// nothing: the newcomer is told why.
///
/// ```swift
/// let approver = try PairingApprover(accounts: AccountStore())      // the signed-in device
/// let browser = PairingDiscovery.browsing()
/// try await browser.start()
/// for await case .appeared(let peer) in browser.events() {
///     guard let candidate = PairingCandidate(peer: peer) else { continue }
///     let approval = try await approver.approve(candidate, confirm: { offer in
///         print("\(offer.deviceName) asks to join; code \(offer.code)")
///         return await askPerson("Does it show the same code?") ? .approve : .refuse("the codes differ")
///     }, passphrase: { try await askPassphrase() })
///     print("admitted", approval.deviceName)
///     break
/// }
/// await browser.stop()
/// ```
package struct PairingApprover: Sendable {
    /// Time limits.
    package struct Options: Sendable {
        /// How long the newcomer may take to answer each message before the code.
        package var stepTimeout: Duration
        /// How long, after the grant is sent, the newcomer's person may take to confirm.
        package var confirmationTimeout: Duration
        package var handshakeTimeout: Duration

        package init(stepTimeout: Duration = .seconds(15), confirmationTimeout: Duration = .seconds(300),
                    handshakeTimeout: Duration = .seconds(10)) {
            self.stepTimeout = stepTimeout
            self.confirmationTimeout = confirmationTimeout
            self.handshakeTimeout = handshakeTimeout
        }
    }

    /// This device, which dials with its certificate and whose account admits the newcomer.
    package let identity: DeviceIdentity
    package let accounts: AccountStore
    package var options: Options
    private let logger: Logger

    /// An approver for `identity` (default: the device signed in to `accounts`).
    ///
    /// - Throws: ``IdentityError/Code/notSignedIn`` when there is no identity.
    package init(accounts: AccountStore, identity: DeviceIdentity? = nil, options: Options = Options(),
                logger: Logger) throws {
        guard let identity = try identity ?? accounts.loadCurrentIdentity() else {
            throw IdentityError(code: .notSignedIn, message: "not signed in to an account")
        }
        self.identity = identity
        self.accounts = accounts
        self.options = options
        self.logger = logger
    }

    /// Approves `candidate` with the account passphrase, asked for by `passphrase` only after
    /// `confirm` approved.
    ///
    /// - Parameter includeCAKey: send the account key sealed under the passphrase, so that the
    ///   newcomer too can admit and remove devices (with the passphrase); false admits a device
    ///   that only syncs.
    /// - Throws: ``IdentityError/Code/wrongPassphrase`` (the newcomer was told "refused"),
    ///   ``IdentityError/Code/caKeyAbsent``/``IdentityError/Code/caKeyInClear`` before any
    ///   connection; ``PairingError`` otherwise.
    package func approve(_ candidate: PairingCandidate, includeCAKey: Bool = true,
                        confirm: @escaping @Sendable (PairingOffer) async -> PairingDecision,
                        passphrase: @escaping @Sendable () async throws -> String) async throws -> PairingApproval {
        let accounts = self.accounts
        let id = identity.account.id
        // Refuse early what cannot work: no account key here to unlock.
        let sealed = try accounts.sealedCAKey(id)
        return try await run(candidate, confirm: confirm) {
            let secret = try await passphrase()
            let authority = try await OffPool.run { try accounts.loadAuthority(id, passphrase: secret) }
            return (authority, includeCAKey ? sealed.pem : nil)
        }
    }

    /// Approves `candidate` with an account key already unlocked (a daemon holding it, say).
    ///
    /// - Parameter sealedCAKey: the account key as this device stores it (PEM), to send along; nil
    ///   admits a device that only syncs.
    package func approve(_ candidate: PairingCandidate, authority: AccountAuthority, sealedCAKey: String? = nil,
                        confirm: @escaping @Sendable (PairingOffer) async -> PairingDecision) async throws -> PairingApproval {
        try await run(candidate, confirm: confirm) { (authority, sealedCAKey) }
    }

    private func run(_ candidate: PairingCandidate, confirm: @escaping @Sendable (PairingOffer) async -> PairingDecision,
                     authorize: @escaping @Sendable () async throws -> (AccountAuthority, String?)) async throws -> PairingApproval {
        let tls = try PairingTLSConfiguration(identity: identity, handshakeTimeout: .init(options.handshakeTimeout), logger: logger)
        let transport = try PeerTransport(pairing: tls, maximumFrameLength: PairingMessage.maximumFrameLength)
        var connection: PeerConnection?
        var failures: [String] = []
        for host in candidate.hosts {
            do {
                connection = try await transport.connect(host: host, port: candidate.port)
                break
            } catch {
                failures.append("\(host): \(error)")
            }
        }
        guard let connection else {
            throw PairingError(code: .connectionLost, message: "cannot reach \(candidate.name): " + failures.joined(separator: "; "))
        }
        let newcomerCertificate = connection.peer.certificate
        guard let newcomerKey = newcomerCertificate.publicKey else {
            await connection.close()
            throw PairingError.malformed("the newcomer's certificate has no Ed25519 key")
        }
        if let expected = candidate.keyHash, PairingCode.announcementHash(of: newcomerKey) != expected {
            await connection.close()
            throw PairingError(code: .unexpectedPeer, message: "the device at \(candidate.hosts.first ?? "?") port \(candidate.port) is not the one announced as \(candidate.name)")
        }
        let name = Self.deviceName(newcomerCertificate.commonName, fallback: candidate.name)
        let identity = self.identity
        let accounts = self.accounts
        let options = self.options
        let address = connection.remoteAddress?.ipAddress
        let logger = self.logger
        return try await PairingLink.run(connection, logger: logger) { link in
            var reader = PairingReader(link)
            let myKey = identity.privateKey.publicKey
            let nonce = PairingCode.nonce()
            try await link.send(.hello(commitment: PairingCode.commitment(memberKey: myKey.rawRepresentation,
                                                                          newcomerKey: newcomerKey.rawRepresentation, memberNonce: nonce)))
            let answer = try await reader.next(within: options.stepTimeout, waitingFor: "pair-nonce")
            let newcomerNonce: [UInt8]
            switch answer {
            case .nonce(let value): newcomerNonce = value
            case .refused(let reason) where reason.hasPrefix("busy"): throw PairingError(code: .busy, message: reason)
            case .refused(let reason): throw PairingError(code: .refusedByPeer, message: reason)
            default:
                await link.refuse("unexpected \(answer.type)", ending: .malformed(answer.type))
                throw PairingError.malformed("expected pair-nonce, got \(answer.type)")
            }
            try await link.send(.reveal(nonce))
            let code = PairingCode(memberKey: myKey, newcomerKey: newcomerKey, memberNonce: nonce, newcomerNonce: newcomerNonce)
            let offer = PairingOffer(code: code, deviceName: name, deviceID: DeviceID(publicKey: newcomerKey), accountName: nil,
                                     address: address)
            // The newcomer may refuse, or go away, while the person decides: that ends the question.
            let person = Task { await confirm(offer) }
            defer { person.cancel() }
            switch await link.decision(of: person) {
            case .refuse(let reason)?:
                await link.refuse(reason, ending: PairingError(code: .refused, message: reason))
                throw PairingError(code: .refused, message: reason)
            case nil:
                throw link.endReason ?? PairingError(code: .connectionLost, message: "the new device went away")
            case .approve?:
                break
            }
            // The newcomer's person may have said no meanwhile: no passphrase for nothing.
            if let reason = link.refusalFromPeer { throw PairingError(code: .refusedByPeer, message: reason) }
            let authority: AccountAuthority
            let sealed: String?
            do {
                (authority, sealed) = try await authorize()
            } catch let error as IdentityError where error.code == .wrongPassphrase {
                await link.refuse("the account passphrase given on \(identity.deviceName) was wrong",
                                  ending: PairingError(code: .refused, message: "wrong passphrase"))
                throw error
            } catch {
                await link.refuse("\(identity.deviceName) could not unlock the account key",
                                  ending: PairingError(code: .refused, message: "\(error)"))
                throw error
            }
            guard authority.account.id == identity.account.id else {
                await link.refuse("internal error", ending: .malformed("authority"))
                throw IdentityError(code: .invalidArgument, message: "the account key given is another account's")
            }
            let certificate = try authority.issueDeviceCertificate(for: newcomerKey, deviceName: name)
            try await link.send(.grant(PairingGrant(caCertificate: authority.account.caCertificate.derEncoded,
                                                    certificate: certificate.derEncoded, sealedCAKey: sealed)))
            let outcome = try await reader.next(within: options.confirmationTimeout, waitingFor: "the newcomer's confirmation")
            switch outcome {
            case .done:
                let approval = PairingApproval(certificate: certificate, deviceID: DeviceID(publicKey: newcomerKey), deviceName: name,
                                               sentCAKey: sealed != nil)
                _ = try? await OffPool.run {
                    let devices = try accounts.knownDevices(of: identity.account.id)
                    devices.note(certificate, seen: true)
                    devices.flush()
                }
                logger.info("admitted a device by pairing", metadata: ["device": "\(approval.deviceID.short)", "name": "\(name)"])
                return approval
            case .refused(let reason):
                throw PairingError(code: .refusedByPeer, message: reason)
            default:
                throw PairingError.malformed("expected pair-done, got \(outcome.type)")
            }
        }
    }

    /// The name to certify: the newcomer's own (its certificate's), else the announced one; at
    /// most 64 characters (X.509's bound on a common name), control characters dropped.
    static func deviceName(_ claimed: String?, fallback: String) -> String {
        let cleaned = (claimed ?? fallback).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }
        let name = String(String.UnicodeScalarView(cleaned)).prefix(64)
        return name.isEmpty ? "device" : String(name)
    }
}
