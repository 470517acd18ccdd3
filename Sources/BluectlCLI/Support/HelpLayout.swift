#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How bluectl lays out a subcommand's help. ArgumentParser prints the
/// discussion, examples included, before USAGE and OPTIONS; bluectl moves the
/// "Examples:" block to the end, where a reader who skimmed the options looks
/// for them (the man pages, generated from the same definitions, keep them in
/// DESCRIPTION). The USAGE line, which ArgumentParser does not wrap, is
/// wrapped to the width, between bracketed groups.
enum HelpLayout {
    /// The width ArgumentParser wraps help to: $COLUMNS, else the terminal's, else 80.
    static func columns() -> Int {
        if let text = getenv("COLUMNS"), let width = Int(String(cString: text)), width > 0 { return width }
        return LiveScanTerminal.size().width
    }

    static func examplesLast(_ help: String, columns: Int) -> String {
        var lines = help.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines = lines.flatMap { $0.hasPrefix("USAGE: ") ? wrappedUsage($0, columns: columns) : [$0] }
        while lines.last?.isEmpty == true { lines.removeLast() }
        if let start = lines.firstIndex(of: "Examples:") {
            var end = start + 1
            while end < lines.count, !lines[end].isEmpty { end += 1 }
            let examples = Array(lines[start..<end])
            // the block and the blank line that separated it from what follows
            lines.removeSubrange(start..<min(end + 1, lines.count))
            while lines.last?.isEmpty == true { lines.removeLast() }
            lines += [""] + examples
        }
        return lines.joined(separator: "\n")
    }

    /// "USAGE: bluectl serve [--adapter <hciN>] …" in lines of at most
    /// `columns`, continued with the indent ArgumentParser gives a long usage (7).
    static func wrappedUsage(_ line: String, columns: Int) -> [String] {
        var words: [String] = []
        var depth = 0
        for word in line.split(separator: " ", omittingEmptySubsequences: false) {
            if depth > 0, let last = words.popLast() { words.append(last + " " + word) } else { words.append(String(word)) }
            depth += word.filter { $0 == "[" }.count - word.filter { $0 == "]" }.count
        }
        var out: [String] = []
        var current = ""
        for word in words {
            if current.isEmpty {
                current = (out.isEmpty ? "" : String(repeating: " ", count: 7)) + word
            } else if current.count + 1 + word.count <= columns {
                current += " " + word
            } else {
                out.append(current)
                current = String(repeating: " ", count: 7) + word
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }
}
