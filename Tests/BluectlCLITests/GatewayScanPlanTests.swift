import BluectlCore
import Testing
@testable import BluectlCLI

/// How the gateway chooses its scan (docs/gateway.md, "The scan"): the monitor's patterns
/// from the config with --scan passive, active otherwise, and the reason said at start.
@Suite("gateway: passive or active, the patterns and the reason")
struct GatewayScanPlanTests {
    static func config(_ json: String) throws -> GatewayConfig { try GatewayConfig.parse(Array(json.utf8)) }

    @Test("No config: the 16 patterns of the formats the gateway decodes, and what a passive scan misses")
    func everyFormat() throws {
        let plan = GatewayScanPlan.choose(.passive, config: GatewayConfig(), unavailable: nil)
        #expect(plan.patterns == SensorFormat.allAdvertisementPatterns)
        #expect(plan.patterns?.count == AdvertisementMonitor.maxPatterns)
        #expect(plan.patterns?.contains(.serviceData(BluetoothUUID(uint16: 0xFCD2))) == true)
        #expect(plan.reason.contains("other advertisements are not heard") && plan.reason.contains("no scan responses"))
        // only addresses: no pattern can say an address, so the same
        let addresses = try Self.config(#"{"advertisements": {"addresses": ["A4:C1:38:00:00:27"]}}"#)
        #expect(GatewayScanPlan.choose(.passive, config: addresses, unavailable: nil) == plan)
    }

    @Test("Services: their data and their place first in a UUID list; sensor formats: theirs alone")
    func servicesAndFormats() throws {
        let services = GatewayScanPlan.choose(.passive, config: try Self.config(#"{"advertisements": {"services": ["fcd2"]}}"#), unavailable: nil)
        #expect(services.patterns == [try AdvertisementPattern(adType: 0x16, bytes: [0xd2, 0xfc]),
                                      try AdvertisementPattern(adType: 0x02, bytes: [0xd2, 0xfc]),
                                      try AdvertisementPattern(adType: 0x03, bytes: [0xd2, 0xfc])])
        // the same service twice: its patterns once
        let twice = try Self.config(#"{"advertisements": {"services": ["fcd2", "fcd2"]}}"#)
        #expect(GatewayScanPlan.choose(.passive, config: twice, unavailable: nil).patterns == services.patterns)
        #expect(GatewayScanPlan.passiveRefusal(twice) == nil)
        // six services: 18 patterns, more than a monitor takes, refused before anything starts
        let six = try Self.config(#"{"advertisements": {"services": ["fcd1", "fcd2", "fcd3", "fcd4", "fcd5", "fcd6"]}}"#)
        #expect(GatewayScanPlan.passiveRefusal(six)?.contains("18 patterns") == true)
        let formats = GatewayScanPlan.choose(.passive, config: try Self.config(#"{"advertisements": {"sensor_formats": ["ruuvi"]}}"#),
                                             unavailable: nil)
        #expect(formats.patterns == [.manufacturerData(0x0499)])
        #expect(formats.reason.hasPrefix("1 pattern: the sensor formats ruuvi;"))
    }

    @Test("auto: passive where monitors are offered by bluetoothd 5.66 (proven in the lab), active elsewhere and why; --scan active")
    func auto() throws {
        let why = "hci0 has no AdvertisementMonitorManager1 (bluetoothd 5.66 offers it only with --experimental)"
        #expect(GatewayScanPlan.choose(.auto, config: GatewayConfig(), unavailable: why, bluezVersion: "5.66") == GatewayScanPlan(patterns: nil, reason: why))
        // no services or sensor formats: every advertisement is admitted, which a monitor cannot hear
        #expect(GatewayScanPlan.choose(.auto, config: GatewayConfig(), unavailable: nil, bluezVersion: "5.66")
                == GatewayScanPlan(patterns: nil, reason: GatewayScanPlan.everyAdvertisement))
        let formats = try Self.config(#"{"advertisements": {"sensor_formats": [\#(SensorFormat.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))]}}"#)
        let proven = GatewayScanPlan.choose(.auto, config: formats, unavailable: nil, bluezVersion: "5.66")
        #expect(proven.patterns == SensorFormat.allAdvertisementPatterns)
        #expect(proven.reason.hasPrefix("bluetoothd 5.66 offers advertisement monitors and is proven with them; 16 patterns: "), "\(proven.reason)")
        // 5.70 matches no service data; an unknown release may be one of those
        let unproven = GatewayScanPlan.choose(.auto, config: formats, unavailable: nil, bluezVersion: "5.70")
        #expect(unproven == GatewayScanPlan(patterns: nil, reason: GatewayScanPlan.passiveUnproven("5.70")))
        #expect(unproven.reason.contains("bluetoothd 5.70 is not one it is proven with (5.66;") && unproven.reason.hasSuffix("--scan passive asks for it"))
        let unknown = GatewayScanPlan.choose(.auto, config: formats, unavailable: nil, bluezVersion: nil)
        #expect(unknown.patterns == nil && unknown.reason.contains("names no BlueZ release"))
        // services making more patterns than a monitor takes: active, saying so (passive would be refused)
        let six = try Self.config(#"{"advertisements": {"services": ["fcd1", "fcd2", "fcd3", "fcd4", "fcd5", "fcd6"]}}"#)
        let many = GatewayScanPlan.choose(.auto, config: six, unavailable: nil, bluezVersion: "5.66")
        #expect(many.patterns == nil && many.reason.contains("18 patterns"))
        #expect(GatewayScanPlan.choose(.active, config: GatewayConfig(), unavailable: nil, bluezVersion: "5.66")
                == GatewayScanPlan(patterns: nil, reason: "--scan active"))
        // --scan passive is passive even where it then fails (startScan says why)
        #expect(GatewayScanPlan.choose(.passive, config: GatewayConfig(), unavailable: why).patterns != nil)
    }

    @Test("The BlueZ release from an adapter's Modalias (BlueZ's own Device ID only)")
    func bluezVersion() {
        #expect(AdapterInfo.bluezVersion(modalias: "usb:v1D6Bp0246d0542") == "5.66")
        #expect(AdapterInfo.bluezVersion(modalias: "usb:v1d6bp0246d0547") == "5.71")
        #expect(AdapterInfo.bluezVersion(modalias: "usb:v05ACp8290d0100") == nil)
        #expect(AdapterInfo.bluezVersion(modalias: "bluetooth:v1D6Bp0246d0542") == nil)
    }
}
