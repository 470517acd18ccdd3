import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An `org.bluez.Agent1` so that touching an encrypted characteristic pairs
/// (just works) instead of failing with "No agent available" / ATT error
/// 0x0e. Registered with `AgentManager1.RegisterAgent(path, capability)`;
/// unregistered by `unregister()`.
///
/// BlueZ asks the agent of the client that called `Device1.Pair`, and the
/// *default* agent for pairings it starts itself (security raised after an
/// ATT error). `RequestDefaultAgent` never fails in BlueZ (it pushes the
/// agent on a stack), so asking for it would displace the user's desktop
/// agent, and the default agent answers for every adapter of bluetoothd —
/// including the other side of a pairing when both roles are local (the
/// lab). So by default this agent is not made the default one: when
/// BlueZ's own attempt fails, `Peripheral` calls `Pair`, which this agent
/// answers. `makeDefault: true` asks anyway (errors ignored).
///
/// It accepts only what it was set up for: requests from bluetoothd (the
/// current owner of org.bluez) about the devices in `devices`. Anything else
/// (another device, a PIN or passkey it cannot enter) is answered
/// `org.bluez.Error.Rejected`. With `.keyboardDisplay`, the questions about
/// those devices go to a `Prompter` (bluectl: the controlling terminal),
/// off the bus thread; what it does not accept is rejected.
public final class PairingAgent: Sendable {
    /// What the agent can do (BlueZ's IO capability): it decides the pairing method.
    public enum Capability: String, Sendable {
        /// No input, no output: Just Works only.
        case noInputNoOutput = "NoInputNoOutput"
        /// Can show a number and take yes or no (numeric comparison).
        case displayYesNo = "DisplayYesNo"
        /// Can show and type a passkey.
        case keyboardDisplay = "KeyboardDisplay"
        /// Can type a passkey, show nothing: whatever the device can do, this
        /// side is the one that enters the passkey (or both sides do), so a
        /// passkey known in advance pairs without a person (`Secrets`).
        case keyboardOnly = "KeyboardOnly"
    }

    /// A question for the user (keyboard-display).
    public enum Question: Equatable, Sendable {
        /// "Does the device show this passkey?" (RequestConfirmation)
        case confirmPasskey(UInt32)
        /// Type the passkey the device shows (RequestPasskey).
        case enterPasskey
        /// Type the PIN (RequestPinCode).
        case enterPinCode
        /// Show this passkey; it is typed on the device (DisplayPasskey, `entered` keys so far).
        case displayPasskey(UInt32, entered: UInt16)
        /// Show this PIN (DisplayPinCode).
        case displayPinCode(String)
        /// May the device pair (RequestAuthorization)?
        case authorizePairing
        /// May the device use this service (AuthorizeService)?
        case authorizeService(String)
    }

    /// The user's answer.
    public enum Reply: Equatable, Sendable {
        /// Accept (a confirmation or an authorization).
        case accept
        /// This passkey (0…999999).
        case passkey(UInt32)
        /// This PIN code (legacy pairing).
        case pinCode(String)
        /// Refuse, with a reason for the log.
        case reject(String)
    }

    /// Asks the user about the device with address `device`; may block (it
    /// runs on a thread of its own).
    public typealias Prompter = @Sendable (_ question: Question, _ device: BluetoothAddress) -> Reply

    package let path: ObjectPath
    /// The capability it registered with.
    public let capability: Capability
    private let connection: DBusConnection
    /// What the agent may answer for and what it answered: the loop's (it
    /// answers bluetoothd's calls there).
    private let state: LoopBound<State>

    private struct State {
        var allowed: Set<ObjectPath>
        var log: [String] = []
        var refusal: String?
    }
    private let prompter: Prompter?

    private init(connection: DBusConnection, path: ObjectPath, capability: Capability, devices: Set<ObjectPath>,
                 prompter: Prompter?) {
        self.connection = connection
        self.path = path
        self.capability = capability
        self.prompter = prompter
        state = LoopBound(State(allowed: devices), loop: connection.loop)
    }

