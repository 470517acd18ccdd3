import Logging
import Testing
@testable import BluectlCLI

@Suite("Diagnostics level (BLUECTL_LOG_LEVEL, BLUECTL_DEBUG)")
struct DiagnosticsTests {
    @Test func theEnvironmentChoosesTheLevel() {
        #expect(Diagnostics.level(logLevel: nil, debug: nil) == (.warning, nil))
        #expect(Diagnostics.level(logLevel: nil, debug: "1") == (.debug, nil))
        #expect(Diagnostics.level(logLevel: nil, debug: "0") == (.warning, nil), "0 turns it off")
        #expect(Diagnostics.level(logLevel: nil, debug: "") == (.warning, nil))
        #expect(Diagnostics.level(logLevel: "TRACE", debug: nil) == (.trace, nil), "any case")
        #expect(Diagnostics.level(logLevel: "error", debug: "1") == (.error, nil), "the explicit level wins")
        #expect(Diagnostics.level(logLevel: "", debug: "1") == (.debug, nil), "empty: not set")
    }

    @Test func aWrongLevelIsReportedNotDropped() {
        let (level, problem) = Diagnostics.level(logLevel: "verbose", debug: "1")
        #expect(level == .debug)
        #expect(problem == #"BLUECTL_LOG_LEVEL "verbose" is not a level (trace, debug, info, notice, warning, error or critical); ignored"#)
    }
}
