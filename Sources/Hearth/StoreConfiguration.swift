import HearthCore
import Logging

/// Settings for opening a store, also spelt `UbiquitousKeyValueStore.Configuration`: where its
/// file is, how soon a change reaches it, how it syncs and attaches, and where it logs.
///
/// ```swift
/// let store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.notes",
///                                         configuration: .init(dataDirectory: "/tmp/notes"))
/// ```
///
/// A type of its own rather than nested in ``UbiquitousKeyValueStore``: a ``HearthDevice`` is
/// made from one too, and the store's class keeps to the store.
public struct StoreConfiguration: Sendable {
    /// The folder that holds the replica files (default `$XDG_DATA_HOME/hearth`).
    public var dataDirectory: String
    /// How long after a change it is written to disk at the latest (default 1 s).
    public var writeBehindDelay: Duration
    /// Where the store and its sync log; pass your app's logger. The default (label `hearth`)
    /// is the one logger the library makes itself: `Configuration()` must work with no
    /// arguments, as Apple's store needs none. Every internal module takes its logger from
    /// here and makes none of its own.
    public var logger: Logger
    /// Whether and how to sync with the account's other devices (default: when signed in).
    public var sync: SyncSettings
    /// What to do when another process of this device has the store open (default
    /// ``AttachMode/automatic``: attach to it; see docs/local-attach.md).
    public var attach: AttachMode = .automatic
    /// Shifts this store's clock, so tests can play devices whose clocks are wrong.
    package var clockSkew: Duration = .zero
    /// Opens with sync set up but not started until ``UbiquitousKeyValueStore/resumeSync()``: a one-shot write
    /// (`hearth set`) makes its change before its first hello, so its peers get the change
    /// as part of their first sync with it, not after a hello that lacked it.
    package var syncStartsPaused = false

    /// Settings with these values; every one has a default.
    public init(dataDirectory: String = StoreLocation.defaultDataDirectory(),
                writeBehindDelay: Duration = .seconds(1),
                sync: SyncSettings = .automatic,
                logger: Logger = Logger(label: "hearth")) {
        self.dataDirectory = dataDirectory
        self.writeBehindDelay = writeBehindDelay
        self.sync = sync
        self.logger = logger
    }
}
