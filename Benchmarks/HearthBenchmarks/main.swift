import Foundation

// hearth-benchmarks: the benchmark suite (docs/benchmarks.md). Without a mode it runs the
// whole suite and prints the table; the other modes are the child processes it spawns.
//
//   hearth-benchmarks [--quick] [--out DIR] [--only local,latency,throughput,join,crypto,daemon,scale,appear]
//   (appear: only when named, inside the test network: it needs Avahi)

let arguments = Array(CommandLine.arguments.dropFirst())
/// `key=value` arguments of the child modes.
let options = Dictionary(arguments.dropFirst().compactMap { argument -> (String, String)? in
    guard let eq = argument.firstIndex(of: "=") else { return nil }
    return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
}, uniquingKeysWith: { $1 })

do {
    switch arguments.first {
    case "peer": try await PeerMode.run(options)
    case "echo-tcp": try EchoMode.runTCP(size: Int(options["size"] ?? "64") ?? 64)
    case "echo-tls": try await EchoMode.runTLS(config: options["config"]!)
    case "local": try LocalMode.run(options)
    case "open": try OpenMode.run(options)
    case "baseline": await BaselineMode.run()
    default:
        let quick = arguments.contains("--quick")
        let out = arguments.firstIndex(of: "--out").map { arguments[$0 + 1] } ?? "bench-results"
        let only = arguments.firstIndex(of: "--only").map { Set(arguments[$0 + 1].split(separator: ",").map(String.init)) } ?? []
        try await Suite(quick: quick, outputDirectory: out, only: only).run()
    }
} catch {
    FileHandle.standardError.write("hearth-benchmarks \(arguments.first ?? ""): \(error)\n".data(using: .utf8)!)
    Child.killAll()
    exit(1)
}
