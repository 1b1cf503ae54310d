/// Why a store cannot be attached to a ``SyncEngine``.
package enum SyncEngineError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The engine has been stopped.
    case stopped
    /// A store of this identifier is attached already.
    case alreadyAttached(String)
    /// The engine serves ``SyncMessage/maximumStores`` stores already.
    case tooManyStores
    /// The identifier is empty or longer than ``SyncMessage/maximumStoreIdentifierBytes``.
    case invalidStoreIdentifier(String)

    package var description: String {
        switch self {
        case .stopped: "the sync engine is stopped"
        case .alreadyAttached(let store): "store \(String(reflecting: store)) is attached already"
        case .tooManyStores: "the sync engine serves \(SyncMessage.maximumStores) stores already"
        case .invalidStoreIdentifier(let store):
            "store identifier \(String(reflecting: store)) cannot be synced (1 to \(SyncMessage.maximumStoreIdentifierBytes) bytes of UTF-8)"
        }
    }
}
