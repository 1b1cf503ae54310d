import Foundation
import Logging
import HearthIdentity
import HearthTransport
import NIOCore

// The floor: what a round trip costs on this loopback with no Hearth logic at all, once over
// plain TCP and once over Hearth's own TLS transport (same handshake, same frame code).

/// Blocking-socket helpers for the raw TCP echo and the counting proxy.
enum Sockets {
    /// A listening socket on 127.0.0.1 (`port` 0: any free port) and its port.
    static func listen(port: Int = 0) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, 64) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { close(fd); throw BenchError("cannot listen: \(String(cString: strerror(errno)))") }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port that was free a moment ago (bound and released), for peers on fixed ports.
    static func freePort() throws -> Int {
        let (fd, port) = try listen()
        close(fd)
        return port
    }

    static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let rc = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else { close(fd); throw BenchError("cannot connect to \(port): \(String(cString: strerror(errno)))") }
        noDelay(fd)
        return fd
    }

    /// Small writes go out at once, as NIO's sockets do (NIO sets TCP_NODELAY by default).
    static func noDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    static func readExactly(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let n = read(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }

    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < buffer.count {
            let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }
}

enum EchoMode {
    /// `echo-tcp`: echoes fixed-size messages on one accepted connection until it closes.
    static func runTCP(size: Int) throws {
        let (listener, port) = try Sockets.listen()
        LineWriter(fd: 1).send("READY \(port)")
        let fd = accept(listener, nil, nil)
        Sockets.noDelay(fd)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while Sockets.readExactly(fd, buffer), Sockets.writeAll(fd, UnsafeRawBufferPointer(buffer)) {}
        close(fd)
        close(listener)
    }

    /// `echo-tls config=…`: echoes every frame of every connection through `PeerTransport`.
    static func runTLS(config: String) async throws {
        guard let identity = try AccountStore(directory: URL(fileURLWithPath: config), logger: Logger(label: "hearth.bench")).loadCurrentIdentity() else {
            throw BenchError("no identity in \(config)")
        }
        let listener = try await PeerTransport(identity: identity, logger: Logger(label: "hearth.bench")).listen(host: "127.0.0.1", port: 0)
        LineWriter(fd: 1).send("READY \(listener.port ?? -1)")
        // One connection at a time, until killed: the floor's, then the handshake-only ones.
        for await connection in listener.connections {
            try? await connection.executeThenClose { inbound, outbound in
                for try await frame in inbound { try await outbound.write(frame) }
            }
        }
    }
}

enum Floor {
    /// Round trips of `size`-byte messages to a raw TCP echo child, in nanoseconds.
    static func tcp(rounds: Int, size: Int) throws -> [Double] {
        let child = try Child(name: "tcp echo", arguments: ["echo-tcp", "size=\(size)"])
        defer { child.kill() }
        let port = Int(try child.ask("", expect: "READY")[0])!
        let fd = try Sockets.connect(port: port)
        defer { close(fd) }
        let out = [UInt8](repeating: 7, count: size)
        let back = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 8)
        defer { back.deallocate() }
        var samples: [Double] = []
        samples.reserveCapacity(rounds)
        for i in 0..<(rounds + rounds / 10) {
            let t0 = monotonicNanoseconds()
            guard out.withUnsafeBytes({ Sockets.writeAll(fd, $0) }), Sockets.readExactly(fd, back) else {
                throw BenchError("tcp echo failed")
            }
            if i >= rounds / 10 { samples.append(Double(monotonicNanoseconds() - t0)) }
        }
        return samples
    }

    /// Round trips of one `size`-byte frame through Hearth's TLS transport to an echo child.
    static func tls(rounds: Int, size: Int, identity: DeviceIdentity, port: Int) async throws -> [Double] {
        let connection = try await PeerTransport(identity: identity, logger: Logger(label: "hearth.bench")).connect(host: "127.0.0.1", port: port)
        return try await connection.executeThenClose { inbound, outbound in
            var frames = inbound.makeAsyncIterator()
            let payload = ByteBuffer(bytes: [UInt8](repeating: 7, count: size))
            var samples: [Double] = []
            samples.reserveCapacity(rounds)
            for i in 0..<(rounds + rounds / 10) {
                let t0 = monotonicNanoseconds()
                try await outbound.write(payload)
                guard try await frames.next() != nil else { throw BenchError("tls echo closed") }
                if i >= rounds / 10 { samples.append(Double(monotonicNanoseconds() - t0)) }
            }
            return samples
        }
    }
}
