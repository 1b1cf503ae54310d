import CHearthAvahi
import Glibc
import HearthCore
import Logging
import Synchronization

/// A C pointer owned by Avahi.
///
/// `@unchecked Sendable` because a raw pointer cannot be checked: every use of the object
/// behind it happens on the Avahi poll thread (inside a callback) or with the threaded-poll
/// lock held (see ``AvahiSession/withPollLock(_:)``), which is what Avahi requires.
struct AvahiHandle: @unchecked Sendable, Hashable {
    let pointer: OpaquePointer
}

/// The avahi-client glue behind ``AvahiDiscovery`` and ``PairingDiscovery``: one service type
/// (``AvahiServiceSpec``), one `AvahiThreadedPoll`, one client,
/// one entry group (our service), one browser and one resolver per remote instance.
///
/// Threading: Avahi runs callbacks on its poll thread with the poll lock held; the few calls
/// made from other threads (start, stop, name queries) take that lock first. The Swift state
/// is in a `Mutex` as well, so Sendable holds without trusting the comment above; Avahi is
/// never called while that Mutex is held, because some Avahi calls run our callbacks
/// synchronously and the Mutex is not recursive.
final class AvahiSession: Sendable {
    private struct State {
        var client: AvahiHandle?
        var group: AvahiHandle?
        var browser: AvahiHandle?
        var resolvers: [PeerTable.InstanceKey: AvahiHandle] = [:]
        var table = PeerTable()
        /// The name we publish under now (changes after a collision).
        var name: String
        var established = false
        var connected = false
        /// Instances known before a daemon restart and not yet seen again.
        var stale: Set<PeerTable.InstanceKey> = []
        var staleTimer: AvahiHandle?
        var reconnectTimer: AvahiHandle?
        var reconnects = 0
        var stopping = false
    }

    let service: AvahiServiceSpec
    let logger: Logger
    let registry: PeerRegistry
    let staleGraceMilliseconds: UInt32
    private let poll: AvahiHandle
    private let state: Locked<State>

