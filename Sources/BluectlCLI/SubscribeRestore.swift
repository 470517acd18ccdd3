// What `subscribe` works on and keeps: the devices and characteristics
// (from the command line or a saved --restore-id), and the state it saves.

import BluectlCore

/// The devices and characteristics to subscribe to: from the command line,
/// or from the saved state of a `--restore-id`.
struct SubscriptionTarget: Sendable {
    var devices: [String]
    var characteristics: [String]
    var service: String?
    var adapter: String?

    init(device: String?, characteristics: [String], service: String?, adapter: String?,
         restored: CentralRestoreState?, restoreID: String?) throws {
        if let device {
            self.devices = try deviceList(device)
            self.characteristics = characteristics
            self.service = service
            self.adapter = adapter
            return
        }
        guard let restored, let first = restored.subscriptions.first else {
            throw CLIFailure(.notFound, "no saved subscription for --restore-id \(restoreID ?? ""): give DEVICE and CHARACTERISTIC")
        }
        guard restored.command == "subscribe" else {
            throw CLIFailure(.usage, "--restore-id \(restoreID ?? "") holds the state of `bluectl \(restored.command)`, not of subscribe")
        }
        var devices: [String] = []
        for entry in restored.subscriptions where !devices.contains(entry.device) { devices.append(entry.device) }
        self.devices = devices
        self.characteristics = restored.subscriptions.filter { $0.device == first.device }.map(\.characteristic)
        self.service = first.service
        self.adapter = adapter ?? restored.adapter
    }
}

/// What `--restore-id` keeps: every device's connection and notification
/// state, saved whole whenever one of them changes. An actor: the devices'
/// tasks save in turn, each save sees every device's newest state.
actor RestoreRecorder {
    private let store: RestoreStore?
    private let target: SubscriptionTarget
    /// Per device (as given): its state, whether notifying, its address once known.
    private var entries: [String: (state: PeripheralState, notifying: Bool, address: String?)] = [:]

    init(store: RestoreStore?, target: SubscriptionTarget) {
        self.store = store
        self.target = target
    }

    /// Records `device`'s state and saves. A failure to save is reported, not
    /// fatal: the subscription goes on.
    func save(device: String, state: PeripheralState, notifying: Bool, address: String? = nil) {
        guard store != nil else { return }
        entries[device] = (state, notifying, address ?? entries[device]?.address)
        write(running: true)
    }

    /// Every device in `state`, not notifying; `running` false when the process ends.
    func saveAll(state: PeripheralState, running: Bool) {
        guard store != nil else { return }
        for device in target.devices { entries[device] = (state, false, entries[device]?.address) }
        write(running: running)
    }

    private func write(running: Bool) {
        guard let store else { return }
        let now = entries
        let saved = CentralRestoreState(
            command: "subscribe", adapter: target.adapter,
            peripherals: target.devices.map { .init(device: $0, address: now[$0]?.address, state: (now[$0]?.state ?? .disconnected).rawValue) },
            subscriptions: target.devices.flatMap { device in
                target.characteristics.map {
                    .init(device: device, characteristic: $0, service: target.service, notifying: now[device]?.notifying ?? false)
                }
            },
            running: running)
        do {
            try store.save(saved)
        } catch {
            Output.error("\(error)")
        }
    }
}
