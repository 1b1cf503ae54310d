import ArgumentParser
import Foundation
import HearthCore
import HearthDaemon
import HearthIdentity

/// `hearth account …`: the household account this device is signed in to.
struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Create, join, export, protect, show, switch or sign out of household accounts.",
        subcommands: [Create.self, Join.self, Export.self, Protect.self, Show.self, SignOut.self, Switch.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a new household account with this device as its first member, and sign in to it.",
            discussion: """
                The account's CA key, which admits and removes devices, is stored encrypted under the account \
                passphrase, which is stored nowhere: every device that joins needs it, and so does adding or removing \
                a device. Without --passphrase, --passphrase-file or $HEARTH_PASSPHRASE, six random words are \
                generated and printed once (on standard error with --json). A weak passphrase given is used, with a warning.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var secret: PassphraseOptions
        @Option(help: "The household's name, shown to people.") var name = "Home"
        @Option(help: "This device's name in the account (default: the host name).") var device: String?
        @Flag(help: "Print JSON for scripts.") var json = false

        func run() async throws {
            let previous = try? global.currentIdentity()
            let (passphrase, generated) = try secret.givenOrGenerated()
            let identity = try identityCall {
                try global.accounts.createAccount(displayName: name, passphrase: passphrase, deviceName: device ?? AccountStore.defaultDeviceName)
            }
            if let previous {
                // Creating switches accounts; running apps replace their data (accountChange).
                note("left \(previous.account.displayName) (\(previous.account.id.short)); back with: hearth account switch \(previous.account.id.short)")
            }
            if json {
                emit(AccountCommand.json(identity))
            } else {
                emit("created account \(identity.account.displayName) (\(identity.account.id.short)) and signed in")
                emit("this device: \(identity.deviceName) (\(identity.deviceID.short))")
                emit("add another device: hearth account export --output home.bundle, then on it: hearth account join home.bundle (with the account passphrase)")
            }
            if generated { AccountCommand.show(generated: passphrase, onStandardError: json) }
            global.warnIfCAKeyInClear()
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Join the account in a join bundle (made by 'hearth account export' on a member device), or by pairing with a member on the LAN (--pair), and sign in to it.",
            discussion: """
                With --pair this device asks a member to admit it: it listens (--port), announces itself by mDNS, \
                and once a member runs hearth device approve, both show a six-digit code. Type y, or the code the \
                member shows, if they are the same (a script writes that line to standard input); anything else \
                refuses. No passphrase is typed here: the member's person gives it. Exit status 12 if either side \
                refuses, 13 if no member approves within --timeout seconds.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The join bundle file, or - for standard input (not with --pair).") var bundle: String?
        @OptionGroup var secret: PassphraseOptions
        @Option(help: "This device's name in the account (default: the host name).") var device: String?
        @Flag(help: "Ask a member on the LAN to admit this device (hearth device approve on it) instead of reading a bundle.")
        var pair = false
        @Option(help: "With --pair: the TCP port to listen on for the member (default: any free port).") var port: Int?
        @Option(help: "With --pair: seconds to wait for a member to approve.") var timeout = 300
        @Flag(name: .customLong("no-announce"), help: "With --pair: do not announce the request by mDNS (the member gives --address).")
        var noAnnounce = false
        @Flag(help: "Print JSON for scripts.") var json = false

        func validate() throws {
            if pair {
                guard bundle == nil else { throw ValidationError("--pair takes no join bundle") }
                guard secret.passphrase == nil, secret.passphraseFile == nil else {
                    throw ValidationError("--pair needs no passphrase here: the approving member's person gives it")
                }
                if let port, !(0...65535).contains(port) { throw ValidationError("--port must be 0-65535") }
                guard timeout > 0 else { throw ValidationError("--timeout must be at least 1 second") }
            } else {
                guard bundle != nil else { throw ValidationError("give a join bundle file (or - for standard input), or --pair") }
                guard port == nil, !noAnnounce else { throw ValidationError("--port and --no-announce go with --pair") }
            }
        }

        func run() async throws {
            guard let bundle else {
                return try await PairingJoin.run(global: global, device: device, port: port, announce: !noAnnounce, timeout: timeout, json: json)
            }
            let data: Data
            if bundle == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let contents = FileManager.default.contents(atPath: bundle) else {
                    throw CommandError(.general, "cannot read the join bundle \(bundle)")
                }
                data = contents
            }
            let passphrase = try secret.resolvedPassphrase()
            let identity = try identityCall {
                try global.accounts.importJoinBundle(data, passphrase: passphrase, deviceName: device ?? AccountStore.defaultDeviceName)
            }
            if json {
                emit(AccountCommand.json(identity))
            } else {
                emit("joined account \(identity.account.displayName) (\(identity.account.id.short)) and signed in")
                emit("this device: \(identity.deviceName) (\(identity.deviceID.short))")
            }
            global.warnIfCAKeyInClear()
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the signed-in account's join bundle, for another device to join with the account passphrase.",
            discussion: """
                The bundle holds the account's CA key as this device stores it, encrypted under the account passphrase: \
                anyone with the bundle and the passphrase can join the household. Exporting needs no passphrase; one \
                given (--passphrase, --passphrase-file or $HEARTH_PASSPHRASE) is checked against the key first, so that \
                a misremembered passphrase shows now rather than on the joining device.
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var secret: PassphraseOptions
        @Option(help: "Write the bundle to this file (mode 0600) instead of standard output.") var output: String?

        func run() async throws {
            guard let id = try identityCall({ try global.accounts.currentAccountID() }) else {
                throw CommandError(.notSignedIn, "not signed in: create or join an account first (hearth account create)")
            }
            if let given = try secret.givenPassphrase() {
                _ = try identityCall(wrongPassphrase: AccountCommand.wrongAccountPassphrase) {
                    try global.accounts.loadAuthority(id, passphrase: given)
                }
            }
            let bundle = try identityCall { try global.accounts.exportJoinBundle(id) }
            if let output {
                // 0600 whatever the umask, and never visible half-written or with wider permissions.
                do {
                    try AtomicFile.write(bundle, to: output, mode: 0o600)
                } catch {
                    throw CommandError(.general, "cannot write \(output): \(error)")
                }
                note("wrote the join bundle of \(id.short) to \(output); join with: hearth account join \(output) (and the account passphrase)")
            } else {
                StandardStreams.write(bundle, to: STDOUT_FILENO)
            }
            global.warnIfCAKeyInClear()
        }
    }

    struct Protect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Encrypt this device's copy of the account's CA key under the account passphrase (accounts made before Hearth did).",
            discussion: """
                Accounts created or joined with earlier versions of Hearth hold the CA key, which admits devices, \
                unencrypted: a copy of this device's files could admit devices of its own. This encrypts it under the \
                account passphrase: --passphrase, --passphrase-file or $HEARTH_PASSPHRASE, or else six random words \
                generated and printed once. Give the same passphrase on every device of the household. A key already \
                encrypted is left as it is (a passphrase given is checked against it).
                """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var secret: PassphraseOptions
        @Argument(help: "The account, by ID (or its first characters) or name (default: the signed-in account).") var account: String?

        func run() async throws {
            let accounts = global.accounts
            let target: Account
            if let account {
                target = try AccountCommand.find(account, in: global)
            } else {
                guard let id = try identityCall({ try accounts.currentAccountID() }) else {
                    throw CommandError(.notSignedIn, "not signed in: name the account (hearth account protect ID) or sign in")
                }
                target = try identityCall { try accounts.loadAccount(id) }
            }
            let name = "\(target.displayName) (\(target.id.short))"
            switch try identityCall({ try accounts.caKeyStatus(target.id) }) {
            case .absent:
                emit("this device holds no CA key for \(name): nothing to protect")
            case .protected(let parameters):
                if let given = try secret.givenPassphrase() {
                    try identityCall(wrongPassphrase: AccountCommand.wrongAccountPassphrase) {
                        try accounts.protectAuthority(target.id, passphrase: given)
                    }
                    emit("the CA key of \(name) is already encrypted (scrypt \(parameters)), and the passphrase given opens it")
                } else {
                    emit("the CA key of \(name) is already encrypted under the account passphrase (scrypt \(parameters)); nothing to do")
                }
            case .clear:
                let (passphrase, generated) = try secret.givenOrGenerated()
                try identityCall(wrongPassphrase: AccountCommand.wrongAccountPassphrase) {
                    try accounts.protectAuthority(target.id, passphrase: passphrase)
                }
                emit("encrypted the CA key of \(name) under the account passphrase; adding or removing a device now needs it")
                if generated {
                    AccountCommand.show(generated: passphrase, onStandardError: false)
                    emit("on this household's other devices, protect with the same words: hearth account protect --passphrase-file FILE")
                }
            }
            global.warnIfCAKeyInClear()
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the signed-in account, this device, and the other accounts stored here.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print JSON for scripts.") var json = false

        func run() async throws {
            let accounts = global.accounts
            let current = try global.currentIdentity()
            let all = try identityCall { try accounts.accounts() }
            let caKey = try current.map { current in try identityCall { try accounts.caKeyStatus(current.account.id) } }
            if json {
                let list = all.map { "{\"id\":\"\($0.id.hex)\",\"name\":\(PropertyListJSON.quote($0.displayName)),\"current\":\($0.id == current?.account.id)}" }
                emit("{\"signedIn\":\(current.map(AccountCommand.json) ?? "null"),\"caKey\":\(caKey.map { "\"\(AccountCommand.word($0))\"" } ?? "null"),"
                     + "\"accounts\":[\(list.joined(separator: ","))]}")
                global.warnIfCAKeyInClear()
                return
            }
            if let current, let caKey {
                emit("signed in to \(current.account.displayName)")
                emit("  account      \(current.account.id.hex)")
                emit("  fingerprint  \(current.account.id.fingerprint)")
                emit("  this device  \(current.deviceName) \(current.deviceID.hex)")
                switch caKey {
                case .protected(let parameters) where !parameters.isAtLeastAsCostly(as: .standard):
                    // Only HEARTH_TEST_WEAK_SCRYPT writes these: say so wherever such a key ends up.
                    emit("  CA key       \(caKey): below Hearth's standard \(ScryptParameters.standard), a test setting")
                case .clear:
                    emit("  CA key       \(caKey): run hearth account protect")
                default:
                    emit("  CA key       \(caKey)")
                }
            } else {
                emit("signed out (stores work on this device only)")
            }
            let others = all.filter { $0.id != current?.account.id }
            if !others.isEmpty {
                emit("other accounts on this device (hearth account switch ID):")
                for account in others { emit("  \(account.id.short)  \(account.displayName)") }
            }
            emit("account directory: \(accounts.directory.path)")
            global.warnIfCAKeyInClear()
        }
    }

    struct SignOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-out",
            abstract: "Sign out: stores stop syncing and show this device's signed-out data; the account stays stored.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try identityCall { try global.accounts.signOut() }
            emit("signed out; running apps switch to their signed-out data within a second")
        }
    }

    struct Switch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Switch to another account stored on this device (by ID prefix or name); running apps follow.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The account's ID (or its first characters) or name.") var account: String

        func run() async throws {
            let target = try AccountCommand.find(account, in: global)
            try identityCall { try global.accounts.switchAccount(to: target.id) }
            emit("switched to \(target.displayName) (\(target.id.short)); running apps follow within a second")
            global.warnIfCAKeyInClear()
        }
    }

    /// The one account stored here whose ID starts with `text` or whose name is `text`.
    static func find(_ text: String, in global: GlobalOptions) throws -> Account {
        let all = try identityCall { try global.accounts.accounts() }
        let matches = all.filter { $0.id.hex.hasPrefix(text.lowercased()) || $0.displayName == text }
        guard matches.count == 1, let target = matches.first else {
            throw CommandError(.notFound, matches.isEmpty ? "no account \(text) on this device (see hearth account show)"
                               : "\(text) names \(matches.count) accounts; give more of the ID")
        }
        return target
    }

    static let wrongAccountPassphrase = "wrong passphrase: it does not open this account's CA key"

    /// A generated account passphrase, shown once: it is kept nowhere, and without it no device
    /// can be added or removed.
    static func show(generated passphrase: String, onStandardError: Bool) {
        let lines = [
            "",
            "account passphrase (shown only now; write it down): joining devices ask for it, and adding or removing a device needs it:",
            "",
            "    \(passphrase)",
            "",
        ]
        for line in lines { onStandardError ? note(line) : emit(line) }
    }

    /// ``CAKeyStatus`` in one word, for JSON.
    static func word(_ status: CAKeyStatus) -> String {
        switch status {
        case .protected: "protected"
        case .clear: "clear"
        case .absent: "absent"
        }
    }

    static func json(_ identity: DeviceIdentity) -> String {
        "{\"account\":\"\(identity.account.id.hex)\",\"accountName\":\(PropertyListJSON.quote(identity.account.displayName)),"
            + "\"device\":\"\(identity.deviceID.hex)\",\"deviceName\":\(PropertyListJSON.quote(identity.deviceName))}"
    }
}

/// The account passphrase (or an old join bundle's own): an option, a file, $HEARTH_PASSPHRASE,
/// or typed at a terminal.
struct PassphraseOptions: ParsableArguments {
    @Option(help: "The account passphrase (visible to other users in ps; prefer --passphrase-file or $HEARTH_PASSPHRASE).")
    var passphrase: String?
    @Option(name: .customLong("passphrase-file"), help: ArgumentHelp("Read the passphrase from the first line of a file.", valueName: "file"))
    var passphraseFile: String?

    /// The passphrase from --passphrase, --passphrase-file or $HEARTH_PASSPHRASE, or nil.
    func givenPassphrase() throws -> String? {
        if let passphrase { return passphrase }
        if let passphraseFile {
            guard let text = try? String(contentsOfFile: passphraseFile, encoding: .utf8) else {
                throw CommandError(.general, "cannot read \(passphraseFile)")
            }
            return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        }
        return ProcessInfo.processInfo.environment["HEARTH_PASSPHRASE"]
    }

    /// The given passphrase, or one typed at the terminal.
    func resolvedPassphrase() throws -> String {
        if let given = try givenPassphrase() { return given }
        guard isatty(0) == 1 else {
            throw CommandError(.usage, "no passphrase: pass --passphrase, --passphrase-file or set HEARTH_PASSPHRASE")
        }
        guard let typed = getpass("Account passphrase: ").map({ String(cString: $0) }), !typed.isEmpty else {
            throw CommandError(.usage, "no passphrase given")
        }
        return typed
    }

    /// A new account passphrase: the given one (with a warning on stderr when it is weak), or
    /// six generated words, never a prompt (so scripts never block).
    func givenOrGenerated() throws -> (passphrase: String, generated: Bool) {
        guard let given = try givenPassphrase() else { return (Passphrase.generate(), true) }
        guard !given.isEmpty else { throw CommandError(.usage, "the passphrase is empty") }
        if let weakness = Passphrase.weakness(of: given) {
            // Still used: the person may have reasons, but a copy of this device's files or a
            // join bundle lets anyone guess it offline.
            note("warning: weak passphrase: \(weakness); anyone with a copy of this device's files or a join bundle can try guesses offline. "
                 + "Leave out --passphrase to get six random words.")
        }
        return (given, false)
    }
}

extension GlobalOptions {
    /// One line on stderr when the signed-in account's CA key is stored unencrypted (an account
    /// made before Hearth encrypted it). Silent when that cannot be read: the command says why
    /// elsewhere if it matters.
    func warnIfCAKeyInClear() {
        let accounts = self.accounts
        guard let id = try? accounts.currentAccountID(), (try? accounts.caKeyStatus(id)) == .clear else { return }
        note("warning: the CA key of account \(id.short) is stored unencrypted, so a copy of this device's files could admit devices: "
             + "run hearth account protect")
    }
}

/// Runs an account operation, mapping identity errors to the command's statuses.
@discardableResult
func identityCall<T>(wrongPassphrase: String = "wrong passphrase for this join bundle", _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as IdentityError {
        switch error.code {
        case .wrongPassphrase: throw CommandError(.badBundle, wrongPassphrase)
        case .damagedBundle: throw CommandError(.badBundle, "not a valid join bundle: \(error.message)")
        case .keyDerivationRefused: throw CommandError(.badBundle, "join bundle refused: \(error.message)")
        case .unknownAccount: throw CommandError(.notFound, error.message)
        case .caKeyInClear: throw CommandError(.general, "\(error.message) (hearth account protect)")
        case .caKeyAbsent: throw CommandError(.general, "\(error.message); use a device that holds it")
        default: throw CommandError(.general, error.description)
        }
    }
}
