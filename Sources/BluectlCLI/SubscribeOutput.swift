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
        switch format {
        case .json:
            var line = JSONLine()
            line.add("time", ValueText.timestamp())
            line.add("device", device)
            line.add("characteristic", characteristic.uuid.uuidString)
            ValueText.addValue(bytes, uuid: characteristic.uuid, to: &line)
            return queue.line(line.render())
        case .raw:
            return queue.enqueue(bytes)
        default:
            let text = ValueText.text(bytes, uuid: characteristic.uuid, format: format)
            return queue.line("\(ValueText.timestamp())  \(ValueText.label(characteristic.uuid))  \(text)")
        }
    }

    enum Field: Sendable {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case strings([String])
    }

    /// Queues an event line (JSON: `{"time", "device", "event", …fields}`;
    /// text: `time  -- text`). With raw output the stream has no lines, so
    /// events go to stderr only. Always also on stderr when stdout is JSON
    /// or a file, so that journald sees the gaps.
    func event(_ event: String, _ fields: [(String, Field)] = [], text: String) {
        if let bytes = Self.eventBytes(format: format, device: device, event: event, fields: fields, text: text) {
            queue.enqueue(bytes)
        }
        if format == .raw || !ValueText.stdoutIsTerminal { Output.error(text) }
    }

    static func eventBytes(format: ValueFormat?, device: String, event: String, fields: [(String, Field)], text: String) -> [UInt8]? {
        switch format {
        case .raw:
            return nil
        case .json:
            var line = JSONLine()
            line.add("time", ValueText.timestamp())
            line.add("device", device)
            line.add("event", event)
            for (key, value) in fields {
                switch value {
                case .string(let s): line.add(key, s)
                case .int(let i): line.add(key, i)
                case .double(let d): line.add(key, d)
                case .bool(let b): line.add(key, b)
                case .strings(let list): line.add(key, strings: list)
                }
            }
            return Array((line.render() + "\n").utf8)
        default:
            return Array("\(ValueText.timestamp())  -- \(TextSafety.terminalSafe(text))\n".utf8)
        }
    }
}
