import Foundation
import Logging
import HearthCore
import Testing

@Suite("Replica files")
struct PersistenceTests {
    static func temporaryDirectory() -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hearth-core-\(UUID())").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("A replica survives a save and load exactly, signatures and tombstones included")
    func roundTrip() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var replica = Replica()
        replica.write(["nested": [1, 2.5, true]], forKey: "a", wall: 10)
        replica.write("gone", forKey: "b", wall: 11)
        replica.write(nil, forKey: "b", wall: 12)
        replica.attach(EntrySignature(signer: Data(repeating: 7, count: 32), bytes: Data(repeating: 9, count: 64)),
                       forKey: "a", origin: replica.id, sequence: 1)
        // The signer's certificate is saved; one of a device that signed nothing held is not.
        replica.keepCertificate(Data("certificate of 7".utf8), signer: Data(repeating: 7, count: 32))
        replica.keepCertificate(Data("certificate of 8".utf8), signer: Data(repeating: 8, count: 32))
        replica.merge(Entry(key: "c", value: .date(Date(timeIntervalSinceReferenceDate: 3)),
                            timestamp: HLCTimestamp(milliseconds: 20, counter: 1), origin: ReplicaID(high: 5, low: 5), sequence: 4), wall: 20)
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "com.example.test", account: "acct")
        do {
            let storage = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
            try storage.save(replica)
        }
        let storage = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
        guard case .loaded(let loaded) = try storage.load() else { Issue.record("not loaded"); return }
        #expect(loaded.entries == replica.entries)
        #expect(loaded.id == replica.id)
        #expect(loaded.sequence == replica.sequence)
        #expect(loaded.clock == replica.clock)
        #expect(loaded.certificates == [Data(repeating: 7, count: 32): Data("certificate of 7".utf8)])
        var info = stat()
        #expect(stat(location.filePath, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test("A second open of the same store is refused with a clear error while the first holds it")
    func exclusiveLock() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "s")
        var first: ReplicaStorage? = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
        do {
            _ = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
            Issue.record("second open succeeded")
        } catch {
            #expect(error.code == .locked)
            #expect(error.description.contains("in use by another process"))
            #expect(error.description.contains("\(getpid())"))
        }
        _ = first
        first = nil
        _ = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
    }

    @Test("Damaged files are moved aside and reported, never overwritten", arguments: [
        Data(), Data("garbage that is not a plist".utf8), Data("bplist00".utf8) + Data(repeating: 0xFF, count: 40),
        try BinaryPropertyList.encode(["format": "something else"]), try BinaryPropertyList.encode([1, 2, 3]),
    ])
    func damaged(_ contents: Data) throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "s")
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        try contents.write(to: URL(fileURLWithPath: location.filePath))
        let storage = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
        guard case .recovered(let error, let aside) = try storage.load() else { Issue.record("damage not detected"); return }
        #expect(error.code == .damaged)
        #expect(FileManager.default.contents(atPath: aside) == contents)
        #expect(!FileManager.default.fileExists(atPath: location.filePath))
    }

    @Test("A truncated real store file is detected as damaged")
    func truncatedStore() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "s")
        var replica = Replica()
        for i in 0..<50 { replica.write(.string("value \(i)"), forKey: StoreKey("k\(i)"), wall: 1) }
        let data = try ReplicaFile.encode(replica, header: .init(storeIdentifier: "s", account: ""))
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: location.filePath))
        let storage = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
        guard case .recovered = try storage.load() else { Issue.record("truncation not detected"); return }
    }

    @Test("A file of another store is not taken for ours")
    func wrongStore() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "mine")
        try FileManager.default.createDirectory(atPath: location.directory, withIntermediateDirectories: true)
        try ReplicaFile.encode(Replica(), header: .init(storeIdentifier: "theirs", account: "")).write(to: URL(fileURLWithPath: location.filePath))
        guard case .recovered = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 }).load() else { Issue.record("accepted"); return }
    }

    @Test("Leftovers of an interrupted save are removed at open; the store file is intact")
    func interruptedSave() throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "s")
        var replica = Replica()
        replica.write(1, forKey: "k", wall: 1)
        try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 }).save(replica)
        let leftover = location.filePath + AtomicFile.temporaryMarker + "99999"
        try Data("half".utf8).write(to: URL(fileURLWithPath: leftover))
        let storage = try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 })
        #expect(!FileManager.default.fileExists(atPath: leftover))
        guard case .loaded(let loaded) = try storage.load() else { Issue.record("not loaded"); return }
        #expect(loaded.value(forKey: "k") == 1)
    }

    @Test("Store identifiers map to safe, distinct file names")
    func escaping() {
        #expect(StoreLocation.escape("com.example.notes") == "com.example.notes")
        #expect(StoreLocation.escape("../etc/passwd") == "%2E.%2Fetc%2Fpasswd")
        #expect(StoreLocation.escape("a b") != StoreLocation.escape("a_b"))
        #expect(StoreLocation.escape("") == "%")
        #expect(StoreLocation.defaultDataDirectory(environment: ["XDG_DATA_HOME": "/x"]) == "/x/hearth")
        #expect(StoreLocation.defaultDataDirectory(environment: ["XDG_DATA_HOME": "relative", "HOME": "/home/u"]) == "/home/u/.local/share/hearth")
    }

    @Test("Python's plistlib reads a store file")
    func pythonReadsStoreFile() async throws {
        let dir = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let location = StoreLocation(dataDirectory: dir, storeIdentifier: "s")
        var replica = Replica()
        replica.write(2, forKey: "backgroundColor", wall: 1)
        try ReplicaStorage(location: location, disk: SystemDisk(), logger: Logger(label: "test"), wall: { 1_700_000_000_000 }, random: { 27 }).save(replica)
        let output = try await TestProcess.run("/usr/bin/env", ["python3", "-c",
            "import plistlib,sys; d=plistlib.load(open(sys.argv[1],'rb')); print(d['format'], d['version'], [(e['key'], e['value']) for e in d['entries']])",
            location.filePath])
        #expect(output == "hearth-replica 2 [('backgroundColor', 2)]\n")
    }
}
