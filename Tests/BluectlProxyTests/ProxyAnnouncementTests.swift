// The TXT record of the proxy's `_esphomelib._tcp` service: ESPHome's keys
// (its mdns component, Linux `host` platform) with the values Home
// Assistant's ESPHome integration reads (docs/proxy.md). The bus tier reads
// the same record back through a real avahi-daemon (ProxyMDNSTests).
import Testing
@testable import BluectlProxy

@Suite struct ProxyAnnouncementTests {
    let identity = ProxyIdentity(name: "attic-proxy", bluetoothAddress: "00:AA:01:00:00:2F", version: "0.9.0")

    @Test func plaintextRecordHasESPHomesKeysInItsOrder() {
        #expect(ProxyAnnouncement.txt(identity: identity, encrypted: false)
                == ["friendly_name=attic-proxy", "version=0.9.0", "mac=00aa0100002f", "board=host"])
    }

    @Test func encryptedRecordSaysNoiseIsRequired() {
        #expect(ProxyAnnouncement.txt(identity: identity, encrypted: true).last
                == "api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256")
    }

    @Test func noAddressNoMac() {
        let unknown = ProxyIdentity(name: "p", bluetoothAddress: "", version: "1")
        #expect(!ProxyAnnouncement.txt(identity: unknown, encrypted: false).contains { $0.hasPrefix("mac=") })
    }
}
