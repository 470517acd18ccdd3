import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// ArgumentParser's own description of a command (the JSON its
/// `--experimental-dump-help` flag prints, the one generate-manual reads):
/// every option with its names, whether it takes a value, its help. Asked
/// through the public API (`parseAsRoot` throws the request, `message(for:)`
/// renders it), so bluectl reads no underscored ArgumentParser API.
enum ArgumentDump {
    struct Argument: Decodable {
        /// "positional", "option" or "flag".
        var kind: String
        var names: [Name]?
        var valueName: String?
        var abstract: String?
        var shouldDisplay: Bool?
    }

    struct Name: Decodable {
        /// "long", "short" or "longWithSingleDash".
        var kind: String
        var name: String
    }

    private struct Dump: Decodable {
        struct Command: Decodable { var arguments: [Argument]? }
        var command: Command
    }

    /// The arguments of `command` (`Bluectl` itself, or one of its subcommands).
    static func arguments(of command: ParsableCommand.Type) -> [Argument] {
        let path = command == Bluectl.self ? [] : [command.configuration.commandName].compactMap { $0 }
        let text: String
        do {
            _ = try Bluectl.parseAsRoot(path + ["--experimental-dump-help"])
            return []
        } catch {
            text = Bluectl.message(for: error)
        }
        guard let dump = try? JSONDecoder().decode(Dump.self, from: Data(text.utf8)) else { return [] }
        return dump.command.arguments ?? []
    }

    /// The long option names `command` takes ("--adapter", "--json"…), help and version included.
    static func longOptions(of command: ParsableCommand.Type) -> [String] {
        arguments(of: command).flatMap { ($0.names ?? []).filter { $0.kind == "long" }.map { "--" + $0.name } }
    }
}
