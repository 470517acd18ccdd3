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

/// The `bluectl` command.
public struct Bluectl: AsyncParsableCommand {
    public static let version = "0.1.0"

    public static let configuration = CommandConfiguration(
        commandName: "bluectl",
        abstract: "Bluetooth Low Energy for Linux, central and peripheral, over BlueZ's D-Bus API.",
        discussion: "Exit codes: \(ExitStatus.summary).",
        version: version,
        subcommands: [AdaptersCommand.self, AdapterCommand.self, ScanCommand.self, DevicesCommand.self, ConnectCommand.self,
                      DisconnectCommand.self, PairCommand.self, UnpairCommand.self, RemoveCommand.self, TrustCommand.self, UntrustCommand.self,
                      BlockCommand.self, UnblockCommand.self, InfoCommand.self, DiscoverCommand.self, ReadCommand.self,
                      WriteCommand.self, SubscribeCommand.self, ServeCommand.self, AdvertiseCommand.self, L2CAPCommand.self,
                      GatewayCommand.self, ProxyCommand.self]
    )

    public init() {}

    /// The process's own memory settings (`MemoryFootprint`: malloc arenas, no transparent
    /// huge pages), made on the main thread before `runMain`, while no other thread exists:
    /// `runMain` runs on a thread of the task pool, whose stack may already have been given
    /// a huge page by then (one was, in the lab).
    public static func prepareProcess() {
        MemoryFootprint.limit()
    }

    /// Parses and runs; every error becomes one line on stderr and a
    /// documented exit status. Help and --version print as usual.
    public static func runMain(arguments: [String]? = nil) async -> Never {
        Diagnostics.bootstrap()
        let given = arguments ?? Array(CommandLine.arguments.dropFirst())
        do {
            if let unknown = UsageHints.unknownHelpTopic(given) { throw CLIFailure(.usage, unknown) }
            // async parsing: the DEVICE arguments' completion asks the bus (deviceCompletion)
            var command: any ParsableCommand
            if let direct = await parseSubcommandDirectly(given) {
                command = direct
            } else {
                command = try await asyncParseAsRoot(arguments)
            }
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit(withError: nil)
        } catch let failure as CLIFailure {
            if !failure.message.isEmpty { Output.error(TextSafety.oneLine(failure.message)) }
            terminate(failure.status.rawValue)
        } catch let error as BluetoothError {
            // as a device command reports it: with what to do, where there is something
            let failure = CLIFailure(error)
            Output.error(TextSafety.oneLine(failure.message))
            terminate(failure.status.rawValue)
        } catch {
            let code = exitCode(for: error)
            if let help = helpText(for: error, columns: HelpLayout.columns()) {
                print(help)
                exit(withError: nil)
            }
            if code == .success || error is CleanExit {
                exit(withError: error)
            }
            let message = message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            Output.error(UsageHints.styled(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message, arguments: given))
            terminate(code == .validationFailure ? ExitStatus.usage.rawValue : code.rawValue)
        }
    }
}

extension Bluectl {
    /// The subcommand called `name` (or by that alias).
    static func subcommand(named name: String) -> ParsableCommand.Type? {
        configuration.subcommands.first { $0.configuration.commandName == name || $0.configuration.aliases.contains(name) }
    }

    /// Every subcommand's name (each sets its own `commandName`).
    static var subcommandNames: [String] {
        configuration.subcommands.compactMap { $0.configuration.commandName }
    }

    /// What `bluectl SUB --help` and `bluectl help SUB` print: ArgumentParser's
    /// help for SUB laid out as bluectl's (HelpLayout: its examples last).
    /// nil for any other clean exit (--version, the root's help).
    static func helpText(for error: Error, columns: Int) -> String? {
        guard exitCode(for: error) == .success,
              let usage = message(for: error).split(separator: "\n").first(where: { $0.hasPrefix("USAGE: bluectl ") }),
              let name = usage.split(separator: " ").dropFirst(2).first, let sub = subcommand(named: String(name))
        else { return nil }
        return HelpLayout.examplesLast(helpMessage(for: sub, columns: columns), columns: columns)
    }

