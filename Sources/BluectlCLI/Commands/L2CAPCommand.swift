import ArgumentParser
import BluectlCore

/// `bluectl l2cap connect DEVICE PSM` and `bluectl l2cap listen [PSM]`:
/// netcat over an LE L2CAP connection-oriented channel. One command with a
/// mode argument (not two subcommands), so it takes the options every
/// device command takes, defined once.
struct L2CAPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "l2cap",
        abstract: "Open an L2CAP channel to a device's PSM, or listen on one: stdin to the channel, the channel to stdout.",
        discussion: """
            connect DEVICE PSM: connects (through bluetoothd when the link is down), opens the \
            channel, then copies stdin to it and it to stdout. listen [PSM]: listens on the adapter \
            (PSM omitted: the kernel picks a free one from 0x0080-0x00FF, printed on stderr), serves \
            one channel (--keep: one after another). PSM: decimal or 0x-hex, 1-255 (LE PSMs). The \
            end of stdin sends what was read, then closes the channel (L2CAP has no half-close); \
            the peer's close ends the command with 0. Events (listening, connected, accepted, \
            closed with byte counts) go to stderr, as JSON lines with --json. --security: low \
            (none), medium (encrypted; pairs when needed), high (authenticated: MITM-protected key).

            Examples:
              bluectl l2cap listen --adapter hci1 > received.bin
              bluectl l2cap connect AA:BB:CC:DD:EE:FF 0x80 < firmware.bin
              bluectl l2cap connect "My Sensor" 128 --security medium --json
            """)

    /// What the command does.
    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case connect, listen
    }

    @OptionGroup var adapterOptions: AdapterOptions
    @OptionGroup var options: DeviceCommandOptions

    @Argument(help: ArgumentHelp("connect or listen.", valueName: "MODE"))
    var mode: Mode

    @Argument(help: ArgumentHelp("connect: DEVICE PSM (an address, D-Bus path or name; the PSM). listen: [PSM].",
                                 valueName: "ARGS"))
    var targets: [String] = []

    @Option(help: ArgumentHelp("Security the channel needs: low, medium (encrypted) or high (authenticated).",
                               valueName: "LEVEL"))
    var security: SecurityChoice = .low

    @Flag(help: "listen: serve channels one after another until interrupted (default: one).")
    var keep = false

    @Flag(name: .customLong("no-stdin"), help: "Do not read stdin: only receive, until the peer closes the channel.")
    var noStdin = false

    @Option(parsing: .unconditional, help: ArgumentHelp("After stdin's end and everything sent, keep the channel open up to SECONDS for the peer to read it all and close first (default 0).",
                               valueName: "SECONDS"))
    var linger: String?

    @Flag(help: "Events on stderr as JSON lines.")
    var json = false

    /// `--security`'s levels, named as the kernel's BT_SECURITY levels.
    enum SecurityChoice: String, ExpressibleByArgument, CaseIterable {
        case low, medium, high

        var level: L2CAPSecurity {
            switch self {
            case .low: return .none
            case .medium: return .encrypted
            case .high: return .authenticated
            }
        }
    }

    /// The checked arguments: the device (connect only) and the PSM (nil: listen on a dynamic one).
    func parsedTargets() throws -> (device: String?, psm: L2CAPPSM?) {
        switch mode {
        case .connect:
            guard targets.count == 2 else {
                throw ValidationError("l2cap connect takes DEVICE PSM (got \(targets.count) argument\(targets.count == 1 ? "" : "s"))")
            }
            return (targets[0], try Self.psm(targets[1]))
        case .listen:
            guard targets.count <= 1 else { throw ValidationError("l2cap listen takes at most one PSM (got \(targets.count) arguments)") }
            return (nil, try targets.first.map(Self.psm))
        }
    }

    /// The next channel, waiting at most `seconds` (nil: as long as it takes).
    private static func accept(_ listener: L2CAPListener, within seconds: Double?) async throws -> L2CAPChannel {
        guard let seconds else { return try await listener.accept() }
        let attempt = { @Sendable () async -> Result<L2CAPChannel, any Error> in
            do { return .success(try await listener.accept()) } catch { return .failure(error) }
        }
        guard let result = await Deadline(seconds: seconds).run(attempt) else {
            throw BluetoothError.timeout("no channel opened to \(listener.adapter) PSM \(listener.psm) within \(seconds) s")
        }
        return try result.get()
    }

    /// `--linger` (0 when not given); 0 is allowed, unlike a timeout.
    func lingerDuration() throws -> Duration {
        guard let linger, linger != "0" else { return .zero }
        return .milliseconds(Int64(try parseSeconds(linger, option: "--linger") * 1000))
    }

    private static func psm(_ text: String) throws -> L2CAPPSM {
        do {
            return try L2CAPPSM.parse(text)
        } catch {
            throw ValidationError(TextSafety.oneLine(error.description))
        }
    }

    func validate() throws {
        _ = try parsedTargets()
        if keep, mode == .connect { throw ValidationError("--keep is for l2cap listen") }
        _ = try lingerDuration()
    }

    func run() async throws {
        let (device, psm) = try parsedTargets()
        let events = L2CAPEvents(json: json)
        let readsStdin = !noStdin
        let linger = try lingerDuration()
        let security = self.security.level
        switch mode {
        case .connect:
            guard let device, let psm else { return }   // parsedTargets gives both for connect
            // --timeout bounds finding, connecting and opening; the transfer runs until an end.
            let setup = options.timeout
            var streamOptions = options
            streamOptions.deadline.text = String(31_536_000)
            let options = self.options
            try await runDeviceCommand(adapterOptions: adapterOptions, options: streamOptions,
                                       what: "open an L2CAP channel to PSM \(psm) of \(device)") { session, _ in
                let deadline = Deadline(seconds: setup)
                let peripheral = try await session.find(device, deadline: deadline)
                session.registerAgent(for: peripheral)
                try await session.connect(peripheral, options: options, deadline: deadline)
                let channel = try await peripheral.openL2CAPChannel(psm, security: security, timeout: deadline.remaining)
                events.opened(channel, accepted: false)
                _ = try await L2CAPPump(channel: channel, central: session.central, events: events).run(readingStdin: readsStdin, linger: linger)
            }
        case .listen:
            let (adapterOptions, keep) = (self.adapterOptions, self.keep)
            // --timeout, when given, bounds each wait for a channel; else listen waits as long as it takes.
            let wait = options.deadline.text.map { _ in options.timeout }
            try await SignalScope.run {
                let (central, adapter) = try await adapterOptions.open()
                defer { central.close() }
                let manager = PeripheralManager(central: central, adapter: adapter)
                let listener = try await manager.publishL2CAPChannel(psm: psm, security: security)
                events.listening(listener)
                var stdinOpen = readsStdin
                repeat {
                    let channel = try await Self.accept(listener, within: wait)
                    events.opened(channel, accepted: true)
                    let pump = L2CAPPump(channel: channel, central: central, events: events)
                    let stdinEnded = try await pump.run(readingStdin: stdinOpen, linger: linger)
                    // a later channel (--keep) only receives once stdin has ended
                    if stdinEnded { stdinOpen = false }
                } while keep
                await listener.close()
            }
        }
    }
}
