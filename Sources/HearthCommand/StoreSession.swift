import Foundation
import Hearth
import HearthCore

/// A store kept open and syncing until SIGINT, SIGTERM or a closed output (`watch` and
/// `serve`), printing each external change as it happens and answering other `hearth`
/// commands over the store's control socket (writes, and `status` for `hearth peers` and
/// `hearth status`).
///
/// While idle it writes nothing to disk: its state is in memory and given out on request.
struct StoreSession {
    let access: StoreAccess
    let printChanges: Bool
    let json: Bool
    let label: String

    func run() async throws {
        let signals = SignalWaiter()
        guard let store = try await openWaiting(signals.stopper) else {
            note("\(label): \(signals.stopper.reason.map(Self.describe) ?? "stopped") while waiting for the store; nothing was opened")
            return
        }
        // Help says serve creates the store; a fresh store with nothing in it would otherwise
        // have no file until its first change, and `hearth list` would call it unknown.
        if !access.exists, !(await store.saveCreatingFile()) {
            note("\(label): could not create the file of store \(access.storeIdentifier) yet; it is written at the first change")
        }
        let exchanges = ExchangeClock()
        let device = access.identity?.deviceID.hex
        let discovery = access.options.discoveryDescription
        let port = Locked<Int?>(nil)
        let liveStatus: @Sendable () -> LiveStatus = {
            let entries = store.syncMetrics.map { ($0.entriesSent, $0.entriesReceived) }
            exchanges.observe(entries)
            return LiveStatus(pid: getpid(), store: store.storeIdentifier, port: port.withLock { $0 }, device: device,
                              connectedPeers: store.connectedPeerDeviceIDs, discoveredPeers: store.discoveredPeers,
                              discovery: discovery, lastExchange: exchanges.date, entries: entries,
                              figures: StoreFigures(store.replica, refusals: store.syncRefusals))
        }
        // Up before sync starts, so that hearth set/rm/peers find us as soon as we hold the store.
        let handler = ControlHandler(store: store, status: liveStatus,
                                     onWrite: { exchanges.observe(store.syncMetrics.map { ($0.entriesSent, $0.entriesReceived) }) })
        let control = ControlServer(path: ControlSocket.path(for: access.location))
        control?.start { line in await handler.answer(line) }
        if control == nil { note("\(label): no control socket; hearth set/rm on this store will report it locked") }

        do {
            let syncPort = store.isSyncing ? try await store.syncPort() : nil
            port.withLock { $0 = syncPort }
            note("\(label) \(access.storeIdentifier) as \(access.whoAmI)"
                 + (syncPort.map { "; listening on port \($0)" } ?? "; not syncing (signed out)")
                 + "; peers: \(discovery). Ctrl-C to stop.")
        } catch {
            control?.stop()
            await store.close()
            throw CommandError(.general, "cannot sync store \(access.storeIdentifier): \(error)")
        }

        let changes = store.changes
        let printer = Task {
            for await change in changes {
                // What is printed is on disk too, so a `hearth get` right after sees it.
                await store.synchronizeOffPool()
                exchanges.observe(store.syncMetrics.map { ($0.entriesSent, $0.entriesReceived) })
                guard printChanges else { continue }
                let values = change.keys.map { ($0, store.value(forKey: $0)) }
                if json {
                    let fields = values.map { "\(PropertyListJSON.quote($0.0)):\($0.1.map(PropertyListJSON.string) ?? "null")" }
                    emit("{\"reason\":\"\(change.reason)\",\"code\":\(change.reason.rawValue),\"values\":{\(fields.joined(separator: ","))}}")
                } else {
                    for (key, value) in values {
                        emit("\(change.reason) (\(change.reason.rawValue)): \(key) " + (value.map { "= \(PropertyListJSON.human($0))" } ?? "removed"))
                    }
                }
            }
        }
        // Entries also move with no change here (a peer that reconnects and lacks some):
        // the counters are looked at once a second, in memory only.
        let sampler = Task {
            while !Task.isCancelled {
                exchanges.observe(store.syncMetrics.map { ($0.entriesSent, $0.entriesReceived) })
                try? await Task.sleep(for: .seconds(1))
            }
        }
        let reason = await signals.wait()
        control?.stop()
        // Whoever closed our output does not want to read more, notes included.
        if reason != .outputClosed { note("\(label): \(Self.describe(reason)); saving and closing") }
        sampler.cancel()
        printer.cancel()
        await store.close()
    }

    /// Opens the store, waiting while another process holds it (a one-shot `hearth set`, say):
    /// a `serve` that gave up would leave the device with no process serving the store.
    /// Nil if stopped before the store was free.
    private func openWaiting(_ stopper: SignalWaiter.Stopper) async throws -> UbiquitousKeyValueStore? {
        var noted = false
        while stopper.reason == nil {
            do {
                // Owning the store, not attached: serve hosts it (apps attach to serve), and its
                // listener, status and delivery figures are this process's (docs/command.md).
                return try access.open(logLevel: .warning)
            } catch let error as CommandError where error.status == .storeLocked {
                if !noted {
                    let holder = StoreHolder(lockPath: access.location.lockPath)
                    note("\(label): store \(access.storeIdentifier) is open in \(holder); waiting for it to be free (Ctrl-C to stop)")
                    noted = true
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        return nil
    }

    private static func describe(_ reason: StopReason) -> String {
        switch reason {
        case .signal(let number): number == SIGINT ? "interrupted" : "terminated"
        case .outputClosed: "output closed"
        }
    }
}
