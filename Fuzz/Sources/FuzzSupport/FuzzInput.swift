// What every fuzz target shares: reading structured choices from the fuzzer's
// bytes, failing loudly when a property does not hold, and writing seeds.
import CFuzzDriver
#if canImport(Glibc)
import Glibc
#endif

/// The fuzzer's bytes, consumed front to back. Past the end every read gives
/// zeros, so any input means something and generation always terminates.
public struct FuzzInput {
    public let bytes: [UInt8]
    public private(set) var index = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public init(_ data: UnsafePointer<UInt8>?, _ count: Int) {
        guard let data, count > 0 else {
            self.init([])
            return
        }
        self.init(Array(UnsafeBufferPointer(start: data, count: count)))
    }

    public var isAtEnd: Bool { index >= bytes.count }

    public mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    public mutating func bool() -> Bool { byte() & 1 != 0 }

    /// Up to `count` bytes (fewer at the end).
    public mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, index + max(0, count))
        defer { index = max(index, end) }
        return index < end ? Array(bytes[index..<end]) : []
    }

    /// A length byte, then that many bytes.
    public mutating func lengthPrefixed() -> [UInt8] { take(Int(byte())) }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] { take(bytes.count - index) }

    /// Little-endian, `byteCount` ≤ 8 bytes.
    public mutating func integer(_ byteCount: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<byteCount { v |= UInt64(byte()) << (8 * UInt64(i)) }
        return v
    }
}

/// Appends what `FuzzInput` reads back.
public struct FuzzOutput {
    public private(set) var bytes: [UInt8] = []
    public init() {}
    public mutating func byte(_ b: UInt8) { bytes.append(b) }
    public mutating func set(_ index: Int, _ b: UInt8) { bytes[index] = b }
    public mutating func bytes(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
    public mutating func lengthPrefixed(_ b: [UInt8]) {
        precondition(b.count <= 255, "seed field longer than a length byte")
        byte(UInt8(b.count))
        bytes(b)
    }
    public mutating func integer(_ v: UInt64, _ byteCount: Int) {
        for i in 0..<byteCount { byte(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }
}

/// A property the target asserts: on failure, says which and aborts, so that
/// libFuzzer keeps the input as a crash artifact.
public func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                  file: StaticString = #fileID, line: UInt = #line) {
    guard !condition() else { return }
    say("PROPERTY FAILED (\(file):\(line)): \(message())")
    abort()
}

/// Seeds: when `BLUECTL_FUZZ_WRITE_SEEDS` names a directory, a target
/// writes its seed corpus there and exits (`Scripts/fuzz --write-seeds`),
/// so the committed seeds stay reproducible.
func writeSeedsIfAsked(_ seeds: () -> [(name: String, bytes: [UInt8])]) {
    guard let dir = getenv("BLUECTL_FUZZ_WRITE_SEEDS").map({ String(cString: $0) }), !dir.isEmpty else { return }
    for seed in seeds() {
        let path = dir + "/" + seed.name
        guard let file = fopen(path, "wb") else {
            say("cannot write \(path)")
            exit(1)
        }
        _ = seed.bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
        fclose(file)
    }
    exit(0)
}

/// A line on stderr.
public func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Each target's main.swift: writes the seeds when asked to, else hands the
/// process to libFuzzer's driver with `target` as the function under test.
public func runFuzzer(_ target: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32,
                      seeds: () -> [(name: String, bytes: [UInt8])]) -> Never {
    writeSeedsIfAsked(seeds)
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, target))
}
