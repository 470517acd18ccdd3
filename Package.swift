// swift-tools-version:6.1
// bluectl: Bluetooth Low Energy for Linux (central and peripheral), over BlueZ's D-Bus API.
// Layers, each its own target: CDBus (libdbus) → CBluectlShim (thin C shim) →
// BluectlDBus (Swift D-Bus) → BluectlCore (BlueZ, CoreBluetooth-shaped; CCrypto:
// libcrypto's AES-CCM for encrypted sensor advertisements) →
// BluectlCLI (commands; CSystemd for sd_notify; BluectlGateway, over CMosquitto:
// libmosquitto, Eclipse Mosquitto's MQTT client, for `bluectl gateway`) → bluectl.
import PackageDescription
#if canImport(Glibc)
import Glibc
#endif

/// The executable linked by the toolchain's lld with packed relative
/// relocations (DT_RELR) when this machine's glibc reads them (2.36 and
/// later: Debian 12's): the static Swift runtime's 1.3 MB table of
/// relocations, read at every start and resident after, becomes 10 KB
/// (docs/benchmarks.md, "relocations packed"). With an older glibc the
/// binary would not start, so it is linked as before (the driver's default).
let packedRelocations: [String] = {
    #if canImport(Glibc)
    var text = [CChar](repeating: 0, count: 64)   // "glibc 2.36"
    guard confstr(Int32(_CS_GNU_LIBC_VERSION), &text, text.count) > 0 else { return [] }
    let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let version = name.split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
    guard version.count >= 2, (version[0], version[1]) >= (2, 36) else { return [] }
    return ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"]
    #else
    return []
    #endif
}()

let package = Package(
    name: "bluectl",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "bluectl", targets: ["bluectl"]),
        .library(name: "BluectlCore", targets: ["BluectlCore"]),
        // For the fuzz package (Fuzz/), which reaches it by product; not a promise.
        .library(name: "BluectlDBus", targets: ["BluectlDBus"]),
        // For the benchmarks package (Benchmarks/), which reaches it by product; not a promise.
        .library(name: "BluectlCLI", targets: ["BluectlCLI"]),
        // For the fuzz package (Fuzz/), which reaches it by product; not a promise.
        .library(name: "BluectlProxy", targets: ["BluectlProxy"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // BluectlCore's diagnostics (a program routes them with LoggingSystem.bootstrap)
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `swift package generate-documentation --target BluectlCore` (the library's reference)
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // ESPHome's native API messages (`bluectl proxy`; code generated once: Scripts/gen-esphome-proto).
        // No traits: the default BinaryDelimitedStreams imports all of Foundation (its
        // InputStream/OutputStream API), which would link Foundation, FoundationInternationalization
        // and ICU's data (~50 MB) into the static binary; the rest of SwiftProtobuf needs only
        // FoundationEssentials (docs/proxy.md).
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0", traits: []),
    ],
    targets: [
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // libmosquitto (MQTT with TLS): its header only. Not linked: opened when the first
        // MQTT session is made (BluectlGateway's MosquittoLibrary).
        .systemLibrary(name: "CMosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .target(name: "CBluectlShim", dependencies: ["CDBus"]),
        .target(name: "BluectlDBus", dependencies: ["CBluectlShim", "CDBus"]),
        .target(name: "BluectlCore", dependencies: ["BluectlDBus", "CBluectlShim", "CCrypto", .product(name: "Logging", package: "swift-log")]),
        // `bluectl gateway`'s MQTT session and publishing (docs/gateway.md); not part of
        // BluectlCore's promise.
        .target(name: "BluectlGateway", dependencies: ["BluectlCore", "BluectlDBus", "CMosquitto"]),
        .target(
            name: "BluectlCLI",
            dependencies: [
                "BluectlCore",
                "BluectlGateway",
                "BluectlProxy",
                "CBluectlShim",   // mallopt, prctl (MemoryFootprint)
                "CSystemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "bluectl", dependencies: ["BluectlCLI"], exclude: ["exports.map"],
            // The proxy's protobuf modules' symbols not exported (see exports.map);
            // relocations packed where the loader reads them (`packedRelocations`).
            linkerSettings: [.unsafeFlags(["-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/bluectl/exports.map"]
                                          + packedRelocations, .when(platforms: [.linux]))]
        ),
        // ESPHome's api.proto as Swift (generated, committed) and the message ids.
        .target(name: "ESPHomeAPI", dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]),
        // `bluectl proxy`: ESPHome's native API server (frames, connections) over BluectlCore's scan.
        // Its Noise encryption (X25519, ChaChaPoly, SHA-256) is libcrypto's (CCrypto).
        .target(name: "BluectlProxy", dependencies: ["BluectlCore", "ESPHomeAPI", "CCrypto", .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                                              .product(name: "Logging", package: "swift-log")]),
        // Small programs using BluectlCore as anyone would (run against the
        // stand-in by the bus tier: Tests/BusTierTests/ExampleTests.swift).
        .executableTarget(name: "ScanExample", dependencies: ["BluectlCore"], path: "Examples/ScanExample"),
        .executableTarget(name: "ReadExample", dependencies: ["BluectlCore"], path: "Examples/ReadExample"),
        .executableTarget(name: "NotifyLoggerExample", dependencies: ["BluectlCore"], path: "Examples/NotifyLoggerExample"),
        .executableTarget(name: "PeripheralExample", dependencies: ["BluectlCore"], path: "Examples/PeripheralExample"),
        .testTarget(name: "BluectlDBusTests", dependencies: ["BluectlDBus"]),
        .testTarget(name: "BluectlCoreTests", dependencies: ["BluectlCore"]),
        .testTarget(name: "BluectlCLITests", dependencies: ["BluectlCLI", "BluectlGateway"]),
        .testTarget(name: "BluectlProxyTests", dependencies: ["BluectlProxy", "ESPHomeAPI", "BluectlCore", "BluectlDBus"]),
        .testTarget(
            name: "BusTierTests",
            dependencies: ["BluectlCore", "BluectlGateway", "bluectl", "ScanExample", "ReadExample", "NotifyLoggerExample", "PeripheralExample"],
            resources: [.copy("Fixtures")]
        ),
    ]
)
