import Foundation
import Testing

@Suite("Shell completion (bus tier)")
struct CompletionTests {
    /// What bash completes for `line` (the cursor at its end), with the completion script bluectl generates.
    static func bashCompletions(_ bus: PrivateBus?, _ words: [String]) async throws -> ProcessResult {
        let bluectl = try BusTier.bluectlExecutable()
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let script = """
            source <('\(bluectl)' --generate-completion-script bash)
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
            COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
            # as bash calls it: the command, the word being completed, the word before it
            _bluectl "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        var env = bus?.environment ?? ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bus"]
        env["PATH"] = "\(URL(fileURLWithPath: bluectl).deletingLastPathComponent().path):/usr/bin:/bin"
        return try await runProcess("/bin/bash", ["-c", script], environment: env, timeout: .seconds(20))
    }

    @Test("a DEVICE argument completes to the addresses BlueZ knows; nothing, silently, without a bus")
    func deviceAddresses() async throws {
        try await withPrivateBus { bus in
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:01", [.name("one"), .rssi(-50)])
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:02", [.name("two"), .rssi(-50)])
            let scan = try await bus.runBluectl(["scan", "--count", "2", "--timeout", "10"])
            #expect(scan.exitCode == 0, "\(scan)")
            let r = try await Self.bashCompletions(bus, ["bluectl", "read", ""])
            #expect(r.exitCode == 0, "\(r)")
            #expect(r.stdoutLines == ["AA:BB:CC:DD:EE:01", "AA:BB:CC:DD:EE:02"], "\(r)")
            let narrowed = try await Self.bashCompletions(bus, ["bluectl", "info", "AA:BB:CC:DD:EE:0"])
            #expect(narrowed.stdoutLines == ["AA:BB:CC:DD:EE:01", "AA:BB:CC:DD:EE:02"], "\(narrowed)")
        }
        let none = try await Self.bashCompletions(nil, ["bluectl", "read", ""])
        #expect(none.exitCode == 0 && none.stdoutLines.isEmpty && none.stderr.isEmpty, "\(none)")
    }

    @Test("every name completes: a subcommand (remove too), its DEVICE, --adapter's adapters; help remove names remove")
    func everyName() async throws {
        try await withPrivateBus(adapters: [.hci0, AdapterSpec("hci1", address: "00:AA:01:01:00:01", alias: "second")]) { bus in
            try await bus.addAdvertiser("hci0", "AA:BB:CC:DD:EE:01", [.name("one"), .rssi(-50)])
            let scan = try await bus.runBluectl(["scan", "--count", "1", "--timeout", "10"])
            #expect(scan.exitCode == 0, "\(scan)")
            let re = try await Self.bashCompletions(bus, ["bluectl", "re"])
            #expect(re.stdoutLines.sorted() == ["read", "remove"], "\(re)")
            let remove = try await Self.bashCompletions(bus, ["bluectl", "remove", ""])
            #expect(remove.stdoutLines == ["AA:BB:CC:DD:EE:01"], "\(remove)")
            for words in [["bluectl", "read", "--adapter", ""], ["bluectl", "devices", "--adapter", ""], ["bluectl", "adapter", ""]] {
                let adapters = try await Self.bashCompletions(bus, words)
                #expect(adapters.stdoutLines == ["hci0", "hci1"], "\(words): \(adapters)")
            }
            let help = try await bus.runBluectl(["help", "remove"])
            #expect(help.exitCode == 0 && help.stdout.contains("USAGE: bluectl remove ") && !help.stdout.contains("bluectl unpair ["),
                    "\(help)")
        }
    }
}
