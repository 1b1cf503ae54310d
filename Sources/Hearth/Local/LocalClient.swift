import Dispatch
import Foundation
import HearthCore
import HearthTransport
import Logging
import NIOCore
import NIOPosix

/// What an attached process needs to reach its host again, or to become the host itself:
/// the socket, the configuration the store was opened with, the event loop group of the
/// store's device (its connection runs there, and so does its socket should it take over),
/// and the threads that wait for the host's answers (``synchronize`` and the open).
final class LocalClient: Sendable {
    let socketPath: String
    let configuration: UbiquitousKeyValueStore.Configuration
    let group: any EventLoopGroup
    private let waiters = Locked<[DispatchSemaphore]>([])
    /// The watch a thread reattaching or taking over waits on: ``wake()`` ends its wait too.
    private let watch = Locked<HolderWatch?>(nil)

    init(socketPath: String, configuration: UbiquitousKeyValueStore.Configuration, group: any EventLoopGroup) {
        self.socketPath = socketPath
        self.configuration = configuration
        self.group = group
    }

    // MARK: Waiting for the host

    /// Runs `check` until it returns a result or `deadline` passes (then nil), again whenever
    /// something it may depend on changed (``wake()``: the host said something, the connection
    /// ended, the store was closed or taken over), never on a timer. Blocks the calling thread:
    /// only for the store's open and `synchronize()`, which Apple's API makes synchronous.
    func wait<T>(until deadline: DispatchTime, _ check: () -> T?) -> T? {
        while true {
            let semaphore = DispatchSemaphore(value: 0)
            // Registered before checking, so that a wake between the check and the wait is not lost.
            waiters.withLock { $0.append(semaphore) }
            if let result = check() {
                waiters.withLock { $0.removeAll { $0 === semaphore } }
                return result
            }
            let now = DispatchTime.now()
            guard now < deadline else {
                waiters.withLock { $0.removeAll { $0 === semaphore } }
                return nil
            }
            _ = semaphore.wait(timeout: deadline)
            waiters.withLock { $0.removeAll { $0 === semaphore } }
        }
    }

    /// Wakes every thread in ``wait(until:_:)``, and one waiting on the holder (``watching(_:)``).
    func wake() {
        for semaphore in waiters.withLock({ w in defer { w = [] }; return w }) { semaphore.signal() }
        watch.withLock { $0 }?.wake()
    }

    /// Records the watch the reattaching thread waits on (nil once it is done).
    func watching(_ holder: HolderWatch?) {
        watch.withLock { $0 = holder }
    }

    // MARK: Connecting

    /// Connects to the host's socket; what the host says goes to `attached` through a
    /// ``LocalClientHandler``. Throws at once if nobody listens (the socket file is gone, or
    /// left by a host that died: the connect is refused).
    func connect(for attached: AttachedStore) throws(LocalAttachError) -> any Channel {
        try LocalSocketDirectory.check((socketPath as NSString).deletingLastPathComponent)
        let fd = try Self.connectedSocket(socketPath)
        let channel: any Channel
        do {
            channel = try ClientBootstrap(group: group)
                .channelInitializer { [weak attached] channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(ByteToMessageHandler(FrameDecoder(maximumLength: Frame.maximumLength)))
                        try pipeline.addHandler(FrameEncoder(maximumLength: Frame.maximumLength))
                        try pipeline.addHandler(LocalClientHandler(attached: attached))
                    }
                }
                .withConnectedSocket(fd)
                .wait()
        } catch {
            throw LocalAttachError("cannot use the connection to \(socketPath): \(error)")
        }
        return channel
    }

    /// A connected, non-blocking, close-on-exec Unix socket. The connect itself is immediate on a
    /// Unix socket (accepted into the backlog, or refused).
    private static func connectedSocket(_ path: String) throws(LocalAttachError) -> NIOBSDSocket.Handle {
        guard var address = LocalSocketDirectory.address(path) else { throw LocalAttachError("socket path too long: \(path)") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LocalAttachError("socket: \(String(cString: strerror(errno)))") }
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            let code = errno
            close(fd)
            throw LocalAttachError("connect \(path): \(String(cString: strerror(code)))")
        }
        // The folder was checked, but the kernel's word on who listens is checked before the
        // hello (which names the data directory) or any write goes out.
        do throws(PrivateFolder.Refusal) {
            try PrivateFolder.checkServer(fd, at: path)
        } catch {
            close(fd)
            throw LocalAttachError(error.description)
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }
}
