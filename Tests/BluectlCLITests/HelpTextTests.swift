import ArgumentParser
import Testing
@testable import BluectlCLI

@Suite("Help that teaches: examples, usage lines, each default once")
struct HelpTextTests {
    static let subcommands = Bluectl.configuration.subcommands

    @Test("every subcommand's help has two or three examples of itself")
    func examples() {
        for command in Self.subcommands {
            let name = command._commandName
            let text = command.configuration.discussion
            let examples = text.split(separator: "\n").filter { $0 == "  bluectl \(name)" || $0.hasPrefix("  bluectl \(name) ") }
            #expect(text.contains("Examples:") && (2...3).contains(examples.count), "\(name): \(text)")
        }
    }

    @Test("SUB --help goes through the root: its usage line names bluectl")
    func usageNamesTheTool() async throws {
        for command in Self.subcommands {
            let name = command._commandName
            #expect(await Bluectl.parseSubcommandDirectly([name, "--help"]) == nil, "\(name) --help parsed directly")
            let help = Bluectl.helpMessage(for: command, columns: 1000)
            #expect(help.contains("USAGE: bluectl \(name)"), "\(name): \(help.prefix(200))")
        }
    }

    @Test("no option shows its default twice (its text and ArgumentParser's '(default: …)')")
    func defaultsOnce() {
        for command in Self.subcommands {
            let help = Bluectl.helpMessage(for: command, columns: 1000)
            for line in help.split(separator: "\n") where line.contains("(default: ") {
                #expect(!line.replacingOccurrences(of: "(default: ", with: "").contains("default"), "\(line)")
            }
        }
    }
}
