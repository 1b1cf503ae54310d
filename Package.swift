// swift-tools-version: 6.1
// Hearth: Apple's iCloud key-value store API (NSUbiquitousKeyValueStore) for Linux,
// synced peer to peer on the LAN. See README.md and docs/architecture.md.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Hearth",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Hearth", targets: ["Hearth"]),
        // A loopback cluster of replicas for app developers' integration tests.
        .library(name: "HearthTesting", targets: ["HearthTesting"]),
        .executable(name: "hearth", targets: ["HearthCommand"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // `swift package generate-documentation` (scripts/docs.sh): the Hearth and HearthTesting catalogs.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Layer 1-3: values, the replica model and persistence. Pure Swift, no sockets.
        .target(
            name: "HearthCore",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // The public, Apple-compatible store.
        .target(
            name: "Hearth",
            dependencies: ["HearthCore", "HearthSync", "HearthIdentity", "HearthTransport",
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // Layer 4-5: identity, signatures and mutual TLS on OpenSSL.
        .systemLibrary(
            name: "CHearthOpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "HearthIdentity",
            dependencies: ["HearthCore", "CHearthOpenSSL", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(
            name: "HearthTransport",
            dependencies: [
                "HearthCore", "HearthIdentity", "CHearthOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // Layer 6: discovery through the Avahi daemon, with a static fallback.
        .systemLibrary(
            name: "CHearthAvahi",
            pkgConfig: "avahi-client",
            providers: [.apt(["libavahi-client-dev"])]
        ),
        .target(
            name: "HearthDiscovery",
            dependencies: ["CHearthAvahi", "HearthCore", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // A tiny publisher/browser process for the discovery tests (multi-host, no-daemon fallback).
        .executableTarget(
            name: "hearth-discovery-probe",
            dependencies: ["HearthDiscovery", .product(name: "Logging", package: "swift-log")],
            path: "Tests/HearthDiscoveryProbe",
            swiftSettings: strict
        ),

        // Pairing (issue 14): a new device joins by asking a member on the LAN, the two comparing
        // a code; identity, the transport's pairing TLS mode and discovery's `_hearth-pair._tcp`.
        .target(
            name: "HearthPairing",
            dependencies: [
                "HearthCore", "HearthIdentity", "HearthTransport", "HearthDiscovery",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HearthPairingTests",
            dependencies: ["HearthPairing", "HearthIdentity", "HearthTransport", "HearthDiscovery", "HearthCore", "HearthTestSupport",
                           .product(name: "NIOCore", package: "swift-nio"), .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // Layer 7: the sync engine, joining replica, identity, transport and discovery.
        .target(
            name: "HearthSync",
            dependencies: [
                "HearthCore", "HearthIdentity", "HearthTransport", "HearthDiscovery",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // A sync peer process for the multi-process tests (kill -9, Avahi end to end).
        .executableTarget(name: "hearth-sync-peer", dependencies: ["Hearth", "HearthCore"], path: "Tests/HearthSyncPeer", swiftSettings: strict),
        // Helpers shared by the test targets (child processes, a seeded generator). Foundation
        // only, so that the lightest test targets can use it too.
        .target(name: "HearthTestSupport", dependencies: [], path: "Tests/HearthTestSupport", swiftSettings: strict),
        .testTarget(name: "HearthSyncTests", dependencies: ["Hearth", "HearthSync", "HearthCore", "HearthIdentity", "HearthTransport", "hearth-sync-peer", "HearthTesting", "HearthTestSupport", "HearthFuzzTargets",
                                                            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                                                            .product(name: "Logging", package: "swift-log")],
                    swiftSettings: strict),
        .testTarget(name: "HearthCoreTests", dependencies: ["HearthCore", "HearthTestSupport", .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .testTarget(name: "HearthTests", dependencies: ["Hearth", "HearthCore", "HearthIdentity", "HearthSync", "HearthTransport", "HearthTesting", "HearthTestSupport", "hearth-test-writer",
                                                        .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                                                        .product(name: "NIOPosix", package: "swift-nio"),
                                                        .product(name: "Logging", package: "swift-log")],
                    swiftSettings: strict),
        // Examples.
        .executableTarget(name: "hearth-local-demo", dependencies: ["Hearth"], path: "Examples/LocalDemo", swiftSettings: strict),
        // A child process for the crash and lock tests: writes in a loop until killed.
        .executableTarget(name: "hearth-test-writer", dependencies: ["Hearth", .product(name: "NIOPosix", package: "swift-nio")], path: "Tests/HearthTestWriter", swiftSettings: strict),
        .testTarget(name: "HearthIdentityTests", dependencies: ["HearthIdentity", "HearthCore", .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .testTarget(
            name: "HearthTransportTests",
            dependencies: [
                "HearthTransport", "HearthIdentity", "HearthCore", "HearthTesting", "HearthTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HearthDiscoveryTests",
            dependencies: ["HearthDiscovery", "Hearth", "HearthCore", "HearthIdentity", "HearthTesting", "HearthTestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),

        // The device daemon (docs/daemon.md) and what the command and the daemon say to the
        // process that holds a store: control sockets, hosted stores, the systemd unit. A library,
        // so that a test runs the daemon in its own process; the command only parses and prints.
        .target(
            name: "HearthDaemon",
            dependencies: ["Hearth", "HearthCore", "HearthIdentity", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HearthDaemonTests",
            dependencies: ["HearthDaemon", "HearthCore", "HearthIdentity"],
            swiftSettings: strict
        ),

        // The hearth command, the example apps and the loopback test harness (issue 6).
        .executableTarget(
            name: "HearthCommand",
            dependencies: ["Hearth", "HearthCore", "HearthIdentity", "HearthPairing", "HearthDiscovery", "HearthDaemon",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .target(name: "HearthTesting", dependencies: ["Hearth", "HearthCore", "HearthIdentity", "HearthSync", "HearthTransport",
                                                   .product(name: "NIOCore", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
                                                   .product(name: "InMemoryLogging", package: "swift-log")],
                swiftSettings: strict),
        .executableTarget(name: "hearth-color-sync", dependencies: ["Hearth"], path: "Examples/ColorSync",
                          exclude: ["README.md", "try-two.sh"], swiftSettings: strict),
        .executableTarget(name: "hearth-shopping-list", dependencies: ["Hearth"], path: "Examples/ShoppingList",
                          exclude: ["README.md", "try-two.sh"], swiftSettings: strict),
        .testTarget(name: "HearthCommandTests", dependencies: ["HearthCommand", "HearthDaemon", "hearth-color-sync", "hearth-test-writer", "Hearth", "HearthCore", "HearthIdentity",
                                                               "HearthTesting", "HearthTestSupport", "HearthTransport", "HearthSync", .product(name: "NIOCore", package: "swift-nio"),
                                                               .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        .testTarget(name: "HearthTestingTests", dependencies: ["HearthTesting", "HearthTestSupport", "Hearth", "HearthCore"], swiftSettings: strict),

        // The fuzz targets' decoders and seeds (Fuzz/, scripts/fuzz.sh), also replayed by a unit test.
        .target(
            name: "HearthFuzzTargets",
            dependencies: ["HearthCore", "HearthSync", "HearthTransport", "HearthDiscovery", "HearthIdentity",
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOEmbedded", package: "swift-nio")],
            path: "Fuzz/Targets",
            swiftSettings: strict
        ),

        // The household simulator (issue 28, docs/simulator.md, scripts/sim.sh): devices of one
        // account on one thread, a virtual clock and the in-memory network, faults from a seed.
        .executableTarget(
            name: "hearth-sim",
            dependencies: ["Hearth", "HearthCore", "HearthIdentity", "HearthSync", "HearthTesting", "HearthTransport",
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Logging", package: "swift-log")],
            path: "Sources/HearthSim",
            swiftSettings: strict
        ),

        .testTarget(name: "HearthSimTests", dependencies: ["hearth-sim", "HearthTestSupport"], swiftSettings: strict),

        // The benchmark suite (docs/benchmarks.md, scripts/bench.sh); not run by the tests.
        .executableTarget(
            name: "hearth-benchmarks",
            dependencies: ["Hearth", "HearthCore", "HearthIdentity", "HearthTransport",
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/HearthBenchmarks",
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The libFuzzer binary (scripts/fuzz.sh): only with HEARTH_FUZZ=1, since it links only with
// -sanitize=fuzzer (libFuzzer's driver; Fuzz/Driver is its entry point).
if Context.environment["HEARTH_FUZZ"] == "1" {
    package.targets.append(.target(name: "HearthFuzzDriver", path: "Fuzz/Driver"))
    package.targets.append(.executableTarget(
        name: "hearth-fuzz",
        dependencies: ["HearthFuzzTargets", "HearthFuzzDriver"],
        path: "Fuzz/Entry",
        swiftSettings: strict + [.unsafeFlags(["-parse-as-library"])]
    ))
}