    init(service: AvahiServiceSpec, logger: Logger, registry: PeerRegistry, staleGraceMilliseconds: UInt32) throws(DiscoveryError) {
        guard let poll = avahi_threaded_poll_new() else {
            throw .avahiFailure(code: Int32(AVAHI_ERR_NO_MEMORY), message: "cannot create the Avahi poll")
        }
        self.service = service
        self.logger = logger
        self.registry = registry
        self.staleGraceMilliseconds = staleGraceMilliseconds
        self.poll = AvahiHandle(pointer: poll)
        self.state = Locked(State(name: service.publication?.instanceName ?? ""))
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
    private var pollAPI: UnsafePointer<AvahiPoll> { avahi_threaded_poll_get(poll.pointer) }

    fileprivate static func from(_ userdata: UnsafeMutableRawPointer?) -> AvahiSession {
        Unmanaged<AvahiSession>.fromOpaque(userdata!).takeUnretainedValue()
    }

    // MARK: Life cycle (called from the owner's threads)

    /// Connects to the daemon and starts the poll thread.
    ///
    /// The client is made with `AVAHI_CLIENT_NO_FAIL`, so a daemon that restarts later is
    /// waited for; but a daemon absent *now* is reported (unless `requiringDaemon` is false),
    /// so the engine can fall back.
    func start(requiringDaemon: Bool) throws(DiscoveryError) {
        // The poll thread is not running yet: no lock needed, callbacks run synchronously.
        var error: Int32 = 0
        guard let client = avahi_client_new(pollAPI, AVAHI_CLIENT_NO_FAIL, Self.clientCallback, userdata, &error) else {
            avahi_threaded_poll_free(poll.pointer)
            throw .daemonUnavailable("cannot reach the system D-Bus (\(Self.message(error))); "
                + "is dbus running, and DBUS_SYSTEM_BUS_ADDRESS right?")
        }
        if avahi_client_get_state(client) == AVAHI_CLIENT_CONNECTING {
            guard !requiringDaemon else {
                avahi_client_free(client)
                avahi_threaded_poll_free(poll.pointer)
                throw .daemonUnavailable("avahi-daemon is not running on the system D-Bus; "
                    + "start it (systemctl start avahi-daemon) or use static peers (HEARTH_PEERS)")
            }
            logger.info("avahi-daemon is not running yet; will publish when it starts")
        }
        state.withLock { $0.client = AvahiHandle(pointer: client) }
        let result = avahi_threaded_poll_start(poll.pointer)
        if result < 0 {
            avahi_client_free(client)
            avahi_threaded_poll_free(poll.pointer)
            throw .avahiFailure(code: result, message: "cannot start the Avahi thread")
        }
    }

    /// Withdraws our service and stops the thread. Not callable from the poll thread.
    func stop() {
        withPollLock { state.withLock { $0.stopping = true } }
        avahi_threaded_poll_stop(poll.pointer)
        // The thread is gone: nothing else touches the client now.
        let client = state.withLock { state -> AvahiHandle? in
            defer { state.client = nil; state.group = nil; state.browser = nil; state.resolvers = [:] }
            return state.client
        }
        // Freeing the client frees its group, browser and resolvers, withdrawing our service.
        if let client { avahi_client_free(client.pointer) }
        avahi_threaded_poll_free(poll.pointer)
    }

    /// Runs `body` with the threaded-poll lock held. Never call from an Avahi callback.
    func withPollLock<T>(_ body: () -> T) -> T {
        avahi_threaded_poll_lock(poll.pointer)
        defer { avahi_threaded_poll_unlock(poll.pointer) }
        return body()
    }

    /// The name our service is published under, once the daemon confirmed it.
    var publishedName: String? {
        state.withLock { $0.established ? $0.name : nil }
    }

    /// Whether a daemon is connected right now.
    var isConnected: Bool { state.withLock { $0.connected } }

    /// How many times the daemon connection was re-established.
    var reconnectCount: Int { state.withLock { $0.reconnects } }

    // MARK: Client

    private static let clientCallback: AvahiClientCallback = { client, clientState, userdata in
        guard let client else { return }
        AvahiSession.from(userdata).clientChanged(client, clientState)
    }

    private func clientChanged(_ client: OpaquePointer, _ clientState: AvahiClientState) {
        switch clientState {
        case AVAHI_CLIENT_S_RUNNING:
            let wasConnected = state.withLock { s in
                defer { s.connected = true }
                return s.connected
            }
            if !wasConnected { logger.info("connected to avahi-daemon") }
            ensureBrowser(client)
            publish(client)
            scheduleStaleSweepIfNeeded()
        case AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            // The host name is being (re)negotiated: our records must wait for RUNNING.
            state.withLock { $0.connected = true; $0.established = false }
            if let group = state.withLock({ $0.group }) { avahi_entry_group_reset(group.pointer) }
            ensureBrowser(client)
        case AVAHI_CLIENT_CONNECTING:
            // During start() this only means "no daemon", which start() reports as an error.
            if state.withLock({ $0.client != nil }) { logger.info("waiting for avahi-daemon to appear on D-Bus") }
        case AVAHI_CLIENT_FAILURE:
            let error = avahi_client_errno(client)
            let stopping = state.withLock { s in
                s.connected = false
                s.established = false
                return s.stopping
            }
            if stopping { return }
            logger.warning("lost avahi-daemon (\(Self.message(error))); reconnecting and re-publishing")
            // Freeing the client inside its own callback is legal but fragile; do it from a timer.
            scheduleReconnect(afterMilliseconds: error == Int32(AVAHI_ERR_DISCONNECTED) ? 0 : 1000)
        default:
            break
        }
    }

    private func scheduleReconnect(afterMilliseconds delay: UInt32) {
        guard state.withLock({ $0.reconnectTimer == nil }) else { return }
        if let timer = hearth_avahi_timeout_new(pollAPI, delay, Self.reconnectCallback, userdata) {
            state.withLock { $0.reconnectTimer = AvahiHandle(pointer: timer) }
        }
    }

    private static let reconnectCallback: AvahiTimeoutCallback = { timeout, userdata in
        AvahiSession.from(userdata).reconnect(timeout)
    }

    private func reconnect(_ timeout: OpaquePointer?) {
        let (old, timers) = state.withLock { s -> (AvahiHandle?, [AvahiHandle]) in
            let timers = [s.reconnectTimer, s.staleTimer].compactMap { $0 }
            s.reconnectTimer = nil
            s.staleTimer = nil
            // Everything the old client owned dies with it; keep what we know about peers but
            // mark it stale until the new browser sees it again.
            s.stale.formUnion(s.table.keys)
            s.group = nil
            s.browser = nil
            s.resolvers = [:]
            s.established = false
            s.reconnects += 1
            defer { s.client = nil }
            return (s.client, timers)
        }
        // Timers are not one-shot in Avahi: a fired one must still be freed (legal from its callback).
        for timer in timers { hearth_avahi_timeout_free(pollAPI, timer.pointer) }
        if let old { avahi_client_free(old.pointer) }
        var error: Int32 = 0
        if let client = avahi_client_new(pollAPI, AVAHI_CLIENT_NO_FAIL, Self.clientCallback, userdata, &error) {
            state.withLock { $0.client = AvahiHandle(pointer: client) }
        } else {
            logger.warning("cannot reconnect to avahi-daemon (\(Self.message(error))); retrying in 2 s")
            scheduleReconnect(afterMilliseconds: 2000)
        }
    }

    // MARK: Publishing

    private func publish(_ client: OpaquePointer) {
        guard service.publication != nil else { return }
        var group = state.withLock { $0.group }
        if group == nil {
            guard let made = avahi_entry_group_new(client, Self.groupCallback, userdata) else {
                logger.error("cannot create an Avahi entry group: \(Self.message(avahi_client_errno(client)))")
                return
            }
            group = AvahiHandle(pointer: made)
            state.withLock { $0.group = group }
        }
        guard let group, avahi_entry_group_is_empty(group.pointer) != 0 else { return }
        addService(group.pointer, client: client)
    }

    /// Adds our service to the (empty) group and commits it, renaming on local collisions.
    private func addService(_ group: OpaquePointer, client: OpaquePointer) {
        guard let publication = service.publication else { return }
        var txt: UnsafeMutablePointer<AvahiStringList>? = nil
        for entry in publication.txt.reversed() { txt = avahi_string_list_add(txt, entry) }
        defer { avahi_string_list_free(txt) }
        for _ in 0..<20 {
            let name = state.withLock { $0.name }
            let result = avahi_entry_group_add_service_strlst(
                group, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(0),
                name, service.serviceType, nil, nil, publication.port, txt)
            if result == Int32(AVAHI_ERR_COLLISION) {
                // Another service on this very daemon has the name: pick the next one.
                renameAfterCollision(name)
                avahi_entry_group_reset(group)
                continue
            }
            if result < 0 {
                logger.error("cannot publish \(service.serviceType) as \"\(name)\": \(Self.message(result))")
                return
            }
            let commit = avahi_entry_group_commit(group)
            if commit < 0 {
                logger.error("cannot commit the Avahi entry group: \(Self.message(commit))")
            }
            return
        }
        logger.error("gave up publishing after 20 name collisions")
    }

    private func renameAfterCollision(_ name: String) {
        guard let alternative = avahi_alternative_service_name(name) else { return }
        let newName = String(cString: alternative)
        avahi_free(alternative)
        logger.notice("service name \"\(name)\" is taken; publishing as \"\(newName)\"")
        state.withLock { $0.name = newName }
    }

    private static let groupCallback: AvahiEntryGroupCallback = { group, groupState, userdata in
        guard let group else { return }
        AvahiSession.from(userdata).groupChanged(group, groupState)
    }

    private func groupChanged(_ group: OpaquePointer, _ groupState: AvahiEntryGroupState) {
        switch groupState {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            let name = state.withLock { s in
                s.established = true
                return s.name
            }
            logger.info("published \(service.serviceType) as \"\(name)\" on port \(service.publication?.port ?? 0)")
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Someone else on the network holds the name: take an alternative and re-publish.
            let name = state.withLock { $0.name }
            renameAfterCollision(name)
            avahi_entry_group_reset(group)
            if let client = avahi_entry_group_get_client(group) { addService(group, client: client) }
        case AVAHI_ENTRY_GROUP_FAILURE:
            let error = avahi_client_errno(avahi_entry_group_get_client(group))
            logger.error("publishing failed: \(Self.message(error))")
        default:
            break
        }
    }

    // MARK: Browsing

    private func ensureBrowser(_ client: OpaquePointer) {
        guard service.browses, state.withLock({ $0.browser == nil }) else { return }
        guard let browser = avahi_service_browser_new(
            client, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC),
            service.serviceType, nil, AvahiLookupFlags(0), Self.browserCallback, userdata)
        else {
            logger.error("cannot browse \(service.serviceType): \(Self.message(avahi_client_errno(client)))")
            return
        }
        state.withLock { $0.browser = AvahiHandle(pointer: browser) }
    }

