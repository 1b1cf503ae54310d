@testable import HearthDiscovery
import Testing

@Suite("Folding mDNS sightings into peers")
struct PeerTableTests {
    let record = ServiceRecord(protocolVersion: 1, accountHash: "0123456789abcdef",
                               storeHash: "00112233aabbccdd", deviceHash: "ffeeddccbbaa9988")

    func key(_ interface: Int32, _ proto: Int32, name: String = "Kitchen") -> PeerTable.InstanceKey {
        .init(name: name, domain: "local", interfaceIndex: interface, ipProtocol: proto)
    }

    func resolution(_ host: String, _ family: PeerAddress.Family, interface: Int32, port: UInt16 = 7420) -> PeerTable.Resolution {
        .init(address: PeerAddress(host: host, family: family, interfaceIndex: interface, interfaceName: "eth\(interface)"),
              port: port, txt: ["v": "1"], record: record)
    }

    @Test("IPv4 and IPv6 on several interfaces make one peer; the last sighting's loss makes it gone")
    func aggregation() {
        var table = PeerTable()
        let first = table.upsert(key(2, 0), resolution("192.168.1.5", .ipv4, interface: 2))
        guard case .appeared(let peer) = first else { Issue.record("expected appeared"); return }
        #expect(peer.id == "mdns:Kitchen.local")
        #expect(peer.addresses.map(\.host) == ["192.168.1.5"])

        let second = table.upsert(key(2, 1), resolution("fe80::1", .ipv6, interface: 2))
        guard case .updated(let both) = second else { Issue.record("expected updated"); return }
        #expect(both.addresses.map(\.connectHost) == ["192.168.1.5", "fe80::1%eth2"])

        let third = table.upsert(key(3, 0), resolution("10.0.0.5", .ipv4, interface: 3))
        guard case .updated(let three) = third else { Issue.record("expected updated"); return }
        #expect(three.addresses.map(\.host) == ["10.0.0.5", "192.168.1.5", "fe80::1"])

        // The same resolution again changes nothing.
        #expect(table.upsert(key(3, 0), resolution("10.0.0.5", .ipv4, interface: 3)) == nil)

        guard case .updated = table.remove(key(2, 1)) else { Issue.record("expected updated"); return }
        guard case .updated = table.remove(key(3, 0)) else { Issue.record("expected updated"); return }
        guard case .gone(let last) = table.remove(key(2, 0)) else { Issue.record("expected gone"); return }
        #expect(last.addresses.map(\.host) == ["192.168.1.5"])
        #expect(table.peers.isEmpty)
        #expect(table.remove(key(2, 0)) == nil)
    }

    @Test("a port change is an update; different names are different peers")
    func updatesAndNames() {
        var table = PeerTable()
        _ = table.upsert(key(1, 0), resolution("127.0.0.1", .ipv4, interface: 1))
        guard case .updated(let moved) = table.upsert(key(1, 0), resolution("127.0.0.1", .ipv4, interface: 1, port: 9000)) else {
            Issue.record("expected updated"); return
        }
        #expect(moved.port == 9000)
        guard case .appeared = table.upsert(key(1, 0, name: "Study"), resolution("127.0.0.1", .ipv4, interface: 1)) else {
            Issue.record("expected appeared"); return
        }
        #expect(table.peers.count == 2)
    }

    @Test("IPv6 link-local addresses carry their scope; others do not")
    func connectHost() {
        #expect(PeerAddress(host: "fe80::1", family: .ipv6, interfaceIndex: 2, interfaceName: "wlan0").connectHost == "fe80::1%wlan0")
        #expect(PeerAddress(host: "fd00::1", family: .ipv6, interfaceIndex: 2, interfaceName: "wlan0").connectHost == "fd00::1")
        #expect(PeerAddress(host: "fe80::1", family: .ipv6, interfaceIndex: 2, interfaceName: "wlan0").description == "[fe80::1%wlan0]")
    }
}
