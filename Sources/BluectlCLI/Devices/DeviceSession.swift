// A device command's run: its deadline, what it set up and must undo, and its errors.

import ArgumentParser
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a device command set up and must undo (the connection it made,
/// the notification sessions it started, the agent it registered), owned by
/// this actor: the device's task and the clean-up after it take turns at it.
actor DeviceSession {
    nonisolated let central: CentralManager
    /// Whether --adapter was given (else a device BlueZ knows on another adapter is used there).
    nonisolated let adapterGiven: Bool
    /// "AA:…: " when the command works on several devices: what this
    /// session says on stderr starts with its device.
    nonisolated let prefix: String
    /// The adapter the device is on (another powered one when BlueZ knows it there and --adapter was not given).
    private(set) var adapter: AdapterInfo
    private(set) var peripheral: Peripheral?
    /// Whether this command made the connection (and so undoes it).
    private(set) var madeConnection = false
    private var sessions: [NotificationSession] = []
    /// The agent registered for pairing, if any: apart from the session, so
    /// that the peripheral's pairing preparation can hold it without holding
    /// the session (no cycle, and no weak reference).
    private let agent = AgentSlot()
    /// How this command answers pairing questions (`--agent`, `--passkey`, `--pin`).
    nonisolated let pairing: PairingSetup

    init(central: CentralManager, adapter: AdapterInfo, adapterGiven: Bool, device: String? = nil,
         pairing: PairingSetup = PairingSetup(agent: .noInputNoOutput, secrets: nil)) {
        self.central = central
        self.pairing = pairing
        self.adapterGiven = adapterGiven
        self.adapter = adapter
        prefix = device.map { deviceLabel($0) + ": " } ?? ""
    }

    /// Says `text` on stderr, naming the device when there are several.
    nonisolated func say(_ text: String) {
        Output.error(prefix + text)
    }

    /// Says on stderr that this device waits for its turn to connect (`CentralManager.connect`'s `onQueued`).
    var sayQueued: @Sendable (_ ahead: Int) -> Void {
        { [self, adapter] ahead in say("waiting to connect: \(ahead) \(ahead == 1 ? "connect" : "connects") ahead on \(adapter.name)") }
    }

    /// Why bluectl's agent refused a pairing question (while it is registered).
    var agentRefusal: String? {
        get async { await agent.refusal }
    }

    /// The device `text` names among those BlueZ knows (on this adapter, or
    /// when no --adapter was given on another powered one, which the session
    /// then uses), without scanning; nil when BlueZ does not know it. Looked
    /// up on the central's loop in one go: no thread blocked, one moment's view.
    func known(_ text: String) async throws -> Peripheral? {
        try checkDeviceText(text)
        let (central, adapter, adapterGiven) = (central, adapter, adapterGiven)
        let found = try await central.onLoop { () -> Result<(Peripheral, AdapterInfo)?, any Error> in
            Result {
                if text.hasPrefix("/") {
                    // A path names an object BlueZ has or has not, on whichever adapter.
                    let known = try central.knownDevice(text, adapter: adapter)
                        ?? central.adapters.lazy.compactMap({ try? central.knownDevice(text, adapter: $0) }).first
                    return known.map { ($0, adapter) }
                }
                if let here = try central.knownDevice(text, adapter: adapter) { return (here, adapter) }
                guard !adapterGiven else { return nil }
                for other in central.adapters where other.powered && other.path != adapter.path {
                    if let there = try central.knownDevice(text, adapter: other) { return (there, other) }
                }
                return nil
            }
        }.get()
        guard let (peripheral, on) = found else { return nil }
        self.adapter = on
        self.peripheral = peripheral
        return peripheral
    }

    /// Finds the device (scanning for it if BlueZ does not know it), leaving 20 % of the time for the rest.
    func find(_ text: String, deadline: Deadline) async throws -> Peripheral {
        if let known = try await known(text) { return known }
        if text.hasPrefix("/") {
            throw BluetoothError.deviceNotFound("\(TextSafety.escapedForMessage(text)) (no such device object in BlueZ)")
        }
        let scanBudget = deadline.remaining * 0.8
        Trace.log("find \(text) on \(adapter.name) (scan budget \(scanBudget))")
        // A person at a terminal is told why nothing happens for a while; a script's stderr stays quiet.
        if isatty(2) == 1 {
            say("scanning \(adapter.name) for \(TextSafety.escapedForMessage(text))… (up to \(formatSeconds(Double(scanBudget.components.seconds))) s)")
        }
        let peripheral = try await central.findDevice(text, adapter: adapter, timeout: scanBudget)
        Trace.log("found \(peripheral.path)")
        self.peripheral = peripheral
        return peripheral
    }

    /// Has `peripheral` register bluectl's agent (`pairing`) right before it
    /// pairs, if it does (see `Peripheral.preparePairing`).
    nonisolated func registerAgent(for peripheral: Peripheral) {
        guard pairing.agent != .none else { return }
        peripheral.preparePairing { [central, agent, pairing] peripheral in
            await agent.register(pairing, for: peripheral, central: central)
        }
    }

    /// Connects unless connected, then waits for the services (connecting
    /// again if the link drops before they are resolved). bluetoothd
    /// 5.66 can crash in the middle (seen in the lab on quick reconnects);
    /// when it stops, this says so on stderr, waits for it to come back (a
    /// supervisor restarts it, as systemd does), finds the device again and
    /// starts over — at most `--retries` times (once with `--retries 0`),
    /// within the deadline.
    func connect(_ peripheral: Peripheral, options: DeviceCommandOptions, deadline: Deadline,
                 onQueued: (@Sendable (_ ahead: Int) -> Void)? = nil) async throws {
        var restarts = 0, drops = 0
        while true {
            do {
                madeConnection = try await central.connect(peripheral, timeout: deadline.remaining, retries: options.retries,
                                                           onQueued: onQueued)
                do {
                    try await peripheral.discoverServices(timeout: deadline.remaining)
                } catch BluetoothError.disconnected(let why) where drops < options.retries {
                    // The link went down between the connection and its services: in the
                    // lab, bluetoothd 5.66 re-connected a bonded device by itself, bluectl
                    // found it connected, and the link dropped again at once. Connect again
                    // (counted against --retries, as an aborted connection is).
                    drops += 1
                    Trace.log("connect \(peripheral.identifier) again: \(why)")
                    continue
                }
                return
            } catch let error as BluetoothError {
                guard case .bluetoothdStopped = error, restarts < max(1, options.retries) else { throw error }
                restarts += 1
                say("\(error.description); waiting for it to come back")
                try await central.waitForAdapter(adapter, timeout: deadline.remaining)
                let (id, adapter, central) = (peripheral.identifier.description, adapter, central)
                if await central.onLoop({ (try? central.knownDevice(id, adapter: adapter)) ?? nil }) == nil {
                    _ = try await central.findDevice(id, adapter: adapter, timeout: deadline.remaining * 0.8)
                }
                Trace.log("bluetoothd is back: connect to \(peripheral.identifier) again")
            }
        }
    }

    func keep(_ session: NotificationSession) {
        sessions.append(session)
    }

    /// The sessions kept so far, no longer stopped at clean-up (the caller stops them).
    func forgetSessions() -> [NotificationSession] {
        defer { sessions = [] }
        return sessions
    }

    /// StopNotify, disconnect if we connected, unregister the agent. Never throws.
    /// In order (StopNotify before Disconnect, so that BlueZ does not re-arm
    /// notifications on a later connection: docs/bluez-pitfalls.md, 6). After a
    /// signal (`hurry`) each step is bounded: the process must end within
    /// 2 s, and bluetoothd finishes what was sent even if we are gone.
    func cleanUp(disconnect: Bool = true, hurry: Bool = false) async {
        let sessions = forgetSessions()
        let registered = await agent.take()
        let peripheral = disconnect && madeConnection ? peripheral : nil
        let central = central
        if hurry {
            // StopNotify goes out first; bluetoothd handles one client's calls
            // in order, so its reply need not be awaited for long.
            _ = await Deadline(after: .milliseconds(500)).run(shielded: true) {
                await withTaskGroup(of: Void.self) { group in
                    for session in sessions { group.addTask { await session.stop() } }
                }
            }
            await withTaskGroup(of: Void.self) { group in
                if let peripheral {
                    group.addTask { try? await central.cancelPeripheralConnection(peripheral, timeout: .milliseconds(800)) }
                }
                if let registered { group.addTask { await registered.unregister(timeout: .milliseconds(800)) } }
            }
            return
        }
        for session in sessions { await session.stop() }
        if let peripheral {
            do {
                try await central.cancelPeripheralConnection(peripheral, timeout: Self.settleLimit)
            } catch {
                say("\(peripheral.identifier) may still be connected: \(cliFailure(error, what: "disconnect").message)")
            }
        }
        await registered?.unregister()
    }

    /// How long the clean-up waits for BlueZ to show a device it disconnects
    /// disconnected: the next command (`bluectl read A; bluectl connect A`)
    /// must find it settled, not going down. bluetoothd 5.66 takes the link
    /// down 2 s after `Disconnect` (its DISCONNECT_TIMER: the profiles go
    /// first) and only then answers; more on a slow machine (the lab).
    static let settleLimit: Duration = .seconds(10)
}

/// The pairing agent a session registers when its device pairs, and why it
/// last refused a question.
private actor AgentSlot {
    private var agent: PairingAgent?

    /// Registers bluectl's agent for `peripheral` (once). Pairing works
    /// without it when another default agent exists: a failure to register
    /// does not fail the command.
    func register(_ setup: PairingSetup, for peripheral: Peripheral, central: CentralManager) async {
        guard agent == nil else { return }
        let registered = await setup.register(for: peripheral, central: central)
        guard let registered, agent == nil else {
            if let registered { await registered.unregister() }
            return
        }
        Trace.log("agent registered at \(registered.path)")
        agent = registered
    }

    /// Why the agent last refused a question, if it did.
    var refusal: String? { agent?.lastRefusal }

    /// The agent, no longer this slot's (the caller unregisters it).
    func take() -> PairingAgent? {
        defer { agent = nil }
        return agent
    }
}

/// Runs a device command (`requirePowered`: whether it needs the adapter
/// on, or only changes what BlueZ keeps of a device): signals
/// (SIGINT/SIGTERM → cleanup → 130/143), the overall `--timeout` (124),
/// cleanup of what the command set up, and every error as one line with its
/// exit status.
func runDeviceCommand(
    adapterOptions: AdapterOptions, options: DeviceCommandOptions, what: String,
    disconnectAfter: Bool = true, requirePowered: Bool = true,
    _ body: @escaping @Sendable (DeviceSession, Deadline) async throws -> Void
) async throws {
    try await runDevicesCommand(adapterOptions: adapterOptions, options: options, what: what, devices: [what],
                                disconnectAfter: disconnectAfter, requirePowered: requirePowered) { sessions, deadline in
        try await body(sessions[0], deadline)
    }
}

/// `runDeviceCommand` for several `devices` at once: one central, a session
/// for each device (each undoes what it set up; with several, each names
/// its device in what it says), all cleaned up together.
func runDevicesCommand(
    adapterOptions: AdapterOptions, options: DeviceCommandOptions, what: String, devices: [String],
    disconnectAfter: Bool = true, requirePowered: Bool = true,
    _ body: @escaping @Sendable ([DeviceSession], Deadline) async throws -> Void
) async throws {
    let seconds = options.timeout
    let pairing = try options.pairing()
    try await SignalScope.run {
        let deadline = Deadline(seconds: seconds)
        let (central, adapter) = try await adapterOptions.open(requirePowered: requirePowered)
        let sessions = devices.map { device in
            DeviceSession(central: central, adapter: adapter, adapterGiven: adapterOptions.adapter != nil,
                          device: devices.count > 1 ? device : nil, pairing: pairing)
        }
        // The body runs in a task of its own: at the deadline (or a signal) it
        // is cancelled and given a few seconds to undo what it started (a
        // pending Connect is cancelled with Disconnect), never more.
        let work = Task { () -> Result<Void, any Error> in
            do {
                try await body(sessions, deadline)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        let outcome: Result<Void, any Error>
        if let finished = await deadline.run({ await work.value }) {
            outcome = finished
        } else {
            work.cancel()
            _ = await Deadline(after: .seconds(5)).run(shielded: true) { await work.value }
            outcome = .failure(BluetoothError.timeout("\(what) did not finish within \(formatSeconds(seconds)) s"))
        }
        var refusal: String?
        for session in sessions where refusal == nil { refusal = await session.agentRefusal }
        let hurry = SignalScope.interrupted
        // StopNotify, then the disconnect's settling (`settleLimit`), devices at once.
        _ = await Deadline(after: hurry ? .milliseconds(1500) : DeviceSession.settleLimit + .seconds(5)).run(shielded: true) {
            await withTaskGroup(of: Void.self) { group in
                for session in sessions {
                    group.addTask { await session.cleanUp(disconnect: disconnectAfter, hurry: hurry) }
                }
                // the discovery that found the devices: stopped, and answered
                group.addTask { await central.settleFinding() }
            }
        }
        // close() waits for the bus thread; never let that keep the process alive.
        _ = await Deadline(after: SignalScope.interrupted ? .milliseconds(200) : .seconds(2)).run(shielded: true) { central.close() }
        if case .failure(let error) = outcome, !SignalScope.interrupted {
            var failure = cliFailure(error, what: what)
            if failure.status == .noPermission, let refusal { failure.message += "; bluectl's agent refused: \(refusal)" }
            throw failure
        }
    }
}

/// Any error of a device command as the CLI reports it.
func cliFailure(_ error: any Error, what: String) -> CLIFailure {
    switch error {
    case let failure as CLIFailure: return failure
    case let error as BluetoothError: return CLIFailure(error)
    case is CancellationError: return CLIFailure(.timeout, "timed out: \(what)")
    default: return CLIFailure(BluetoothError.from(error, operation: what))
    }
}
