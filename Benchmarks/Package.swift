// swift-tools-version:6.1
// bluectl's micro-benchmarks of its hot paths (Scripts/bench micro builds and
// runs them): decoding a PropertiesChanged, applying it to the mirror,
// rendering a line. A package of its own, so that the main package never
// depends on package-benchmark: it depends on the repository's root package
// by path. Built with
//   swift build -c release -Xswiftc -enable-testing
// (-enable-testing: the cases reach internal API such as MessageCodec and
// ScanCommand through @testable import). Every call into bluectl that is
// measured is in Sources/HotPathCases/HotPathCases.swift; two drivers run
// those cases:
//   HotPaths      package-benchmark's (`swift package benchmark`): time, CPU,
//                 mallocs (malloc-interposer), throughput
//   HotPathCount  N iterations of one case, for valgrind's callgrind
//                 (instructions per operation: this machine has no perf counters)
import PackageDescription

// A path dependency's identity is its directory's name, which depends on
// where the repository was cloned.
let root = Context.packageDirectory.split(separator: "/").dropLast().last.map(String.init) ?? "bluectl"

let package = Package(
    name: "bluectl-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        // Only the malloc interposer's trait: the default RuntimeInterposer
        // (Swift 6.3 on Linux, ARC metrics) needs a package that is not used here.
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .target(name: "CBenchSink"),
        .target(name: "HotPathCases", dependencies: [
            "CBenchSink",
            .product(name: "BluectlDBus", package: root),
            .product(name: "BluectlCore", package: root),
            .product(name: "BluectlCLI", package: root),
        ]),
        .executableTarget(name: "HotPathCount", dependencies: ["HotPathCases"]),
        .executableTarget(
            name: "HotPaths",
            dependencies: ["HotPathCases", .product(name: "Benchmark", package: "package-benchmark")],
            path: "Benchmarks/HotPaths",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
