import BluectlCore

/// What `subscribe` writes: one line per value and, between them, event
/// lines (restored state, disconnected, reconnected, values dropped) in
/// the same format, so that a log shows every gap where it happened.
/// Everything goes through the bounded `OutputQueue`.
struct SubscribeOutput: Sendable {
    let format: ValueFormat?
    let device: String
    let queue: OutputQueue

    init(format: ValueFormat?, device: String, queueCapacity: Int) {
        self.format = format
        self.device = device
        let (fmt, dev) = (format, device)
        queue = OutputQueue(capacity: queueCapacity) { dropped in
            Self.eventBytes(format: fmt, device: dev, event: "dropped", fields: [("count", .int(dropped))],
                            text: "\(dropped) \(dropped == 1 ? "value" : "values") dropped: output too slow")
        }
    }

    /// Queues one value; `.closed` when the reader went away.
    func value(_ bytes: [UInt8], characteristic: GattCharacteristic) -> OutputQueue.Outcome {
        if format == .raw { return queue.enqueue(bytes) }
        let record = ValueRecord(time: ValueText.timestamp(), device: device, characteristic: characteristic.uuid,
                                 bytes: bytes, format: format, namesCharacteristic: true)
        return queue.line(record.line(json: format == .json) ?? "")
    }

    /// Queues an event line (`EventRecord`). With raw output the stream has no
    /// lines, so events go to stderr only. Always also on stderr when stdout is
    /// JSON or a file, so that journald sees the gaps.
    func event(_ event: String, _ fields: [(String, JSONValue)] = [], text: String) {
        if let bytes = Self.eventBytes(format: format, device: device, event: event, fields: fields, text: text) {
            queue.enqueue(bytes)
        }
        if format == .raw || !ValueText.stdoutIsTerminal { Output.error(text) }
    }

    static func eventBytes(format: ValueFormat?, device: String, event: String, fields: [(String, JSONValue)], text: String) -> [UInt8]? {
        guard format != .raw else { return nil }
        let record = EventRecord(time: ValueText.timestamp(), device: device, event: event, fields: fields, text: text)
        return record.lineBytes(json: format == .json)
    }
}
