import Foundation
import Hearth
import HearthCore

// The `hearth` command's waits for the process that holds a store (a one-shot `hearth set`
// waiting for `serve`, `serve` waiting for a one-shot): events with a deadline, as the
// library's own open waits (``HolderWatch``; docs/local-attach.md, "Waiting for the holder").

extension StoreAccess {
    /// What tells a process waiting for this store that its holder may have changed: its lock
    /// let go, the holder's exit, and the holder's sockets (the store's attach socket, the
    /// command's control socket, the daemon's) appearing or going (``HolderWatch``). The
    /// folders are made if missing (private, as their owners make them): a folder that does not
    /// exist cannot be watched, and the wait would re-check once a second instead.
    package func holderWatch() -> HolderWatch {
        let control = ControlSocket.path(for: location, under: folders.controlSocketBase)
        for path in [control, attachSocketPath] {
            try? PrivateFolder.prepare((path as NSString).deletingLastPathComponent)
        }
        return HolderWatch(socketPaths: [control, attachSocketPath], lockPath: location.lockPath, blindInterval: holderBlindInterval,
                           asleep: holderWaitAsleep)
    }

    /// The store's attach socket (docs/local-attach.md), whoever hosts it.
    package var attachSocketPath: String {
        LocalSocketDirectory.socketPath(dataDirectory: folders.storeDataDirectory, storeIdentifier: storeIdentifier)
    }
}

extension HolderWatch {
    /// Waits, off the cooperative pool, for the holder to change (see ``HolderWatch``), for
    /// `deadline` (none: `nil`), or for `shouldStop` to hold, checked at once and again each
    /// time `stopped` is signalled: a process told to stop does not wait for the holder.
    package func wait(until deadline: ContinuousClock.Instant?, orUntil stopped: ChangeSignal?,
                      _ shouldStop: @escaping @Sendable () -> Bool) async {
        guard let stopped else { return await wait(until: deadline) }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(until: deadline) }
            group.addTask {
                // Ended by the group's cancellation once the holder's wait returns.
                _ = await ChangeSignal.waitUntil(deadline ?? .now + .seconds(86_400 * 365), observing: { [stopped] }, shouldStop)
            }
            await group.next()
            group.cancelAll()
        }
    }
}
