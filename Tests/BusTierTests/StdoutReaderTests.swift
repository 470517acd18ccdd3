import Foundation
import Testing

/// stdout's reader as the streaming commands meet it (issue 30.1, 26.1): a
/// reader that goes away ends the command at once with 141, also while
/// nothing more is printed; a reader that stops reading holds up nothing on
/// the D-Bus side, and what could not wait is counted and reported. The real
/// binary against the stand-in on a private bus, in a shell pipeline.
@Suite("stdout's reader: gone or stalled (bus tier)", .serialized, .timeLimit(.minutes(3)))
struct StdoutReaderTests {
    static let device = "AA:00:00:00:00:31"

    /// Runs `command | head -n 1` in bash, the command's status on stderr as `status=N`.
    static func headOne(_ bus: PrivateBus, _ arguments: String) throws -> ChildProcess {
        try bus.spawn("/bin/bash", ["-c", """
            "$0" \(arguments) | head -n 1
            echo "status=${PIPESTATUS[0]}" >&2
            """, try BusTier.bluectlExecutable()])
    }

    /// The pipeline ends (it would run for ever otherwise: no --timeout), with 141 and no message.
    static func expectEndsWith141(_ shell: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) async {
        let r = await shell.wait(timeout: .seconds(20))
        #expect(!r.timedOut, "still running after its reader left: \(r)", sourceLocation: sourceLocation)
        #expect(r.stdoutLines.count == 1, "\(r)", sourceLocation: sourceLocation)
        #expect(r.stderr.contains("status=141"), "\(r)", sourceLocation: sourceLocation)
        #expect(!r.stderr.contains("bluectl:"), "a closed pipe is not an error: \(r)", sourceLocation: sourceLocation)
    }

    @Test("scan --json --duplicates | head -1, one more advertisement after the first line: scan ends at once, 141, StopDiscovery")
    func scanReaderGoneThenOneMore() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", Self.device, [.name("gone-1"), .rssi(-50)])
            let shell = try Self.headOne(bus, "scan --json --duplicates")
            #expect(await shell.waitForStdoutLines(1, timeout: .seconds(15)), "no first line")
            // head has printed its line and left; one more advertisement comes
            try await bus.updateAdvertiser("hci0", Self.device, [.rssi(-40)])
            await Self.expectEndsWith141(shell)
            #expect(try await bus.eventually { try await bus.discoverySessions().isEmpty }, "the discovery was stopped")
        }
    }

    @Test("scan --json | head -1 with nothing more to print: the reader leaving alone ends the scan, 141")
    func scanReaderGoneNothingMore() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", Self.device, [.name("gone-2"), .rssi(-50)])
            let shell = try Self.headOne(bus, "scan --json")
            await Self.expectEndsWith141(shell)
            #expect(try await bus.eventually { try await bus.discoverySessions().isEmpty }, "the discovery was stopped")
        }
    }

    @Test("subscribe | head -1 after one value, nothing more: ends at once with 141 after StopNotify and Disconnect")
    func subscribeReaderGoneNothingMore() async throws {
        try await withPrivateBus { bus in
            let chr = try await SubscribeReliabilityTests.addStreamPeripheral(bus)
            let shell = try Self.headOne(bus, "subscribe \(heartRateAddress) \(SubscribeReliabilityTests.streamUUID) --json")
            #expect(try await bus.eventually(timeout: .seconds(15)) { SubscribeReliabilityTests.notifyCalls(bus, chr).start == 1 })
            _ = try await bus.emitNotification(chr, [1, 0, 0, 0])
            await Self.expectEndsWith141(shell)
            #expect(SubscribeReliabilityTests.notifyCalls(bus, chr).stop == 1, "\(bus.standInLog.suffix(2000))")
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Connected")["data"] == .bool(false))
        }
    }

    @Test("advertise --json | head -1: the first line, then the reader leaves: ends with 141, the advertisement unregistered")
    func advertiseReaderGone() async throws {
        try await withPrivateBus { bus in
            let shell = try Self.headOne(bus, "advertise --adapter hci0 --name gone-adv --json")
            await Self.expectEndsWith141(shell)
            #expect(try await bus.eventually { try await bus.registered("RegisteredAdvertisements").isEmpty },
                    "the advertisement was unregistered")
        }
    }

    @Test("serve --json | head -1: ends with 141, the service unregistered")
    func serveReaderGone() async throws {
        try await withPrivateBus { bus in
            let spec = try bus.temporaryFile(heartRateSpec)
            let shell = try Self.headOne(bus, "serve \(spec) --adapter hci0 --json")
            await Self.expectEndsWith141(shell)
            #expect(try await bus.eventually { try await bus.registered("RegisteredApplications").isEmpty }, "the application was unregistered")
        }
    }

    @Test("a reader that stops reading: the values keep coming and the clean-up runs meanwhile; dropped values counted and reported")
    func stalledReader() async throws {
        try await withPrivateBus { bus in
            let chr = try await SubscribeReliabilityTests.addStreamPeripheral(bus)
            let flag = bus.directory.appendingPathComponent("read-now").path
            // The reader shrinks the pipe to one page and reads nothing until the flag file exists.
            let reader = "import fcntl, os, sys, time\nfcntl.fcntl(0, 1031, 4096)\n"
                + "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
                + "sys.stdout.buffer.write(sys.stdin.buffer.read())\n"
            let shell = try bus.spawn("/bin/bash", ["-c", """
                "$0" subscribe \(heartRateAddress) \(SubscribeReliabilityTests.streamUUID) --json --queue 10 --count 2000 \
                  | /usr/bin/python3 -c "$1" "$2"
                echo "status=${PIPESTATUS[0]}" >&2
                """, try BusTier.bluectlExecutable(), reader, flag])
            #expect(try await bus.eventually(timeout: .seconds(15)) { SubscribeReliabilityTests.notifyCalls(bus, chr).start == 1 })
            try await bus.mock("EmitNotifications", [.objectPath(chr), .uint32(0), .uint32(2000)], timeout: .seconds(60))
            // The reader still reads nothing: bluectl took every value (--count reached) and did its
            // clean-up through the bus (StopNotify, Disconnect) without waiting for stdout.
            #expect(try await bus.eventually(timeout: .seconds(20)) { SubscribeReliabilityTests.notifyCalls(bus, chr).stop == 1 },
                    "no StopNotify while stdout is stalled: \(bus.standInLog.suffix(1500))")
            #expect(try await bus.eventually(timeout: .seconds(10)) {
                try await bus.property(heartRatePath, "org.bluez.Device1", "Connected")["data"] == .bool(false)
            }, "no Disconnect while stdout is stalled")
            #expect(shell.isRunning, "bluectl waits for its reader to take what is queued")
            #expect(FileManager.default.createFile(atPath: flag, contents: nil), "cannot write \(flag)")
            let r = await shell.wait(timeout: .seconds(30))
            let (seqs, events) = try SubscribeReliabilityTests.parse(r.stdoutLines)
            let dropped = events.filter { $0["event"] == .string("dropped") }.compactMap { $0["count"]?.int }.reduce(0, +)
            #expect(dropped > 0, "one page of pipe and 10 queued lines cannot hold 2000 values: \(events)")
            #expect(seqs.count + dropped == 2000, "printed \(seqs.count) + dropped \(dropped)")
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "in order, none twice")
            #expect(r.stderr.contains("output is too slow"), "\(r)")
            #expect(r.stderr.contains("\(dropped) values were dropped in all"), "\(r)")
            #expect(r.stderr.contains("status=0"), "\(r)")
        }
    }
}
