import Foundation
import HearthTestSupport
import Testing

@Suite("Test children")
struct ChildProcessTests {
    @Test("A child inherits no descriptor of the test process beyond stdin, stdout and stderr")
    func noInheritedDescriptors() async throws {
        // A descriptor without close-on-exec, as NIO's sockets are, at a number nothing else uses.
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(socketFD >= 0)
        let high = dup2(socketFD, 777)
        close(socketFD)
        defer { close(high) }
        try #require(high == 777)
        let child = try ChildProcess("/bin/ls", ["/proc/self/fd"])
        #expect(await child.wait(upTo: .seconds(10)) == 0)
        let descriptors = child.output.split(separator: "\n").compactMap { Int($0) }
        // 0-2, and the one ls opens to read the directory.
        #expect(!descriptors.contains(777), "inherited: \(descriptors)")
        #expect(descriptors.count <= 4, "inherited: \(descriptors)")
    }
}
