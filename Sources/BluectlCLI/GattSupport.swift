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

/// `--timeout` of every command that works with one device.
struct OperationTimeout: ParsableArguments {
    /// Unconditional: "--timeout -1" reaches validation and is rejected by name.
    @Option(name: .customLong("timeout"), parsing: .unconditional, help: ArgumentHelp(
        "Bound the whole command (finding the device included) to this many seconds (default 30).",
        valueName: "SECONDS"))
    var text: String?

    func validate() throws {
        if let text { _ = try parseSeconds(text, option: "--timeout") }
    }

    var seconds: Double { ((try? text.map { try parseSeconds($0, option: "--timeout") }) ?? nil) ?? 30 }
}

/// Options of the commands that connect (besides `AdapterOptions`): the
/// timeout, connection retries and the pairing agent. `info` and
/// `disconnect` take only `OperationTimeout`.
struct DeviceCommandOptions: ParsableArguments {
    @OptionGroup var deadline: OperationTimeout

    /// Unconditional: "--retries -1" is rejected by name, not as a missing value.
    @Option(parsing: .unconditional, help: ArgumentHelp("Extra connection attempts after le-connection-abort-by-local or InProgress.", valueName: "N"))
    var retries: Int = 2

    @Option(help: ArgumentHelp(
        "Pairing agent while running: no-input-no-output (just works), keyboard-display (asks on the terminal) or none.",
        valueName: "AGENT"))
    var agent: AgentChoice = .noInputNoOutput

    func validate() throws {
        if !(0...10).contains(retries) { throw ValidationError("invalid --retries \"\(retries)\": expected 0 to 10") }
    }

    var timeout: Double { deadline.seconds }

    init() {}

    /// The options of a command that does not connect: its timeout, the defaults otherwise.
    init(_ deadline: OperationTimeout) {
        self.deadline = deadline
        retries = 2
        agent = .noInputNoOutput
    }
}

/// Tab completion of a DEVICE argument: the addresses of the devices BlueZ
/// knows (`CentralManager.devices(on:)`), asked of the system bus by bluectl
/// when the shell calls it back (`bluectl ---completion …`), one second at
/// most; nothing when there is no bus or no bluetoothd.
let deviceCompletion = CompletionKind.custom { (_: [String], _: Int, _: String) async -> [String] in
    await knownDeviceAddresses(within: .seconds(1))
}

/// The addresses of the devices BlueZ knows, sorted; none when the bus or
/// bluetoothd does not answer within `limit`.
func knownDeviceAddresses(within limit: Duration) async -> [String] {
    await firstValue(within: limit) { () async -> [String] in
        guard let central = try? await CentralManager.open(callTimeout: limit) else { return [] }
        defer { central.close() }
        return Set(central.devices().map(\.address)).sorted().map(\.description)
    } ?? []
}

enum AgentChoice: String, ExpressibleByArgument, Sendable {
    case noInputNoOutput = "no-input-no-output"
    /// Passkeys, PINs and confirmations asked on the controlling terminal.
    case keyboardDisplay = "keyboard-display"
    case none
}

/// How values are shown.
enum ValueFormat: String, ExpressibleByArgument, Sendable, CaseIterable {
    /// hex + printable ASCII (the default on a terminal)
    case hex
    case utf8
    /// the bytes unchanged, for pipes
    case raw
    case json
    /// decoded for common SIG characteristics, else hex
    case decoded
}

/// The value format for `--format` and `--json` (the default depends on whether stdout is a terminal).
func chosenFormat(_ format: ValueFormat?, json: Bool) -> ValueFormat? {
    if json { return .json }
    return format
}

enum ValueText {
    static var stdoutIsTerminal: Bool { isatty(1) == 1 }

    /// A value as one line of text (nil format: hex dump on a terminal, plain hex otherwise).
    /// In the hex formats a value bluectl can decode is followed by its decoded form in
    /// parentheses: `64 (100 %)`, so that a byte is not read as a decimal number.
    static func text(_ bytes: [UInt8], uuid: BluetoothUUID, format: ValueFormat?) -> String {
        func withDecoded(_ hex: String) -> String {
            guard let decoded = CharacteristicDecoding.decode(uuid: uuid, bytes) else { return hex }
            return "\(hex) (\(TextSafety.terminalSafe(decoded.summary)))"
        }
        switch format {
        case nil: return withDecoded(stdoutIsTerminal ? ByteFormats.hexDump(bytes) : ByteFormats.hex(bytes))
        case .hex: return withDecoded(ByteFormats.hexDump(bytes))
        case .utf8: return TextSafety.terminalSafe(ByteFormats.utf8Text(bytes))
        case .decoded:
            if let decoded = CharacteristicDecoding.decode(uuid: uuid, bytes) {
                return TextSafety.terminalSafe(decoded.summary)
            }
            return ByteFormats.hexDump(bytes)
        case .raw, .json: return ByteFormats.hex(bytes)
        }
    }

    /// Adds `value` (hex) and, when known, `decoded` (an object of fields).
    static func addValue(_ bytes: [UInt8], uuid: BluetoothUUID, to line: inout JSONLine) {
        line.add("value", ByteFormats.hex(bytes))
        if let decoded = CharacteristicDecoding.decode(uuid: uuid, bytes) {
            var fields = JSONLine()
            for field in decoded.fields { fields.add(field.name, field.value) }
            line.add("decoded", object: fields)
        }
    }

