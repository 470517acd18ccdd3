// `--layout theengs`'s device identity (brand, model, model_id, type) against what Theengs
// Decoder (theengsdecoder 2.5.0) says of the same frames: each frame below is one of
// Tests/SensorReference's generators' (one per identity Theengs gives a frame bluectl decodes),
// with Theengs' answer as Tests/SensorReference/theengs_compare.py's decoding printed it.

import Testing
import BluectlCore
@testable import BluectlCLI

@Suite("--layout theengs: the device identity Theengs Decoder gives the same frames")
struct TheengsIdentityTests {
    struct Frame: CustomTestStringConvertible, Sendable {
        var address: String
        var name: String?
        var service: (uuid: String, hex: String)?
        var company: (id: UInt16, hex: String)?
        var key: String?
        /// Theengs' brand | model | model_id | type.
        var theengs: String

        var testDescription: String { theengs }
    }

    static let frames: [Frame] = [
        Frame(address: "A4:C1:38:0B:5E:ED", service: ("181a", "a4c1380b5eedfe7000500b5400"),
              theengs: "Xiaomi | TH Sensor | LYWSD03MMC/MJWSD05MMC_ATC | THB"),
        Frame(address: "A4:C1:38:2F:86:6C", service: ("181a", "6c862f38c1a460f00000860b320000"),
              theengs: "Xiaomi | TH Sensor | LYWSD03MMC/MJWSD05MMC_PVVX | THB"),
        Frame(address: "A4:C1:38:2F:86:6C", service: ("181a", "14fab3e4e2c53eb1c0acf8"), key: "b9ea895fac7eea6d30532432a516f3a3",
              theengs: "Xiaomi | TH Sensor | LYWSD03MMC/MJWSD05MMC_PVVX_ENCR | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "GVH5075_E12B", company: (0xEC88, "00861a803200"),
              theengs: "Govee | Thermo-Hygrometer | H5072/75 | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "GVH5072_E12B", company: (0xEC88, "0081e2404d00"),
              theengs: "Govee | Thermo-Hygrometer | H5072/75 | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "GVH5101_E12B", company: (0x0001, "010180d93c58"),
              theengs: "Govee | Smart Thermo-Hygrometer | H5100/01/02/04/05/08/74/77 | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "GVH5177_E12B", company: (0x0001, "010180d93c58"),
              theengs: "Govee | Smart Thermo-Hygrometer | H5100/01/02/04/05/08/74/77 | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "GVH5101_E12B", company: (0x0001, "0101049959370000"),
              theengs: "Govee | Smart Thermo-Hygrometer | H5100/01/02/04/05/08/74/77 | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "GV5179_E12B", company: (0x0001, "010180d93c58"),
              theengs: "Govee | Thermo-Hygrometer | H5179_N | THB"),
        Frame(address: "A4:C1:38:5D:E1:2B", name: "Govee_H5074_E12B", company: (0xEC88, "0030f800004002"),
              theengs: "Govee | Thermo-Hygrometer | H5074 | THB"),
        Frame(address: "49:42:08:00:2C:5B", name: "sps", company: (0xF060, "000000318b0008"),
              theengs: "Inkbird | T(H) Sensor | IBS-TH1/TH2/P01B/ITH-12S | THB"),
        Frame(address: "49:42:08:00:2C:5B", name: "tps", company: (0xF060, "000000318b0008"),
              theengs: "Inkbird | T(H) Sensor | IBS-TH1/TH2/P01B/ITH-12S | THB"),
        Frame(address: "CB:B8:33:4C:88:4F", name: "Ruuvi 884F", company: (0x0499, "0512fc5394c37c0004fffc040cac364200cdcbb8334c884f"),
              theengs: "Ruuvi | RuuviTag | RuuviTag_RAWv2 | ACEL"),
        Frame(address: "CB:B8:33:4C:88:4F", name: "Ruuvi 884F", company: (0x0499, "03291a1ece1efc18f94202ca0b53"),
              theengs: "Ruuvi | RuuviTag | RuuviTag_RAWv1 | ACEL"),
        Frame(address: "D4:1D:8A:03:27:B5", service: ("fd3d", "54003c05952d"),
              theengs: "SwitchBot | Meter (Plus) | THX1/W230150X | THB"),
        Frame(address: "D4:1D:8A:03:27:B5", service: ("fd3d", "690058059e1f"),
              theengs: "SwitchBot | Meter (Plus) | THX1/W230150X | THB"),
        Frame(address: "D4:1D:8A:03:27:B5", service: ("fd3d", "770064"), company: (0x0969, "d41d8a0327b5360302963700"),
              theengs: "SwitchBot | Outdoor Meter | W340001X | THB"),
        Frame(address: "58:2D:34:35:93:21", service: ("fe95", "5020aa0100219335342d580d1004ccffc900"),
              theengs: "Xiaomi | Mi Jia round | LYWSDCGQ | THB"),
        Frame(address: "58:2D:34:35:93:21", service: ("fe95", "40505b0409041002de000a100128"),
              theengs: "Xiaomi/Mijia | e-ink Clock | LYWSD02 | THB"),
    ]

    @Test("each frame's reading has Theengs' identity", arguments: frames)
    func identity(_ frame: Frame) throws {
        let address = try #require(BluetoothAddress(frame.address))
        var decoder = SensorDecoder(keys: try SensorKeys(hex: frame.key.map { [frame.address: $0] } ?? [:]))
        let advertisement = SensorAdvertisement(
            address: address, name: frame.name,
            manufacturerData: try frame.company.map { [$0.id: try ByteFormats.parseHex($0.hex)] } ?? [:],
            serviceData: try frame.service.map { [try BluetoothUUID($0.uuid, kind: .service): try ByteFormats.parseHex($0.hex)] } ?? [:])
        guard case .success(let reading)? = decoder.decode(advertisement) else {
            Issue.record("bluectl decodes no reading from the frame")
            return
        }
        let identity = try #require(TheengsIdentity(reading), "no identity for \(reading.format) \(reading.model ?? "-")")
        #expect([identity.brand, identity.model, identity.modelID, identity.type].joined(separator: " | ") == frame.theengs)
    }

    @Test("a device Theengs knows only by its name (BTHome) has no identity: its record keeps bluectl's model")
    func bthomeHasNone() {
        #expect(TheengsIdentity(SensorReading(format: .bthome)) == nil)
        #expect(TheengsIdentity(SensorReading(format: .govee, model: "H5179")) == nil)
    }
}
