import Foundation
import Hearth
import HearthCore
import HearthDaemon

/// One store kept open and syncing until SIGINT, SIGTERM or a closed output (`watch` and
/// `serve`): a ``HostedStore`` for as long as the command runs.
struct StoreSession {
    let access: StoreAccess
    let printChanges: Bool
    let json: Bool
    let label: String

    func run() async throws {
        let signals = SignalWaiter()
        let stopper = signals.stopper
        guard let hosted = try await HostedStore.open(access, label: label, output: .standardStreams, printChanges: printChanges, json: json,
                                                      shouldStop: { stopper.reason != nil }, stopped: stopper.stopped) else {
            note("\(label): \(stopper.reason.map(Self.describe) ?? "stopped") while waiting for the store; nothing was opened")
            return
        }
        note("\(label) \(access.storeIdentifier) as \(access.whoAmI)"
             + (hosted.syncPort.map { "; listening on port \($0)" } ?? "; \(hosted.notSyncing)")
             + "; peers: \(access.peering.discoveryDescription). Ctrl-C to stop.")
        let reason = await signals.wait()
        // Whoever closed our output does not want to read more, notes included.
        if reason != .outputClosed { note("\(label): \(Self.describe(reason)); saving and closing") }
        await hosted.close()
    }

    static func describe(_ reason: StopReason) -> String {
        switch reason {
        case .signal(let number): number == SIGINT ? "interrupted" : "terminated"
        case .outputClosed: "output closed"
        }
    }
}
