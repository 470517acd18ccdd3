// A battery you can connect to: serves the Battery Service (its level can be
// read and notifies once a second as it runs down) and a command
// characteristic this program answers itself, advertises both, prints what
// centrals do, and on Ctrl-C (or after SECONDS) stops: nothing stays
// registered in bluetoothd.
//
//     swift run PeripheralExample [hciN] [SECONDS]
//
// Commands a central can write to 12345678-1234-5678-1234-56789abcdef0:
// 01 = recharge to 100 %; anything else is refused (ATT "Request Not Supported").
import BluectlCore
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Writes `text` and a newline in one write(2), so a pipe sees each line at once.
func writeLine(_ text: String, to fd: Int32 = 1) {
    var line = text + "\n"
    line.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let adapterName = arguments.first { $0.hasPrefix("hci") }
let seconds = arguments.compactMap(Double.init).first
guard arguments.count <= 2, arguments.allSatisfy({ $0.hasPrefix("hci") || Double($0) != nil }) else {
    writeLine("usage: PeripheralExample [hciN] [SECONDS]", to: 2)
    exit(64)
}

let batteryLevel = try BluetoothUUID("battery_level", kind: .characteristic)
let command = try BluetoothUUID("12345678-1234-5678-1234-56789abcdef0")

/// Serves and advertises until cancelled; runs the battery down meanwhile.
func run(_ manager: PeripheralManager) async throws {
    let battery = try await manager.add(MutableService(uuid: try BluetoothUUID("battery_service", kind: .service), characteristics: [
        // A value: reads are answered by the manager.
        MutableCharacteristic(uuid: batteryLevel, flags: [.read, .notify], value: [100],
                              descriptors: [MutableDescriptor(uuid: try BluetoothUUID("2901"), flags: [.read], value: Array("level".utf8))]),
        // No value: every write comes to this program to answer.
        MutableCharacteristic(uuid: command, flags: [.write]),
    ]))
    let level = battery.characteristic(batteryLevel)!
    try await manager.startAdvertising(AdvertisementData(localName: "bluectl-battery", serviceUUIDs: [battery.uuid]))
    writeLine("serving on \(manager.adapter.name)")
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            var percent: UInt8 = 100
            while true {
                try await Task.sleep(for: .seconds(1))
                percent = percent > 1 ? percent - 1 : 100
                // false: the bus is backed up; wait for room, then send the latest.
                while !manager.updateValue([percent], for: level) { await manager.waitUntilReadyToUpdate() }
            }
        }
        group.addTask {
            for await event in manager.events {
                switch event {
                case .write(let request) where request.characteristic.uuid == command:
                    if request.value == [0x01] {
                        request.respond()
                        manager.updateValue([100], for: level)
                        writeLine("recharged by \(request.central?.description ?? "?")")
                    } else {
                        request.respond(withError: .notSupported)
                        writeLine("refused command \(ByteFormats.hex(request.value))")
                    }
                case .read(let request):
                    writeLine("read by \(request.central?.description ?? "?")")
                case .subscribed:
                    writeLine("subscribed")
                case .unsubscribed:
                    writeLine("unsubscribed")
                default:
                    break
                }
            }
        }
        try await group.next()
    }
}

/// Serves until Ctrl-C or SECONDS; the exit status. The manager lives only
/// in here, so it is gone before the process exits.
func serveUntilStopped() async -> Int32 {
    let manager: PeripheralManager
    do {
        manager = try await PeripheralManager.open(adapter: adapterName)
    } catch {
        writeLine("PeripheralExample: \(error)", to: 2)
        return 1
    }
    let work = Task { try await run(manager) }
    let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    interrupt.setEventHandler { @Sendable in work.cancel() }   // runs on a dispatch queue, not the main actor
    interrupt.resume()
    defer { interrupt.cancel() }
    if let seconds {
        Task {
            try await Task.sleep(for: .seconds(seconds))
            work.cancel()
        }
    }
    let outcome = await work.result
    await manager.stop()
    if case .failure(let error) = outcome, !(error is CancellationError) {
        writeLine("PeripheralExample: \(error)", to: 2)
        return 1
    }
    return work.isCancelled && seconds == nil ? 130 : 0
}

signal(SIGINT, SIG_IGN)
exit(await serveUntilStopped())
