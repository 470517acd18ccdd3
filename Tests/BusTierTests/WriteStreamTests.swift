// `bluectl write --stream` (the library's CharacteristicWriter) against the
// stand-in: AcquireWrite's socket as bluetoothd 5.66 hands it out (a
// SOCK_SEQPACKET pair, every datagram one Write Command), and the fallback
// to WriteValue calls where bluetoothd refuses AcquireWrite. What the
// kernel and a real bluetoothd do with it is the lab's (Tests/Lab).

import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Bytes that show a reordering or a loss (no two 4-byte windows alike for a long way).
private func streamPattern(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 7) ^ ($0 >> 8) ^ ($0 >> 16)) }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// `streamPattern(count)` in a file of the bus's directory: the bytes and the file's path.
private func patternFile(_ bus: PrivateBus, _ count: Int) throws -> ([UInt8], String) {
    let data = streamPattern(count)
    let file = bus.directory.appendingPathComponent("stream.bin")
    try Data(data).write(to: file)
    return (data, file.path)
}

@Suite("write --stream: AcquireWrite, and WriteValue where it is refused", .timeLimit(.minutes(3)))
struct WriteStreamTests {
    @Test("--file PATH: one AcquireWrite, every byte in order in datagrams of MTU − 3, the socket released at the end")
    func acquiredFromFile() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let (data, file) = try patternFile(bus, 1000)
            let r = try await bus.runBluectl(["write", heartRateAddress, HeartRateGatt.customUUID, "--file", file, "--stream", "--json"])
            #expect(r.exitCode == 0, "\(r)")
            let line = try r.jsonLines().first
            #expect(line?["via"] == .string("acquire-write"), "\(r)")
            #expect(line?["type"] == .string("without-response"))
            #expect(line?["bytes"] == .int(1000))
            #expect(line?["writes"] == .int(5))
            #expect(line?["value"] == nil)
            let writes = try await bus.gattWrites(g.custom)
            #expect(writes.map { $0.hex.count / 2 } == [244, 244, 244, 244, 24])   // the stand-in's MTU 247
            #expect(writes.map(\.hex).joined() == hex(data))
            #expect(writes.allSatisfy { $0.options["acquired"] != nil && $0.type == "command" })
            #expect(try await bus.callCount(g.custom, "AcquireWrite") == 1)
            #expect(try await bus.callCount(g.custom, "WriteValue") == 0)
            #expect(try await bus.property(g.custom, "org.bluez.GattCharacteristic1", "WriteAcquired")["data"] == .bool(false))
        }
    }

    @Test("--file - from a pipe faster than the socket: held back, nothing lost, in order")
    func acquiredFromPipe() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let (data, file) = try patternFile(bus, 300_000)
            let exe = try BusTier.bluectlExecutable()
            let s = await (try bus.spawn("/bin/sh", ["-c", "cat \"$1\" | \"$0\" write \(heartRateAddress) \(HeartRateGatt.customUUID) --file - --stream --json",
                                                     exe, file]))
                .wait(timeout: .seconds(60))
            #expect(s.exitCode == 0, "\(s)")
            let line = try s.jsonLines().first
            #expect(line?["bytes"] == .int(300_000), "\(s)")
            let writes = try await bus.gattWrites(g.custom)
            #expect(line?["writes"] == .int(Int64(writes.count)))
            #expect(writes.allSatisfy { $0.hex.count <= 2 * 244 })
            #expect(writes.map(\.hex).joined() == hex(data))
        }
    }

    @Test("AcquireWrite refused (no write-without-response flag): WriteValue calls with type command, said on stderr")
    func fallback() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let (data, file) = try patternFile(bus, 600)
            let r = try await bus.runBluectl(["write", heartRateAddress, "2a39", "--file", file, "--stream", "--json"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stderr.contains("refused AcquireWrite") && r.stderr.contains("org.bluez.Error.NotSupported"), "\(r)")
            let line = try r.jsonLines().first
            #expect(line?["via"] == .string("write-value"))
            #expect(line?["bytes"] == .int(600) && line?["writes"] == .int(3))
            let writes = try await bus.gattWrites(g.control)
            #expect(writes.map { $0.hex.count / 2 } == [244, 244, 112])
            #expect(writes.map(\.type) == ["command", "command", "command"])
            #expect(writes.map(\.hex).joined() == hex(data))
            #expect(try await bus.callCount(g.control, "AcquireWrite") == 1)
        }
    }

    @Test("--stream needs --file, excludes --with-response and --descriptor: usage errors, nothing written")
    func badInput() async throws {
        try await withPrivateBus { bus in
            let g = try await HeartRateGatt.install(bus)
            let c = HeartRateGatt.customUUID
            expectCleanFailure(try await bus.runBluectl(["write", heartRateAddress, c, "01", "--stream"]), 64, "--stream writes --file")
            expectCleanFailure(try await bus.runBluectl(["write", heartRateAddress, c, "--file", "-", "--stream", "--with-response"]),
                               64, "--with-response excludes it")
            expectCleanFailure(try await bus.runBluectl(["write", heartRateAddress, c, "--file", "-", "--stream", "--descriptor", "2902"]),
                               64, "not --descriptor")
            expectCleanFailure(try await bus.runBluectl(["write", heartRateAddress, c, "--file", "/nonexistent/x", "--stream"]),
                               64, "No such file or directory")
            #expect(try await bus.gattWrites(g.custom).isEmpty)
        }
    }
}
