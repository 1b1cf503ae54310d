import Foundation
import Logging
import HearthIdentity
import Testing

@Suite("Account store")
struct AccountStoreTests {
    @Test("The default directory follows XDG_CONFIG_HOME, falling back to ~/.config")
    func defaultDirectory() {
        #expect(AccountStore.defaultDirectory(environment: ["XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/u"]).path == "/x/cfg/hearth")
        #expect(AccountStore.defaultDirectory(environment: ["HOME": "/home/u"]).path == "/home/u/.config/hearth")
        #expect(AccountStore.defaultDirectory(environment: ["XDG_CONFIG_HOME": "", "HOME": "/home/u"]).path == "/home/u/.config/hearth")
        #expect(AccountStore.defaultDirectory(environment: ["XDG_CONFIG_HOME": "relative", "HOME": "/home/u"]).path == "/home/u/.config/hearth")
    }

    @Test("Create, sign out, sign in, switch; files are 0600 and directories 0700")
    func lifecycle() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let store = AccountStore(directory: dir.appendingPathComponent("hearth"), logger: Logger(label: "test"), scrypt: .testing)
        #expect(try store.currentAccountID() == nil)
        #expect(try store.loadCurrentIdentity() == nil)

        let smiths = try store.createAccount(displayName: "The Smiths", passphrase: "pw", deviceName: "laptop")
        #expect(try store.currentAccountID() == smiths.account.id)
        let loaded = try #require(try store.loadCurrentIdentity())
        #expect(loaded.deviceID == smiths.deviceID)
        #expect(loaded.deviceName == "laptop")
        #expect(loaded.account.displayName == "The Smiths")

        let accountDir = dir.appendingPathComponent("hearth/accounts/\(smiths.account.id.hex)")
        for name in ["ca.key", "ca.pem", "device.key", "device.pem"] {
            #expect(fileMode(accountDir.appendingPathComponent(name)) == 0o600, "\(name)")
        }
        #expect(fileMode(dir.appendingPathComponent("hearth/current")) == 0o600)
        #expect(fileMode(dir.appendingPathComponent("hearth")) == 0o700)
        #expect(fileMode(accountDir) == 0o700)
        // Nothing left behind by the atomic writes.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: accountDir.path).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)

        let joneses = try store.createAccount(displayName: "The Joneses", passphrase: "pw", deviceName: "laptop")
        #expect(try store.currentAccountID() == joneses.account.id)
        #expect(joneses.deviceID != smiths.deviceID)  // one device key per account
        #expect(try store.accounts().map(\.id).sorted() == [smiths.account.id, joneses.account.id].sorted())

        try store.switchAccount(to: smiths.account.id)
        #expect(try store.loadCurrentIdentity()?.deviceID == smiths.deviceID)

        try store.signOut()
        #expect(try store.currentAccountID() == nil)
        try store.signOut()  // idempotent

        try store.signIn(joneses.account.id)
        #expect(try store.loadCurrentIdentity()?.deviceID == joneses.deviceID)

        try store.removeAccount(joneses.account.id)
        #expect(try store.currentAccountID() == nil)
        #expect(try store.accounts().map(\.id) == [smiths.account.id])
        let missing = #expect(throws: IdentityError.self) { try store.signIn(joneses.account.id) }
        #expect(missing?.code == .unknownAccount)
    }

    @Test("A second store on the same directory (another app) sees the same account")
    func sharedBetweenApps() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        let app1 = AccountStore(directory: dir, logger: Logger(label: "test"), scrypt: .testing)
        let app2 = AccountStore(directory: dir, logger: Logger(label: "test"))
        let identity = try app1.createAccount(displayName: "Home", passphrase: "pw", deviceName: "pc")
        #expect(try app2.loadCurrentIdentity()?.deviceID == identity.deviceID)
        try app1.signOut()
        #expect(try app2.currentAccountID() == nil)
    }

    @Test("A damaged current pointer is reported, not guessed at")
    func damagedPointer() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTemporaryDirectory(dir) }
        try Data("not an id\n".utf8).write(to: dir.appendingPathComponent("current"))
        let error = #expect(throws: IdentityError.self) { try AccountStore(directory: dir, logger: Logger(label: "test")).currentAccountID() }
        #expect(error?.code == .damagedAccount)
    }
}
