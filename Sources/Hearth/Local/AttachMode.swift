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
}
