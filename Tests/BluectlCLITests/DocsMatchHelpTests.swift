import ArgumentParser
import Foundation
import Testing
@testable import BluectlCLI

/// What README.md and docs/ say about options, checked against each
/// command's `--help` (what ArgumentParser prints from the definitions).
@Suite("README and docs say what --help says")
struct DocsMatchHelpTests {
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: repo.appendingPathComponent(path), encoding: .utf8)
    }

    /// The long options a command's `--help` lists under OPTIONS.
    static func optionsInHelp(_ command: ParsableCommand.Type) -> Set<String> {
        let help = Bluectl.helpMessage(for: command, columns: 1000)
        return Set(help.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  --") else { return nil }
            return String(line.dropFirst(2).prefix { $0 != " " && $0 != "," })
        })
    }

    static let commands: [(name: String, type: ParsableCommand.Type)] = Bluectl.configuration.subcommands.map {
        ($0.configuration.commandName ?? "", $0)
    }

    @Test("docs/devices.md's table of shared options lists exactly the commands whose --help has each")
    func optionsTable() throws {
        let text = try Self.read("docs/devices.md")
        let table = text.components(separatedBy: "<!-- options-table -->").dropFirst().first?
            .components(separatedBy: "<!-- /options-table -->").first ?? ""
        let rows = table.split(separator: "\n").filter { $0.hasPrefix("| `--") }
        #expect(rows.count >= 5, "the table: \(table)")
        for row in rows {
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let option = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let listed = Set(cells[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            for (name, type) in Self.commands {
                let has = Self.optionsInHelp(type).contains(option)
                #expect(has == listed.contains(name), "\(option): \(name) --help \(has ? "has" : "lacks") it, docs/devices.md \(listed.contains(name) ? "lists" : "does not list") it")
            }
            for name in listed { #expect(Self.commands.contains { $0.name == name }, "\(option): no command \(name)") }
        }
    }

    @Test("README: every command that works on one adapter takes --adapter (adapters and adapter work otherwise)")
    func readmeAdapterClaim() throws {
        let readme = try Self.read("README.md").replacingOccurrences(of: "\n", with: " ")
        #expect(readme.contains("Every command that works on one adapter takes `--adapter hciN`"))
        for (name, type) in Self.commands where !["adapters", "adapter"].contains(name) {
            #expect(Self.optionsInHelp(type).contains("--adapter"), "\(name) --help has no --adapter")
        }
        // the commands that scan, connect or advertise take --power-on
        for name in ["scan", "connect", "pair", "discover", "read", "write", "subscribe", "serve", "advertise", "info", "disconnect"] {
            let type = try #require(Bluectl.subcommand(named: name))
            #expect(Self.optionsInHelp(type).contains("--power-on"), "\(name) --help has no --power-on")
        }
    }

    @Test("an option's help says what the command does with it: devices' --adapter filters, subscribe's --timeout bounds the set-up")
    func optionLines() throws {
        let devices = Bluectl.helpMessage(for: DevicesCommand.self, columns: 1000)
        let adapterLine = try #require(devices.split(separator: "\n").first { $0.hasPrefix("  --adapter") })
        #expect(adapterLine.contains("every adapter") && !adapterLine.contains("first powered"), "\(adapterLine)")
        let subscribe = Bluectl.helpMessage(for: SubscribeCommand.self, columns: 1000)
        let timeoutLine = try #require(subscribe.split(separator: "\n").first { $0.hasPrefix("  --timeout") })
        // the description: "--timeout bounds finding, connecting and subscribing (each attempt …)"
        #expect(SubscribeCommand.configuration.discussion.contains("--timeout bounds finding, connecting and subscribing"))
        #expect(timeoutLine.contains("set-up") && !timeoutLine.contains("whole command"), "\(timeoutLine)")
    }

    @Test("docs/library.md names the version bluectl --version prints, and the package's real URL")
    func libraryVersion() throws {
        let text = try Self.read("docs/library.md")
        #expect(text.contains("from: \"\(Bluectl.version)\""), "docs/library.md does not name \(Bluectl.version)")
        #expect(!text.contains("url: …") && text.contains(".package(url: \"https://"), "docs/library.md elides the URL")
        #expect(text.contains("libdbus-1-dev") && text.contains("pkg-config"))
    }
}
