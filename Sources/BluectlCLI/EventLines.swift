// The event lines bluectl prints among its other lines, each made in one
// place: its name, its JSON fields and its sentence. docs/output.md's table
// of events is generated from these (Scripts/gen-output-docs).

import BluectlCore

/// One event line's content; `EventRecord` renders it (with its time and device).
struct EventLine: Sendable {
    let event: String
    var fields: [(String, JSONValue)] = []
    /// The event as a sentence for people; it says what `fields` hold.
    let text: String

    /// The line as a record (`time`: subscribe's lines carry it; `namesDevice`: one of several devices).
    func record(time: String? = nil, device: String? = nil, namesDevice: Bool = false) -> EventRecord {
        EventRecord(time: time, device: device, event: event, fields: fields, text: text, namesDevice: namesDevice)
    }
}

extension EventLine {
    /// Lines a slow reader lost (scan events or subscribe values).
    static func dropped(_ count: Int, of what: String) -> EventLine {
        EventLine(event: "dropped", fields: [("count", .int(count))],
                  text: "\(count) \(what)\(count == 1 ? "" : "s") dropped: output too slow")
    }

    /// One device of several failed (its line names it; the others go on).
    static func failed(_ failure: CLIFailure, sentence: String? = nil) -> EventLine {
        EventLine(event: "failed", fields: [("reason", .string(failure.message)), ("exit_status", .int(Int(failure.status.rawValue)))],
                  text: sentence ?? failure.message)
    }

    /// `scan --restore-id`: the filter saved by an earlier scan, and whether it is used.
    static func scanRestored(_ saved: CentralRestoreState, filter: CentralRestoreState.ScanFilter, id: String, used: Bool) -> EventLine {
        var parts: [String] = filter.services.map { "service \($0)" }
        if let name = filter.name { parts.append("name contains \"\(name)\"") }
        if let rssi = filter.rssi { parts.append("rssi >= \(rssi)") }
        if filter.duplicates { parts.append("duplicates") }
        parts.append("transport \(filter.transport)")
        return EventLine(
            event: "restored",
            fields: [("restore_id", .string(id)), ("saved", .string(saved.saved)), ("was_running", .bool(saved.running)),
                     ("filter", .strings(parts)), ("used", .bool(used))],
            text: "restored \(id) (saved \(saved.saved); \(howItEnded(saved))): \(parts.joined(separator: ", "))"
                + (used ? "" : " (not used: filter options given)"))
    }

    /// `subscribe --restore-id`: what an earlier run was subscribed to.
    static func subscribeRestored(_ state: CentralRestoreState, id: String) -> EventLine {
        let subscriptions = state.subscriptions.map { "\($0.characteristic) of \($0.device)" }
        let peripherals = state.peripherals.map { "\($0.address ?? $0.device) \($0.state)" }
        return EventLine(event: "restored", fields: [
            ("restore_id", .string(id)), ("saved", .string(state.saved)), ("was_running", .bool(state.running)),
            ("pid", .int(Int(state.pid))), ("subscriptions", .strings(subscriptions)), ("peripherals", .strings(peripherals)),
        ], text: "restored \(id) (saved \(state.saved); \(howItEnded(state))): subscribed to \(subscriptions.joined(separator: ", "))"
            + (peripherals.isEmpty ? "" : "; \(peripherals.joined(separator: ", "))"))
    }

    private static func howItEnded(_ state: CentralRestoreState) -> String {
        state.running ? "was still running (pid \(state.pid), killed or crashed)" : "ended normally"
    }

    /// The device waits while others connect on its adapter.
    static func connectQueued(ahead: Int, adapter: String) -> EventLine {
        EventLine(event: "connect_queued", fields: [("ahead", .int(ahead)), ("adapter", .string(adapter))],
                  text: "waiting to connect: \(ahead) \(ahead == 1 ? "connect" : "connects") ahead on \(adapter)")
    }

    /// The link was lost (`--reconnect`: reconnecting).
    static func disconnected(_ reason: String) -> EventLine {
        EventLine(event: "disconnected", fields: [("reason", .string(reason))], text: "\(reason); reconnecting")
    }

    /// Back after a loss, `gap` seconds later (to a tenth).
    static func reconnected(gap seconds: Double) -> EventLine {
        EventLine(event: "reconnected", fields: [("gap_seconds", .double(seconds))],
                  text: "reconnected after \(seconds) s; notifications resumed")
    }

    /// Values come from another client's notify session (bluectl started none).
    static func sharedSession(_ characteristic: BluetoothUUID) -> EventLine {
        EventLine(event: "shared_session", fields: [("characteristic", .string(characteristic.uuidString))],
                  text: "sharing the notification session another client holds on \(characteristic.label) (bluetoothd sends a copy of each value per session, so bluectl adds none)")
    }

    /// The shared session ended and bluectl started its own.
    static func ownSession(_ characteristic: BluetoothUUID) -> EventLine {
        EventLine(event: "own_session", fields: [("characteristic", .string(characteristic.uuidString))],
                  text: "the shared notification session on \(characteristic.label) ended; bluectl started its own (values sent in between are lost)")
    }

    /// What `--check-sequence` found in a value of `characteristic`.
    static func sequence(_ finding: SequenceTracker.Finding, of characteristic: BluetoothUUID) -> EventLine {
        let uuid: (String, JSONValue) = ("characteristic", .string(characteristic.uuidString))
        let label = characteristic.label
        switch finding {
        case .gap(let expected, let got, let missing):
            return EventLine(event: "gap", fields: [uuid, ("expected", .int(Int(expected))), ("got", .int(Int(got))), ("missing", .int(missing))],
                             text: "sequence gap in \(label): expected \(expected), got \(got) (\(missing) missing)")
        case .late(let seq):
            return EventLine(event: "late", fields: [uuid, ("seq", .int(Int(seq)))], text: "sequence \(seq) of \(label) arrived late")
        case .repeated(let seq):
            return EventLine(event: "repeated", fields: [uuid, ("seq", .int(Int(seq)))], text: "sequence \(seq) of \(label) repeated")
        case .short(let length):
            return EventLine(event: "short", fields: [uuid, ("length", .int(length))],
                             text: "a value of \(label) is too short for a sequence number (\(length) bytes)")
        }
    }
}
