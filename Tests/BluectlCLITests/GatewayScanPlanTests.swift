import BluectlCore
import Testing
@testable import BluectlCLI

/// How the gateway chooses its scan (docs/gateway.md, "The scan"): the monitor's patterns
/// from the config, passive only where offered and expressible, and the reason said at start.
@Suite("gateway: passive or active, the patterns and the reason")
struct GatewayScanPlanTests {
    static func config(_ json: String) throws -> GatewayConfig { try GatewayConfig.parse(Array(json.utf8)) }

    @Test("No config: the 16 patterns of the formats the gateway decodes, and what a passive scan misses")
    func everyFormat() throws {
        let plan = GatewayScanPlan.choose(.auto, config: GatewayConfig(), unavailable: nil)
        #expect(plan.patterns == SensorFormat.allAdvertisementPatterns)
        #expect(plan.patterns?.count == AdvertisementMonitor.maxPatterns)
        #expect(plan.patterns?.contains(.serviceData(BluetoothUUID(uint16: 0xFCD2))) == true)
        #expect(plan.reason.contains("other advertisements are not heard") && plan.reason.contains("no scan responses"))
        // only addresses: no pattern can say an address, so the same
        let addresses = try Self.config(#"{"advertisements": {"addresses": ["A4:C1:38:00:00:27"]}}"#)
        #expect(GatewayScanPlan.choose(.auto, config: addresses, unavailable: nil) == plan)
    }

    @Test("Services: their data and their place first in a UUID list; sensor formats: theirs alone")
    func servicesAndFormats() throws {
        let services = GatewayScanPlan.choose(.auto, config: try Self.config(#"{"advertisements": {"services": ["fcd2"]}}"#), unavailable: nil)
        #expect(services.patterns == [try AdvertisementPattern(adType: 0x16, bytes: [0xd2, 0xfc]),
                                      try AdvertisementPattern(adType: 0x02, bytes: [0xd2, 0xfc]),
                                      try AdvertisementPattern(adType: 0x03, bytes: [0xd2, 0xfc])])
        let formats = GatewayScanPlan.choose(.auto, config: try Self.config(#"{"advertisements": {"sensor_formats": ["ruuvi"]}}"#),
                                             unavailable: nil)
        #expect(formats.patterns == [.manufacturerData(0x0499)])
        #expect(formats.reason.hasPrefix("1 pattern: the sensor formats ruuvi;"))
    }

    @Test("Active: where no monitor is offered (the reason given), with --scan active, or with more than 16 patterns")
    func active() throws {
        let why = "hci0 has no AdvertisementMonitorManager1 (bluetoothd 5.66 offers it only with --experimental)"
        #expect(GatewayScanPlan.choose(.auto, config: GatewayConfig(), unavailable: why) == GatewayScanPlan(patterns: nil, reason: why))
        #expect(GatewayScanPlan.choose(.active, config: GatewayConfig(), unavailable: nil) == GatewayScanPlan(patterns: nil, reason: "--scan active"))
        let six = (1...6).map { String(format: "%04x", 0x1800 + $0) }.map { "\"\($0)\"" }.joined(separator: ",")
        let many = GatewayScanPlan.choose(.auto, config: try Self.config(#"{"advertisements": {"services": [\#(six)]}}"#), unavailable: nil)
        #expect(many.patterns == nil)
        #expect(many.reason == "the config needs 18 advertisement patterns, more than a monitor takes (16)")
        // --scan passive is passive even where it then fails (startScan says why)
        #expect(GatewayScanPlan.choose(.passive, config: GatewayConfig(), unavailable: why).patterns != nil)
    }
}
