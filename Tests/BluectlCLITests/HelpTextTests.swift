import ArgumentParser
import Testing
@testable import BluectlCLI

@Suite("Help that teaches: examples, usage lines, each default once")
struct HelpTextTests {
    static let subcommands = Bluectl.configuration.subcommands

    @Test("every subcommand's help has two or three examples of itself")
    func examples() throws {
        for command in Self.subcommands {
            let name = try #require(command.configuration.commandName)
            let text = command.configuration.discussion
            let examples = text.split(separator: "\n").filter { $0 == "  bluectl \(name)" || $0.hasPrefix("  bluectl \(name) ") }
            #expect(text.contains("Examples:") && (2...3).contains(examples.count), "\(name): \(text)")
        }
    }

    @Test("SUB --help goes through the root: its usage line names bluectl")
    func usageNamesTheTool() async throws {
        for command in Self.subcommands {
            let name = try #require(command.configuration.commandName)
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

    /// What `bluectl NAME --help` and `bluectl help NAME` print (at 80 columns).
    static func printedHelp(_ arguments: [String]) throws -> String {
        do {
            var command = try Bluectl.parseAsRoot(arguments)
            try command.run()   // `help NAME`
        } catch {
            if let text = Bluectl.helpText(for: error, columns: 80) { return text }
            throw error
        }
        return ""
    }

    @Test("SUB --help and help SUB end with SUB's examples, after OPTIONS")
    func examplesLast() throws {
        for command in Self.subcommands {
            let name = try #require(command.configuration.commandName)
            for arguments in [[name, "--help"], ["help", name]] {
                let help = try Self.printedHelp(arguments)
                let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
                let tail = lines.split(separator: "", omittingEmptySubsequences: true).last ?? []
                #expect(tail.first == "Examples:" && (3...4).contains(tail.count), "\(arguments): \(tail)")
                #expect(tail.dropFirst().allSatisfy { $0.hasPrefix("  ") && $0.contains("bluectl \(name)") }, "\(arguments): \(tail)")
                #expect(lines.filter { $0 == "Examples:" }.count == 1 && help.contains("OPTIONS:"), "\(arguments)")
            }
        }
    }

    @Test("no help line is wider than 80 columns, and no example wraps (78 at most, with its indent)")
    func width() throws {
        for command in Self.subcommands {
            let name = try #require(command.configuration.commandName)
            let help = try Self.printedHelp([name, "--help"])
            for line in help.split(separator: "\n") {
                #expect(line.count <= 80, "\(name): \(line.count) columns: \(line)")
            }
            let discussion = command.configuration.discussion
            let examples = discussion.split(separator: "\n").drop { $0 != "Examples:" }.dropFirst()
            for line in examples { #expect(line.count <= 78, "\(name): \(line)") }
        }
    }

    @Test("help is ASCII: the man pages are generated from it, and their generator drops any other character (-127…20 read -12720)")
    func asciiOnly() throws {
        for command in [Bluectl.self] + Self.subcommands {
            let help = Bluectl.helpMessage(for: command, columns: 1000)
            let other = help.unicodeScalars.filter { !$0.isASCII }
            #expect(other.isEmpty, "\(command.configuration.commandName ?? "bluectl"): \(String(String.UnicodeScalarView(other)))")
        }
    }

    @Test("serve's example SPEC, as its help shows it, is a SPEC serve accepts")
    func serveSpecExample() throws {
        let lines = ServeCommand.configuration.discussion.split(separator: "\n")
        let start = try #require(lines.firstIndex { $0.hasPrefix("  {") })
        let end = try #require(lines[start...].firstIndex { !$0.hasPrefix("  ") })
        let spec = lines[start..<end].joined(separator: " ")
        let services = try ServeSpec.parse(Array(spec.utf8))
        #expect(services.count == 1)
    }
}
