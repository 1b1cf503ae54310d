/// How a session ended (``SyncSession/run(_:)``): what its dialler does next.
enum SessionOutcome: Sendable {
    /// The connection ended after the hello exchange (peer closed, error, or replaced).
    case ended
    /// Refused by the duplicate rule before any data: another connection to this peer won.
    case duplicate
    /// The peer sent the account-signed record of this device's removal.
    case removedByPeer
    /// The peer refused our certificate with a bare `certificate_revoked` alert: any member
    /// can say that, so it is only a refused connection (issue 26).
    case refusedAsRevoked
    /// The peer is a device removed from the account.
    case peerRemoved
}
