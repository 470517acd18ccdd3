import BluectlCore
import Logging

/// How Home Assistant finds the proxy: the `_esphomelib._tcp` service an
/// ESPHome node announces over mDNS, published by the host's avahi-daemon
/// (`MDNSPublication`), with the TXT records ESPHome's `mdns` component
/// writes for a node of its Linux `host` platform (docs/proxy.md).
///
/// Home Assistant's ESPHome integration (`async_step_zeroconf`) needs
/// `mac` (without it the discovery is dropped): the config entry's unique
/// id, which must equal `mac_address` of `DeviceInfoResponse` (the
/// adapter's address, here as there); it shows `friendly_name`, and asks
/// for the key up front when `api_encryption` is there. aioesphomeapi
/// reconnects at once when it sees the service named as the node again.
package final class ProxyAnnouncement: Sendable {
    /// ESPHome's native API service type.
    package static let serviceType = "_esphomelib._tcp"
    /// ESPHome's `ESPHOME_BOARD` on its `host` platform (a Linux process, as bluectl).
    package static let board = "host"
    /// Noise's protocol name, the value of `api_encryption`.
    package static let noiseProtocol = "Noise_NNpsk0_25519_ChaChaPoly_SHA256"

    private let publication: MDNSPublication

    /// `encrypted`: the API requires Noise (`--key-file`).
    package init(central: CentralManager, identity: ProxyIdentity, encrypted: Bool) {
        let logger = Logger(label: "bluectl")
        publication = MDNSPublication(central: central, service: MDNSService(
            name: identity.name, type: Self.serviceType, txt: Self.txt(identity: identity, encrypted: encrypted))) { event in
            switch event {
            case .published(let name):
                logger.info("proxy: announced over mDNS as \"\(name)\" (\(Self.serviceType), through avahi-daemon)")
            case .renamed(let from, let to):
                logger.warning("proxy: mDNS: \"\(from)\" is taken on the network: announced as \"\(to)\"")
            case .daemonNotRunning:
                logger.warning("""
                    proxy: not announced over mDNS: avahi-daemon is not running (\(MDNSPublication.avahi) is not on the system bus); \
                    add the proxy in Home Assistant by host and port (announced if avahi-daemon starts)
                    """)
            case .daemonLeft:
                logger.warning("proxy: avahi-daemon left the system bus: the proxy is announced again when it is back")
            case .failed(let reason):
                logger.warning("proxy: not announced over mDNS: avahi-daemon: \(reason)")
            }
        }
    }

    /// The TXT record, in ESPHome's order: `friendly_name`, `version`, `mac`
    /// (lower-case hex without colons, as ESPHome's `get_mac_address()`),
    /// `board`, and `api_encryption` when the API requires Noise. Not
    /// `platform` nor `network`, which ESPHome writes only for its
    /// microcontrollers; not `api_encryption_supported`, which tells clients
    /// a key may be set through the API (`NoiseEncryptionSetKeyRequest`,
    /// not served).
    package static func txt(identity: ProxyIdentity, encrypted: Bool) -> [String] {
        var txt = ["friendly_name=\(identity.name)", "version=\(identity.version)"]
        let mac = identity.bluetoothAddress.lowercased().filter { $0 != ":" }
        if !mac.isEmpty { txt.append("mac=\(mac)") }
        txt.append("board=\(board)")
        if encrypted { txt.append("api_encryption=\(noiseProtocol)") }
        return txt
    }

    /// Announces the proxy on `port` (from any thread, without waiting).
    package func start(port: UInt16) {
        publication.publish(port: port)
    }

    /// Withdraws the announcement; at most a second (a daemon that does not
    /// answer is left to drop it when this process leaves the bus).
    package func stop() async {
        _ = await Deadline(after: .seconds(1)).run(shielded: true) { [publication] in await publication.withdraw() }
    }
}
