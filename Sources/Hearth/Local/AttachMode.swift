/// What a store does when another process of this device already has it open
/// (docs/local-attach.md).
///
/// ```swift
/// var configuration = UbiquitousKeyValueStore.Configuration()
/// configuration.attach = .embedded   // own the file or throw storeLocked
/// ```
public enum AttachMode: Sendable, Hashable {
    /// The default. The first process to open the store owns its file and *hosts* it for the
    /// others on a Unix socket; the next ones *attach* to it: they read from an in-process
    /// copy the host keeps current, their writes go to the host in order, and each gets the
    /// others' writes as `serverChange` notifications. When the host exits, an attached
    /// process takes over. A store is never memory-only because another process holds it.
    case automatic
    /// This process owns the store's file or fails: the throwing initializer throws
    /// ``KeyValueStoreError/Code/storeLocked`` when another process holds it (Hearth's
    /// behaviour before attaching existed). Once open, it hosts the store for processes that
    /// attach, as ``automatic`` does.
    case embedded
    /// The store is held by this user's device daemon (`hearth daemon`, docs/daemon.md) and
    /// this process only ever attaches to it: no file of its own, no sync engine, whatever
    /// happens. The throwing initializer throws ``KeyValueStoreError/Code/daemonUnavailable``
    /// when no daemon runs or it will not hold the store (another data directory). If the
    /// daemon stops while the app runs, the app's writes wait in its process (reads go on from
    /// its copy) and are sent, in order, when a daemon is back; this process never takes the
    /// store over, as ``automatic`` would.
    ///
    /// ```swift
    /// var configuration = UbiquitousKeyValueStore.Configuration()
    /// configuration.attach = .required
    /// let store = try UbiquitousKeyValueStore(storeIdentifier: "com.example.notes", configuration: configuration)
    /// ```
    case required
}
