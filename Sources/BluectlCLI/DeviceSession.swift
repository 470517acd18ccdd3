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

/// A point in time the whole command must finish by.
struct Deadline: Sendable {
    let end: ContinuousClock.Instant
    init(seconds: Double) { end = .now + .milliseconds(Int64(seconds * 1000)) }
    var remaining: Duration { max(.zero, end - .now) }
}

/// What a device command set up and must undo: the connection it made, the agent it registered.
final class DeviceSession: Sendable {
    let central: CentralManager
    /// Whether --adapter was given (else a device BlueZ knows on another adapter is used there).
    let adapterGiven: Bool
    var adapter: AdapterInfo { state.withLock { $0.adapter } }
    private struct State {
        var adapter: AdapterInfo
        var peripheral: Peripheral?
        var madeConnection = false
        var sessions: [NotificationSession] = []
    }
    private let state: Locked<State>
    /// The agent registered for pairing, if any: apart from `state`, so that
    /// the peripheral's pairing preparation can hold it without holding
    /// the session (no cycle, and no weak reference).
    private let agent = Locked<PairingAgent?>(nil)

    /// "AA:…: " when the command works on several devices: what this
    /// session says on stderr starts with its device.
    private let prefix = Locked("")

    /// Says `text` on stderr, naming the device when there are several.
    func say(_ text: String) {
        Output.error(prefix.withLock { $0 } + text)
    }

    /// Says on stderr that this device waits for its turn to connect (`CentralManager.connect`'s `onQueued`).
    var sayQueued: @Sendable (_ ahead: Int) -> Void {
        { [self] ahead in say("waiting to connect: \(ahead) \(ahead == 1 ? "connect" : "connects") ahead on \(adapter.name)") }
    }

    /// Names the device in what this session says (one of several).
    func nameInMessages(_ device: String) {
        prefix.withLock { $0 = device + ": " }
    }

    init(central: CentralManager, adapter: AdapterInfo, adapterGiven: Bool) {
        self.central = central
        self.adapterGiven = adapterGiven
        state = Locked(State(adapter: adapter))
    }

    var peripheral: Peripheral? { state.withLock { $0.peripheral } }
    /// Why bluectl's agent refused a pairing question (while it is registered).
    var agentRefusal: String? { agent.withLock { $0 }?.lastRefusal }
    var madeConnection: Bool { state.withLock { $0.madeConnection } }

    /// The device `text` names among those BlueZ knows (on this adapter, or
    /// when no --adapter was given on another powered one, which the session
    /// then uses), without scanning; nil when BlueZ does not know it.
    func known(_ text: String) throws -> Peripheral? {
        try checkDeviceText(text)
        if text.hasPrefix("/") {
            // A path names an object BlueZ has or has not: nothing to scan for.
            let known = try central.knownDevice(text, adapter: adapter)
                ?? central.adapters.lazy.compactMap({ try? self.central.knownDevice(text, adapter: $0) }).first
            if let known { state.withLock { $0.peripheral = known } }
            return known
        }
        if let peripheral = try central.knownDevice(text, adapter: adapter) {
            state.withLock { $0.peripheral = peripheral }
            return peripheral
        }
        guard !adapterGiven else { return nil }
        for other in central.adapters where other.powered && other.path != adapter.path {
            if let peripheral = try central.knownDevice(text, adapter: other) {
                state.withLock {
                    $0.adapter = other
                    $0.peripheral = peripheral
                }
                return peripheral
            }
        }
        return nil
    }

    /// Finds the device (scanning for it if BlueZ does not know it), leaving 20 % of the time for the rest.
    func find(_ text: String, deadline: Deadline) async throws -> Peripheral {
        if let known = try known(text) { return known }
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
        state.withLock { $0.peripheral = peripheral }
        return peripheral
    }

    /// Has `peripheral` register bluectl's agent (`choice`) right before it
    /// pairs, if it does (see `Peripheral.preparePairing`).
    func registerAgent(_ choice: AgentChoice, for peripheral: Peripheral) {
        guard choice != .none else { return }
        peripheral.preparePairing { [central, agent] peripheral in
            await Self.registerAgent(choice, for: peripheral, central: central, into: agent)
        }
    }

