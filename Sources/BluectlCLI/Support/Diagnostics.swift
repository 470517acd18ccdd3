import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Where diagnostics go in bluectl: BluectlCore (and the CLI) log through
/// swift-log; bluectl prints each message on standard error as one line,
/// `bluectl[debug] +12ms message` (milliseconds since start, monotonic).
///
/// The level: `BLUECTL_LOG_LEVEL` (trace, debug, info, notice, warning,
/// error, critical) when set; else `debug` when `BLUECTL_DEBUG` is set to
/// anything but "" or "0"; else `warning`.
enum Diagnostics {
    /// Installs the handler, once per process (swift-log allows one bootstrap).
    static func bootstrap() { _ = installed }

    private static let installed: Void = {
        let (level, problem) = Diagnostics.level(logLevel: environment("BLUECTL_LOG_LEVEL"), debug: environment("BLUECTL_DEBUG"))
        _ = StderrLogHandler.start // times count from here
        LoggingSystem.bootstrap { _ in StderrLogHandler(logLevel: level) }
        if let problem { Logger(label: "bluectl").warning("\(problem)") }
    }()

    /// The level the environment asks for (see `Diagnostics`), and what is
    /// wrong with `BLUECTL_LOG_LEVEL` when it names no level.
    static func level(logLevel: String?, debug: String?) -> (Logger.Level, problem: String?) {
        var problem: String?
        if let logLevel, !logLevel.isEmpty {
            if let level = Logger.Level(rawValue: logLevel.lowercased()) { return (level, nil) }
            let levels = Logger.Level.allCases.map(\.rawValue)
            problem = "BLUECTL_LOG_LEVEL \"\(logLevel)\" is not a level (\(levels.dropLast().joined(separator: ", ")) or \(levels.last!)); ignored"
        }
        if let debug, debug != "", debug != "0" { return (.debug, problem) }
        return (.warning, problem)
    }

    private static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

/// One line per message on standard error, written at once (write(2)), so
/// lines from several threads never interleave.
struct StderrLogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    static let start = ContinuousClock.now

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let elapsed = ContinuousClock.now - Self.start
        let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        var line = "bluectl[\(event.level)] +\(ms)ms \(event.message)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
