// swift-tools-version:6.0
// bluectl's libFuzzer targets (Scripts/fuzz builds and runs them). A package
// of its own, so that the main package never builds with -sanitize=fuzzer:
// it depends on the repository's root package by path. Built with
//   swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing
// (-enable-testing: the targets reach internal API such as MessageCodec
// through @testable import). Each target's main.swift hands over to
// libFuzzer's driver (SwiftPM renames main, so libFuzzer's own never runs).
import PackageDescription

// A path dependency's identity is its directory's name, which depends on
// where the repository was cloned.
let root = Context.packageDirectory.split(separator: "/").dropLast().last.map(String.init) ?? "bluectl"

let package = Package(
    name: "bluectl-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        .target(name: "CFuzzDriver"),
        .target(name: "FuzzSupport", dependencies: ["CFuzzDriver", .product(name: "BluectlDBus", package: root)]),
        .executableTarget(name: "FuzzDBus", dependencies: [
            "FuzzSupport", .product(name: "BluectlDBus", package: root),
        ]),
        .executableTarget(name: "FuzzAdvertisement", dependencies: [
            "FuzzSupport", .product(name: "BluectlCore", package: root),
        ]),
        .executableTarget(name: "FuzzParsers", dependencies: [
            "FuzzSupport", .product(name: "BluectlCore", package: root),
        ]),
        .executableTarget(name: "FuzzSensors", dependencies: [
            "FuzzSupport", .product(name: "BluectlCore", package: root),
        ]),
        .executableTarget(name: "FuzzProxy", dependencies: [
            "FuzzSupport", .product(name: "BluectlProxy", package: root),
        ]),
    ]
)
