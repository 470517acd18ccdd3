import ArgumentParser
import BluectlCore
import BluectlGateway
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `bluectl gateway`: publish every advertisement an adapter hears to an MQTT broker.
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Publish the advertisements an adapter hears to an MQTT broker, until Ctrl-C or SIGTERM.",
        discussion: """
            Each device's latest advertisement goes to bluectl/ID/devices/MAC (retained, QoS 1) as the record \
            `scan --json` prints, with "gateway": ID; a frame heard again unchanged (RSSI aside) is not sent again. \
            bluectl/ID/status holds "online", and "offline" once the gateway stops or is lost (the broker's last will). \
            A broker that cannot be reached is not an error: readings wait on disk (under $STATE_DIRECTORY, else \
            $XDG_STATE_HOME/bluectl, else ~/.local/state/bluectl) and go out in order when it is back, also after a \
            crash. bluetoothd restarting and the adapter powered off and on are survived, and a scan that hears \
            nothing for --scan-watchdog seconds is restarted (then the adapter power-cycled); each is an event on \
            bluectl/ID/events. Topics, payloads and buffering: docs/gateway.md.

            Examples:
              bluectl gateway --broker mqtt://localhost
              bluectl gateway --broker mqtt://broker.lan:1884 --id kitchen --adapter hci1
              bluectl gateway --broker mqtts://mq.lan --ca ca.pem --home-assistant
            """)

    @Option(help: ArgumentHelp("The broker: mqtt://HOST[:PORT] (port 1883) or mqtts://HOST[:PORT] (TLS, port 8883).", valueName: "URL"))
    var broker: String

    @Option(help: ArgumentHelp("This gateway's name in its topics and its MQTT client id (default: the host name).", valueName: "NAME"))
    var id: String?

    @Option(help: ArgumentHelp("bluectl (topics bluectl/ID/..., scan's records) or theengs (Theengs Gateway's topics and fields).",
                               valueName: "LAYOUT"))
    var layout: String = "bluectl"

    @Flag(name: .customLong("home-assistant"), help: "Publish Home Assistant's MQTT discovery configs for decoded sensor readings and GATT values.")
    var homeAssistant = false

    @Option(help: ArgumentHelp("With mqtts://: the CA certificates (PEM) that sign the broker's (default: the system's).",
                               valueName: "FILE"), completion: .file())
    var ca: String?

    @Option(help: ArgumentHelp("With mqtts://: this gateway's client certificate (PEM); needs --key.", valueName: "FILE"),
            completion: .file())
    var cert: String?

    @Option(help: ArgumentHelp("With mqtts://: the client certificate's private key (PEM).", valueName: "FILE"), completion: .file())
    var key: String?

    @Option(help: ArgumentHelp("The user name the broker asks for.", valueName: "NAME"))
    var username: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp(
        "The password, the file's first line (else $BLUECTL_MQTT_PASSWORD; never on the command line).", valueName: "FILE"),
        completion: .file())
    var passwordFile: String?

    /// Unconditional: "-1" reaches validation and is refused by name.
    @Option(name: .customLong("max-buffered"), parsing: .unconditional, help: ArgumentHelp(
        "At most this many messages wait for the broker, on disk; past it the oldest are dropped and counted.", valueName: "N"))
    var maxBuffered: Int = 50_000

    @Option(name: .customLong("config"), help: ArgumentHelp(
        "Which advertisements to publish, a JSON file (docs/gateway.md).", valueName: "FILE"), completion: .file(extensions: ["json"]))
    var configPath: String?

    /// Unconditional: "-1" reaches validation and is refused by name.
    @Option(name: .customLong("scan-watchdog"), parsing: .unconditional, help: ArgumentHelp(
        "Restart the scan after this many seconds without an advertisement, then power-cycle the adapter (0: never).",
        valueName: "SECONDS"))
    var scanWatchdog: Double = 120

    @Option(name: .customLong("scan"), help: ArgumentHelp(
        "active (StartDiscovery), passive (an advertisement monitor: bluetoothd --experimental), or auto: passive where bluetoothd 5.66 offers monitors and the config names services or sensor formats, else active; said at start.",
        valueName: "MODE"))
    var scanMode: GatewayScanMode = .auto

    @OptionGroup var adapterOptions: AdapterOptions

    func validate() throws {
        do { _ = try BrokerAddress(broker) } catch {
            throw ValidationError("invalid --broker \"\(TextSafety.escapedForMessage(broker))\": \(error)")
        }
        if !broker.lowercased().hasPrefix("mqtts://"), let option = [("--ca", ca), ("--cert", cert), ("--key", key)].first(where: { $0.1 != nil })?.0 {
            throw ValidationError("\(option) needs a TLS broker: --broker mqtts://HOST[:PORT]")
        }
        if GatewayTopics.Layout(rawValue: layout) == nil {
            throw ValidationError("invalid --layout \"\(TextSafety.escapedForMessage(layout))\": expected bluectl or theengs")
        }
        if (cert == nil) != (key == nil) { throw ValidationError("--cert and --key go together") }
        if !(1...1_000_000).contains(maxBuffered) { throw ValidationError("invalid --max-buffered \"\(maxBuffered)\": expected 1 to 1000000") }
        if !(scanWatchdog == 0 || (1...86_400).contains(scanWatchdog)) {
            throw ValidationError("invalid --scan-watchdog \"\(scanWatchdog)\": expected 0 (off) or 1 to 86400 seconds")
        }
        if let id, !RestoreStore.isValid(id) {
            throw ValidationError("invalid --id \"\(TextSafety.escapedForMessage(id))\": expected 1 to 64 letters, digits, \".\", \"_\" or \"-\", not starting with \".\"")
        }
    }

    /// --id, else the host name reduced to the characters a topic level may hold here.
    func gatewayID() -> String {
        if let id { return id }
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count) == 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let cleaned = String(host.prefix { $0 != "." }.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.prefix(64))
        return cleaned.isEmpty ? "bluectl" : cleaned
    }

    func run() async throws {
        let address = try BrokerAddress(broker)
        if let reason = MQTTSession.unavailableReason { throw CLIFailure(.unavailable, reason) }
        let config = try configPath.map { try GatewayConfig.load($0) } ?? GatewayConfig()
        if scanMode == .passive, let refusal = GatewayScanPlan.passiveRefusal(config) { throw CLIFailure(.usage, refusal) }
        // The GATT devices connect with the device commands' defaults (--timeout 30 for each
        // set-up, --retries 2, just-works pairing; docs/gateway.md).
        let deviceOptions = try DeviceCommandOptions.parse([])
        let gattSettings = GatewayGattSettings(options: deviceOptions, pairing: try deviceOptions.pairing(),
                                               adapterGiven: adapterOptions.adapter != nil)
        let gateway = gatewayID()
        let topics = GatewayTopics(gateway: gateway, layout: GatewayTopics.Layout(rawValue: layout) ?? .bluectl)
        let persistence = try GatewayStateDirectory.mqttDirectory()
        var configuration = MQTTSession.Configuration(
            serverURI: address.sessionURI, clientID: "bluectl-" + gateway, persistenceDirectory: persistence, statusTopic: topics.status)
        configuration.keepAlive = 10
        configuration.maxBufferedMessages = Int32(maxBuffered)
        configuration.username = username
        configuration.password = try password()
        if configuration.password != nil, username == nil { throw CLIFailure(.usage, "a password needs --username") }
        if address.tls {
            var tls = MQTTSession.TLS()
            for (option, path) in [("--ca", ca), ("--cert", cert), ("--key", key)] {
                if let path, case .failure(let reason) = WriteCommand.readFile(path) {
                    throw CLIFailure(.usage, "cannot read \(option) \(TextSafety.escapedForMessage(path)): \(reason.text)")
                }
            }
            (tls.caFile, tls.certificateFile, tls.keyFile) = (ca, cert, key)
            configuration.tls = tls
        }
        let session: MQTTSession
        do { session = try MQTTSession(configuration) } catch {
            throw CLIFailure(.unavailable, "cannot keep MQTT state in \(persistence): \(error)")
        }
        let (adapterOptions, homeAssistant, scanMode) = (self.adapterOptions, self.homeAssistant, self.scanMode)
        let scanSilence: Duration? = scanWatchdog == 0 ? nil : .milliseconds(Int64(scanWatchdog * 1000))
        try await SignalScope.run {
            let (central, adapter) = try await adapterOptions.open()
            defer { central.close() }
            try await GatewayRun(session: session, topics: topics, broker: address, central: central, adapter: adapter,
                                 homeAssistant: homeAssistant, config: config, scanSilence: scanSilence,
                                 gattSettings: gattSettings, scanMode: scanMode).run()
        }
    }
}

