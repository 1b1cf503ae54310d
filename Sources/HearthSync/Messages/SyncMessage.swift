import Foundation
import HearthCore
import HearthIdentity

/// The messages of the sync protocol, each one frame: a binary property list dictionary
/// with a `t` (type) field. docs/protocol.md documents every field.
///
/// Since protocol 3, one connection carries every store two devices share: the hello is per
/// device and lists the stores the sender serves; every message about data names its store.
package enum SyncMessage: Sendable, Equatable {
    /// The message's kind as its `type` field names it ("hello", "delta", …), for log lines.
    package var kind: String {
        switch self {
        case .hello: "hello"
        case .store: "store"
        case .delta: "delta"
        case .ack: "ack"
        case .ping: "ping"
        case .pong: "pong"
        case .refused: "refused"
        case .removals: "removals"
        case .renew: "renew"
        case .certificate: "certificate"
        case .links: "links"
        }
    }

    /// First message on a connection, both ways.
    case hello(Hello)
    /// What the sender has of one store, when the hello's digests showed the peer may not
    /// know it (or the store was attached since), or that the sender no longer serves it.
    case store(StoreState)
    /// Entries of one store the receiver lacks, with the certificates that verify them.
    case delta(Delta)
    /// What the sender has of one store after applying a delta.
    case ack(Ack)
    /// Heartbeat, per connection: with the vectors of the stores that changed since the
    /// sender last told them (so peers learn what it has even when idle, and can collect
    /// tombstones); answered by `pong`.
    case ping([String: VersionVector])
    /// The answer to a ping, with the vectors of the stores that changed since the sender last
    /// told them (on a link with sparse heartbeats only the dialler pings, so the other side
    /// says what it has here; older builds send and read none).
    case pong([String: VersionVector])
    /// Entries of a delta the receiver did not apply, each with why, and the receiver's wall
    /// clock (milliseconds since 1970), so that a writer whose clock is ahead can tell. The
    /// rest of the delta was applied; the link stays up.
    case refused(Refusal)
    /// Device removals signed by the account CA, per connection: sent when the hellos'
    /// removals digests differ, and relayed to every peer when a device learns a new one.
    case removals([DeviceRemoval])
    /// The sender's certificate is within its renewal window: a peer holding the unlocked
    /// account CA answers with `certificate`; others ignore it.
    case renew
    /// A renewed certificate (DER) for the receiver's own key, issued by the account CA.
    case certificate(Data)
    /// The devices the sender has a session with now, besides the receiver (32-byte IDs), and
    /// the vectors of the stores that changed since the receiver was last told them: a relay
    /// does not pass on to the sender what those devices' own sessions bring it
    /// (docs/protocol.md, "Relays").
    case links(Links)

    package struct Links: Sendable, Equatable {
        package var devices: [Data]
        package var stores: [String: VersionVector]

        package init(devices: [Data], stores: [String: VersionVector] = [:]) {
            self.devices = devices
            self.stores = stores
        }
    }

    /// A renewed certificate in a `certificate` message is at most this many bytes.
    package static let maximumCertificateSize = 8192

    /// At most this many removal records are read from a `removals` message.
    package static let maximumRemovals = DeviceRemovals.maximumRecords

    /// At most this many refused entries are read from a `refused` message.
    package static let maximumRefusals = 1024

    /// The largest frame read before the peer's hello is verified, hello included: nothing
    /// bigger is even decoded from a peer that has not yet proved who it is. A hello lists at
    /// most ``maximumStores`` stores of at most ``maximumStoreIdentifierBytes`` each, about
    /// 180 KB.
    package static let maximumHelloSize = 256 * 1024

    /// At most this many stores in a hello, and served by one engine: a device with more
    /// would be a household of a thousand apps; a hello listing more is refused.
    package static let maximumStores = 1024

    /// A store identifier on the wire is at most this many bytes of UTF-8.
    package static let maximumStoreIdentifierBytes = 128

    /// At most this many entries in one delta. Senders split what a peer lacks into deltas of
    /// at most this many entries (and about a megabyte); a receiver refuses a bigger delta.
    package static let maximumDeltaEntries = 8192

    /// A vector in a message may name at most this many origins (`Replica.maximumVectorOrigins`).
    package static let maximumVectorOrigins = Replica.maximumVectorOrigins

    /// At most this many device IDs are read from a `store` message's `peers`: a household is
    /// a few devices, and a misbehaving peer must not grow our list of devices without bound.
    package static let maximumPeers = 64

    /// The digest of a set of known devices that a hello carries per store: the first 8 bytes
    /// of the SHA-256 of the 32-byte IDs, sorted and concatenated. Equal digests: nothing to tell.
    package static func peersDigest(_ devices: some Sequence<Data>) -> Data {
        Data(SHA256.hash(devices.sorted { $0.lexicographicallyPrecedes($1) }.reduce(into: Data()) { $0.append($1) }).prefix(8))
    }

    /// The digest of a vector that a hello carries per store: the first 8 bytes of the SHA-256
    /// of the vector's signing bytes. Equal digests: both sides have the same entries.
    package static func vectorDigest(_ vector: VersionVector) -> Data {
        Data(SHA256.hash(vector.signingBytes).prefix(8))
    }

    package struct Hello: Sendable, Equatable {
        /// One store the sender serves, as digests: a peer that serves it too and has the same
        /// digests has nothing to tell about it.
        package struct Store: Sendable, Equatable {
            package var identifier: String
            /// ``SyncMessage/vectorDigest(_:)`` of the sender's vector of the store.
            package var vectorDigest: Data
            /// ``SyncMessage/peersDigest(_:)`` of the devices the sender knows of in this store,
            /// itself included.
            package var peersDigest: Data
            /// The sender's vector itself, when small (at most ``Hello/maximumInlineOrigins``
            /// origins, within the hello's ``Hello/maximumInlineBytes``): a peer whose digest
            /// differs then knows it at once, and neither sends a `store` message for it. On a
            /// reconnection that saves a round trip and two frames.
            package var vector: VersionVector?

            package init(identifier: String, vectorDigest: Data, peersDigest: Data, vector: VersionVector? = nil) {
                self.identifier = identifier
                self.vectorDigest = vectorDigest
                self.peersDigest = peersDigest
                self.vector = vector
            }
        }

        /// A store's vector goes in the hello only if it names at most this many origins.
        package static let maximumInlineOrigins = 8
        /// The vectors a hello carries take at most this many bytes together, so that a hello of
        /// 1,024 stores still fits the 256 KiB read before the hello (about 180 KB of them
        /// without vectors).
        package static let maximumInlineBytes = 32 * 1024

        package var protocolVersion: Int
        /// The account ID (32 bytes).
        ///
        /// Protocol 4 dropped the device ID and the signature protocol 3 carried: TLS 1.3 has
        /// authenticated the sender's device key for the whole connection before the hello is
        /// read (its CertificateVerify signs the handshake), so the hello is that device's
        /// already; the signature proved it a second time, at an Ed25519 signature and
        /// verification per connection.
        package var account: Data
        /// The stores the sender serves, at most ``SyncMessage/maximumStores``.
        package var stores: [Store]
        /// ``DeviceRemovals/digest`` of the removals the sender knows (every device sends one;
        /// a hello without it is sent no removals).
        package var removalsDigest: Data?
        /// The sender understands `renew` and `certificate`: every protocol 4 device does (not on
        /// the wire); a session's rules still allow for a peer that does not.
        package var renews: Bool
        /// The sender understands `links`: every protocol 4 device does (not on the wire).
        package var links: Bool

        package init(protocolVersion: Int = SyncMessage.protocolVersion, account: Data, stores: [Store],
                    removalsDigest: Data? = nil, renews: Bool = true, links: Bool = true) {
            self.renews = renews
            self.links = links
            self.protocolVersion = protocolVersion
            self.account = account
            self.stores = stores
            self.removalsDigest = removalsDigest
        }
    }

    /// What the sender has of one store, or that it left it.
    package struct StoreState: Sendable, Equatable {
        package var store: String
        /// The sender's vector of the store (absent when only its peers are told, or it left).
        package var vector: VersionVector?
        /// The other devices the sender knows of in this store (32-byte IDs), sent when the
        /// hello's peers digests differ: the receiver keeps tombstones until each has them.
        package var peers: [Data]?
        /// The sender no longer serves the store on this connection.
        package var left: Bool
        /// `w`: the sender asks for every entry the receiver has, whatever it was sent before
        /// (with `vector`): it dropped a removed device's later writes, and the entries they
        /// replaced are covered by its vector (docs/protocol.md, "Device removals").
        package var whole: Bool

        package init(store: String, vector: VersionVector? = nil, peers: [Data]? = nil, left: Bool = false, whole: Bool = false) {
            self.store = store
            self.vector = vector
            self.peers = peers
            self.left = left
            self.whole = whole
        }
    }

    package struct Delta: Sendable, Equatable {
        package var store: String
        package var entries: [Entry]
        /// DER device certificates of the signers.
        package var certificates: [Data]
        /// The sender's vector: what it had when it sent the delta. A claim, not a fact: the
        /// receiver's vector advances by the entries it applies, never by this.
        package var vector: VersionVector
        /// Entries of the frame that did not decode or break ``StoreLimits`` (only on receipt;
        /// never encoded). They are refused; the others apply.
        package var undecodable: [RefusedEntry]
        /// More deltas of the same batch follow (a big batch is split; the receiver's first
        /// download lasts until the last part).
        package var more: Bool

        package init(store: String, entries: [Entry], certificates: [Data], vector: VersionVector,
                    undecodable: [RefusedEntry] = [], more: Bool = false) {
            self.store = store
            self.entries = entries
            self.certificates = certificates
            self.vector = vector
            self.undecodable = undecodable
            self.more = more
        }
    }

    package struct Ack: Sendable, Equatable {
        package var store: String
        package var vector: VersionVector
        /// The part of ``vector`` the receiver has saved (`d`), when that is less: peers collect
        /// tombstones only on what a device keeps through a crash. Absent: all of it (what older
        /// builds of protocol 4 claim, as they did).
        package var durable: VersionVector?

        package init(store: String, vector: VersionVector, durable: VersionVector? = nil) {
            self.store = store
            self.vector = vector
            self.durable = durable
        }

        /// What the sender has saved of the store, by its word.
        package var saved: VersionVector { durable ?? vector }
    }

    package struct Refusal: Sendable, Equatable {
        package var store: String
        package var entries: [RefusedEntry]
        /// The receiver's wall clock when it refused them, in milliseconds since 1970.
        package var clock: UInt64

        package init(store: String, entries: [RefusedEntry], clock: UInt64) {
            self.store = store
            self.entries = entries
            self.clock = clock
        }
    }

    /// 4: the compact wire (one-letter field names, packed vectors, raw account ID, no signer
    /// for the sender's own entries, an unsigned hello). 3: one connection per pair of devices
    /// carries every store they share (store-tagged messages, a per-device hello with per-store
    /// digests). 2: entries refused one by one (`refused`), vectors advanced only by applied entries.
    package static let protocolVersion = 4

    /// A ping or a pong: traffic that keeps a link alive, not activity on it.
    package var isHeartbeat: Bool {
        switch self {
        case .ping, .pong: true
        default: false
        }
    }

    /// The store a message is about, if it is about one.
    package var storeIdentifier: String? {
        switch self {
        case .store(let state): state.store
        case .delta(let delta): delta.store
        case .ack(let ack): ack.store
        case .refused(let refusal): refusal.store
        case .hello, .ping, .pong, .removals, .renew, .certificate, .links: nil
        }
    }
}

