import HearthDiscovery
import Testing

@Suite("TXT record validation")
struct ServiceRecordTests {
    let account = "0123456789abcdef", store = "00112233aabbccdd", device = "ffeeddccbbaa9988"

    func parse(_ strings: [String]) -> Result<ServiceRecord, ServiceRecord.Rejection> {
        ServiceRecord.parse(txt: strings.map { Array($0.utf8) })
    }

    @Test("a description's own TXT parses back to its record")
    func roundTrip() throws {
        let service = ServiceDescription(instanceName: "Kitchen", port: 7420, protocolVersion: 3,
                                         accountHash: account, storeHash: store, deviceHash: device)
        try service.validate()
        #expect(service.txtStrings == ["v=3", "a=\(account)", "s=\(store)", "d=\(device)"])
        #expect(try parse(service.txtStrings).get() == service.record)
    }

    @Test("a device's service (protocol 3) has no store hash: its TXT has no s, and parses back")
    func deviceService() throws {
        let service = ServiceDescription(instanceName: "Kitchen", port: 7420, protocolVersion: 3,
                                         accountHash: account, deviceHash: device)
        try service.validate()
        #expect(service.txtStrings == ["v=3", "a=\(account)", "d=\(device)"])
        let record = try parse(service.txtStrings).get()
        #expect(record == service.record)
        #expect(record.storeHash == nil)
        // An older store's service still parses, with its store hash.
        #expect(try parse(["v=2", "a=\(account)", "s=\(store)", "d=\(device)"]).get().storeHash == store)
    }

    @Test("unknown keys and boolean attributes are allowed; keys are case-insensitive")
    func forwardCompatible() throws {
        let record = try parse(["V=1", "a=\(account)", "s=\(store)", "d=\(device)", "future=yes", "flag"]).get()
        #expect(record.protocolVersion == 1)
    }

    @Test("rejections", arguments: [
        (["a=0123456789abcdef", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], ServiceRecord.Rejection.missingKey("v")),
        (["v=1", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .missingKey("a")),
        (["v=1", "a=0123456789abcdef", "s=00112233aabbccdd"], .missingKey("d")),
        (["v=x", "a=0123456789abcdef", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .invalidValue(key: "v")),
        (["v=0", "a=0123456789abcdef", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .invalidValue(key: "v")),
        (["v=99999999999999999999", "a=0123456789abcdef", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .invalidValue(key: "v")),
        (["v=1", "a=0123456789ABCDEF", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .invalidValue(key: "a")),
        (["v=1", "a=0123", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .invalidValue(key: "a")),
        (["v=1", "a=0123456789abcdef", "s=Kitchen Notes", "d=ffeeddccbbaa9988"], .invalidValue(key: "s")),
        (["v=1", "a=0123456789abcdef", "a=0123456789abcdef", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .duplicateKey("a")),
        (["v=1", "=x", "a=0123456789abcdef", "s=00112233aabbccdd", "d=ffeeddccbbaa9988"], .notText),
    ])
    func rejections(strings: [String], expected: ServiceRecord.Rejection) {
        guard case .failure(let rejection) = parse(strings) else { Issue.record("accepted \(strings)"); return }
        // Errors are equal by code; the description names the key too.
        #expect(rejection == expected && rejection.description == expected.description)
    }

    @Test("binary bytes are refused")
    func binary() {
        let entries: [[UInt8]] = [Array("v=1".utf8), Array("a=0123456789abcdef".utf8), Array("s=00112233aabbccdd".utf8),
                                  [0x64, 0x3d, 0xff, 0x00, 0x01]]
        #expect(ServiceRecord.parse(txt: entries) == .failure(.notText))
        #expect(ServiceRecord.parse(txt: [[]]) == .failure(.notText))
    }

    @Test("huge records and too many strings are refused before looking inside")
    func size() {
        let valid = ["v=1", "a=\(account)", "s=\(store)", "d=\(device)"]
        let padding = (0..<10).map { "x\($0)=" + String(repeating: "A", count: 200) }
        guard case .failure(let rejection) = parse(valid + padding), rejection.code == .tooLarge else {
            Issue.record("not refused as too large")
            return
        }
        let many = (0..<40).map { "k\($0)" }
        guard case .failure(let tooMany) = parse(valid + many) else { Issue.record("not refused as too many strings"); return }
        #expect(tooMany == .tooManyEntries(44) && tooMany.description == ServiceRecord.Rejection.tooManyEntries(44).description)
    }

    @Test("invalid descriptions are refused before publishing")
    func descriptionValidation() {
        let good = ServiceDescription(instanceName: "Kitchen", port: 7420, protocolVersion: 1,
                                      accountHash: account, storeHash: store, deviceHash: device)
        var noPort = good; noPort.port = 0
        var badHash = good; badHash.deviceHash = "Alice's phone"
        var noName = good; noName.instanceName = ""
        for bad in [noPort, badHash, noName] {
            #expect(throws: DiscoveryError.self) { try bad.validate() }
        }
    }

    @Test("instance names are cut to 63 bytes on a character boundary")
    func truncation() {
        let name = String(repeating: "é", count: 40)   // 80 bytes
        let service = ServiceDescription(instanceName: name, port: 1, protocolVersion: 1,
                                         accountHash: account, storeHash: store, deviceHash: device)
        #expect(service.instanceName.utf8.count == 62)
        #expect(service.instanceName == String(repeating: "é", count: 31))
    }
}