    private static let browserCallback: AvahiServiceBrowserCallback = {
        browser, interface, ipProtocol, event, name, type, domain, flags, userdata in
        AvahiSession.from(userdata).browserEvent(browser, interface, ipProtocol, event, name, domain, flags)
    }

    private func browserEvent(
        _ browser: OpaquePointer?, _ interface: AvahiIfIndex, _ ipProtocol: AvahiProtocol,
        _ event: AvahiBrowserEvent, _ name: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
        _ flags: AvahiLookupResultFlags
    ) {
        switch event {
        case AVAHI_BROWSER_NEW, AVAHI_BROWSER_REMOVE:
            guard let name, let domain else { return }
            let key = PeerTable.InstanceKey(name: String(cString: name), domain: String(cString: domain),
                                            interfaceIndex: interface, ipProtocol: ipProtocol)
            if event == AVAHI_BROWSER_NEW {
                if flags.rawValue & AVAHI_LOOKUP_RESULT_OUR_OWN.rawValue != 0 { return }
                state.withLock { _ = $0.stale.remove(key) }
                startResolver(key, browser: browser)
            } else {
                let resolver = state.withLock { $0.resolvers.removeValue(forKey: key) }
                if let resolver { avahi_service_resolver_free(resolver.pointer) }
                remove(key)
            }
        case AVAHI_BROWSER_FAILURE:
            let client = browser.flatMap { avahi_service_browser_get_client($0) }
            logger.error("browsing failed: \(Self.message(client.map { avahi_client_errno($0) } ?? 0))")
        default:
            break   // CACHE_EXHAUSTED, ALL_FOR_NOW: nothing to do, the stale timer covers restarts.
        }
    }

