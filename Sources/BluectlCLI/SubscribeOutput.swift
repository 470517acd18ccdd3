import BluectlCore

/// What `subscribe` writes: one line per value and, between them, event
/// lines (restored state, disconnected, reconnected, values dropped) in
/// the same format, so that a log shows every gap where it happened.
/// Everything goes through the bounded `OutputQueue` (the event lines'
/// copies on stderr too: its writer thread writes them).
struct SubscribeOutput: Sendable {
    let format: ValueFormat?
    /// The device, as its lines name it.
    let device: String
    /// Shared by every device's output: one stdout, one order.
    let queue: OutputQueue
    /// Whether text lines name the device (several devices).
    let namesDevice: Bool

    init(format: ValueFormat?, device: String, queue: OutputQueue, namesDevice: Bool = false) {
        self.format = format
        self.device = device
        self.queue = queue
        self.namesDevice = namesDevice
    }

    /// The bounded queue to stdout; what it drops is reported as one event line (of no one device).
    static func queue(format: ValueFormat?, capacity: Int) -> OutputQueue {
        OutputQueue(capacity: capacity) { dropped in
            eventBytes(format: format, device: nil, namesDevice: false, event: "dropped", fields: [("count", .int(dropped))],
                       text: "\(dropped) \(dropped == 1 ? "value" : "values") dropped: output too slow")
        }
    }

    /// Queues one value; `.closed` when the reader went away.
    func value(_ bytes: [UInt8], characteristic: GattCharacteristic) -> OutputQueue.Outcome {
        if format == .raw { return queue.enqueue(bytes) }
        return queue.enqueue(line(bytes, characteristic: characteristic))
    }

    /// One value's line with its line break, JSON or text (raw values go out
    /// as they are, `value`); measured by Benchmarks/.
    func line(_ bytes: [UInt8], characteristic: GattCharacteristic) -> [UInt8] {
        let record = ValueRecord(time: ValueText.timestamp(), device: device, characteristic: characteristic.uuid,
                                 bytes: bytes, format: format, namesCharacteristic: true, namesDevice: namesDevice)
        return record.lineBytes(json: format == .json)
    }

    /// Queues an event line (`EventRecord`). With raw output the stream has no
    /// lines, so events go to stderr only. Always also on stderr when stdout is
    /// JSON or a file, so that journald sees the gaps.
    func event(_ event: String, _ fields: [(String, JSONValue)] = [], text: String) {
        if let bytes = Self.eventBytes(format: format, device: device, namesDevice: namesDevice, event: event, fields: fields, text: text) {
            queue.enqueue(bytes)
        }
        if format == .raw || !ValueText.stdoutIsTerminal { queue.notice(namesDevice ? "\(device): \(text)" : text) }
    }

    /// The `restored` event line of a `--restore-id` run: what the last run saved.
    func reportRestored(_ state: CentralRestoreState, id: String) {
        let subscriptions = state.subscriptions.map { "\($0.characteristic) of \($0.device)" }
        let peripherals = state.peripherals.map { "\($0.address ?? $0.device) \($0.state)" }
        let how = state.running ? "was still running (pid \(state.pid), killed or crashed)" : "ended normally"
        event("restored", [
            ("restore_id", .string(id)), ("saved", .string(state.saved)), ("was_running", .bool(state.running)),
            ("pid", .int(Int(state.pid))), ("subscriptions", .strings(subscriptions)), ("peripherals", .strings(peripherals)),
        ], text: "restored \(id) (saved \(state.saved); \(how)): subscribed to \(subscriptions.joined(separator: ", "))"
            + (peripherals.isEmpty ? "" : "; \(peripherals.joined(separator: ", "))"))
    }

    static func eventBytes(format: ValueFormat?, device: String?, namesDevice: Bool, event: String, fields: [(String, JSONValue)],
                           text: String) -> [UInt8]? {
        guard format != .raw else { return nil }
        let record = EventRecord(time: ValueText.timestamp(), device: device, event: event, fields: fields, text: text,
                                 namesDevice: namesDevice)
        return record.lineBytes(json: format == .json)
    }
}