    /// Writes bytes to stdout unchanged.
    static func writeRaw(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Output.writeAll(1, $0) }
    }

    /// "2026-11-22T04:40:01.123Z"
    static func timestamp(_ date: Date = Date()) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let millis = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ v: Int32, _ width: Int = 2) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T"
            + "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)).\(pad(Int32(millis), 3))Z"
    }

    static func label(_ uuid: BluetoothUUID) -> String {
        uuid.name.map { "\(uuid.shortString) (\($0))" } ?? uuid.uuidString
    }
}

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

    init(central: CentralManager, adapter: AdapterInfo, adapterGiven: Bool) {
        self.central = central
        self.adapterGiven = adapterGiven
        state = Locked(State(adapter: adapter))
    }

    var peripheral: Peripheral? { state.withLock { $0.peripheral } }
    /// Why bluectl's agent refused a pairing question (while it is registered).
    var agentRefusal: String? { agent.withLock { $0 }?.lastRefusal }
    var madeConnection: Bool { state.withLock { $0.madeConnection } }

    /// Finds the device (scanning for it if BlueZ does not know it), leaving 20 % of the time for the rest.
    func find(_ text: String, deadline: Deadline) async throws -> Peripheral {
        try checkDeviceText(text)
        if text.hasPrefix("/") {
            // A path names an object BlueZ has or has not: nothing to scan for.
            guard let known = try central.knownDevice(text, adapter: adapter)
                ?? central.adapters.lazy.compactMap({ try? self.central.knownDevice(text, adapter: $0) }).first else {
                throw BluetoothError.deviceNotFound("\(TextSafety.escapedForMessage(text)) (no such device object in BlueZ)")
            }
            state.withLock { $0.peripheral = known }
            return known
        }
        if !adapterGiven, try central.knownDevice(text, adapter: adapter) == nil {
            for other in central.adapters where other.powered && other.path != adapter.path {
                if let peripheral = try central.knownDevice(text, adapter: other) {
                    state.withLock {
                        $0.adapter = other
                        $0.peripheral = peripheral
                    }
                    return peripheral
                }
            }
        }
        let scanBudget = deadline.remaining * 0.8
        Trace.log("find \(text) on \(adapter.name) (scan budget \(scanBudget))")
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
    func connect(_ peripheral: Peripheral, options: DeviceCommandOptions, deadline: Deadline) async throws {
        var restarts = 0, drops = 0
        while true {
            do {
                let made = try await central.connect(peripheral, timeout: deadline.remaining, retries: options.retries)
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
                Output.error("\(error.description); waiting for it to come back")
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

/// Refuses DEVICE texts that cannot name a device: empty, an invalid object
/// path, or something shaped like an address that is not one
/// ("AA:BB:CC:DD:EE", "GG:…") — instead of scanning for it as a name.
func checkDeviceText(_ text: String) throws {
    let shown = TextSafety.escapedForMessage(text)
    if text.trimmingWhitespace().isEmpty {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": empty; expected an address (AA:BB:CC:DD:EE:FF), a D-Bus path or a name")
    }
    if text.hasPrefix("/"), !BlueZ.isObjectPath(text) {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": not a valid D-Bus object path")
    }
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    let addressShaped = parts.count >= 3 && parts.allSatisfy { (1...2).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
    if addressShaped, BluetoothAddress(text) == nil {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": not a Bluetooth address (expected six hex bytes, AA:BB:CC:DD:EE:FF)")
    }
}

/// Runs a device command: signals (SIGINT/SIGTERM → cleanup → 130/143),
/// the overall `--timeout` (124), cleanup of what the command set up, and
/// every error as one line with its exit status.
func runDeviceCommand(
    adapterOptions: AdapterOptions, options: DeviceCommandOptions, what: String,
    disconnectAfter: Bool = true,
    _ body: @escaping @Sendable (DeviceSession, Deadline) async throws -> Void
) async throws {
    let seconds = options.timeout
    try await SignalScope.run {
        let deadline = Deadline(seconds: seconds)
        let (central, adapter) = try await adapterOptions.open()
        let session = DeviceSession(central: central, adapter: adapter, adapterGiven: adapterOptions.adapter != nil)
        // The body runs in a task of its own: at the deadline (or a signal) it
        // is cancelled and given a few seconds to undo what it started (a
        // pending Connect is cancelled with Disconnect), never more.
        let work = Task { () -> Result<Void, any Error> in
            do {
                try await body(session, deadline)
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
        let refusal = session.agentRefusal
        await uncancellable {
            let hurry = SignalScope.interrupted
            _ = await firstValue(within: hurry ? .milliseconds(1500) : .seconds(8)) {
                await session.cleanUp(disconnect: disconnectAfter, hurry: hurry)
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

func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
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

/// Parses a UUID option for services.
func parseServiceUUID(_ text: String, option: String) throws -> BluetoothUUID {
    do {
        return try BluetoothUUID(text, kind: .service)
    } catch {
        throw ValidationError("invalid \(option): \(error)")
    }
}

func parseSelector(_ text: String, kind: BluetoothUUID.Kind, what: String) throws -> AttributeSelector {
    do {
        return try AttributeSelector(text, kind: kind)
    } catch {
        throw ValidationError("invalid \(what): \(error)")
    }
}
