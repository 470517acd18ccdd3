// Output records: each line bluectl prints is described once, field by field, and the
// description feeds both of its forms, JSON and text.

/// A JSON member's value.
enum JSONValue: Sendable {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case strings([String])
    case ints([Int])
    case object(JSONLine)
    /// Bytes as lowercase hex digits, written without an intermediate string.
    case hex([UInt8])
}

extension JSONLine {
    mutating func add(_ key: String, _ value: JSONValue) {
        switch value {
        case .string(let s): add(key, s)
        case .int(let i): add(key, i)
        case .double(let d): add(key, d)
        case .bool(let b): add(key, b)
        case .strings(let list): add(key, strings: list)
        case .ints(let list): add(key, ints: list)
        case .object(let object): add(key, object: object)
        case .hex(let bytes): add(key, hex: bytes)
        }
    }
}

/// A field's part in the text form. The text has two layouts: a line (`scan`,
/// `adapters`, `discover`, values: parts joined by two spaces, or by ", " in a
/// sentence) and a block (`info`: one "label       text" line per part).
struct TextPart: Sendable {
    enum Style: Sendable {
        /// Line: the text alone. Block: label and text.
        case plain
        /// Line: "label text". Block: label and text.
        case labelled
        /// Line: the label when true, nothing when false. Block: label and yes/no.
        case flag(Bool)
        /// Line: nothing (too long for a line, or said by the line's other parts). Block: label and text.
        case detail
    }

    var label: String
    var text: String
    var style: Style

    static func plain(_ label: String, _ text: String) -> TextPart { TextPart(label: label, text: text, style: .plain) }
    static func labelled(_ label: String, _ text: String) -> TextPart { TextPart(label: label, text: text, style: .labelled) }
    static func flag(_ label: String, _ on: Bool) -> TextPart { TextPart(label: label, text: on ? "yes" : "no", style: .flag(on)) }
    static func detail(_ label: String, _ text: String) -> TextPart { TextPart(label: label, text: text, style: .detail) }
    static func detail(_ label: String, _ on: Bool) -> TextPart { detail(label, on ? "yes" : "no") }
}

/// Where a record's fields go, in order. A record is described once, by a function
/// generic over its sink; `JSONSink` and `TextSink` are its two forms. Each field
/// gives its JSON member and its text part together, so the forms cannot drift
/// apart: a field that has no text part (or no JSON member) says so where it is
/// described. Both are autoclosures: a sink evaluates only its own form's.
protocol RecordSink {
    /// One field: its JSON member (nil: left out) and its text parts (none: not in the text).
    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> [TextPart])
    /// A field with at most one text part (a sink may take it without an array in between).
    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> TextPart?)
}

extension RecordSink {
    /// A field with at most one text part.
    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> TextPart?) {
        field(key, json(), text: text().map { [$0] } ?? [])
    }

    /// A field shown only in JSON (its text form says it otherwise, or a terminal has no use for it).
    mutating func json(_ key: String, _ json: @autoclosure () -> JSONValue?) {
        field(key, json(), text: [])
    }
}

/// The JSON form: one JSON object.
struct JSONSink: RecordSink {
    var line: JSONLine

    init(capacity: Int = 0) {
        line = capacity > 0 ? JSONLine(capacity: capacity) : JSONLine()
    }

    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> [TextPart]) {
        if let value = json() { line.add(key, value) }
    }
}

/// The text form: the parts, in order; `line` or `block` lays them out.
struct TextSink: RecordSink {
    var parts: [TextPart] = []

    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> [TextPart]) {
        parts += text()
    }

    /// One part, appended as it is (a value line has six fields: an array
    /// each was an allocation each).
    mutating func field(_ key: String, _ json: @autoclosure () -> JSONValue?, text: @autoclosure () -> TextPart?) {
        if let part = text() { parts.append(part) }
    }

    /// The parts on one line, joined by `separator`; nil when no part shows on a line.
    func line(separator: String = "  ", indent: String = "") -> String? {
        var bytes: [UInt8] = []
        guard appendLine(to: &bytes, separator: separator, indent: indent) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `line(separator:indent:)`'s text to `bytes`, written in
    /// place (no string per part, no joined copy); false, and nothing
    /// appended, when no part shows on a line.
    func appendLine(to bytes: inout [UInt8], separator: String = "  ", indent: String = "") -> Bool {
        var shown = false
        for part in parts {
            let text: String?
            switch part.style {
            case .plain: text = part.text
            case .labelled: text = nil
            case .flag(let on):
                guard on else { continue }
                text = part.label
            case .detail: continue
            }
            bytes.append(contentsOf: (shown ? separator : indent).utf8)
            shown = true
            if let text {
                bytes.append(contentsOf: text.utf8)
            } else {
                bytes.append(contentsOf: part.label.utf8)
                bytes.append(0x20)
                bytes.append(contentsOf: part.text.utf8)
            }
        }
        return shown
    }

    /// One "label       text" line per part, labels padded to one column.
    func block() -> [String] {
        parts.map { part in
            let pad = max(1, 12 - part.label.count)
            return part.label + String(repeating: " ", count: pad) + part.text
        }
    }
}

/// A record the CLI prints: described once (`describe`), rendered as JSON or text.
protocol OutputRecord {
    func describe<Sink: RecordSink>(into sink: inout Sink)
}

extension OutputRecord {
    /// The JSON form, one line.
    func json(capacity: Int = 0) -> String {
        jsonObject(capacity: capacity).render()
    }

    /// The record as one line: JSON, or its text parts joined by `separator`
    /// (nil when none of them shows on a line).
    func line(json: Bool, capacity: Int = 0, separator: String = "  ", indent: String = "") -> String? {
        json ? self.json(capacity: capacity) : textParts.line(separator: separator, indent: indent)
    }

    /// The line with its line break, as bytes for `OutputQueue.enqueue` (an
    /// event line built where the queue asks for it).
    func lineBytes(json: Bool, capacity: Int = 0) -> [UInt8] {
        guard json else {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(max(capacity, 64))
            _ = textParts.appendLine(to: &bytes)
            bytes.append(0x0A)
            return bytes
        }
        return jsonObject(capacity: capacity).renderedBytes(newline: true)
    }

    /// The JSON object, to nest or extend.
    var jsonObject: JSONLine { jsonObject(capacity: 0) }

    /// The JSON object, with room for `capacity` bytes reserved up front.
    func jsonObject(capacity: Int) -> JSONLine {
        var sink = JSONSink(capacity: capacity)
        describe(into: &sink)
        return sink.line
    }

    /// The text parts.
    var textParts: TextSink {
        var sink = TextSink()
        sink.parts.reserveCapacity(8)
        describe(into: &sink)
        return sink
    }
}

/// An event among other lines (a gap in a subscription, a restored state, lines
/// dropped): JSON `{"time", "device", "event", …fields}`, text `time  -- what happened`.
struct EventRecord: OutputRecord {
    /// When it happened (`subscribe`'s lines carry their time; `scan`'s do not).
    var time: String?
    var device: String?
    let event: String
    var fields: [(String, JSONValue)] = []
    /// The event as a sentence for people; it says what `fields` hold.
    let text: String
    /// Whether the text names the device (a command given several).
    var namesDevice = false

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.field("time", time.map { .string($0) }, text: time.map { .plain("time", $0) })
        sink.field("device", device.map { .string($0) }, text: namesDevice ? device.map { .plain("device", $0) } : nil)  // else the command line named it
        sink.field("event", .string(event), text: .plain("event", "-- " + TextSafety.terminalSafe(text)))
        for (key, value) in fields { sink.json(key, value) }  // the sentence says them
    }
}