    private static func registerAgent(_ choice: AgentChoice, for peripheral: Peripheral, central: CentralManager,
                                      into slot: Locked<PairingAgent?>) async {
        guard slot.withLock({ $0 }) == nil else { return }
        // Pairing works without our agent when another default agent exists: don't fail the command.
        let agent: PairingAgent?
        switch choice {
        case .keyboardDisplay:
            agent = try? await PairingAgent.register(central: central, devices: [peripheral.path], capability: .keyboardDisplay,
                                                     prompter: { TerminalPrompter.ask($0, device: $1) })
        default:
            agent = try? await PairingAgent.register(central: central, devices: [peripheral.path])
        }
        guard let agent else { return }
        Trace.log("agent registered at \(agent.path)")
        slot.withLock { $0 = agent }
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
                let made = try await central.connect(peripheral, timeout: deadline.remaining, retries: options.retries,
                                                     onQueued: onQueued)
                state.withLock { $0.madeConnection = made }
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
                if peripheral.info == nil {
                    _ = try await central.findDevice(peripheral.identifier.description, adapter: adapter, timeout: deadline.remaining * 0.8)
                }
                Trace.log("bluetoothd is back: connect to \(peripheral.identifier) again")
            }
        }
    }

    func keep(_ session: NotificationSession) {
        state.withLock { $0.sessions.append(session) }
    }

    /// The sessions kept so far, no longer stopped at clean-up (the caller stops them).
    func forgetSessions() -> [NotificationSession] {
        state.withLock { s in
            let sessions = s.sessions
            s.sessions = []
            return sessions
        }
    }

    /// StopNotify, disconnect if we connected, unregister the agent. Never throws.
    /// In order (StopNotify before Disconnect, so that BlueZ does not re-arm
    /// notifications on a later connection: docs/bluez-pitfalls.md, 6). After a
    /// signal (`hurry`) each step is bounded: the process must end within
    /// 2 s, and bluetoothd finishes what was sent even if we are gone.
    func cleanUp(disconnect: Bool = true, hurry: Bool = false) async {
        let s = state.withLock { s -> State in
            let copy = s
            s.sessions = []
            return copy
        }
        let registered = agent.withLock { a -> PairingAgent? in
            defer { a = nil }
            return a
        }
        let peripheral = disconnect && s.madeConnection ? s.peripheral : nil
        if hurry {
            // StopNotify goes out first; bluetoothd handles one client's calls
            // in order, so its reply need not be awaited for long.
            let sessions = s.sessions
            _ = await firstValue(within: .milliseconds(500)) {
                await withTaskGroup(of: Void.self) { group in
                    for session in sessions { group.addTask { await session.stop() } }
                }
            }
            await withTaskGroup(of: Void.self) { group in
                if let peripheral {
                    group.addTask { try? await self.central.cancelPeripheralConnection(peripheral, timeout: .milliseconds(800)) }
                }
                if let registered { group.addTask { await registered.unregister(timeout: .milliseconds(800)) } }
            }
            return
        }
        for session in s.sessions { await session.stop() }
        if let peripheral {
            try? await central.cancelPeripheralConnection(peripheral, timeout: .seconds(5))
        }
        await registered?.unregister()
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
    try await runDevicesCommand(adapterOptions: adapterOptions, options: options, what: what, count: 1,
                                disconnectAfter: disconnectAfter, requirePowered: requirePowered) { sessions, deadline in
        try await body(sessions[0], deadline)
    }
}

/// `runDeviceCommand` for `count` devices at once: one central, a session
/// for each device (each undoes what it set up), all cleaned up together.
func runDevicesCommand(
    adapterOptions: AdapterOptions, options: DeviceCommandOptions, what: String, count: Int,
    disconnectAfter: Bool = true, requirePowered: Bool = true,
    _ body: @escaping @Sendable ([DeviceSession], Deadline) async throws -> Void
) async throws {
    let seconds = options.timeout
    try await SignalScope.run {
        let deadline = Deadline(seconds: seconds)
        let (central, adapter) = try await adapterOptions.open(requirePowered: requirePowered)
        let sessions = (0..<count).map { _ in
            DeviceSession(central: central, adapter: adapter, adapterGiven: adapterOptions.adapter != nil)
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
        let finished = await withTaskCancellationHandler {
            await firstValue(within: deadline.remaining) { await work.value }
        } onCancel: {
            work.cancel()
        }
        let outcome: Result<Void, any Error>
        if let finished {
            outcome = finished
        } else {
            work.cancel()
            _ = await uncancellable { await firstValue(within: .seconds(5)) { await work.value } }
            outcome = .failure(BluetoothError.timeout("\(what) did not finish within \(formatSeconds(seconds)) s"))
        }
        let refusal = sessions.lazy.compactMap(\.agentRefusal).first
        await uncancellable {
            let hurry = SignalScope.interrupted
            _ = await firstValue(within: hurry ? .milliseconds(1500) : .seconds(8)) {
                await withTaskGroup(of: Void.self) { group in
                    for session in sessions {
                        group.addTask { await session.cleanUp(disconnect: disconnectAfter, hurry: hurry) }
                    }
                }
            }
        }
        // close() waits for the bus thread; never let that keep the process alive.
        _ = await uncancellable { await firstValue(within: SignalScope.interrupted ? .milliseconds(200) : .seconds(2)) { central.close() } }
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
