import HearthCore

/// Why a store cannot be attached to a ``SyncEngine``.
package typealias SyncEngineError = HearthError<SyncEngineErrors>

/// The domain of ``SyncEngineError``.
package enum SyncEngineErrors: HearthErrorDomain {}

extension ErrorCode where Domain == SyncEngineErrors {
    /// The engine has been stopped.
    package static var stopped: Self { Self("stopped") }
    /// A store of this identifier is attached already.
    package static var alreadyAttached: Self { Self("alreadyAttached") }
    /// The engine serves ``SyncMessage/maximumStores`` stores already.
    package static var tooManyStores: Self { Self("tooManyStores") }
    /// The identifier is empty or longer than ``SyncMessage/maximumStoreIdentifierBytes``.
    package static var invalidStoreIdentifier: Self { Self("invalidStoreIdentifier") }
    /// The caller's condition for attaching no longer held when the engine would attach.
    package static var withdrawn: Self { Self("withdrawn") }
}

extension HearthError where Domain == SyncEngineErrors {
    package static func stopped(file: String = #fileID, line: UInt = #line) -> Self {
        Self(.stopped, "the sync engine is stopped", file: file, line: line)
    }

    package static func alreadyAttached(_ store: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.alreadyAttached, "store \(String(reflecting: store)) is attached already", file: file, line: line)
    }

    package static func tooManyStores(file: String = #fileID, line: UInt = #line) -> Self {
        Self(.tooManyStores, "the sync engine serves \(SyncMessage.maximumStores) stores already", file: file, line: line)
    }

    package static func withdrawn(_ store: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.withdrawn, "store \(String(reflecting: store)) is no longer to be attached", file: file, line: line)
    }

    package static func invalidStoreIdentifier(_ store: String, file: String = #fileID, line: UInt = #line) -> Self {
        Self(.invalidStoreIdentifier, "store identifier \(String(reflecting: store)) cannot be synced "
             + "(1 to \(SyncMessage.maximumStoreIdentifierBytes) bytes of UTF-8)", file: file, line: line)
    }
}
