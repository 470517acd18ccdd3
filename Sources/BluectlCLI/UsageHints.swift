/// What bluectl does to ArgumentParser's usage errors, so that every error
/// line reads the same whoever found the problem: bluectl's own wording
/// (lower-case start, `invalid --count "abc": expected …`, what the user
/// typed in double quotes), and a suggestion for a mistyped subcommand.
enum UsageHints {
    /// `message` in bluectl's style; when the first argument is no
    /// subcommand but one or two edits from one, ArgumentParser's own
    /// wording for a mistyped option is added for it: "Did you mean "scan"?".
    static func styled(_ message: String, arguments: [String]) -> String {
        var line = message.first.map { $0.lowercased() + message.dropFirst() } ?? message
        if let suggestion = subcommandSuggestion(arguments), !line.contains("Did you mean") {
            line += ". Did you mean '\(suggestion)'?"
        }
        return doubleQuoted(invalidValue(line) ?? line)
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
    /// with a suggestion (`unknown subcommand "scna". Did you mean "scan"?`).
    static func unknownHelpTopic(_ arguments: [String]) -> String? {
        guard arguments.first == "help", arguments.count > 1, !arguments[1].hasPrefix("-"), arguments[1] != "help",
              !Bluectl.configuration.subcommands.contains(where: { $0._commandName == arguments[1] })
        else { return nil }
        return styled("unknown subcommand '\(arguments[1])'", arguments: Array(arguments.dropFirst()))
    }

    static func subcommandSuggestion(_ arguments: [String]) -> String? {
        let subcommands = Bluectl.configuration.subcommands.map { $0._commandName } + ["help"]
        guard let first = arguments.first, !first.hasPrefix("-"), !subcommands.contains(first) else { return nil }
        return closest(to: first, among: subcommands)
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