    /// `bluectl SUB …` parsed by the subcommand's type alone. Parsing from the
    /// root reflects over every subcommand's options (and looks for a completion
    /// script request among them): over half of a one-shot `read`'s
    /// instructions. Anything this does not parse cleanly — help, --version,
    /// a usage error — returns nil and goes through the root as before, so
    /// messages and exit codes stay the root's.
    static func parseSubcommandDirectly(_ arguments: [String]) async -> (any ParsableCommand)? {
        // help goes through the root, so its usage line names the tool ("bluectl scan …")
        guard let name = arguments.first, !arguments.contains(where: { ["-h", "--help", "help"].contains($0) }),
              let subcommand = subcommand(named: name) as? AsyncParsableCommand.Type
        else { return nil }
        return try? await subcommand.asyncParseAsRoot(Array(arguments.dropFirst()))
    }
}

/// `--adapter`: every command that works on one adapter takes it (`devices`
/// its own, `AdapterFilter`: it lists every adapter's devices without it).
struct AdapterChoice: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Adapter to use, e.g. hci0 (default: the first powered one, else the first).",
                                            valueName: "hciN"), completion: adapterCompletion)
    var adapter: String?

    func validate() throws { try Self.check(adapter) }

    /// Refuses an adapter name that is not hciN.
    static func check(_ adapter: String?) throws {
        if let adapter, !AdapterOptions.isAdapterName(adapter) {
            throw ValidationError("invalid adapter name \"\(TextSafety.escapedForMessage(adapter))\": expected hciN, e.g. hci0")
        }
    }
}

/// `devices --adapter`: only that adapter's devices (without it, every adapter's).
struct AdapterFilter: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Only this adapter's devices, e.g. hci0 (default: every adapter).", valueName: "hciN"),
            completion: adapterCompletion)
    var adapter: String?

    func validate() throws { try AdapterChoice.check(adapter) }
}

/// `--adapter` and `--power-on`: the commands that may need the radio on, to
/// scan, connect or advertise (`unpair`/`remove` take only `AdapterChoice`:
/// they never do).
struct AdapterOptions: ParsableArguments {
    @OptionGroup var choice: AdapterChoice

    @Flag(name: .long, help: "Power the adapter on if it is off.")
    var powerOn = false

    var adapter: String? { choice.adapter }

    init() {}

    /// The options of a command that does not offer --power-on.
    init(_ choice: AdapterChoice) {
        self.choice = choice
        powerOn = false
    }

    static func isAdapterName(_ text: String) -> Bool {
        guard text.hasPrefix("hci"), text.count > 3, text.count <= 8 else { return false }
        return text.dropFirst(3).allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// Opens the central and picks the adapter, powering it on when asked
    /// (and failing when it is off, if the command needs it on).
    func open(callTimeout: Duration = .seconds(25), requirePowered: Bool = true) async throws -> (CentralManager, AdapterInfo) {
        let central = try await CentralManager.open(callTimeout: callTimeout)
        do {
            let adapter = self.adapter
            var chosen = try await central.adapterOnLoop(named: adapter)
            if !chosen.powered, requirePowered || powerOn {
                guard powerOn else { throw BluetoothError.adapterPoweredOff(chosen.name) }
                try await central.setPowered(true, adapter: chosen, timeout: .seconds(10))
                let name = chosen.name
                chosen = try await central.adapterOnLoop(named: name)
            }
            return (central, chosen)
        } catch {
            central.close()
            throw error
        }
    }
}

/// Parses --timeout values: a positive number of seconds.
func parseSeconds(_ text: String, option: String) throws -> Double {
    guard let value = Double(text), value.isFinite, value > 0, value <= 31_536_000 else {
        throw ValidationError("invalid \(option) \"\(TextSafety.escapedForMessage(text))\": expected a positive number of seconds")
    }
    return value
}

extension CentralManager {
    /// The adapter `name` (nil: the default) as BlueZ exports it now, read on the central's
    /// loop: no thread of the task's pool blocked, as the synchronous `adapter(named:)` would.
    func adapterOnLoop(named name: String?) async throws(BluetoothError) -> AdapterInfo {
        try await onLoop { [self] in Result { () throws(BluetoothError) in try adapter(named: name) } }.get()
    }
}