    /// Exports an agent on `central`'s connection and registers it with
    /// bluetoothd. It answers only for `peripherals` (and those passed to
    /// `allow(_:)` later); with `makeDefault`, bluetoothd also asks it about
    /// pairings nobody else asked for.
    public static func register(
        central: CentralManager, for peripherals: [Peripheral], capability: Capability = .noInputNoOutput,
        makeDefault: Bool = false, prompter: Prompter? = nil
    ) async throws -> PairingAgent {
        try await register(central: central, devices: Set(peripherals.map(\.path)), capability: capability,
                           makeDefault: makeDefault, prompter: prompter)
    }

    /// `register(central:for:…)` by object path.
    package static func register(
        central: CentralManager, devices: Set<ObjectPath>, capability: Capability = .noInputNoOutput,
        makeDefault: Bool = false, prompter: Prompter? = nil
    ) async throws -> PairingAgent {
        let path = ObjectPath("/org/bluectl/agent\(getpid())") ?? ObjectPath(verified: "/org/bluectl/agent")
        let agent = PairingAgent(connection: central.connection, path: path, capability: capability, devices: devices,
                                 prompter: prompter)
        central.connection.export(path) { [weak agent] message, connection in
            guard let agent else {
                try? connection.send(.error(to: message, name: "org.bluez.Error.Rejected", message: "agent gone"))
                return
            }
            agent.handle(message, connection: connection)
        }
        do {
            _ = try await central.connection.callMethod(
                destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.agentManagerInterface,
                member: "RegisterAgent", arguments: [.objectPath(path), .string(capability.rawValue)],
                timeout: central.callTimeout)
        } catch {
            central.connection.unexport(path)
            throw BluetoothError.from(error, operation: "register the pairing agent")
        }
        Trace.log("agent: registered \(path) (\(capability.rawValue))")
        if makeDefault {
            _ = try? await central.connection.callMethod(
                destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.agentManagerInterface,
                member: "RequestDefaultAgent", arguments: [.objectPath(path)], timeout: central.callTimeout)
        }
        return agent
    }

    /// Also answer requests about `peripheral`.
    public func allow(_ peripheral: Peripheral) { allow(peripheral.path) }

    /// Also accept requests about `device`.
    package func allow(_ device: ObjectPath) {
        state.loop.sync { [self] in _ = state.value.allowed.insert(device) }
    }

    /// What the agent was asked and answered (for diagnostics).
    public var requests: [String] { state.loop.sync { [self] in state.value.log } }

    /// Why the agent last refused a question, if it did.
    public var lastRefusal: String? { state.loop.sync { [self] in state.value.refusal } }

    /// UnregisterAgent and stop serving the object.
    public func unregister(timeout: Duration = .seconds(3)) async {
        _ = try? await connection.callMethod(
            destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.agentManagerInterface,
            member: "UnregisterAgent", arguments: [.objectPath(path)], timeout: timeout)
        connection.unexport(path)
    }

    /// The answer to one Agent1 call; pure apart from the allowed set.
    package enum Answer: Equatable, Sendable {
        case accept
        case reject(String)
        case unknownMethod
        /// Ask the user (keyboard-display only).
        case ask(Question)
    }

    /// On the loop: the answer to one call, with the devices allowed now.
    package func answer(member: String?, interface: String?, arguments: [DBusValue], sender: String?, bluetoothd: String?) -> Answer {
        Self.decide(member: member, interface: interface, arguments: arguments, sender: sender,
                    bluetoothd: bluetoothd, allowed: state.value.allowed, capability: capability)
    }

    /// The policy, pure: only bluetoothd may ask; confirmations and
    /// authorizations only for the allowed devices; PIN and passkey input
    /// only with a capability that has a keyboard (the prompter answers).
    package static func decide(
        member: String?, interface: String?, arguments: [DBusValue], sender: String?, bluetoothd: String?,
        allowed: Set<ObjectPath>, capability: Capability
    ) -> Answer {
        guard interface == nil || interface == "org.bluez.Agent1" else { return .unknownMethod }
        guard let sender, sender == bluetoothd else { return .reject("only bluetoothd may ask this agent") }
        let device = arguments.first?.objectPath
        let known = device.map { allowed.contains($0) } ?? false
        if capability == .keyboardDisplay || capability == .keyboardOnly, let member, member != "Release", member != "Cancel" {
            guard let question = question(member: member, arguments: arguments) else { return .unknownMethod }
            return known ? .ask(question) : .reject("not a device this bluectl run is working with")
        }
        switch member {
        case "Release", "Cancel":
            return .accept
        case "RequestAuthorization", "RequestConfirmation", "AuthorizeService":
            return known ? .accept : .reject("not a device this bluectl run is working with")
        case "DisplayPasskey", "DisplayPinCode":
            return known ? .accept : .reject("not a device this bluectl run is working with")
        case "RequestPinCode", "RequestPasskey":
            return .reject("\(capability.rawValue): cannot enter a PIN or passkey")
        default:
            return .unknownMethod
        }
    }

