import Testing
@testable import BluectlCLI

@Suite("Usage hints: one error style, a did-you-mean for a mistyped subcommand")
struct UsageHintsTests {
    @Test("edit distance, with a transposition counted once")
    func distance() {
        #expect(UsageHints.distance("scan", "scan") == 0)
        #expect(UsageHints.distance("scna", "scan") == 1)
        #expect(UsageHints.distance("reed", "read") == 1)
        #expect(UsageHints.distance("sacn", "scan") == 1)
        #expect(UsageHints.distance("disconect", "disconnect") == 1)
        #expect(UsageHints.distance("", "info") == 4)
        #expect(UsageHints.distance("xyz", "scan") == 4)
    }

    @Test("a suggestion only within two edits, and only when one candidate is nearest")
    func closest() {
        let commands = ["adapters", "scan", "connect", "disconnect", "info", "discover", "read", "write", "subscribe", "help"]
        #expect(UsageHints.closest(to: "scna", among: commands) == "scan")
        #expect(UsageHints.closest(to: "wirte", among: commands) == "write")
        #expect(UsageHints.closest(to: "xyz", among: commands) == nil)
        #expect(UsageHints.closest(to: "ab", among: ["ac", "ad"]) == nil, "a tie suggests nothing")
    }

    @Test("ArgumentParser's lines start lower-case like bluectl's; a real subcommand gets no suggestion")
    func styled() {
        #expect(UsageHints.styled("Unexpected argument 'scna'", arguments: ["scna"]) == "unexpected argument 'scna'. Did you mean 'scan'?")
        #expect(UsageHints.styled("Unknown option '--timout'. Did you mean '--timeout'?", arguments: ["scan", "--timout"])
                == "unknown option '--timout'. Did you mean '--timeout'?")
        #expect(UsageHints.styled("Missing expected argument '<device>'", arguments: ["read"]) == "missing expected argument '<device>'")
    }
}
