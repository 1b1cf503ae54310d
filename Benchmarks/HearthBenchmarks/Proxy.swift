import Foundation
import Synchronization

/// A TCP relay on loopback that counts the bytes of each connection in each direction:
/// the wire bytes of a sync session, TLS records and handshake included, counted at the
/// socket. The dialling peer is pointed at the proxy instead of at the listening peer.
final class CountingProxy: Sendable {
    struct Counts: Sendable {
        var toTarget = 0
        var fromTarget = 0
        var total: Int { toTarget + fromTarget }
    }

    let port: Int
    private let listener: Int32
    private let target: Int
    private let connections = Mutex<[Counts]>([])
    private let sockets = Mutex<[Int32]>([])
    private let stopped = Mutex(false)

    init(target: Int) throws {
        (listener, port) = try Sockets.listen()
        self.target = target
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Byte counts of every connection so far, in order of arrival.
    var counts: [Counts] { connections.withLock { $0 } }

    private func acceptLoop() {
        while !stopped.withLock({ $0 }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { if errno == EINTR { continue }; return }
            guard let upstream = try? Sockets.connect(port: target) else { close(client); continue }
            Sockets.noDelay(client)
            let index = connections.withLock { $0.append(Counts()); return $0.count - 1 }
            sockets.withLock { $0 += [client, upstream] }
            Thread { [self] in pump(from: client, to: upstream, index: index, up: true) }.start()
            Thread { [self] in pump(from: upstream, to: client, index: index, up: false) }.start()
        }
    }

    private func pump(from source: Int32, to destination: Int32, index: Int, up: Bool) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n = read(source, buffer.baseAddress, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            connections.withLock { if up { $0[index].toTarget += n } else { $0[index].fromTarget += n } }
            guard Sockets.writeAll(destination, UnsafeRawBufferPointer(rebasing: buffer[..<n])) else { break }
        }
        // One side ended: end the other, as a direct connection would.
        shutdown(destination, Int32(SHUT_WR))
    }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in sockets.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
        // The pump threads see the shutdown and end; the descriptors are closed after a
        // moment so no pump reads a number the kernel has already reused.
        let fds = sockets.withLock { s in defer { s = [] }; return s }
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) { for fd in fds { close(fd) } }
    }
}
