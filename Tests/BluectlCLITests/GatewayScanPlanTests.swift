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

    @Test("Active by default: where no monitor is offered (that reason), and where one is (bluetoothd 5.66 aborted on it in the lab); --scan active")
    func active() throws {
        let why = "hci0 has no AdvertisementMonitorManager1 (bluetoothd 5.66 offers it only with --experimental)"
        #expect(GatewayScanPlan.choose(.auto, config: GatewayConfig(), unavailable: why) == GatewayScanPlan(patterns: nil, reason: why))
        #expect(GatewayScanPlan.choose(.auto, config: GatewayConfig(), unavailable: nil)
                == GatewayScanPlan(patterns: nil, reason: GatewayScanPlan.passiveNotDefault))
        #expect(GatewayScanPlan.choose(.active, config: GatewayConfig(), unavailable: nil) == GatewayScanPlan(patterns: nil, reason: "--scan active"))
        // --scan passive is passive even where it then fails (startScan says why)
        #expect(GatewayScanPlan.choose(.passive, config: GatewayConfig(), unavailable: why).patterns != nil)
    }
}
