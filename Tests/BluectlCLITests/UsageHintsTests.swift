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

    @Test("ArgumentParser's lines read like bluectl's: lower-case start, double quotes, DEVICE, one did-you-mean")
    func styled() {
        #expect(UsageHints.styled("Unexpected argument 'scna'", arguments: ["scna"]) == "unknown subcommand \"scna\"; did you mean \"scan\"?")
        #expect(UsageHints.styled("3 unexpected arguments: 'reed', 'D', 'C'", arguments: ["reed", "D", "C"])
                == "unknown subcommand \"reed\"; did you mean \"read\"?")
        #expect(UsageHints.styled("Unknown option '--timout'. Did you mean '--timeout'?", arguments: ["scan", "--timout"])
                == "unknown option \"--timout\"; did you mean \"--timeout\"?")
        #expect(UsageHints.styled("Unknown option '--versoin'", arguments: ["--versoin"]) == "unknown option \"--versoin\"; did you mean \"--version\"?")
        #expect(UsageHints.styled("Missing expected argument '<device>'", arguments: ["read"]) == "missing expected argument DEVICE")
        #expect(UsageHints.styled("Missing expected argument '<device>'", arguments: ["read", "-x"]) == "unknown option \"-x\"")
        #expect(UsageHints.styled("2 unexpected arguments: 'scan', 'x'", arguments: ["read", "D", "C", "scan", "x"])
                == "2 unexpected arguments: \"scan\", \"x\"")
    }

    @Test("an unknown option is found among the arguments; values of options and what follows -- are not options")
    func unknownOption() {
        #expect(UsageHints.unknownOption(in: ["read", "-x"]) == "unknown option \"-x\"")
        #expect(UsageHints.unknownOption(in: ["scan", "--rssi", "-70", "-q"]) == "unknown option \"-q\"")
        #expect(UsageHints.unknownOption(in: ["scan", "--rssi", "-70", "--json"]) == nil)
        #expect(UsageHints.unknownOption(in: ["scan", "--rssi=-70"]) == nil)
        #expect(UsageHints.unknownOption(in: ["read", "D", "C", "--", "-x"]) == nil)
        #expect(UsageHints.unknownOption(in: ["remove", "--timeout", "2", "--jsno"]) == "unknown option \"--jsno\"; did you mean \"--json\"?")
        #expect(UsageHints.unknownOption(in: ["--versoin"]) == "unknown option \"--versoin\"; did you mean \"--version\"?")
    }

    @Test("an invalid value is said as bluectl says it: invalid --option \"value\": expected …")
    func invalidValue() {
        #expect(UsageHints.styled("The value 'abc' is invalid for '--count <N>'", arguments: ["subscribe"]) == "invalid --count \"abc\"")
        #expect(UsageHints.styled("The value 'xml' is invalid for '--format <FORMAT>'. Please provide one of 'hex', 'utf8', 'raw', 'json' or 'decoded'.",
                                  arguments: ["read"]) == "invalid --format \"xml\": expected hex, utf8, raw, json or decoded")
        #expect(UsageHints.styled("The value 'maybe' is invalid for '--power <on|off>'. Please provide one of 'on' and 'off'.",
                                  arguments: ["adapter"]) == "invalid --power \"maybe\": expected on or off")
        #expect(UsageHints.styled("The value 'zz' is invalid for '<characteristic>': bad", arguments: ["read"]) == "invalid CHARACTERISTIC \"zz\": bad")
        #expect(UsageHints.styled("The value 'it's' is invalid for '--rssi <MIN>'", arguments: ["scan"]) == "invalid --rssi \"it's\"")
    }

    @Test("an apostrophe inside a quoted word stays; one outside a quote is left alone")
    func doubleQuoted() {
        #expect(UsageHints.doubleQuoted("unknown option '--it's'") == "unknown option \"--it's\"")
        #expect(UsageHints.doubleQuoted("bluetoothd's reply") == "bluetoothd's reply")
        #expect(UsageHints.doubleQuoted("'a' or 'b'.") == "\"a\" or \"b\".")
    }

    @Test("help for a subcommand that does not exist is a usage error, in the words the subcommand itself gets")
    func unknownHelpTopic() {
        #expect(UsageHints.unknownHelpTopic(["help", "scna"]) == "unknown subcommand \"scna\"; did you mean \"scan\"?")
        #expect(UsageHints.unknownHelpTopic(["help", "scna"]) == UsageHints.styled("Unexpected argument 'scna'", arguments: ["scna"]))
        #expect(UsageHints.unknownHelpTopic(["help", "xyz"]) == "unknown subcommand \"xyz\"")
        #expect(UsageHints.unknownHelpTopic(["help", "scan"]) == nil)
        #expect(UsageHints.unknownHelpTopic(["help", "help"]) == nil)
        #expect(UsageHints.unknownHelpTopic(["help"]) == nil)
        #expect(UsageHints.unknownHelpTopic(["scan", "help"]) == nil)
    }
}
