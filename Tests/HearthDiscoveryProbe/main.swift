// hearth-discovery-probe: publishes one Hearth service and reports what it discovers, one
// line per event on stdout. The discovery tests run it as a separate process: on each
// virtual host of scripts/testnet/multihost.sh, and with no Avahi daemon for the fallback.
//
//   hearth-discovery-probe [--name N] [--port P] [--account H] [--store H] [--device H]
//                          [--expect COUNT] [--addresses N] [--timeout SECONDS] [--together] [--fallback]
//
// Exits 0 once COUNT peers were seen, each with N addresses at least (default 1; and, with
// --fallback, TCP-connected), 1 on timeout,
// 2 on a usage or discovery error. With --together (on multihost.sh's hosts), it keeps
// publishing after that until every host's probe is done too (each marks it in the folder
// $HEARTH_SHARED, HEARTH_HOSTS in all), so that a slower host still sees it; the timeout
// bounds that wait too. Output lines:
//   published NAME | appeared NAME PORT ADDR… | gone NAME | unavailable REASON |
//   static PEERS | connected HOST:PORT | done | timeout
import Foundation
import HearthDiscovery
import Logging

LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }

var options: [String: String] = [:]
var flags: Set<String> = []
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--fallback" || argument == "--together" {
        flags.insert(argument)
    } else if argument.hasPrefix("--"), let value = arguments.popFirst() {
        options[String(argument.dropFirst(2))] = value
    } else {
        FileHandle.standardError.write(Data("usage: see the header of Tests/HearthDiscoveryProbe/main.swift\n".utf8))
        exit(2)
    }
}

func say(_ line: String) {
    // Unbuffered: the parent process reads lines as they come.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let host = ProcessInfo.processInfo.environment["HEARTH_HOST"] ?? ProcessInfo.processInfo.hostName
let service = ServiceDescription(
    instanceName: options["name"] ?? "probe on \(host)",
    port: UInt16(options["port"] ?? "") ?? 7420,
    protocolVersion: 1,
    accountHash: options["account"] ?? "00000000000000aa",
    storeHash: options["store"] ?? "00000000000000bb",
    deviceHash: options["device"] ?? String(format: "%016llx", UInt64.random(in: 1...UInt64.max)))
let expected = Int(options["expect"] ?? "1") ?? 1
let addresses = Int(options["addresses"] ?? "1") ?? 1
let timeout = Double(options["timeout"] ?? "20") ?? 20
var logger = Logger(label: "probe")
logger.logLevel = .info

/// Marks this host's probe done in `folder` and returns once `hosts` probes have (on a thread
/// of its own: inotify on the folder, no poll); the watchdog ends the process otherwise.
func together(in folder: String, hosts: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            let watch = inotify_init1(Int32(IN_CLOEXEC))
            // Watched before this probe's mark and the count: no other mark can be missed.
            if watch < 0 || inotify_add_watch(watch, folder, UInt32(IN_CREATE | IN_MOVED_TO)) < 0 {
                say("error cannot watch \(folder): errno \(errno)")
                exit(2)
            }
            _ = FileManager.default.createFile(atPath: "\(folder)/\(host)", contents: nil)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while ((try? FileManager.default.contentsOfDirectory(atPath: folder))?.count ?? 0) < hosts {
                guard read(watch, &buffer, buffer.count) > 0 || errno == EINTR else {
                    say("error reading inotify: errno \(errno)")
                    exit(2)
                }
            }
            close(watch)
            continuation.resume()
        }
    }
}

/// A plain TCP connect, enough to prove a statically listed peer is reachable.
func tcpConnect(_ peer: DiscoveredPeer) -> Bool {
    for address in peer.addresses {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(address.connectHost, String(peer.port), &hints, &result) == 0, let first = result else { continue }
        defer { freeaddrinfo(result) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { continue }
        defer { close(fd) }
        if connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 { return true }
    }
    return false
}

let discovery: any PeerDiscovery
do {
    let avahi = AvahiDiscovery(service: service, logger: logger)
    try await avahi.start()
    discovery = avahi
    if flags.contains("--fallback") { say("avahi available") }
} catch let error as DiscoveryError {
    guard error.code == .daemonUnavailable, flags.contains("--fallback") else {
        say("error \(error)")
        exit(2)
    }
    say("unavailable \(error)")
    do {
        guard let fallback = try StaticDiscovery.fromDefaultSources(logger: logger) else {
            say("error no static peers (set HEARTH_PEERS)")
            exit(2)
        }
        try await fallback.start()
        say("static \(fallback.endpoints.map(\.description).joined(separator: ","))")
        discovery = fallback
    } catch {
        say("error \(error)")
        exit(2)
    }
}

let watchdog = Task {
    try await Task.sleep(for: .seconds(timeout))
    say("timeout")
    exit(1)
}

// Print every event, including updates after `done` (e.g. an IPv6 address arriving after
// the IPv4 one); `reached` resumes once `expected` peers are present with `addresses`
// addresses each.
let (reached, reachedContinuation) = AsyncStream.makeStream(of: Void.self)
let printer = Task {
    var seen: Set<String> = []
    for await event in discovery.events() {
        switch event {
        case .appeared(let peer), .updated(let peer):
            let kind = if case .appeared = event { "appeared" } else { "updated" }
            say("\(kind) \(peer.name.replacingOccurrences(of: " ", with: "_")) \(peer.port) \(peer.addresses.map(\.description).joined(separator: " "))")
            // Counted once it has what the caller checks (its second family or interface comes as an update).
            guard peer.addresses.count >= addresses else { continue }
            if flags.contains("--fallback"), !seen.contains(peer.id) {
                guard tcpConnect(peer) else { continue }
                say("connected \(peer.name)")
            }
            seen.insert(peer.id)
        case .gone(let peer):
            say("gone \(peer.name.replacingOccurrences(of: " ", with: "_"))")
            seen.remove(peer.id)
        }
        if seen.count >= expected { reachedContinuation.yield() }
    }
}
for await _ in reached { break }
if let avahi = discovery as? AvahiDiscovery, let name = avahi.publishedName { say("published \(name)") }
say("done")
// Publishing on until the other hosts' probes have seen us too.
if flags.contains("--together") {
    let environment = ProcessInfo.processInfo.environment
    guard let folder = environment["HEARTH_SHARED"], let hosts = environment["HEARTH_HOSTS"].flatMap(Int.init) else {
        say("error --together needs HEARTH_SHARED and HEARTH_HOSTS (scripts/testnet/multihost.sh sets them)")
        exit(2)
    }
    await together(in: folder, hosts: hosts)
}
watchdog.cancel()
await discovery.stop()
_ = await printer.value
exit(0)
