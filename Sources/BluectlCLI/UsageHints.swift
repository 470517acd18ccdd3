/// What bluectl adds to ArgumentParser's usage errors, so that every error
/// line reads the same whoever found the problem (lower-case start, as
/// bluectl's own) and a mistyped subcommand or option gets a suggestion.
enum UsageHints {
    /// `message` in bluectl's style; when the first argument is no
    /// subcommand but one or two edits from one, ArgumentParser's own
    /// wording for a mistyped option is added for it: "Did you mean 'scan'?".
    static func styled(_ message: String, arguments: [String]) -> String {
        var line = message.first.map { $0.lowercased() + message.dropFirst() } ?? message
        if let suggestion = subcommandSuggestion(arguments), !line.contains("Did you mean") {
            line += ". Did you mean '\(suggestion)'?"
        }
        return line
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
