import BluectlDBus
import Foundation

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
/// `org.bluez.Error.Rejected`.
public final class PairingAgent: Sendable {
    public enum Capability: String, Sendable {
        case noInputNoOutput = "NoInputNoOutput"
        case displayYesNo = "DisplayYesNo"
    }

    public let path: ObjectPath
    public let capability: Capability
    private let connection: DBusConnection
    private let allowed: Locked<Set<ObjectPath>>
    private let log: Locked<[String]>

    private init(connection: DBusConnection, path: ObjectPath, capability: Capability, devices: Set<ObjectPath>) {
        self.connection = connection
        self.path = path
        self.capability = capability
        allowed = Locked(devices)
        log = Locked([])
    }

    /// Exports the agent and registers it with bluetoothd.
    public static func register(
        central: CentralManager, devices: Set<ObjectPath>, capability: Capability = .noInputNoOutput,
        makeDefault: Bool = false
    ) async throws -> PairingAgent {
        let path = ObjectPath("/org/bluectl/agent\(getpid())") ?? ObjectPath(verified: "/org/bluectl/agent")
        let agent = PairingAgent(connection: central.connection, path: path, capability: capability, devices: devices)
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
            throw CentralError.from(error, operation: "register the pairing agent")
        }
        if makeDefault {
            _ = try? await central.connection.callMethod(
                destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.agentManagerInterface,
                member: "RequestDefaultAgent", arguments: [.objectPath(path)], timeout: central.callTimeout)
        }
        return agent
    }

    /// Also accept requests about `device`.
    public func allow(_ device: ObjectPath) {
        _ = allowed.withLock { $0.insert(device) }
    }

    /// What the agent was asked and answered (for diagnostics).
    public var requests: [String] { log.withLock { $0 } }

    /// UnregisterAgent and stop serving the object.
    public func unregister(timeout: Duration = .seconds(3)) async {
        _ = try? await connection.callMethod(
            destination: BlueZ.service, path: BlueZ.root, interface: BlueZ.agentManagerInterface,
            member: "UnregisterAgent", arguments: [.objectPath(path)], timeout: timeout)
        connection.unexport(path)
    }

    /// The answer to one Agent1 call; pure apart from the allowed set.
    public enum Answer: Equatable, Sendable {
        case accept
        case reject(String)
        case unknownMethod
    }

    public func answer(member: String?, interface: String?, arguments: [DBusValue], sender: String?, bluetoothd: String?) -> Answer {
        let allowedNow = allowed.withLock { $0 }
        return Self.decide(member: member, interface: interface, arguments: arguments, sender: sender,
                           bluetoothd: bluetoothd, allowed: allowedNow, capability: capability)
    }

    /// The policy, pure: only bluetoothd may ask; confirmations and
    /// authorizations only for the allowed devices; no PIN or passkey input.
    public static func decide(
        member: String?, interface: String?, arguments: [DBusValue], sender: String?, bluetoothd: String?,
        allowed: Set<ObjectPath>, capability: Capability
    ) -> Answer {
        guard interface == nil || interface == "org.bluez.Agent1" else { return .unknownMethod }
        guard let sender, sender == bluetoothd else { return .reject("only bluetoothd may ask this agent") }
        let device = arguments.first?.objectPath
        let known = device.map { allowed.contains($0) } ?? false
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

    private func handle(_ message: DBusMessage, connection: DBusConnection) {
        let answer = answer(
            member: message.member, interface: message.interface, arguments: message.arguments,
            sender: message.sender, bluetoothd: connection.owner(of: BlueZ.service))
        let device = message.arguments.first?.objectPath?.rawValue ?? "-"
        log.withLock { $0.append("\(message.member ?? "?") \(device) → \(answer)") }
        guard !message.noReplyExpected else { return }
        switch answer {
        case .accept:
            try? connection.send(.methodReturn(to: message))
        case .reject(let why):
            try? connection.send(.error(to: message, name: "org.bluez.Error.Rejected", message: why))
        case .unknownMethod:
            try? connection.send(.error(
                to: message, name: "org.freedesktop.DBus.Error.UnknownMethod",
                message: "no method \(message.member ?? "?") on \(message.interface ?? "?")"))
        }
    }
}
