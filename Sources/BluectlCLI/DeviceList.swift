// DEVICE as a comma-separated list: each device worked on at once, each
// failure its own, reported by device.

import BluectlCore

/// The devices a DEVICE argument names: one, or a comma-separated list
/// (`AA:…:01,AA:…:02`), each checked as `checkDeviceText` does. An empty
/// entry or a device named twice is refused (exit 64).
func deviceList(_ text: String) throws -> [String] {
    guard text.contains(",") else {
        try checkDeviceText(text)
        return [text]
    }
    let items = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingWhitespace() }
    var seen = Set<String>()
    for item in items {
        if item.isEmpty {
            throw CLIFailure(.usage, "invalid DEVICE list \"\(TextSafety.escapedForMessage(text))\": an empty entry")
        }
        try checkDeviceText(item)
        let key = BluetoothAddress(item)?.description ?? item
        if !seen.insert(key).inserted {
            throw CLIFailure(.usage, "invalid DEVICE list: \(TextSafety.escapedForMessage(key)) is named twice")
        }
    }
    return items
}

/// `--format raw` with several devices: their bytes could not be told apart.
let rawTakesOneDevice = CLIFailure(.usage, "--format raw takes one DEVICE: the values of several devices could not be told apart")

/// How a device of a list is named in output: its address when the text is
/// one (in BlueZ's form), else the text as given.
func deviceLabel(_ text: String) -> String {
    BluetoothAddress(text)?.description ?? text
}

/// Runs `each` for every device at once, each in its own session. With one
/// device its failure is the command's. With several, a device that fails
/// is reported on its own — a line on stderr naming it and, with `json`, a
/// `failed` event line on stdout — while the others go on; when all are
/// done, the command fails with the status of the first device (in the
/// order given) that failed. A failed device is named by its address once
/// it was found (as its value lines name it), else as given. `report`,
/// when given, reports instead (`device`: as given, `shown`: as named).
func forEachDevice(_ devices: [String], sessions: [DeviceSession], json: Bool, what: String,
                   report: (@Sendable (_ device: String, _ shown: String, CLIFailure) -> Void)? = nil,
                   _ each: @escaping @Sendable (_ device: String, DeviceSession) async throws -> Void) async throws {
    if devices.count == 1 {
        try await each(devices[0], sessions[0])
        return
    }
    let failures = await withTaskGroup(of: (Int, String, CLIFailure)?.self) { group in
        for (index, device) in devices.enumerated() {
            group.addTask {
                do {
                    try await each(device, sessions[index])
                    return nil
                } catch {
                    let failure = cliFailure(error, what: "\(what) of \(device)")
                    let shown = await sessions[index].peripheral?.identifier.description ?? deviceLabel(device)
                    if let report {
                        report(deviceLabel(device), shown, failure)
                    } else {
                        reportDeviceFailure(device: shown, failure, json: json)
                    }
                    return (index, shown, failure)
                }
            }
        }
        var failures: [(Int, String, CLIFailure)] = []
        for await failure in group {
            if let failure { failures.append(failure) }
        }
        return failures.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
    }
    guard let first = failures.first else { return }
    throw CLIFailure(first.1.status, "\(failures.count) of \(devices.count) devices failed: "
        + failures.map(\.0).joined(separator: ", "))
}

/// One device of several failed: "AA:…: why" on stderr and, with `json`, an
/// event line on stdout (`{"device":…,"event":"failed","reason":…,"exit_status":…}`).
func reportDeviceFailure(device: String, _ failure: CLIFailure, json: Bool) {
    guard !SignalScope.interrupted else { return }
    Output.error("\(device): \(TextSafety.oneLine(failure.message))")
    if json {
        _ = Output.line(EventLine.failed(failure).record(device: device).json())
    }
}