extension GatewayCommand {
    /// --password-file's first line (a file only its owner may read, as keys files: else
    /// 78), else $BLUECTL_MQTT_PASSWORD, else none: never argv, which `ps` shows.
    func password() throws -> String? {
        guard let passwordFile else { return getenv("BLUECTL_MQTT_PASSWORD").map { String(cString: $0) } }
        let bytes = try PrivateFile.read(passwordFile, what: "the --password-file")
        return String(decoding: bytes.prefix { $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
    }
}

/// Where the gateway keeps its log of messages not yet acknowledged (`MessageLog`):
/// `$STATE_DIRECTORY` (systemd's `StateDirectory=`; its first entry), else the
/// user's state directory (`RestoreStore.userStateDirectory`), then `mqtt/`.
enum GatewayStateDirectory {
    static func mqttDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        let base: String
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first, state.hasPrefix("/") {
            base = String(state)
        } else {
            base = RestoreStore.userStateDirectory(environment: environment)
        }
        let directory = base + "/mqtt"
        // Each missing folder made owner-only: the files hold what the sensors reported.
        var path = ""
        for component in directory.split(separator: "/") {
            path += "/" + component
            if mkdir(path, 0o700) != 0, errno != EEXIST {
                throw CLIFailure(.noPermission, "cannot make the state directory \(path): \(String(cString: strerror(errno)))")
            }
        }
        guard access(directory, W_OK) == 0 else {
            throw CLIFailure(.noPermission, "cannot write to the state directory \(directory)")
        }
        return directory
    }
}
