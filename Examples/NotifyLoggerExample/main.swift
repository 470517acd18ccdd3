// Logs the notifications of one characteristic, one line per value (the time
// in seconds since the epoch, then the value in hex), and keeps doing so
// across disconnects: when the device goes away, the adapter powers off or
// bluetoothd restarts, it waits as ReconnectPolicy says and sets up again.
// Runs until interrupted; a failure that cannot pass (a wrong name, no
// access to the bus) ends it with status 1.
//
//     swift run NotifyLoggerExample AA:BB:CC:DD:EE:FF heart_rate_measurement
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

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2 else {
    writeLine("usage: NotifyLoggerExample DEVICE CHARACTERISTIC   (an address or name; a UUID or SIG name)", to: 2)
    exit(64)
}

/// Finds and connects the device, subscribes (then calls `subscribed`), and
/// prints values until the subscription ends (it fails when the device disconnects).
func logUntilLost(_ central: CentralManager, device: String, characteristic selector: AttributeSelector,
                  subscribed: () -> Void) async throws {
    let adapter = try central.poweredAdapter(named: nil)
    let peripheral = try await central.findDevice(device, adapter: adapter, timeout: .seconds(20))
    try await central.connect(peripheral, timeout: .seconds(30))
    try await peripheral.discoverServices(timeout: .seconds(30))
    let session = try await peripheral.subscribe(to: try peripheral.characteristic(selector))
    writeLine("# subscribed to \(selector) of \(peripheral.identifier)")
    subscribed()
    for try await value in session.values {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        writeLine("\(now.tv_sec).\(String(now.tv_nsec / 1_000_000 + 1000).dropFirst()) \(ByteFormats.hex(value))")
    }
}

do {
    let selector = try AttributeSelector(arguments[1], kind: .characteristic)
    let central = try await CentralManager.open()
    defer { central.close() }
    let policy = ReconnectPolicy()
    var attempt = 1
    var subscribedOnce = false
    while true {
        do {
            try await logUntilLost(central, device: arguments[0], characteristic: selector) {
                subscribedOnce = true
                attempt = 1
            }
        } catch where policy.isRecoverable(error, afterSuccess: subscribedOnce) {
            attempt += 1
            let delay = policy.delay(beforeAttempt: attempt)
            writeLine("# \(error); trying again in \(delay)")
            try await Task.sleep(for: delay)
        }
    }
} catch {
    writeLine("NotifyLoggerExample: \(error)", to: 2)
    exit(1)
}
