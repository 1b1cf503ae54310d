import HearthCore
import Logging

/// Keeps what Hearth logs, so a test can check that a refusal or a recovery was reported
/// and why.
///
/// ```swift
/// let capture = LogCapture()
/// var configuration = UbiquitousKeyValueStore.Configuration()
/// configuration.logger = capture.logger("hearth")
/// // … do something Hearth should complain about …
/// #expect(await capture.waitFor("ignoring the saved certificate") != nil)
/// ```
public final class LogCapture: Sendable {
    /// One log event.
    public struct Record: Sendable {
        public var label: String
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]

        /// The message, then the metadata as sorted `key=value` pairs.
        public var text: String {
            "\(message) " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
    }

    private let records = Locked<[Record]>([])

    public init() {}

    /// A logger whose events (at every level) are kept here.
    public func logger(_ label: String) -> Logger {
        Logger(label: label) { label in Handler(label: label, capture: self) }
    }

    /// Everything logged so far, in order.
    public var all: [Record] { records.withLock { $0 } }

    /// Waits up to `timeout` for an event whose ``Record/text`` contains `text`.
    public func waitFor(_ text: String, timeout: Duration = .seconds(5)) async -> Record? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let record = all.first(where: { $0.text.contains(text) }) { return record }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return all.first(where: { $0.text.contains(text) })   // the deadline may pass while we wait
    }

    private func append(_ record: Record) { records.withLock { $0.append(record) } }

    private struct Handler: LogHandler {
        let label: String
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append(Record(label: label, level: event.level, message: "\(event.message)",
                                  metadata: merged.mapValues { "\($0)" }))
        }
    }
}
