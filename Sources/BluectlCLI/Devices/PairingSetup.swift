import BluectlCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a device command answers BlueZ's pairing questions: the agent chosen
/// with `--agent`, and the passkey or PIN code given for pairing without a
/// person (`--passkey`, `--pin`, each also `@FILE`, else `$BLUECTL_PASSKEY`
/// and `$BLUECTL_PIN`: neither then shows in `ps`).
struct PairingSetup: Sendable, Equatable {
    var agent: AgentChoice
    /// nil when no passkey or PIN was given.
    var secrets: PairingAgent.Secrets?

    /// The environment variables read when the option is not given.
    static let passkeyVariable = "BLUECTL_PASSKEY", pinVariable = "BLUECTL_PIN"

    /// The set-up the options ask for, the secrets read from where they were given.
    /// Exit 64 for a passkey that is not six digits, a PIN that is empty,
    /// longer than 16 bytes or holds control characters, a file that cannot be
    /// read, or a secret with `--agent none`; 78 for a file others may read.
    static func resolve(agent: AgentChoice, passkey: String?, pin: String?,
                        environment: [String: String] = ProcessInfo.processInfo.environment) throws(CLIFailure) -> PairingSetup {
        let passkeyText = try secret(passkey, option: "--passkey", variable: passkeyVariable, environment: environment)
        let pinText = try secret(pin, option: "--pin", variable: pinVariable, environment: environment)
        guard passkeyText != nil || pinText != nil else { return PairingSetup(agent: agent, secrets: nil) }
        if agent == .none {
            // what the environment holds is ambient: only options given on this command line conflict
            guard passkey == nil && pin == nil else {
                throw CLIFailure(.usage, "--passkey and --pin need an agent to answer with them; --agent none was given")
            }
            return PairingSetup(agent: agent, secrets: nil)
        }
        var secrets = PairingAgent.Secrets()
        if let (text, source) = passkeyText {
            guard text.utf8.count == 6, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = UInt32(text) else {
                throw CLIFailure(.usage, "invalid passkey (\(source)): expected the device's 6-digit passkey, 000000 to 999999")
            }
            secrets.passkey = value
        }
        if let (text, source) = pinText {
            guard (1...16).contains(text.utf8.count), !TextSafety.hasControlCharacters(text) else {
                throw CLIFailure(.usage, "invalid PIN code (\(source)): expected 1 to 16 bytes, no control characters")
            }
            secrets.pinCode = text
        }
        return PairingSetup(agent: agent, secrets: secrets)
    }

    /// The text of one secret and where it came from ("--passkey", "the file F",
    /// "$BLUECTL_PASSKEY"): the option's value, or the first line of the file
    /// an `@FILE` value names, else the environment variable; nil when none.
    private static func secret(_ given: String?, option: String, variable: String,
                               environment: [String: String]) throws(CLIFailure) -> (String, String)? {
        guard let given else {
            return environment[variable].flatMap { $0.isEmpty ? nil : ($0, "$\(variable)") }
        }
        guard given.hasPrefix("@") else { return (given, option) }
        let path = String(given.dropFirst())
        let bytes = try PrivateFile.read(path, what: "the \(option) file")
        let line = bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        let text = String(decoding: line, as: UTF8.self).trimmingWhitespace(newlines: true)
        return (text, "\(option) @\(TextSafety.escapedForMessage(path, limit: 1024))")
    }

    /// Registers the agent this set-up asks for, answering only about `peripheral`:
    /// with secrets, one that types them (KeyboardOnly; with `keyboard-display`,
    /// the terminal answers what they do not); else the `--agent` chosen.
    func register(for peripheral: Peripheral, central: CentralManager) async -> PairingAgent? {
        let capability: PairingAgent.Capability
        let prompter: PairingAgent.Prompter?
        switch (agent, secrets) {
        case (.none, _):
            return nil
        case (.keyboardDisplay, let secrets):
            capability = .keyboardDisplay
            prompter = { question, device in secrets?.reply(to: question) ?? TerminalPrompter.ask(question, device: device) }
        case (.noInputNoOutput, let secrets?):
            (capability, prompter) = (secrets.capability, secrets.prompter)
        case (.noInputNoOutput, nil):
            (capability, prompter) = (.noInputNoOutput, nil)
        }
        return try? await PairingAgent.register(central: central, for: [peripheral], capability: capability, prompter: prompter)
    }
}
