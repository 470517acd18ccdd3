/// The advertisement patterns of the sensor formats, for passive scanning
/// (`ScanOptions.passive`): what a monitor must match so that the decoders get the frames.
extension SensorFormat {
    /// Patterns that match this format's advertisements as the decoders recognise them:
    /// its service data or manufacturer data by identifier; for the formats told by the
    /// advertised name (Inkbird, some Govee models), the complete local name, which a
    /// passive scan hears only when it is in the advertisement itself, not in a scan response.
    public var advertisementPatterns: [AdvertisementPattern] {
        switch self {
        case .bthome: [.serviceData(BluetoothUUID(uint16: 0xFCD2))]
        case .ruuvi: [.manufacturerData(0x0499)]
        case .xiaomi: [.serviceData(BluetoothUUID(uint16: 0xFE95))]
        case .pvvx, .atc1441: [.serviceData(BluetoothUUID(uint16: 0x181A))]
        case .switchbot: SwitchBotDecoder.services.map(AdvertisementPattern.serviceData) + [.manufacturerData(SwitchBotDecoder.company)]
        case .govee: [0xEC88, 0x0001, 0x8801, 0x8803, 0x8843].map(AdvertisementPattern.manufacturerData)
            + ["GV", "Govee"].map(Self.namePrefix)
        case .inkbird: InkbirdDecoder.models.keys.sorted().map(Self.namePrefix)
        }
    }

    /// A complete local name (AD type 0x09) that starts with `prefix` (ASCII, at most 31 bytes).
    private static func namePrefix(_ prefix: String) -> AdvertisementPattern {
        AdvertisementPattern(verified: 0x09, bytes: Array(prefix.utf8))
    }

    /// The patterns of all the formats the decoders know, without repeats: 16, as many as one
    /// monitor takes (`AdvertisementMonitor.maxPatterns`).
    public static var allAdvertisementPatterns: [AdvertisementPattern] { advertisementPatterns(of: allCases) }

    /// The patterns of `formats`, in their order, without repeats (formats share some).
    package static func advertisementPatterns(of formats: some Sequence<SensorFormat>) -> [AdvertisementPattern] {
        var seen = Set<AdvertisementPattern>()
        return formats.flatMap(\.advertisementPatterns).filter { seen.insert($0).inserted }
    }
}
