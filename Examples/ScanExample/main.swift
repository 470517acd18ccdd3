// Scans an adapter (the first powered one, or the one named by the first
// argument, e.g. "hci1") and prints each discovered device's address as it is
// found, until interrupted.
//
//     swift run ScanExample
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

/// Writes `text` and a newline to `fd` (1: standard output, 2: standard
/// error) in one write(2): unbuffered, so a pipe sees each line at once.
func writeLine(_ text: String, to fd: Int32 = 1) {
    var line = text + "\n"
    line.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}

do {
    let central = try await CentralManager.open()
    defer { central.close() }
    let adapter = try central.poweredAdapter(named: CommandLine.arguments.dropFirst().first)
    let scan = try await central.startScan(adapter: adapter, options: ScanOptions())
    for try await discovery in scan.discoveries where discovery.kind == .discovered {
        writeLine(discovery.device.address.description)
    }
} catch {
    writeLine("ScanExample: \(error)", to: 2)
    exit(1)
}
