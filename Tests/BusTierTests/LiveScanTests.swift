import Foundation
import Testing

/// `bluectl scan` on a terminal: the live table, through a real pseudo-terminal
/// (a tmux server of the test's own), its screen read with `capture-pane`.
@Suite("Live scan view (bus tier, through tmux)", .serialized)
struct LiveScanTests {
    static let tmux = "/usr/bin/tmux"

    /// A tmux server (own socket) running one command in a WIDTH × HEIGHT pane that stays after it exits.
    struct Pane {
        let socket: String
        let target = "live"

        func run(_ arguments: [String]) async throws -> ProcessResult {
            try await runProcess(LiveScanTests.tmux, ["-L", socket] + arguments, timeout: .seconds(10))
        }

        func screen() async throws -> [String] {
            let r = try await run(["capture-pane", "-p", "-t", target])
            return r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }

        /// Waits for the screen to satisfy `predicate` (a hang guard, not a timed assertion).
        func waitForScreen(_ predicate: ([String]) -> Bool) async throws -> [String] {
            let deadline = ContinuousClock.now + .seconds(30)
            var last: [String] = []
            while ContinuousClock.now < deadline {
                last = try await screen()
                if predicate(last) { return last }
                try await Task.sleep(for: .milliseconds(100))
            }
            return last
        }
    }

