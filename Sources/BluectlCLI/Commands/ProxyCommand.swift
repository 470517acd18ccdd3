import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials   // Data(base64Encoded:)
import BluectlCore
import BluectlProxy
import Logging

/// `bluectl proxy`: a Home Assistant Bluetooth proxy, speaking ESPHome's native API (docs/proxy.md).
struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Serve as a Home Assistant Bluetooth proxy (ESPHome's native API over TCP).",
        discussion: """
            Runs until Ctrl-C or SIGTERM. Scans the adapter and forwards every advertisement to the API clients \
            that subscribed to raw advertisements (Home Assistant's ESPHome integration, aioesphomeapi). Built so \
            far: the API (hello, device info, ping, list entities, disconnect), advertisements, the scanner's state, \
            and GATT connections through the proxy (3 slots: connect, services, read, write, notify, pair), \
            plaintext or, with --key-file, encrypted as ESPHome's (Noise, its base64 key), announced over mDNS \
            through avahi-daemon (_esphomelib._tcp, as ESPHome nodes; --no-mdns: not announced). \
            Clients connecting and leaving are logged at info level, a client disconnected for garbage at warning \
            level (BLUECTL_LOG_LEVEL=info shows the port it listens on); see docs/proxy.md.

            Examples:
              bluectl proxy
              bluectl proxy --adapter hci1 --name attic-proxy --no-mdns
            """)

    @OptionGroup var adapterOptions: AdapterOptions

    /// Unconditional: "--port -1" reaches validation and is refused by name.
    @Option(parsing: .unconditional, help: ArgumentHelp("TCP port to listen on (ESPHome's is 6053; 0: any free port).", valueName: "N"))
    var port: Int = 6053

    @Option(help: ArgumentHelp("The node's name Home Assistant shows (default: this host's name; at most 31 bytes).", valueName: "NAME"))
    var name: String?

    @Option(name: .customLong("key-file"), help: ArgumentHelp(
        "Encrypt the API (Noise) with the key in FILE: base64, 32 bytes, one line; only its owner may read it.", valueName: "FILE"),
        completion: .file())
    var keyFile: String?

    /// Unconditional: "--connect-timeout -1" reaches validation and is refused by name.
    @Option(name: .customLong("connect-timeout"), parsing: .unconditional, help: ArgumentHelp(
        "Seconds a client's device connect may take, BlueZ's retries and a wait for bluetoothd or the device to be back included; resolving the services, and a pairing, get as long again (2 to 600, default 20).",
        valueName: "SECONDS"))
    var connectTimeoutText: String?

    @Flag(name: .customLong("no-mdns"), help: "Do not announce the proxy over mDNS (through avahi-daemon): Home Assistant is then given its host and port by hand.")
    var noMDNS = false

    func validate() throws {
        if let connectTimeoutText { _ = try Self.connectTimeout(connectTimeoutText) }
        guard (0...65535).contains(port) else { throw ValidationError("invalid --port \"\(port)\": expected 0 to 65535") }
        if let name {
            guard !name.isEmpty, name.utf8.count <= 31, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ValidationError("invalid --name \"\(TextSafety.escapedForMessage(name))\": expected 1 to 31 bytes, no control characters")
            }
        }
    }

    func run() async throws {
        let psk = try keyFile.map(Self.readKey)
        if psk != nil, let reason = LibCrypto.unavailableReason { throw CLIFailure(.unavailable, reason + " (the Noise encryption's)") }
        let connectTimeout = try connectTimeoutText.map(Self.connectTimeout) ?? ProxyLinks.defaultConnectTimeout
        let (adapterOptions, port, name, noMDNS) = (self.adapterOptions, UInt16(port), self.name ?? Self.hostName(), self.noMDNS)
        try await SignalScope.run {
            let (central, adapter) = try await adapterOptions.open()
            defer { central.close() }
            let identity = ProxyIdentity(name: name, bluetoothAddress: adapter.address?.description ?? "",
                                         version: Bluectl.version)
            let server = ProxyServer(central: central, identity: identity, psk: psk, connectTimeout: connectTimeout)
            let announcement = noMDNS ? nil : ProxyAnnouncement(central: central, identity: identity, encrypted: psk != nil)
            do {
                try await server.run(adapter: adapter, port: port) { bound in
                    Logger(label: "bluectl").notice("proxy \"\(name)\" on \(adapter.name) (\(identity.bluetoothAddress)): listening on port \(bound), \(psk == nil ? "plaintext" : "encrypted (Noise)"), \(noMDNS ? "no mDNS" : "mDNS through avahi-daemon")")
                    announcement?.start(port: bound)
                }
            } catch {
                await announcement?.stop()
                if let error = error as? ProxyError { throw CLIFailure(.unavailable, "\(error)") }
                throw error
            }
            await announcement?.stop()
        }
    }

    /// `--connect-timeout`: at least 2 s (the proxy's second try needs a second
    /// left after its wait), at most 10 minutes (Home Assistant gives up long before).
    static func connectTimeout(_ text: String) throws -> Duration {
        guard let seconds = Double(text), seconds.isFinite, (2...600).contains(seconds) else {
            throw ValidationError("invalid --connect-timeout \"\(TextSafety.escapedForMessage(text))\": expected 2 to 600 seconds")
        }
        return .seconds(seconds)
    }

    /// The 32-byte key of `path`: base64 on one line, as ESPHome's `api: encryption: key:`;
    /// like the sensor keys file, only its owner may read it (exit 78 otherwise, and when
    /// it holds no such key).
    static func readKey(_ path: String) throws -> [UInt8] {
        let bytes = try PrivateFile.read(path, what: "the key file")
        var text = String(decoding: bytes, as: UTF8.self)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        guard let key = Data(base64Encoded: text), key.count == 32 else {
            throw CLIFailure(.config, "the key file \(TextSafety.escapedForMessage(path, limit: 1024)): expected a base64 key of 32 bytes "
                             + "on one line (ESPHome's api encryption key)")
        }
        return Array(key)
    }

    /// This host's name, cut to ESPHome's 31 bytes at a character boundary.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "bluectl" }
        var name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        while name.utf8.count > 31 { name.removeLast() }
        return name.isEmpty ? "bluectl" : name
    }
}
