import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `--agent keyboard-display`: the pairing agent's questions, asked on the
/// controlling terminal (/dev/tty — stdin and stdout may be pipes). Without
/// a terminal every question is refused, saying so.
enum TerminalPrompter {
    static func ask(_ question: PairingAgent.Question, device who: BluetoothAddress) -> PairingAgent.Reply {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            return .reject("no terminal to ask on for --agent keyboard-display (/dev/tty: \(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        switch question {
        case .confirmPasskey(let passkey):
            return yes(fd, "bluectl: confirm passkey \(PairingAgent.passkeyText(passkey)) for \(who) (yes/no): ")
                ? .accept : .reject("passkey not confirmed at the terminal")
        case .enterPasskey:
            guard let text = prompt(fd, "bluectl: enter the passkey \(who) shows: ") else { return .reject("no passkey entered") }
            guard let value = UInt32(text), value <= 999_999 else {
                return .reject("not a passkey (0 to 999999): \"\(TextSafety.escapedForMessage(text))\"")
            }
            return .passkey(value)
        case .enterPinCode:
            guard let text = prompt(fd, "bluectl: enter the PIN code for \(who): ") else { return .reject("no PIN code entered") }
            guard (1...16).contains(text.utf8.count), text.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                return .reject("not a PIN code (1 to 16 characters)")
            }
            return .pinCode(text)
        case .displayPasskey(let passkey, let entered):
            say(fd, "bluectl: passkey for \(who): \(PairingAgent.passkeyText(passkey))\(entered > 0 ? " (\(entered) typed)" : ""); type it on the device\n")
            return .accept
        case .displayPinCode(let pin):
            say(fd, "bluectl: PIN code for \(who): \(TextSafety.terminalSafe(pin)); type it on the device\n")
            return .accept
        case .authorizePairing:
            return yes(fd, "bluectl: allow \(who) to pair (yes/no): ") ? .accept : .reject("pairing not allowed at the terminal")
        case .authorizeService(let uuid):
            let label = (try? BluetoothUUID(uuid)).map(\.label) ?? TextSafety.escapedForMessage(uuid)
            return yes(fd, "bluectl: allow \(who) to use service \(label) (yes/no): ")
                ? .accept : .reject("service not authorized at the terminal")
        }
    }

    static func say(_ fd: Int32, _ text: String) {
        var text = text
        _ = text.withUTF8 { Output.writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    static func yes(_ fd: Int32, _ question: String) -> Bool {
        guard let answer = prompt(fd, question)?.lowercased() else { return false }
        return answer == "y" || answer == "yes"
    }

    /// Writes `question`, reads one line (trimmed); nil at end of input.
    static func prompt(_ fd: Int32, _ question: String) -> String? {
        say(fd, question)
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < 256 {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == 0x0a { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self).trimmingWhitespace(newlines: true)
    }
}
