// The sensor decoders' hot paths (issue 25): what a scan adds per advertisement when it
// decodes sensors, on a device that is no sensor and on BTHome frames.
@testable import BluectlCore
@testable import BluectlCLI

extension HotPaths {
    static let address = BluetoothAddress("54:48:E6:8F:80:A5")!
    static let key: [UInt8] = [0x23, 0x1d, 0x39, 0xc1, 0xd7, 0xcc, 0x1a, 0xb1, 0xae, 0xe2, 0x24, 0xcd, 0x09, 0x6d, 0xb9, 0x32]
    /// A BTHome frame as a thermometer sends it: packet id, battery, temperature, humidity, voltage.
    static let bthomePlain: [UInt8] = [0x40, 0x00, 0x09, 0x01, 0x61, 0x02, 0xCA, 0x09, 0x03, 0xBF, 0x13, 0x0C, 0xB8, 0x0B]

    static let sensors: [HotPath] = [
        HotPath(name: "sensor-decode-none",
                about: "a scan's SensorDecoder on a device that is no sensor (the burst's: manufacturer data of 0xffff)") {
            var decoder = SensorDecoder()
            let advertisement = SensorAdvertisement(address: address, name: "burst-00001",
                                                    manufacturerData: [0xFFFF: Fixtures.manufacturerData(1)])
            return { consume(decoder.decode(advertisement)) }
        },
        HotPath(name: "sensor-decode-bthome",
                about: "a scan's SensorDecoder on a BTHome frame (packet id, battery, temperature, humidity, voltage)") {
            var decoder = SensorDecoder()
            let advertisement = SensorAdvertisement(address: address, serviceData: [BTHome.serviceUUID: bthomePlain])
            return { consume(decoder.decode(advertisement)) }
        },
        HotPath(name: "sensor-decode-bthome-encrypted",
                about: "the same objects encrypted (AES-CCM through libcrypto), the counter checked") {
            var decoder = SensorDecoder(keys: try! SensorKeys([address: key]))
            let encoder = try! BTHomeEncoder([("battery", .integer(97)), ("temperature", .number(25.06)), ("humidity", .number(50.55)),
                                              ("voltage", .number(3))], key: key, address: address, counter: 1)
            let advertisement = SensorAdvertisement(address: address, serviceData: [BTHome.serviceUUID: encoder.serviceData])
            return { consume(decoder.decode(advertisement)) }
        },
        HotPath(name: "scan-line-json-sensor", about: "`scan --json`: the line of a discovery with a BTHome reading (sensor object)") {
            var discovery = Self.discovery()
            discovery.sensor = SensorDecoders.decode(SensorAdvertisement(address: address, serviceData: [BTHome.serviceUUID: bthomePlain]))
            return { consume(ScanCommand.line(discovery, adapter: "hci0", json: true)) }
        },
    ]
}
