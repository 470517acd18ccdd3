// Reads one characteristic of a device once and prints its value in hex:
// finds the device (scanning for it if BlueZ does not know it yet), connects,
// waits for its services, reads, and disconnects again if it connected it.
//
//     swift run ReadExample AA:BB:CC:DD:EE:FF battery_level
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
    writeLine("usage: ReadExample DEVICE CHARACTERISTIC   (an address or name; a UUID or SIG name)", to: 2)
    exit(64)
}

do {
    let selector = try AttributeSelector(arguments[1], kind: .characteristic)
    let central = try await CentralManager.open()
    defer { central.close() }
    let adapter = try central.poweredAdapter(named: nil)
    let peripheral = try await central.findDevice(arguments[0], adapter: adapter, timeout: .seconds(20))
    // false: it was connected already (then leave it connected).
    let connectedHere = try await central.connect(peripheral, timeout: .seconds(30))
    do {
        try await peripheral.discoverServices(timeout: .seconds(30))
        let value = try await peripheral.readValue(for: try peripheral.characteristic(selector))
        writeLine(ByteFormats.hex(value))
    } catch {
        if connectedHere { try? await central.cancelPeripheralConnection(peripheral) }
        throw error
    }
    if connectedHere { try await central.cancelPeripheralConnection(peripheral) }
} catch {
    writeLine("ReadExample: \(error)", to: 2)
    exit(1)
}
