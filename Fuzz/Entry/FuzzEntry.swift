import Foundation
import HearthFuzzDriver
import HearthFuzzTargets

// The libFuzzer entry points of `hearth-fuzz`, one binary for every target: the target is
// chosen by $HEARTH_FUZZ_TARGET (see scripts/fuzz.sh). Built only with HEARTH_FUZZ=1 and
// -sanitize=fuzzer,address, where libFuzzer supplies main().

/// The target of this process, read once at start.
nonisolated(unsafe) private var selected: FuzzTarget?

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    let name = ProcessInfo.processInfo.environment["HEARTH_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("hearth-fuzz: set HEARTH_FUZZ_TARGET to one of: \(names)\n".utf8))
        exit(2)
    }
    // HEARTH_FUZZ_SEEDS=DIR: write the target's seeds there and exit.
    if let directory = ProcessInfo.processInfo.environment["HEARTH_FUZZ_SEEDS"] {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (i, seed) in try FuzzSeeds.seeds(for: target).enumerated() {
                try seed.write(to: URL(fileURLWithPath: "\(directory)/seed-\(i)"))
            }
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("hearth-fuzz: writing seeds: \(error)\n".utf8))
            exit(1)
        }
    }
    selected = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let target = selected else { return 0 }
    let data = bytes.map { Data(bytes: $0, count: count) } ?? Data()
    target.run(data)
    return 0
}
