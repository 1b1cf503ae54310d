import HearthCore
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

    /// Signalled at each event kept: what ``waitFor(_:timeout:)`` and ``until(_:deadline:_:)``
    /// wait on (no polling).
    package let changes = ChangeSignal()

    /// A logger whose events (at every level) are kept here.
    public func logger(_ label: String) -> Logger {
        Logger(label: label) { [handler, changes] label in
            var labelled = handler
            labelled.metadata[Self.labelKey] = .string(label)
            return Signalling(inner: labelled, changes: changes)
        }
    }

    /// The in-memory handler, and a signal after each event it keeps.
    private struct Signalling: LogHandler {
        var inner: InMemoryLogHandler
        let changes: ChangeSignal

        func log(event: LogEvent) {
            inner.log(event: event)
            changes.signal()
        }

        var metadataProvider: Logger.MetadataProvider? {
            get { inner.metadataProvider }
            set { inner.metadataProvider = newValue }
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { inner[metadataKey: key] }
            set { inner[metadataKey: key] = newValue }
        }

        var metadata: Logger.Metadata {
            get { inner.metadata }
            set { inner.metadata = newValue }
        }

        var logLevel: Logger.Level {
            get { inner.logLevel }
            set { inner.logLevel = newValue }
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
        var found: Record?
        _ = await ChangeSignal.waitUntil(ContinuousClock.now + timeout, observing: { [changes] }) {
            found = all.first { $0.text.contains(text) }
            return found != nil
        }
        return found
    }

    /// Waits until `condition` (on ``all``, say) holds, checking it again at each event logged;
    /// false if it does not hold by `deadline`, a bound for a failure.
    ///
    /// ```swift
    /// #expect(await capture.until { capture.all.filter { $0.text.contains("refused") }.count >= 2 })
    /// ```
    package func until(deadline: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
        await ChangeSignal.waitUntil(ContinuousClock.now + deadline, observing: { [changes] }, condition)
    }
}
