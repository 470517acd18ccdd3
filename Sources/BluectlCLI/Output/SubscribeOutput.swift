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
            eventBytes(format: format, device: nil, namesDevice: false, .dropped(dropped, of: "value"))
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
        // Room for the whole line up front (a JSON line of a 128-bit UUID is
        // about 140 bytes, a text line about 75): no copy as it grows.
        return record.lineBytes(json: format == .json, capacity: 192)
    }

    /// Queues an event line (`EventRecord`). With raw output the stream has no
    /// lines, so events go to stderr only. Always also on stderr when stdout is
    /// JSON or a file, so that journald sees the gaps.
    /// `device` names it otherwise than the value lines (a failed device, by its address).
    func event(_ line: EventLine, device: String? = nil) {
        let device = device ?? self.device
        if let bytes = Self.eventBytes(format: format, device: device, namesDevice: namesDevice, line) {
            queue.enqueue(bytes)
        }
        if format == .raw || !ValueText.stdoutIsTerminal { queue.notice(namesDevice ? "\(device): \(line.text)" : line.text) }
    }

    /// The `restored` event line of a `--restore-id` run: what the last run saved.
    func reportRestored(_ state: CentralRestoreState, id: String) {
        event(.subscribeRestored(state, id: id))
    }

    static func eventBytes(format: ValueFormat?, device: String?, namesDevice: Bool, _ line: EventLine) -> [UInt8]? {
        guard format != .raw else { return nil }
        return line.record(time: ValueText.timestamp(), device: device, namesDevice: namesDevice).lineBytes(json: format == .json)
    }
}
