import BluectlDBus
import Testing
@testable import BluectlCore

/// A scan's tracker decodes sensors where it makes its results (ScanOptions.decodesSensors,
/// .sensorsOnly, .sensorKeys), with one SensorDecoder for the scan.
@Suite("Scan results carry sensor readings")
struct ScanSensorTests {
    static let bthome = "0000fcd2-0000-1000-8000-00805f9b34fb"

    static func serviceData(_ entries: [String: [UInt8]]) -> DBusValue {
        .dictionary(key: .string, value: .variant, entries.sorted { $0.key < $1.key }.map { DBusDictEntry(.string($0.key), .variant(.bytes($0.value))) })
    }

    static func tree(_ properties: [String: DBusValue]) -> (BlueZObjectTree, BlueZObjectTree.Change) {
        var tree = BlueZObjectTree()
        let change = tree.apply(interfacesAdded: Fixture.added(Fixture.device(), [BlueZ.deviceInterface: properties]))!
        return (tree, change)
    }

    @Test("With decodesSensors a discovery holds the reading; without, none")
    func decodes() throws {
        var properties = Fixture.deviceProperties()
        properties["ServiceData"] = Self.serviceData([Self.bthome: [0x40, 0x02, 0xC4, 0x09]])
        let (tree, change) = Self.tree(properties)
        var options = ScanOptions()
        options.decodesSensors = true
        var tracker = ScanTracker(adapter: Fixture.hci0, options: options)
        let handled = tracker.handle(change, in: tree)
        let discovery = try #require(handled)
        #expect(try discovery.sensor?.get().measurements == [SensorMeasurement(.temperature, .number(25))])
        var plain = ScanTracker(adapter: Fixture.hci0, options: ScanOptions())
        #expect(plain.handle(change, in: tree)?.sensor == nil)
    }

    @Test("A frame that gives no reading is a discovery with the reason (an encrypted frame, no key)")
    func failure() throws {
        var properties = Fixture.deviceProperties()
        properties["ServiceData"] = Self.serviceData([Self.bthome: try ByteFormats.parseHex("41e445f3c9962b332211006c7c4519")])
        let (tree, change) = Self.tree(properties)
        var options = ScanOptions()
        options.sensorsOnly = true
        var tracker = ScanTracker(adapter: Fixture.hci0, options: options)
        guard case .failure(let error)? = tracker.handle(change, in: tree)?.sensor else {
            Issue.record("no failure")
            return
        }
        #expect(error.kind == .noKey)
    }

    @Test("sensorsOnly: a device without a sensor frame is not reported, nor counted as seen until it sends one")
    func sensorsOnly() throws {
        var options = ScanOptions()
        options.sensorsOnly = true
        var tracker = ScanTracker(adapter: Fixture.hci0, options: options)
        var (tree, change) = Self.tree(Fixture.deviceProperties())
        #expect(tracker.handle(change, in: tree) == nil)
        #expect(tracker.seen.isEmpty)
        let frame = tree.apply(propertiesChangedAt: Fixture.device(), arguments: Fixture.changed(
            BlueZ.deviceInterface, ["ServiceData": Self.serviceData([Self.bthome: [0x40, 0x21, 0x01]])]))!
        let handled = tracker.handle(frame, in: tree)
        let discovery = try #require(handled)
        #expect(discovery.kind == .discovered)
        #expect(try discovery.sensor?.get()[.motion] == .flag(true))
    }

    @Test("The scan's keys decrypt")
    func keys() throws {
        var properties = Fixture.deviceProperties()
        properties["Address"] = .string("54:48:E6:8F:80:A5")
        properties["ServiceData"] = Self.serviceData([Self.bthome: try ByteFormats.parseHex("41e445f3c9962b332211006c7c4519")])
        let (tree, change) = Self.tree(properties)
        var options = ScanOptions()
        options.decodesSensors = true
        options.sensorKeys = try SensorKeys(hex: ["54:48:E6:8F:80:A5": "231d39c1d7cc1ab1aee224cd096db932"])
        var tracker = ScanTracker(adapter: Fixture.hci0, options: options)
        let handled = tracker.handle(change, in: tree)
        let reading = try #require(try handled?.sensor?.get())
        #expect(reading.encrypted)
        #expect(reading[.humidity] == .number(50.55))
    }
}