    @Test("a table sorted by signal, escaped names, fits the width, redraws on resize, Ctrl-C leaves the cursor on and exits 130")
    func liveTable() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "AA:00:00:00:00:01", [.name("Weak one"), .rssi(-90)])
            try await bus.addAdvertiser("hci0", "AA:00:00:00:00:02", [.name("Strong one"), .rssi(-40), .uuids(["180d"])])
            let evil = "\u{1B}[31mEVIL\u{07}" + String(repeating: "x", count: 80)
            try await bus.addAdvertiser("hci0", "AA:00:00:00:00:03", [.name(evil), .rssi(-60)])
            let (script, exitFile) = try Self.script(bus, "scan --adapter hci0")
            let pane = Pane(socket: "bluectl-live-\(getpid())")
            do {
                try await Self.checkLiveTable(pane, script: script, exitFile: exitFile, raw: bus.directory.appendingPathComponent("raw"))
            } catch {
                _ = try? await pane.run(["kill-server"])
                throw error
            }
            _ = try? await pane.run(["kill-server"])
        }
    }

    static func checkLiveTable(_ pane: Pane, script: URL, exitFile: URL, raw: URL) async throws {
        #expect(try await pane.run(["new-session", "-d", "-s", pane.target, "-x", "100", "-y", "20", "sh '\(script.path)'"]).exitCode == 0)
        _ = try await pane.run(["set-option", "-t", pane.target, "remain-on-exit", "on"])
        _ = try await pane.run(["pipe-pane", "-o", "-t", pane.target, "cat >> '\(raw.path)'"])

        let screen = try await pane.waitForScreen { $0.first?.hasPrefix("bluectl scan on hci0: 3 devices") == true }
        #expect(screen.first?.hasPrefix("bluectl scan on hci0: 3 devices, ") == true, "\(screen)")
        #expect(screen.first?.hasSuffix("(Ctrl-C to stop)") == true, "\(screen)")
        let rows = screen.filter { $0.hasPrefix("AA:00:00:00:00:0") }
        #expect(rows.map { String($0.prefix(17)) } == ["AA:00:00:00:00:02", "AA:00:00:00:00:03", "AA:00:00:00:00:01"],
                "strongest first: \(screen)")
        #expect(rows.first?.contains("-40 dBm  ██████".prefix(10)) == true, "\(rows)")
        #expect(rows.first?.contains("180d (Heart Rate)") == true, "\(rows)")
        // the name's escape sequence is shown, not obeyed; the row is cut to the width
        let evilRow = try #require(rows.dropFirst().first)
        #expect(evilRow.contains("[31mEVIL"), "\(evilRow)")
        #expect(screen.allSatisfy { $0.count <= 100 }, "\(screen)")
        #expect(evilRow.contains("EVIL\\") && evilRow.contains("…") && !evilRow.contains("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
                "the long name is cut in its column: \(evilRow)")

        _ = try await pane.run(["resize-window", "-t", pane.target, "-x", "60", "-y", "20"])
        let narrow = try await pane.waitForScreen { lines in
            lines.first?.hasPrefix("bluectl scan on hci0") == true && lines.allSatisfy { $0.count <= 60 }
                && lines.filter { $0.hasPrefix("AA:00:00:00:00:0") }.count == 3
        }
        #expect(narrow.allSatisfy { $0.count <= 60 } && narrow.filter { $0.hasPrefix("AA:00:00:00:00:0") }.count == 3,
                "after the resize: \(narrow)")

        _ = try await pane.run(["send-keys", "-t", pane.target, "C-c"])
        let status = try await Self.waitForExit(exitFile)
        #expect(status == "130", "exit status \(status ?? "none")")
        try await Self.expectTerminalRestored(raw)
        let after = try await pane.screen()
        #expect(after.contains { $0.hasPrefix("AA:00:00:00:00:02") }, "the last table stays on the screen: \(after)")
    }

    /// What bluectl left the terminal in: its output stream (pipe-pane, which starts
    /// after the first bytes) must end by resetting attributes and showing the cursor
    /// it hid. (tmux's own cursor flag for a dead pane proved unreliable under the
    /// sanitizers.) Waits for tmux to write the stream out (a hang guard).
    static func expectTerminalRestored(_ raw: URL) async throws {
        let reset = Array("\u{1B}[0m\u{1B}[?25h".utf8)
        func stream() -> [UInt8] { [UInt8]((try? Data(contentsOf: raw)) ?? Data()) }
        let settle = ContinuousClock.now + .seconds(10)
        while !stream().ends(with: reset), ContinuousClock.now < settle { try await Task.sleep(for: .milliseconds(100)) }
        let rawTail = stream().suffix(80).map { $0 == 0x1B ? "\\e" : String(UnicodeScalar($0)) }.joined()
        #expect(stream().ends(with: reset), "the terminal is not restored after exit: \(rawTail)")
    }

    /// Writes a script that runs bluectl with the bus's environment and records its exit status.
    static func script(_ bus: PrivateBus, _ arguments: String) throws -> (script: URL, exitFile: URL) {
        let script = bus.directory.appendingPathComponent("live-\(UInt32.random(in: 0...UInt32.max)).sh")
        let exitFile = script.appendingPathExtension("exit")
        let env = bus.environment.map { "export \($0.key)='\($0.value.replacingOccurrences(of: "'", with: "'\\''"))'" }
        // (the shell ignores the Ctrl-C meant for bluectl, to report its status)
        try (["#!/bin/sh", "trap '' INT"] + env + ["'\(try BusTier.bluectlExecutable())' \(arguments)", "echo $? > '\(exitFile.path)'"])
            .joined(separator: "\n").write(to: script, atomically: true, encoding: .utf8)
        return (script, exitFile)
    }

    static func waitForExit(_ exitFile: URL) async throws -> String? {
        let deadline = ContinuousClock.now + .seconds(30)
        while !FileManager.default.fileExists(atPath: exitFile.path), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        return try? String(contentsOf: exitFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("--timeout ends the live view with exit 0, the last table on the screen and the terminal restored")
    func liveTimeout() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "AA:00:00:00:00:07", [.name("Only one"), .rssi(-55)])
            let (script, exitFile) = try Self.script(bus, "scan --adapter hci0 --timeout 3")
            let pane = Pane(socket: "bluectl-live-t-\(getpid())")
            let raw = bus.directory.appendingPathComponent("raw-timeout")
            _ = try await pane.run(["new-session", "-d", "-s", pane.target, "-x", "100", "-y", "20", "sh '\(script.path)'"])
            _ = try await pane.run(["set-option", "-t", pane.target, "remain-on-exit", "on"])
            _ = try await pane.run(["pipe-pane", "-o", "-t", pane.target, "cat >> '\(raw.path)'"])
            let status = try await Self.waitForExit(exitFile)
            #expect(status == "0", "exit status \(status ?? "none")")
            try await Self.expectTerminalRestored(raw)
            let screen = try await pane.screen()
            #expect(screen.contains { $0.hasPrefix("AA:00:00:00:00:07  -55 dBm") }, "\(screen)")
            _ = try? await pane.run(["kill-server"])
        }
    }

    @Test("--live without a terminal on stdout: one line, exit 64; not a terminal: lines as before")
    func liveNeedsATerminal() async throws {
        try await withPrivateBus { bus in
            let r = try await bus.runBluectl(["scan", "--live", "--timeout", "1"])
            #expect(r.exitCode == 64, "\(r)")
            #expect(r.stderrLines == ["bluectl: --live needs a terminal on stdout (without it, scan prints a line per event)"],
                    "\(r.stderr)")
        }
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

