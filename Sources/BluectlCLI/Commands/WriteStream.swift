// `write --stream`: a file (or stdin) as writes without response, through
// the library's `CharacteristicWriter` (AcquireWrite, else WriteValue calls).

import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

extension WriteCommand {
    /// Streams `--file` into the characteristic: read on the central's
    /// event loop (`InputPump`) and offered to the writer there, so a full
    /// socket stops the reading, not a thread. At the input's end, waits
    /// until bluetoothd has taken everything, then releases the socket.
    func runStream() async throws {
        let selector = try parseSelector(characteristic, kind: .characteristic, what: "CHARACTERISTIC")
        let service = try serviceText.map { try parseServiceUUID($0, option: "--service") }
        let devices = try deviceList(device)
        guard devices.count == 1 else { throw CLIFailure(.usage, "--stream writes to one device") }
        let (input, path) = try Self.openInput(file ?? "-")
        defer { if path != nil { close(input) } }
        // --timeout bounds finding and connecting; the stream runs until its input ends.
        let setup = options.timeout
        var streamOptions = options
        streamOptions.deadline.text = String(31_536_000)
        let (options, json, characteristic) = (self.options, self.json, self.characteristic)
        try await runDeviceCommand(adapterOptions: adapterOptions, options: streamOptions,
                                   what: "stream to \(characteristic) of \(device)") { session, _ in
            let deadline = Deadline(seconds: setup)
            let peripheral = try await session.find(devices[0], deadline: deadline)
            session.registerAgent(for: peripheral)
            try await session.connect(peripheral, options: options, deadline: deadline, onQueued: await session.sayQueued)
            let chr = try peripheral.characteristic(selector, service: service)
            let writer = try await peripheral.acquireWriter(for: chr)
            if let reason = writer.fallbackReason {
                session.say("note: bluetoothd refused AcquireWrite on \(chr.uuid.label) (\(reason)); writing through WriteValue calls")
            }
            let started = ContinuousClock.now
            let pump = InputPump(fd: input, central: session.central,
                                 offer: { writer.offerOnLoop($0) }, whenRoom: { writer.whenRoomOnLoop($0) })
            pump.start()
            do {
                try await withTaskCancellationHandler {
                    try await pump.ended.wait()
                } onCancel: {
                    pump.stop()
                }
            } catch let error as BluetoothError {
                throw error
            } catch {
                throw CLIFailure(.interrupted, "interrupted")
            }
            guard await writer.flush() else {
                throw BluetoothError.disconnected("\(peripheral.identifier): the stream to \(chr.uuid.label) ended before bluetoothd took it all")
            }
            let (bytes, writes) = await writer.counts
            await writer.close(timeout: .zero)
            var record = WriteRecord(device: peripheral.identifier.description, characteristic: chr.uuid, bytes: [])
            record.type = .withoutResponse
            let seconds = (ContinuousClock.now - started).components
            record.stream = .init(via: writer.route.rawValue, bytes: bytes, writes: writes,
                                  seconds: Double(seconds.seconds) + Double(seconds.attoseconds) / 1e18)
            _ = record.line(json: json).map(Output.line)
        }
    }

    /// The input's descriptor ("-": stdin) and, for a file, its path; a clear refusal when it cannot be opened.
    static func openInput(_ file: String) throws -> (Int32, String?) {
        if file == "-" { return (0, nil) }
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw CLIFailure(.usage, "cannot read --file \"\(TextSafety.escapedForMessage(file))\": \(String(cString: strerror(errno)))")
        }
        return (fd, file)
    }
}
