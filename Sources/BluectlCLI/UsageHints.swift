import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What bluectl does to ArgumentParser's usage errors, so that every error
/// line reads the same whoever found the problem: bluectl's own wording
/// (lower-case start, `invalid --count "abc": expected …`, what the user
/// typed in double quotes, a positional named in capitals: DEVICE), and a
/// suggestion for a mistyped subcommand or option, said one way:
/// `unknown subcommand "scna"; did you mean "scan"?`.
enum UsageHints {
    /// `message` (ArgumentParser's first line) in bluectl's style. A first
    /// argument that is no subcommand is said to be one, whatever the parser
    /// made of it; an unknown option found among the arguments is named
    /// before a missing argument (`read -x`: the -x, not the DEVICE).
    static func styled(_ message: String, arguments: [String]) -> String {
        if let first = arguments.first, !first.hasPrefix("-"), first != "help",
           Bluectl.subcommand(named: first) == nil {
            return unknownSubcommand(first)
        }
        if message.hasPrefix("Missing expected argument") || message.hasPrefix("Unknown option"),
           let unknown = unknownOption(in: arguments) {
            return unknown
        }
        var line = message.first.map { $0.lowercased() + message.dropFirst() } ?? message
        line = line.replacing(". Did you mean ", with: "; did you mean ")
        return doubleQuoted(invalidValue(line) ?? placeholdersInCapitals(line))
    }

    /// `unknown subcommand "NAME"`, with the nearest subcommand when there is one.
    static func unknownSubcommand(_ name: String) -> String {
        let subcommands = Bluectl.subcommandNames + ["help"]
        return "unknown subcommand \"\(TextSafety.escapedForMessage(name))\"" + suggestion(closest(to: name, among: subcommands))
    }

    private static func suggestion(_ candidate: String?) -> String {
        candidate.map { "; did you mean \"\($0)\"?" } ?? ""
    }

    /// ArgumentParser's '<device>' as bluectl names it: DEVICE.
    static func placeholdersInCapitals(_ line: String) -> String {
        line.replacing(/'<([a-z][a-z0-9-]*)>'/) { $0.output.1.uppercased() }
    }

    /// ArgumentParser's "the value 'abc' is invalid for '--count <N>'" (and
    /// ". Please provide one of 'a', 'b' or 'c'.") as bluectl says it:
    /// `invalid --count "abc"` (`: expected a, b or c`); a positional is named
    /// in capitals, as bluectl's own messages name it (`invalid CHARACTERISTIC`).
    static func invalidValue(_ line: String) -> String? {
        let head = "the value '", middle = "' is invalid for '"
        guard line.hasPrefix(head), let split = line.ranges(of: middle).last,
              let nameEnd = line[split.upperBound...].firstIndex(of: "'")
        else { return nil }
        let value = line[line.index(line.startIndex, offsetBy: head.count)..<split.lowerBound]
        var name = String(line[split.upperBound..<nameEnd].prefix { $0 != " " })
        if name.hasPrefix("<"), name.hasSuffix(">") { name = name.dropFirst().dropLast().uppercased() }
        var rest = String(line[line.index(after: nameEnd)...])
        let choices = ". Please provide one of "
        if rest.hasPrefix(choices) {
            rest = ": expected " + rest.dropFirst(choices.count).replacing("'", with: "")
            if !rest.contains(",") { rest = rest.replacing(" and ", with: " or ") }   // "on or off", not "on and off"
            if rest.hasSuffix(".") { rest.removeLast() }
        }
        return "invalid \(name) \"\(value)\"" + rest
    }

    /// ArgumentParser's 'quoted' words in double quotes, as bluectl quotes what
    /// the user typed. A quote opens at a word's start and closes before the
    /// end, a space or punctuation, so an apostrophe inside stays ('it's').
    static func doubleQuoted(_ line: String) -> String {
        var characters = Array(line)
        var i = 0
        while i < characters.count {
            if characters[i] == "'", i == 0 || " (,:".contains(characters[i - 1]),
               let close = (i + 1..<characters.count).first(where: { j in
                   characters[j] == "'" && (j + 1 == characters.count || " ,.?):".contains(characters[j + 1]))
               }) {
                characters[i] = "\""
                characters[close] = "\""
                i = close
            }
            i += 1
        }
        return String(characters)
    }

    /// `bluectl help NAME` for a NAME that is no subcommand: ArgumentParser
    /// shows the root's help and exits 0; bluectl says so, as a usage error,
    /// in the words `bluectl NAME` gets (`unknown subcommand "scna"; did you mean "scan"?`).
    static func unknownHelpTopic(_ arguments: [String]) -> String? {
        guard arguments.first == "help", arguments.count > 1, !arguments[1].hasPrefix("-"), arguments[1] != "help",
              Bluectl.subcommand(named: arguments[1]) == nil
        else { return nil }
        return unknownSubcommand(arguments[1])
    }

    /// The first option among `arguments` that their command (the subcommand
    /// they name, or the root) does not have, as bluectl says it, with the
    /// nearest of its long options: `unknown option "--versoin"; did you mean "--version"?`.
    /// Values of options that take one are skipped (`--rssi -70`), as is everything after `--`.
    static func unknownOption(in arguments: [String]) -> String? {
        var rest = arguments[...]
        var command: ParsableCommand.Type = Bluectl.self
        if let index = arguments.firstIndex(where: { !$0.hasPrefix("-") }), let sub = Bluectl.subcommand(named: arguments[index]) {
            command = sub
            rest = arguments[(index + 1)...]
        }
        let options = OptionNames(command)
        var skipValue = false
        for word in rest {
            if word == "--" { break }
            if skipValue { skipValue = false; continue }
            guard word.hasPrefix("-"), word.count > 1, Double(word) == nil else { continue }
            let name = word.hasPrefix("--") ? String(word.prefix { $0 != "=" }) : word
            if let takesValue = options.takesValue[name] {
                skipValue = takesValue && !word.contains("=")
                continue
            }
            // -abc: short flags together
            if !word.hasPrefix("--"), word.count > 2, word.dropFirst().allSatisfy({ options.takesValue["-\($0)"] != nil }) { continue }
            let near = name.hasPrefix("--") ? closest(to: name, among: options.takesValue.keys.filter { $0.hasPrefix("--") }.sorted()) : nil
            return "unknown option \"\(TextSafety.escapedForMessage(name))\"" + suggestion(near)
        }
        return nil
    }

    /// A command's option names ("--adapter", "-h") and whether each takes a
    /// value, from ArgumentParser's description of it: what
    /// `bluectl [SUB] --experimental-dump-help` prints, reached through the
    /// public parse-and-message API, never an underscored one.
    struct OptionNames {
        var takesValue: [String: Bool] = [:]

        init(_ command: ParsableCommand.Type) {
            for argument in ArgumentDump.arguments(of: command) where argument.kind != "positional" {
                for name in argument.names ?? [] {
                    takesValue[(name.kind == "long" ? "--" : "-") + name.name] = argument.kind == "option"
                }
            }
        }
    }

    /// The one candidate at the smallest edit distance, when that is 1 or 2 (none if tied).
    static func closest(to word: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= 2 }
        guard let best = scored.map(\.1).min() else { return nil }
        let winners = scored.filter { $0.1 == best }
        return winners.count == 1 ? winners[0].0 : nil
    }

    /// Levenshtein distance (insertions, deletions, substitutions), with transpositions counted as one.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}
