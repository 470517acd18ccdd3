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
            _bluectl
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
}
