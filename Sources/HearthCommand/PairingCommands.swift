import ArgumentParser
import Dispatch
import Foundation
import HearthCore
import HearthDaemon
import HearthDiscovery
import HearthIdentity
import HearthPairing

/// `hearth account join --pair`: this device asks a member on the LAN to admit it.
enum PairingJoin {
    static func run(global: GlobalOptions, device: String?, port: Int?, announce: Bool, timeout: Int, json: Bool) async throws {
        let accounts = global.accounts
        let name = device ?? AccountStore.defaultDeviceName
        let request: PairingRequest
        do {
            request = try await PairingRequest.start(deviceName: name, accounts: accounts,
                                                     options: .init(port: port ?? 0, announce: announce), logger: global.logger)
        } catch let error as IdentityError {
            throw CommandError(.usage, "cannot ask to join as \"\(name)\": \(error.message)")
        } catch {
            throw CommandError(.general, "cannot listen for a member: \(error)")
        }
        let say: @Sendable (String) -> Void = { json ? note($0) : emit($0) }
        say("waiting for a member to approve \(name) (device \(request.deviceID.short)): on a device of the household run: hearth device approve \(name)")
        if !announce {
            say("listening on port \(request.port), not announced: on the member, hearth device approve --address THIS-HOST:\(request.port)")
        } else if let problem = request.announcementProblem {
            say("not announced on the LAN (\(problem)); on the member: hearth device approve --address THIS-HOST:\(request.port)")
        } else {
            say("listening on port \(request.port), announced as \(PairingAnnouncement.serviceType) \"\(name)\"")
        }
        let outcome: Result<DeviceIdentity, any Error>
        do {
            outcome = .success(try await request.waitForGrant(timeout: .seconds(timeout)) { offer in
                let member = Prompt.printable(offer.deviceName)
                say("\(member)\(offer.accountName.map { " (\(Prompt.printable($0)))" } ?? "") asks to add this device\(offer.address.map { ", from \($0)" } ?? "")")
                say("pairing code: \(offer.code)")
                let answer = await Prompt.line("Does \(member) show the same code? Type y, or the code \(member) shows, to join; anything else refuses: ")
                let decision = PairingDecision.typed(answer, for: offer.code)
                // Cancelled: the member ended the pairing first, and says why.
                if case .refuse(let reason) = decision, !Task.isCancelled { note("refusing: \(reason)") }
                return decision
            })
        } catch {
            outcome = .failure(error)
        }
        await request.close()
        switch outcome {
        case .success(let identity):
            if json {
                emit(AccountCommand.json(identity))
            } else {
                emit("joined account \(identity.account.displayName) (\(identity.account.id.short)) and signed in")
                emit("this device: \(identity.deviceName) (\(identity.deviceID.short))")
            }
            global.warnIfCAKeyInClear()
        case .failure(let error as PairingError):
            throw Self.commandError(error, nothingStored: "nothing was stored")
        case .failure(let error):
            throw CommandError(.general, "pairing failed: \(error); nothing was stored")
        }
    }

    /// A pairing failure as the command reports it: 13 for a timeout, 12 for the rest.
    static func commandError(_ error: PairingError, nothingStored: String) -> CommandError {
        switch error.code {
        case .timedOut: CommandError(.pairingTimedOut, "\(error.message); \(nothingStored)")
        case .refused: CommandError(.pairingRefused, "refused: \(error.message); \(nothingStored)")
        case .refusedByPeer: CommandError(.pairingRefused, "the other device refused: \(Prompt.printable(error.message)); \(nothingStored)")
        case .busy: CommandError(.pairingRefused, "the new device is pairing with another member; \(nothingStored)")
        default: CommandError(.pairingRefused, "pairing failed (\(error.code)): \(Prompt.printable(error.message)); \(nothingStored)")
        }
    }
}

