/// Pairing without a person: the passkey or PIN code a script knows in
/// advance (a device's fixed passkey, printed on it or set in its firmware).
///
/// The agent registers with `capability`, so that BlueZ asks it to *enter*
/// the passkey rather than to show one the kernel picked at random (which no
/// script could know); `prompter` answers those questions from the secrets.
/// Example:
///
/// ```swift
/// let secrets = PairingAgent.Secrets(passkey: 123456)
/// let agent = try await PairingAgent.register(central: central, for: [peripheral],
///                                             capability: secrets.capability, prompter: secrets.prompter)
/// try await peripheral.pair()
/// await agent.unregister()
/// ```
extension PairingAgent {
    /// The answers to give when BlueZ asks for a passkey or a PIN code.
    public struct Secrets: Sendable, Equatable {
        /// The six-digit passkey (0…999999), entered when BlueZ asks for one
        /// and the only one a confirmation accepts.
        public var passkey: UInt32?
        /// The PIN code of legacy (BR/EDR) pairing.
        public var pinCode: String?

        /// Secrets with a passkey, a PIN code, or both; a passkey above 999999 is not one.
        public init(passkey: UInt32? = nil, pinCode: String? = nil) {
            self.passkey = passkey.flatMap { $0 <= 999_999 ? $0 : nil }
            self.pinCode = pinCode
        }

        /// The capability that has BlueZ ask for these: KeyboardOnly (this
        /// side types; the device shows its passkey, or types it too).
        public var capability: Capability { .keyboardOnly }

        /// The reply these secrets give to `question`, nil when they have
        /// none (for a prompter that asks a person the rest).
        public func reply(to question: Question) -> Reply? {
            switch question {
            case .enterPasskey:
                return passkey.map { .passkey($0) }
            case .enterPinCode:
                return pinCode.map { .pinCode($0) }
            case .confirmPasskey(let shown):
                guard let passkey else { return nil }
                return shown == passkey
                    ? .accept : .reject("the passkey to confirm (\(PairingAgent.passkeyText(shown))) is not the one given")
            default:
                return nil
            }
        }

        /// Answers every question without a person: the secrets where they
        /// apply; accepts what needs no secret (showing a passkey or PIN
        /// the device types, authorizing the pairing or a service — the
        /// agent asks only about the devices it was registered for);
        /// rejects, saying why, a secret it was not given.
        public var prompter: Prompter {
            let secrets = self
            return { question, _ in
                if let reply = secrets.reply(to: question) { return reply }
                switch question {
                case .enterPasskey: return .reject("the device asks for a passkey and none was given")
                case .enterPinCode: return .reject("the device asks for a PIN code and none was given")
                case .confirmPasskey(let shown): return .reject("no passkey was given to confirm \(PairingAgent.passkeyText(shown)) against")
                case .displayPasskey, .displayPinCode, .authorizePairing, .authorizeService: return .accept
                }
            }
        }

    }

    /// A passkey as devices show it: six digits, zeros in front (the terminal's questions too).
    package static func passkeyText(_ passkey: UInt32) -> String {
        let digits = String(passkey)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}
