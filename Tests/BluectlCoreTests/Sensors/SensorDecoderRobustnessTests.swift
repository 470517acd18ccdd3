import Testing
@testable import BluectlCore

/// Every sensor decoder on random bytes: whatever the data, a decoder answers (a reading,
/// a failure or nil) and never traps. A seeded generator (SplitMix64), so a failure reproduces.
@Suite("Sensor decoders never trap on random data")
struct SensorDecoderRobustnessTests {
    static let address = BluetoothAddress("A4:C1:38:44:55:66")!
    /// The entries the decoders look in (company identifiers and service UUIDs of every format).
    static let companies: [UInt16] = [0x0499, 0x0969, 0xEC88, 0x0001, 0x8801, 0x038F, 0x1234]
    static let services: [UInt16] = [0xFE95, 0x181A, 0xFD3D, 0x0D00, 0xFCD2]
    /// Names some formats tell their model by.
    static let names: [String?] = [nil, "GVH5075_1234", "GVH5101_1234", "Govee_H5074_1234", "GVH5179_1234", "sps", "tps",
                                   "ATC_445566", "LYWSD03MMC"]

    @Test("Every decoder, alone and through the table, on random data of each length 0…40")
    func randomData() throws {
        var rng = SplitMix64(seed: 0x5EED_0025)
        let keys = try SensorKeys([Self.address: (0..<16).map { UInt8($0) }])
        var outcomes = [0, 0, 0]  // reading, failure, nil
        for length in 0...40 {
            for round in 0..<60 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let name = Self.names[round % Self.names.count]
                for company in Self.companies {
                    var advertisement = SensorAdvertisement(address: Self.address, name: name, manufacturerData: [company: bytes])
                    count(SensorDecoders.decode(advertisement, keys: keys), &outcomes)
                    advertisement.manufacturerData[0x0969] = bytes.reversed()
                    for decoder in SensorDecoders.all { count(decoder.decode(advertisement, keys: keys), &outcomes) }
                }
                for service in Self.services {
                    let uuid = BluetoothUUID(uint16: service)
                    var advertisement = SensorAdvertisement(address: Self.address, name: name, serviceData: [uuid: bytes])
                    count(SensorDecoders.decode(advertisement, keys: keys), &outcomes)
                    advertisement.serviceData[uuid] = bytes.map { $0 ^ 0x5A }
                    for decoder in SensorDecoders.all { count(decoder.decode(advertisement, keys: keys), &outcomes) }
                }
            }
        }
        // Random bytes reach the decoders' failures (and so their checks), not only nil.
        #expect(outcomes[1] > 0, "\(outcomes)")
    }

    private func count(_ result: Result<SensorReading, SensorDecodingError>?, _ outcomes: inout [Int]) {
        switch result {
        case .success?: outcomes[0] += 1
        case .failure?: outcomes[1] += 1
        case nil: outcomes[2] += 1
        }
    }
}
