import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
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
            far: the plaintext API (hello, device info, ping, list entities, disconnect) and advertisements; not yet: \
            GATT connections through the proxy, the Noise encryption (--key-file), mDNS (pass --no-mdns). \
            Clients connecting and leaving are logged at info level, a client disconnected for garbage at warning \
            level (BLUECTL_LOG_LEVEL=info shows the port it listens on); see docs/proxy.md.

            Examples:
              bluectl proxy --no-mdns
              bluectl proxy --adapter hci1 --name attic-proxy --no-mdns
            """)

    @OptionGroup var adapterOptions: AdapterOptions

    /// Unconditional: "--port -1" reaches validation and is refused by name.
    @Option(parsing: .unconditional, help: ArgumentHelp("TCP port to listen on (ESPHome's is 6053; 0: any free port).", valueName: "N"))
    var port: Int = 6053

    @Option(help: ArgumentHelp("The node's name Home Assistant shows (default: this host's name; at most 31 bytes).", valueName: "NAME"))
    var name: String?

    @Option(name: .customLong("key-file"), help: ArgumentHelp(
        "A file holding the API encryption key (base64, one line): not built yet, refused.", valueName: "FILE"),
        completion: .file())
    var keyFile: String?

    @Flag(name: .customLong("no-mdns"), help: "Do not announce the proxy on the network (required for now: mDNS is not built yet).")
    var noMDNS = false

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("invalid --port \"\(port)\": expected 0 to 65535") }
        if let name {
            guard !name.isEmpty, name.utf8.count <= 31, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ValidationError("invalid --name \"\(TextSafety.escapedForMessage(name))\": expected 1 to 31 bytes, no control characters")
            }
        }
    }

    func run() async throws {
        if let keyFile {
            // Read first, so that an unreadable file is named as such; then refused: not built.
            switch WriteCommand.readFile(keyFile) {
            case .failure(let reason):
                throw CLIFailure(.usage, "cannot read --key-file \(TextSafety.escapedForMessage(keyFile)): \(reason.text)")
            case .success:
                throw CLIFailure(.usage, "--key-file: the API encryption (Noise) is not built yet; run without it for the plaintext API")
            }
        }
        guard noMDNS else {
            throw CLIFailure(.usage, "announcing the proxy over mDNS is not built yet: pass --no-mdns and add it in Home Assistant by host and port")
        }
        let (adapterOptions, port, name) = (self.adapterOptions, UInt16(port), self.name ?? Self.hostName())
        try await SignalScope.run {
            let (central, adapter) = try await adapterOptions.open()
            defer { central.close() }
            let identity = ProxyIdentity(name: name, bluetoothAddress: adapter.address?.description ?? "",
                                         version: Bluectl.version)
            let server = ProxyServer(central: central, identity: identity)
            do {
                try await server.run(adapter: adapter, port: port) { bound in
                    Logger(label: "bluectl").notice("proxy \"\(name)\" on \(adapter.name) (\(identity.bluetoothAddress)): listening on port \(bound), plaintext, no mDNS")
                }
            } catch let error as ProxyError {
                throw CLIFailure(.unavailable, "\(error)")
            }
        }
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
