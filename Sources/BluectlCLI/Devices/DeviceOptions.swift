// The options and arguments every device command shares, and their checks.

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
        "Seconds for finding the device, connecting and the operation (default 30); for subscribe, each set-up, not the notifications.",
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

    @Option(help: ArgumentHelp(
        "The device's passkey (6 digits) for pairing without a person, or @FILE holding it (else $BLUECTL_PASSKEY).",
        valueName: "PASSKEY"))
    var passkey: String?

    @Option(help: ArgumentHelp("The device's PIN code (legacy pairing), or @FILE holding it (else $BLUECTL_PIN).", valueName: "PIN"))
    var pin: String?

    /// How pairing questions are answered: `--agent` with the passkey or PIN
    /// given (read here, so that a file or variable is read once, before
    /// anything else).
    func pairing() throws(CLIFailure) -> PairingSetup {
        try PairingSetup.resolve(agent: agent, passkey: passkey, pin: pin)
    }

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
        passkey = nil
        pin = nil
    }
}

/// Tab completion of a DEVICE argument: the addresses of the devices BlueZ
/// knows (`CentralManager.devices(on:)`), asked of the system bus by bluectl
/// when the shell calls it back (`bluectl ---completion …`), one second at
/// most; nothing when there is no bus or no bluetoothd.
let deviceCompletion = CompletionKind.custom { (_: [String], _: Int, _: String) async -> [String] in
    await knownDeviceAddresses(within: .seconds(1))
}

/// Tab completion of `--adapter` (and `adapter`'s hciN): the adapters
/// BlueZ has, asked as `deviceCompletion` asks for devices.
let adapterCompletion = CompletionKind.custom { (_: [String], _: Int, _: String) async -> [String] in
    await askedOfBluez(within: .seconds(1)) { central in central.adapters.map(\.name).sorted() }
}

/// The addresses of the devices BlueZ knows, sorted; none when the bus or
/// bluetoothd does not answer within `limit`.
func knownDeviceAddresses(within limit: Duration) async -> [String] {
    await askedOfBluez(within: limit) { central in Set(central.devices().map(\.address)).sorted().map(\.description) }
}

/// What `question` reads of BlueZ on the system bus for a completion (on the
/// central's loop); none when the bus or bluetoothd does not answer within `limit`.
private func askedOfBluez(within limit: Duration, _ question: @escaping @Sendable (CentralManager) -> [String]) async -> [String] {
    await Deadline(after: limit).run { () async -> [String] in
        guard let central = try? await CentralManager.open(callTimeout: limit) else { return [] }
        defer { central.close() }
        return await central.onLoop { question(central) }
    } ?? []
}

enum AgentChoice: String, ExpressibleByArgument, Sendable, CaseIterable {
    case noInputNoOutput = "no-input-no-output"
    /// Passkeys, PINs and confirmations asked on the controlling terminal.
    case keyboardDisplay = "keyboard-display"
    case none
}

/// Refuses DEVICE texts that cannot name a device, instead of scanning for
/// them as a name: empty; an invalid object path; something shaped like an
/// address that is not one ("AA:BB", "AA:BB:CC:DD:EE", "GG:…"); text that is not
/// valid UTF-8 (the shell's argument, decoded with U+FFFD in its place) or
/// holds control characters; longer than the 248 bytes a device name can have.
func checkDeviceText(_ text: String) throws {
    let shown = TextSafety.escapedForMessage(text)
    if text.trimmingWhitespace().isEmpty {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": empty; expected an address (AA:BB:CC:DD:EE:FF), a D-Bus path or a name")
    }
    if text.hasPrefix("/"), !BlueZ.isObjectPath(text) {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": not a valid D-Bus object path")
    }
    let parts = text.split(separator: ":", omittingEmptySubsequences: false)
    let addressShaped = parts.count >= 2 && parts.allSatisfy { (1...2).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
    if addressShaped, BluetoothAddress(text) == nil {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": not a Bluetooth address (expected six hex bytes, AA:BB:CC:DD:EE:FF)")
    }
    if text.unicodeScalars.contains("\u{FFFD}") {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": not valid UTF-8, so not a name BlueZ could report")
    }
    if TextSafety.hasControlCharacters(text) {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": holds control characters, so not a name BlueZ could report")
    }
    if text.utf8.count > maxDeviceNameBytes {
        throw CLIFailure(.usage, "invalid DEVICE \"\(shown)\": \(text.utf8.count) bytes, longer than a device name can be (\(maxDeviceNameBytes))")
    }
}

/// The longest device name (Core Specification, GAP: the Device Name
/// characteristic holds at most 248 octets).
let maxDeviceNameBytes = 248

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