    /// The question an Agent1 call asks (nil: not an Agent1 question, or malformed arguments).
    static func question(member: String, arguments: [DBusValue]) -> Question? {
        let second = arguments.dropFirst().first
        switch member {
        case "RequestConfirmation": return second?.integer.flatMap(UInt32.init(exactly:)).map { .confirmPasskey($0) }
        case "RequestPasskey": return .enterPasskey
        case "RequestPinCode": return .enterPinCode
        case "DisplayPasskey":
            guard let passkey = second?.integer.flatMap(UInt32.init(exactly:)) else { return nil }
            let entered = arguments.dropFirst(2).first?.integer.flatMap(UInt16.init(exactly:)) ?? 0
            return .displayPasskey(passkey, entered: entered)
        case "DisplayPinCode": return second?.string.map { .displayPinCode($0) }
        case "RequestAuthorization": return .authorizePairing
        case "AuthorizeService": return second?.string.map { .authorizeService($0) }
        default: return nil
        }
    }

    /// Replies to `message` with the user's answer (`question` decides what a reply carries).
    static func reply(_ reply: Reply, question: Question, to message: DBusMessage) -> DBusMessage {
        switch (reply, question) {
        case (.reject(let why), _):
            return .error(to: message, name: "org.bluez.Error.Rejected", message: why)
        case (.passkey(let passkey), .enterPasskey):
            return .methodReturn(to: message, arguments: [.uint32(passkey)])
        case (.pinCode(let pin), .enterPinCode):
            return .methodReturn(to: message, arguments: [.string(pin)])
        case (.accept, .enterPasskey), (.accept, .enterPinCode), (.passkey, _), (.pinCode, _):
            return .error(to: message, name: "org.bluez.Error.Rejected", message: "no answer given")
        case (.accept, _):
            return .methodReturn(to: message)
        }
    }

    private func handle(_ message: DBusMessage, connection: DBusConnection) {
        let answer = answer(
            member: message.member, interface: message.interface, arguments: message.arguments,
            sender: message.sender, bluetoothd: connection.owner(of: BlueZ.service))
        let device = message.arguments.first?.objectPath?.rawValue ?? "-"
        state.value.log.append("\(message.member ?? "?") \(device) → \(answer)")
        Trace.log("agent: \(message.member ?? "?") \(device) → \(answer)")
        guard !message.noReplyExpected else { return }
        switch answer {
        case .ask(let question):
            guard let prompter else {
                try? connection.send(.error(to: message, name: "org.bluez.Error.Rejected", message: "nobody to ask"))
                return
            }
            let device = message.arguments.first?.objectPath ?? path
            // The user may take a while: never on the loop; the answer goes back to it.
            startThread(name: "bluectl-prompt") { [self] in
                let reply = prompter(question, DeviceInfo.addressFromPath(device))
                connection.loop.execute { [self] in
                    state.value.log.append("\(question) → \(reply)")
                    if case .reject(let why) = reply { state.value.refusal = why }
                    try? connection.send(Self.reply(reply, question: question, to: message))
                }
            }
        case .accept:
            try? connection.send(.methodReturn(to: message))
        case .reject(let why):
            state.value.refusal = why
            try? connection.send(.error(to: message, name: "org.bluez.Error.Rejected", message: why))
        case .unknownMethod:
            try? connection.send(.error(
                to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                message: "no method \(message.member ?? "?") on \(message.interface ?? "?")"))
        }
    }
}