    private func startResolver(_ key: PeerTable.InstanceKey, browser: OpaquePointer?) {
        guard state.withLock({ $0.resolvers[key] == nil }),
              let browser, let client = avahi_service_browser_get_client(browser)
        else { return }
        // Kept open: Avahi then reports every later change of address, port or TXT.
        guard let resolver = avahi_service_resolver_new(
            client, key.interfaceIndex, key.ipProtocol, key.name, service.serviceType, key.domain,
            AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiLookupFlags(0), Self.resolverCallback, userdata)
        else {
            logger.warning("cannot resolve \"\(Self.printable(key.name))\": \(Self.message(avahi_client_errno(client)))")
            return
        }
        state.withLock { $0.resolvers[key] = AvahiHandle(pointer: resolver) }
    }

    private static let resolverCallback: AvahiServiceResolverCallback = {
        resolver, interface, ipProtocol, event, name, type, domain, hostName, address, port, txt, flags, userdata in
        AvahiSession.from(userdata).resolved(resolver, interface, ipProtocol, event, name, domain, address, port, txt, flags)
    }

    private func resolved(
        _ resolver: OpaquePointer?, _ interface: AvahiIfIndex, _ ipProtocol: AvahiProtocol,
        _ event: AvahiResolverEvent, _ name: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
        _ address: UnsafePointer<AvahiAddress>?, _ port: UInt16, _ txt: UnsafeMutablePointer<AvahiStringList>?,
        _ flags: AvahiLookupResultFlags
    ) {
        guard let name, let domain else { return }
        let key = PeerTable.InstanceKey(name: String(cString: name), domain: String(cString: domain),
                                        interfaceIndex: interface, ipProtocol: ipProtocol)
        guard event == AVAHI_RESOLVER_FOUND else {
            // Usually a timeout: the service vanished between browse and resolve. The browser
            // will report it again if it comes back.
            logger.debug("cannot resolve \"\(Self.printable(key.name))\"")
            let mine = state.withLock { s -> AvahiHandle? in
                guard let current = s.resolvers[key], current.pointer == resolver else { return nil }
                return s.resolvers.removeValue(forKey: key)
            }
            if let mine { avahi_service_resolver_free(mine.pointer) }
            return
        }
        let where_ = "\"\(Self.printable(key.name))\" on \(Self.interfaceName(interface) ?? "interface \(interface)")"
        let entries = Self.entries(of: txt)
        let record: ServiceRecord?
        switch service.judge(entries) {
        case .malformed(let rejection):
            logger.warning("ignoring \(service.serviceType) service \(where_): \(rejection)")
            remove(key)
            return
        case .own:
            logger.debug("ignoring our own service \(where_)")
            return
        case .foreign:
            logger.debug("ignoring service \(where_) of another account, store or protocol")
            remove(key)
            return
        case .accept(let parsed):
            record = parsed
        }
        guard let address, let peerAddress = Self.peerAddress(address, interface: interface) else { return }
        var fields: [String: String] = [:]
        for entry in entries {
            let text = String(decoding: entry, as: UTF8.self)
            let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            fields[parts[0].lowercased()] = parts.count > 1 ? String(parts[1]) : ""
        }
        let resolution = PeerTable.Resolution(address: peerAddress, port: port, txt: fields, record: record)
        let event = state.withLock { $0.table.upsert(key, resolution) }
        if let event { emit(event) }
    }