/// Why a frame is not a valid message, or a peer broke the protocol.
package typealias SyncProtocolError = HearthError<SyncProtocolErrors>

/// The domain of ``SyncProtocolError``.
package enum SyncProtocolErrors: HearthErrorDomain {}

extension ErrorCode where Domain == SyncProtocolErrors {
    /// A frame is not a valid message, or a message breaks the protocol's rules (a second
    /// hello, a hello of another account, too many forged entries): the connection closes.
    package static var violation: Self { Self("violation") }
    /// The peer said nothing for longer than the link's timeout.
    package static var silent: Self { Self("silent") }
}

extension HearthError where Domain == SyncProtocolErrors {
    /// A protocol violation, explained by `reason`.
    package init(_ reason: String, file: String = #fileID, line: UInt = #line) {
        self.init(.violation, reason, file: file, line: line)
    }
}

extension SyncMessage {
    /// The message as a property list, as ``propertyList(sender:)`` with no sender.
    package var propertyList: PropertyListValue { propertyList(sender: nil) }

    /// The message as a property list; a delta leaves out the signer of the entries `sender`
    /// (the sending device's 32-byte ID) signed (``SyncMessageCodec``).
    package func propertyList(sender: Data?) -> PropertyListValue {
        SyncMessageCodec(sender: sender).propertyList(of: self)
    }

    /// The frame payload; `sender` as in ``propertyList(sender:)``.
    package func encoded(sender: Data? = nil) throws(PropertyListEncodingError) -> Data {
        try SyncMessageCodec(sender: sender).encode(self)
    }

    /// Parses a frame payload; `sender` (the peer's 32-byte device ID) signed the delta
    /// entries that name no signer (``SyncMessageCodec/decode(_:)``).
    package init(decoding data: Data, sender: Data? = nil) throws(SyncProtocolError) {
        self = try SyncMessageCodec(sender: sender).decode(data)
    }

    /// Reads a message from its property list (``propertyList(sender:)``).
    package init(propertyList value: PropertyListValue, sender: Data? = nil) throws(SyncProtocolError) {
        self = try SyncMessageCodec(sender: sender).message(fromPropertyList: value)
    }
}
