// Sanitizer reports of bluectl children, scraped from their stderr.

import Foundation
import Testing

/// Sanitizer reports of bluectl children: one place that sets their options and
/// one check of their stderr, so that a report fails the test even when the test
/// ignores the exit status, or runs bluectl in the background and kills it.
enum SanitizerReports {
    /// Lines that only a sanitizer runtime prints (ASan, LSan, TSan, UBSan).
    static let markers = [
        "==ERROR: AddressSanitizer", "AddressSanitizer:DEADLYSIGNAL", "SUMMARY: AddressSanitizer",
        "ERROR: LeakSanitizer",
        "WARNING: ThreadSanitizer", "ThreadSanitizer:DEADLYSIGNAL", "SUMMARY: ThreadSanitizer",
        "SUMMARY: UndefinedBehaviorSanitizer", "runtime error:",
    ]

    /// `environment` with halt_on_error=1 appended to ASAN_OPTIONS, TSAN_OPTIONS and
    /// UBSAN_OPTIONS (the last value of an option wins, so this one does); options
    /// already set (detect_leaks, …) and LSAN_OPTIONS (suppressions) are kept.
    static func environment(_ environment: [String: String]) -> [String: String] {
        var env = environment
        for key in ["ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"] {
            let existing = env[key].map { $0.hasSuffix(":") || $0.isEmpty ? $0 : $0 + ":" } ?? ""
            env[key] = existing + "halt_on_error=1"
        }
        return env
    }

    /// The lines of `stderr` a sanitizer wrote (empty when none).
    static func findings(in stderr: String) -> [Substring] {
        stderr.split(separator: "\n").filter { line in markers.contains { line.contains($0) } }
    }

    /// Whether `argv` runs bluectl (directly, or as an argument of a shell, setsid or a
    /// Python driver).
    static func runsBluectl(_ argv: [String]) -> Bool {
        guard let bluectl = bluectlPath else { return false }
        return argv.contains(bluectl)
    }

    private static let bluectlPath: String? = try? BusTier.bluectlExecutable()
}

extension ChildProcess {
    /// For a bluectl child that has ended: records an issue (failing the current
    /// test) if its stderr holds a sanitizer report. Once per child; called by
    /// `wait` and by the bus's teardown, so no test can miss it.
    func recordSanitizerReports() {
        guard let text = stderrForSanitizerCheck() else { return }
        let findings = SanitizerReports.findings(in: text)
        guard !findings.isEmpty else { return }
        Issue.record("""
            sanitizer report from `\(command)`: \(findings.prefix(5).joined(separator: " | "))
            --- its stderr ---
            \(text.suffix(8000))
            """)
    }
}