extension DeviceCommand {
    struct Approve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Admit a new device that asks to join (hearth account join --pair on it), comparing a code; needs the account passphrase.",
            discussion: """
                Finds the request on the LAN (mDNS, _hearth-pair._tcp; or --address), connects to it, and shows a \
                six-digit code that the new device shows too. Type y, or the code the new device shows, if they are \
                the same (a script writes that line to standard input); anything else refuses. The new device's \
                person confirms on it as well. Then, with the account passphrase, this device issues the new \
                device's certificate and sends it with the account CA certificate and, unless --no-ca-key, the \
                account key sealed under the passphrase (so the new device too can admit and remove devices). \
                A code refused on either side, or a wrong passphrase, admits nothing, and the other device is told.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The new device's name, as it asks to join (default: the only request seen).") var device: String?
        @Option(help: ArgumentHelp("Connect to the new device here instead of finding it by mDNS (it prints its port).", valueName: "host:port"))
        var address: String?
        @Option(help: "Seconds to wait for a request to appear.") var timeout = 60
        @Flag(name: .customLong("no-ca-key"), help: "Admit a device that syncs but cannot admit or remove devices: do not send it the sealed account key.")
        var noCAKey = false
        @OptionGroup var secret: PassphraseOptions
        @Flag(help: "Print JSON for scripts.") var json = false

        func validate() throws {
            if let address { try StaticDiscoveryEndpoint.check(address) }
            guard timeout > 0 else { throw ValidationError("--timeout must be at least 1 second") }
        }

        func run() async throws {
            guard let identity = try global.currentIdentity() else {
                throw CommandError(.notSignedIn, "not signed in: create or join an account first (hearth account create)")
            }
            let accounts = global.accounts
            // Fail before dialling anyone if this device cannot admit: no key, or a clear one.
            switch try identityCall({ try accounts.caKeyStatus(identity.account.id) }) {
            case .absent:
                throw CommandError(.general, "this device holds no CA key for account \(identity.account.id.short): approve from a device that holds it (hearth account show, line CA key)")
            case .clear:
                throw CommandError(.general, "the CA key of account \(identity.account.id.short) is stored unencrypted; protect it first (hearth account protect)")
            case .protected:
                break
            }
            let candidate = try await find()
            let say: @Sendable (String) -> Void = { json ? note($0) : emit($0) }
            say("connecting to the request of \(Prompt.printable(candidate.name)) at \(candidate.hosts.first ?? "?") port \(candidate.port)")
            let account = identity.account.displayName
            let approver = try PairingApprover(accounts: accounts, identity: identity, logger: global.logger)
            let secret = self.secret
            do {
                let approval = try await approver.approve(candidate, includeCAKey: !noCAKey, confirm: { offer in
                    let name = Prompt.printable(offer.deviceName)
                    say("\(name) (device \(offer.deviceID.short)) asks to join \(account)")
                    say("pairing code: \(offer.code)")
                    let answer = await Prompt.line("Does \(name) show the same code? Type y, or the code \(name) shows, to approve; anything else refuses: ")
                    let decision = PairingDecision.typed(answer, for: offer.code)
                    if case .refuse(let reason) = decision, !Task.isCancelled { note("refusing: \(reason)") }
                    return decision
                }, passphrase: {
                    try await Blocking.run { try secret.resolvedPassphrase() }
                })
                if json {
                    emit("{\"approved\":\"\(approval.deviceID.hex)\",\"name\":\(PropertyListJSON.quote(approval.deviceName)),\"caKey\":\(approval.sentCAKey)}")
                } else {
                    emit("approved \(approval.deviceName) (\(approval.deviceID.short)): it is now a device of \(identity.account.displayName)")
                    emit(approval.sentCAKey ? "it holds the account key sealed under the account passphrase, so it too can admit and remove devices"
                         : "it holds no account key: it syncs, but cannot admit or remove devices")
                }
            } catch let error as PairingError {
                throw PairingJoin.commandError(error, nothingStored: "nothing was admitted")
            } catch let error as IdentityError where error.code == .wrongPassphrase {
                throw CommandError(.badBundle, "\(AccountCommand.wrongAccountPassphrase); the new device was told, nothing was admitted")
            } catch let error as IdentityError {
                _ = try identityCall { throw error }
            }
        }

        /// The request to approve: the address given, or the one seen by mDNS (the one named).
        private func find() async throws -> PairingCandidate {
            if let address, let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) {
                var host = String(address[..<colon])
                if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
                return PairingCandidate(name: device ?? host, host: host, port: port)
            }
            let browser = PairingDiscovery.browsing(logger: global.logger)
            do {
                try await browser.start()
            } catch {
                throw CommandError(.general, "\(error); give the new device's address: hearth device approve --address HOST:PORT (it prints its port)")
            }
            defer { Task { await browser.stop() } }
            // Looked at again whenever the browser reports a change, not on a timer.
            let changed = ChangeSignal()
            let events = browser.events()
            let listener = Task {
                for await _ in events { changed.signal() }
            }
            defer { listener.cancel() }
            let deadline = ContinuousClock.now + .seconds(timeout)
            var firstSeen: ContinuousClock.Instant?
            while ContinuousClock.now < deadline {
                // Taken before looking: a change after the look ends the wait below at once.
                let seen = changed.generation
                let requests = browser.peers.compactMap(PairingCandidate.init(peer:))
                let matching = device.map { name in requests.filter { Self.names($0.name, name) } } ?? requests
                if !matching.isEmpty {
                    // A moment for other requests to show, so that two are never mistaken for one.
                    if device != nil || matching.count > 1 { return try Self.one(matching, named: device) }
                    if let firstSeen, ContinuousClock.now - firstSeen >= .seconds(1) { return matching[0] }
                    if firstSeen == nil { firstSeen = .now }
                }
                try Task.checkCancellation()
                await ChangeSignal.wait(for: [(changed, seen)], until: firstSeen.map { min(deadline, $0 + .seconds(1)) } ?? deadline)
            }
            let what = device.map { "from \($0) " } ?? ""
            throw CommandError(.pairingTimedOut, "no pairing request \(what)seen within \(timeout) s: run hearth account join --pair on the new device, on this network (or give --address)")
        }

        private static func one(_ requests: [PairingCandidate], named name: String?) throws -> PairingCandidate {
            if requests.count == 1 { return requests[0] }
            let names = requests.map { Prompt.printable($0.name) }.sorted().joined(separator: ", ")
            throw CommandError(.usage, name == nil ? "several devices ask to join (\(names)): name one, hearth device approve NAME"
                               : "several requests are named \(name!) (\(names)); give --address")
        }

        /// Whether an announced instance is `name`'s: Avahi renames a second "kitchen" to "kitchen #2".
        private static func names(_ instance: String, _ name: String) -> Bool {
            instance == name || (instance.hasPrefix(name + " #") && instance.dropFirst(name.count + 2).allSatisfy(\.isNumber))
        }
    }
}

/// Answers typed at the terminal, or lines a script writes to standard input.
enum Prompt {
    /// Shows `prompt` on stderr and reads one line of standard input on a thread of its own
    /// (never blocking the cooperative pool); nil at the end of input, or when the task is
    /// cancelled (the pairing ended meanwhile).
    static func line(_ prompt: String) async -> String? {
        // At a terminal the answer ends the line; from a script, end it here.
        StandardStreams.write(Array((isatty(0) == 1 ? prompt : prompt + "\n").utf8), to: STDERR_FILENO)
        let waiter = Waiter()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter.set(continuation)
                let thread = Thread { waiter.resume(readLine(strippingNewline: true)) }
                thread.start()
            }
        } onCancel: {
            // The other device ended the pairing while the person was deciding: end the prompt's line.
            if waiter.resume(nil), isatty(0) == 1 { StandardStreams.write(Array("\n".utf8), to: STDERR_FILENO) }
        }
    }

    /// Resumes its continuation once, whoever comes first: the line, or a cancellation (which
    /// may come before the continuation is even set).
    private final class Waiter: Sendable {
        private let state = Locked<(continuation: CheckedContinuation<String?, Never>?, result: String??)>((nil, nil))

        func set(_ continuation: CheckedContinuation<String?, Never>) {
            let ready = state.withLock { s -> String?? in
                guard let result = s.result else { s.continuation = continuation; return nil }
                return result
            }
            if let ready { continuation.resume(returning: ready) }
        }

        /// Whether this call settled it (false: a line or a cancellation came first).
        @discardableResult
        func resume(_ line: String?) -> Bool {
            let (settled, waiting) = state.withLock { s -> (Bool, CheckedContinuation<String?, Never>?) in
                guard s.result == nil else { return (false, nil) }
                s.result = .some(line)
                defer { s.continuation = nil }
                return (true, s.continuation)
            }
            waiting?.resume(returning: line)
            return settled
        }
    }

    /// A name another device chose, made safe to print: control characters escaped, length capped.
    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(80) {
            if scalar.value < 0x20 || scalar.value == 0x7f || (0x80..<0xa0).contains(scalar.value) {
                out += scalar.escaped(asASCII: true)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > 80 ? out + "…" : out
    }
}

/// Runs blocking work (a passphrase prompt, a key derivation) on a dispatch thread, off the
/// cooperative pool.
enum Blocking {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }
}
