import Foundation
import HearthCore
import HearthDiscovery
import HearthIdentity
import HearthTransport

/// The engine's diallers: one task per peer discovery reports, keeping a connection to it up
/// (connect, run the session, back off after a failure, wait while the device has a session the
/// other way). The engine owns one; its sessions, network and removals are the engine's.
final class PeerDialler: Sendable {
    private struct State {
        var dialers: [String: Task<Void, Never>] = [:]
        /// The device each discovered peer turned out to be.
        var knownDevices: [String: DeviceID] = [:]
        /// Diallers waiting until a device's session (which the peer dialled) ends.
        var waiters: [DeviceID: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        var nextWaiter: UInt64 = 0
        var stopped = false
    }

    private let state = Locked(State())

    /// Stops dialling for good; returns the diallers, to be cancelled.
    func stop() -> [Task<Void, Never>] {
        state.withLock { s in
            s.stopped = true
            defer { s.dialers = [:] }
            return Array(s.dialers.values)
        }
    }

    /// `device`'s session ended (the engine took it out first): its waiting diallers go on.
    func sessionEnded(with device: DeviceID) {
        for waiter in state.withLock({ $0.waiters.removeValue(forKey: device).map { Array($0.values) } ?? [] }) { waiter.resume() }
    }

    /// Returns once `device` has no session (or the calling dialler is cancelled). Woken by
    /// ``sessionEnded(with:)``, not by polling: an idle device with peers that dialled it must
    /// not wake every few hundred milliseconds per peer.
    private func waitUntilNoSession(with device: DeviceID, of engine: SyncEngine) async {
        let id = state.withLock { s in defer { s.nextWaiter &+= 1 }; return s.nextWaiter }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { s -> Bool in
                    guard !s.stopped, !Task.isCancelled else { return false }
                    s.waiters[device, default: [:]][id] = continuation
                    return true
                }
                guard waiting else { continuation.resume(); return }
                // Checked once registered: a session that ends from now on resumes it; one that
                // ended before is seen here (whoever takes the waiter out resumes it, once).
                if !engine.hasSession(with: device) {
                    state.withLock { $0.waiters[device]?.removeValue(forKey: id) }?.resume()
                }
            }
        } onCancel: {
            state.withLock { s in s.waiters[device]?.removeValue(forKey: id) }?.resume()
        }
    }

    /// Starts or stops dialling a peer as discovery reports it (or ``SyncEngine/addPeer(host:port:)``).
    func handle(_ event: PeerEvent, for engine: SyncEngine) {
        switch event {
        case .appeared(let peer), .updated(let peer):
            state.withLock { s in
                guard !s.stopped, s.dialers[peer.id] == nil else { return }
                // A removed device is not dialled (once known by its certificate).
                if let device = s.knownDevices[peer.id], engine.removals.isRemoved(device) { return }
                s.dialers[peer.id] = Task { [weak self, weak engine] in
                    guard let engine else { return }
                    await self?.dial(peer, for: engine)
                }
            }
        case .gone(let peer):
            state.withLock { $0.dialers.removeValue(forKey: peer.id) }?.cancel()
        }
    }

    /// Keeps a connection to `peer` up: connect, run, and after a failure wait a jittered,
    /// doubling back-off before trying again. Waits while another connection to the same
    /// device is up (it may have dialled us).
    private func dial(_ peer: DiscoveredPeer, for engine: SyncEngine) async {
        let (options, identity, removals, logger) = (engine.options, engine.identity, engine.removals, engine.logger)
        var backoff = options.minimumBackoff
        while !Task.isCancelled {
            if let device = state.withLock({ $0.knownDevices[peer.id] }), engine.hasSession(with: device) {
                await waitUntilNoSession(with: device, of: engine)
                continue
            }
            var connected = false
            for address in peer.addresses.sorted() where !Task.isCancelled {
                do {
                    let connection = try await engine.network.dial(host: address.connectHost, port: Int(peer.port), expecting: nil)
                    connected = true
                    backoff = options.minimumBackoff
                    if connection.peer.deviceID == identity.deviceID {
                        logger.debug("\(peer.name) is this device; not dialling it")
                        await connection.close()
                        return
                    }
                    state.withLock { $0.knownDevices[peer.id] = connection.peer.deviceID }
                    switch await engine.runSession(connection, initiatedLocally: true) {
                    case .removedByPeer:
                        // It sent the account-signed record naming this device (noted by RemovalCoordinator.learn).
                        return
                    case .refusedAsRevoked:
                        // A bare alert is any member's word: a refused connection, tried again.
                        engine.removalCoordinator.noteRefusedAsRevoked(by: connection.peer)
                        connected = false   // backs off as a failed dial does
                    case .peerRemoved:
                        return
                    case .ended, .duplicate:
                        // Removed while connected (its session was closed for it), or this device was.
                        if removals.isRemoved(connection.peer.deviceID) || removals.isRemoved(identity.deviceID) { return }
                    }
                    break
                } catch let error as TLSError where error.code == .peerRemoved {
                    logger.info("\(peer.name) is a device removed from the account; not dialling it")
                    return
                } catch let error as TLSError where error.code == .removedByPeer {
                    logger.debug("could not connect to \(peer.name) at \(address): \(error)")
                    engine.removalCoordinator.noteRefusedAsRevoked(by: nil, name: peer.name)
                } catch {
                    logger.debug("could not connect to \(peer.name) at \(address): \(error)")
                }
            }
            let jitter = engine.context.random.number(in: 0.5...1.5)
            try? await engine.context.clock.sleep((connected ? options.minimumBackoff : backoff) * jitter)
            if !connected { backoff = min(backoff * 2, options.maximumBackoff) }
        }
    }
}
