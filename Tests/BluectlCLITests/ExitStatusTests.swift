import Foundation
import Testing
@testable import BluectlCLI

@Suite("Exit codes: one definition, listed alike in --help and the README")
struct ExitStatusTests {
    @Test("--help names every exit code, each once, in order")
    func helpListsEveryCode() {
        let text = Bluectl.configuration.discussion
        let listed = text.split(whereSeparator: { !$0.isNumber }).compactMap { Int32($0) }
        #expect(listed == ExitStatus.allCases.map(\.rawValue), "\(text)")
    }

    @Test("README.md's exit-code table has a row for every code and no other")
    func readmeTableMatches() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../README.md").standardized
        let text = try String(contentsOf: readme, encoding: .utf8)
        let table = try #require(text.components(separatedBy: "## Exit codes").dropFirst().first)
        // the table: the lines starting with "|" right after the heading
        let rows = table.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2)
            .prefix { $0.hasPrefix("|") }
            .filter { !$0.hasPrefix("| code") && !$0.hasPrefix("|---") }
        // "| 130 / 143 | …" lists two codes in one row
        let codes = rows.flatMap { row -> [Int32] in
            let first = row.split(separator: "|").first.map(String.init) ?? ""
            return first.split(separator: "/").compactMap { Int32($0.trimmingCharacters(in: .whitespaces)) }
        }
        #expect(codes.sorted() == ExitStatus.allCases.map(\.rawValue).sorted(), "\(codes)")
    }
}
