import ArgumentParser
import Testing
@testable import BluectlCLI

/// `ReadCommand.parsePlain` must give exactly what ArgumentParser gives for
/// every command line it accepts, and leave all others to ArgumentParser.
/// The comparison is of the reflected property wrappers: a property the
/// plain parser forgot to set shows up as `.definition` instead of `.value`.
@Suite("plain command lines parsed without ArgumentParser")
struct PlainParsingTests {
    static let accepted: [[String]] = [
        ["AA:BB:CC:DD:EE:FF", "2a19"],
        ["AA:BB:CC:DD:EE:FF", "battery_level", "--json"],
        ["--adapter", "hci1", "/org/bluez/hci1/dev_AA_BB_CC_DD_EE_FF", "2a19"],
        ["Thermo", "--adapter=hci1", "2a19", "--format", "decoded"],
        ["dev", "2a19", "--service", "180f", "--timeout", "5", "--retries", "0", "--agent", "none", "--power-on"],
        ["dev", "handle:0x000e", "--descriptor", "2902", "--offset", "3", "--format=raw", "--timeout=0.5"],
        ["dev", "2a19", "--agent=keyboard-display", "--retries=10", "--offset=65535"],
    ]

    static let declined: [[String]] = [
        [], ["--help"], ["dev", "2a19", "-h"], ["dev", "2a19", "--help"], ["dev"], ["dev", "2a19", "extra"],
        ["dev", "2a19", "--json", "--json"], ["dev", "2a19", "--adapter", "hci0", "--adapter", "hci1"],
        ["dev", "2a19", "--timeout", "-1"], ["dev", "2a19", "--timeout", "0"], ["dev", "2a19", "--format", "bogus"],
        ["dev", "2a19", "--offset", "x"], ["dev", "2a19", "--offset", "70000"], ["dev", "zz"],
        ["dev", "2a19", "--bogus"], ["dev", "2a19", "--"], ["--", "dev", "2a19"], ["dev", "2a19", "--json=1"],
        ["dev", "2a19", "--adapter"], ["dev", "2a19", "--adapter", "bad"], ["-", "2a19"], ["dev", "2a19", "-"],
        ["dev", "2a19", "--retries", "11"], ["dev", "2a19", "--agent", "nobody"], ["dev", "2a19", "--service", "nope"],
        ["dev", "2a19", "--generate-completion-script", "bash"], ["dev", "2a19", "--version"],
    ]

    @Test("an accepted command line gives ArgumentParser's result, every property set", arguments: accepted)
    func sameAsArgumentParser(arguments: [String]) async throws {
        let plain = try #require(ReadCommand.parsePlain(arguments))
        let parsed = try await ReadCommand.asyncParse(arguments)
        #expect(String(reflecting: plain) == String(reflecting: parsed))
        #expect(!String(reflecting: plain).contains("definition"))
    }

    @Test("anything else is left to ArgumentParser", arguments: declined)
    func leftToArgumentParser(arguments: [String]) {
        #expect(ReadCommand.parsePlain(arguments) == nil)
    }
}
