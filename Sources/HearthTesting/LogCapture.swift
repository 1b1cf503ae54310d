import InMemoryLogging
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
        /// The logger's label.
        public var label: String
        /// The level it was logged at.
        public var level: Logger.Level
        /// The message, without metadata.
        public var message: String
        /// The metadata, each value as text.
        public var metadata: [String: String]

        /// The message, then the metadata as sorted `key=value` pairs.
        public var text: String {
            "\(message) " + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
    }

    /// swift-log's own in-memory handler keeps the events: every logger made here shares its
    /// store (copies of the handler do), so the events of every label stay in one order.
    private let handler: InMemoryLogHandler
    /// The metadata key under which each event carries its logger's label (removed from records).
    private static let labelKey = "hearth.capture.label"

    /// A capture with no records yet.
    public init() {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        self.handler = handler
    }

    /// A logger whose events (at every level) are kept here.
    public func logger(_ label: String) -> Logger {
        Logger(label: label) { [handler] label in
            var labelled = handler
            labelled.metadata[Self.labelKey] = .string(label)
            return labelled
        }
    }

    /// Everything logged so far, in order.
    public var all: [Record] {
        handler.entries.map { entry in
            var metadata = entry.metadata.mapValues { "\($0)" }
            let label = metadata.removeValue(forKey: Self.labelKey) ?? ""
            return Record(label: label, level: entry.level, message: "\(entry.message)", metadata: metadata)
        }
    }

    /// Waits up to `timeout` for an event whose ``Record/text`` contains `text` (the default is
    /// generous: a busy machine, or a sanitizer, slows a test's events down several times).
    public func waitFor(_ text: String, timeout: Duration = .seconds(30)) async -> Record? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let record = all.first(where: { $0.text.contains(text) }) { return record }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return all.first(where: { $0.text.contains(text) })   // the deadline may pass while we wait
    }
}
