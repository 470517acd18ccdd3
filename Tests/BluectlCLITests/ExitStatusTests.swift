import Foundation
import BluectlCore
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

    @Test("the library's errors map to exit codes; CLI advice is added here, not in the library")
    func libraryErrors() {
        let cases: [(BluetoothError, BluectlCLI.ExitStatus, String)] = [
            (.adapterPoweredOff("hci0"), .unavailable, "adapter hci0 is powered off (try --power-on)"),
            (.cancelled("connect"), .timeout, "timed out: connect"),
            (.timeout("connect"), .timeout, "timed out: connect"),
            (.attributeNotFound(kind: "characteristic", what: "2a19", existing: []), .notFound,
             "characteristic 2a19 not found; the device has: none"),
            (.ambiguous(kind: "characteristic", what: "fff1", candidates: ["handle:3", "handle:5"]), .usage,
             "characteristic fff1 is ambiguous (2 match); name one by path or handle: handle:3, handle:5"),
            (.notSupported("characteristic 2a37 is not readable"), .noPermission, "characteristic 2a37 is not readable"),
            (.valueTooLong(length: 600, limit: 512, type: .withResponse), .dataError,
             "value of 600 bytes is longer than the write limit of 512 bytes (with response)"),
        ]
        for (error, status, message) in cases {
            let failure = CLIFailure(error)
            #expect(failure.status == status && failure.message == message, "\(error)")
        }
        #expect(!BluetoothError.adapterPoweredOff("hci0").description.contains("--"), "no CLI words in the library")
    }
}