    private func remove(_ key: PeerTable.InstanceKey) {
        let event = state.withLock { $0.table.remove(key) }
        if let event { emit(event) }
    }

    private func emit(_ event: PeerEvent) {
        switch event {
        case .appeared(let peer):
            logger.info("peer appeared: \"\(Self.printable(peer.name))\" at \(peer.addresses.map(\.description).joined(separator: ", ")) port \(peer.port)")
        case .updated(let peer):
            logger.debug("peer updated: \"\(Self.printable(peer.name))\"")
        case .gone(let peer):
            logger.info("peer gone: \"\(Self.printable(peer.name))\"")
        }
        registry.publish(event)
    }

    // MARK: Daemon restarts

    private func scheduleStaleSweepIfNeeded() {
        let needed = state.withLock { !$0.stale.isEmpty && $0.staleTimer == nil }
        guard needed, let timer = hearth_avahi_timeout_new(pollAPI, staleGraceMilliseconds, Self.staleCallback, userdata)
        else { return }
        state.withLock { $0.staleTimer = AvahiHandle(pointer: timer) }
    }

    private static let staleCallback: AvahiTimeoutCallback = { _, userdata in
        AvahiSession.from(userdata).sweepStale()
    }

    /// After a restart, peers the new daemon has not reported within the grace period are gone.
    private func sweepStale() {
        let (stale, timer) = state.withLock { s -> (Set<PeerTable.InstanceKey>, AvahiHandle?) in
            defer { s.stale = []; s.staleTimer = nil }
            return (s.stale, s.staleTimer)
        }
        if let timer { hearth_avahi_timeout_free(pollAPI, timer.pointer) }
        // Logged even when all were confirmed: the end of the grace period is an event a test waits on.
        logger.debug("grace period after the daemon restart over: \(stale.count) sighting(s) not confirmed")
        for key in stale { remove(key) }
    }

    // MARK: Helpers

    static func message(_ error: Int32) -> String { String(cString: avahi_strerror(error)) }

    static func interfaceName(_ index: AvahiIfIndex) -> String? {
        guard index > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(hearth_if_namesize()) + 1)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return nil }
        return string(fromNulTerminated: buffer)
    }

    static func peerAddress(_ address: UnsafePointer<AvahiAddress>, interface: AvahiIfIndex) -> PeerAddress? {
        let family: PeerAddress.Family
        switch hearth_avahi_address_family(address) {
        case 4: family = .ipv4
        case 6: family = .ipv6
        default: return nil
        }
        var buffer = [CChar](repeating: 0, count: Int(hearth_avahi_address_str_max()) + 1)
        guard avahi_address_snprint(&buffer, buffer.count, address) != nil else { return nil }
        return PeerAddress(host: string(fromNulTerminated: buffer), family: family,
                           interfaceIndex: interface > 0 ? interface : nil,
                           interfaceName: interfaceName(interface))
    }

    static func string(fromNulTerminated buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The TXT strings as bytes, at most a little past the accepted maximum: a hostile record
    /// is rejected for its size without being copied whole.
    static func entries(of list: UnsafeMutablePointer<AvahiStringList>?) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var total = 0
        var node = list
        while let current = node {
            let size = Int(avahi_string_list_get_size(current))
            total += size + 1
            if total > ServiceRecord.maximumTXTBytes || result.count > ServiceRecord.maximumTXTEntries {
                // Keep a placeholder of the right size so the parser reports the real reason.
                result.append([UInt8](repeating: 0x78, count: min(size, ServiceRecord.maximumTXTBytes + 1)))
                if total > 4 * ServiceRecord.maximumTXTBytes { break }
            } else if let text = avahi_string_list_get_text(current) {
                result.append(Array(UnsafeBufferPointer(start: text, count: size)))
            }
            node = avahi_string_list_get_next(current)
        }
        return result
    }

    /// A name made safe for a log line: control characters escaped, length capped.
    static func printable(_ name: String) -> String {
        var out = ""
        for scalar in name.unicodeScalars.prefix(80) {
            if scalar.value < 0x20 || scalar.value == 0x7f || scalar == "\"" || scalar == "\\" {
                out += scalar.escaped(asASCII: true)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return name.unicodeScalars.count > 80 ? out + "…" : out
    }
}
