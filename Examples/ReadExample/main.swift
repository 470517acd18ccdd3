// Reads one characteristic of a device once and prints its value in hex:
// finds the device (scanning for it if BlueZ does not know it yet), connects,
// waits for its services, reads, and disconnects again if it connected it.
// Given several devices (comma-separated), reads them all at once, one task
// each: the central makes their connections one at a time, as the adapter
// needs, and each line then starts with the device.
//
//     swift run ReadExample AA:BB:CC:DD:EE:FF battery_level
//     swift run ReadExample AA:BB:CC:DD:EE:01,AA:BB:CC:DD:EE:02 battery_level
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
    writeLine("usage: ReadExample DEVICE[,DEVICE...] CHARACTERISTIC   (an address or name; a UUID or SIG name)", to: 2)
    exit(64)
}

/// Reads `selector` of the device `text` names, connecting it if needed.
func read(_ text: String, _ selector: AttributeSelector, central: CentralManager, adapter: AdapterInfo) async throws -> [UInt8] {
    let peripheral = try await central.findDevice(text, adapter: adapter, timeout: .seconds(20))
    // false: it was connected already (then leave it connected).
    let connectedHere = try await central.connect(peripheral, timeout: .seconds(30))
    do {
        try await peripheral.discoverServices(timeout: .seconds(30))
        let value = try await peripheral.readValue(for: try peripheral.characteristic(selector))
        if connectedHere { try await central.cancelPeripheralConnection(peripheral) }
        return value
    } catch {
        if connectedHere { try? await central.cancelPeripheralConnection(peripheral) }
        throw error
    }
}

do {
    let selector = try AttributeSelector(arguments[1], kind: .characteristic)
    let devices = arguments[0].split(separator: ",").map(String.init)
    let central = try await CentralManager.open()
    defer { central.close() }
    let adapter = try central.poweredAdapter(named: nil)
    if devices.count == 1 {
        writeLine(ByteFormats.hex(try await read(devices[0], selector, central: central, adapter: adapter)))
    } else {
        let failed = await withTaskGroup(of: Bool.self) { group in
            for device in devices {
                group.addTask {
                    do {
                        writeLine("\(device) \(ByteFormats.hex(try await read(device, selector, central: central, adapter: adapter)))")
                        return false
                    } catch {
                        writeLine("ReadExample: \(device): \(error)", to: 2)
                        return true
                    }
                }
            }
            var any = false
            for await failed in group where failed { any = true }
            return any
        }
        if failed { exit(1) }
    }
} catch {
    writeLine("ReadExample: \(error)", to: 2)
    exit(1)
}
