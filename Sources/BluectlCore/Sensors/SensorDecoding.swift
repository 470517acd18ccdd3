// SensorDecoding: which decoder reads which advertisement (one table), and the per-device
// state that encrypted formats need (the last counter accepted).

/// What a sensor decoder reads of an advertisement: the device's address (encrypted formats
/// bind their nonce to it), its name (some formats tell the model by it) and the advertised
/// data entries.
public struct SensorAdvertisement: Sendable, Equatable {
    /// The advertiser's address.
    public var address: BluetoothAddress
    /// The advertised (or cached) name.
    public var name: String?
    /// Manufacturer data by company identifier (the bytes after the identifier).
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service data by service UUID.
    public var serviceData: [BluetoothUUID: [UInt8]]

    /// An advertisement with these entries.
    public init(address: BluetoothAddress, name: String? = nil, manufacturerData: [UInt16: [UInt8]] = [:],
                serviceData: [BluetoothUUID: [UInt8]] = [:]) {
        self.address = address
        self.name = name
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
    }

    /// What BlueZ holds of `device` (its latest data entry of each company and service).
    public init(_ device: DeviceInfo) {
        self.init(address: device.address, name: device.name ?? device.alias,
                  manufacturerData: device.manufacturerData, serviceData: device.serviceData)
    }
}

/// One sensor format's decoder: pure, from an advertisement to a reading or the reason there
/// is none. Each lives in a file of its own in this folder, with its source (specification
/// and date) in its doc comment, and is listed in `SensorDecoders.all`.
package protocol SensorFormatDecoder: Sendable {
    /// The format it decodes.
    static var format: SensorFormat { get }
    /// Nil when the advertisement carries nothing of this format (a cheap look at the
    /// entries it lives in); else the reading, or why there is none. Never traps, on any bytes.
    static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys) -> Result<SensorReading, SensorDecodingError>?
}

/// Decodes sensor advertisements of every format bluectl knows (`SensorFormat`), statelessly.
/// For a stream of advertisements use `SensorDecoder`, which also checks encrypted frames'
/// counters.
public enum SensorDecoders {
    /// Every decoder, in the order they are tried: the first that recognises an advertisement
    /// decodes it.
    package static let all: [any SensorFormatDecoder.Type] = [
        RuuviDecoder.self,
        XiaomiDecoder.self,
        PvvxDecoder.self,
        ATC1441Decoder.self,
        SwitchBotDecoder.self,
        GoveeDecoder.self,
        InkbirdDecoder.self,
    ]

    /// The reading of the first format that recognises `advertisement`, or why that format's
    /// frame gives none; nil when no format recognises it. `keys` decrypts encrypted frames.
    public static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys = SensorKeys()) -> Result<SensorReading, SensorDecodingError>? {
        for decoder in all {
            if let result = decoder.decode(advertisement, keys: keys) { return result }
        }
        return nil
    }
}

/// Decodes the advertisements of many devices over time: `SensorDecoders.decode`, plus the
/// check an encrypted format needs — the counter of a device's encrypted frames must not go
/// backwards (a lower one is reported as `counterWentBack`, not accepted). A value: one
/// owner (a scan keeps one on its event loop).
public struct SensorDecoder: Sendable {
    /// The keys of encrypted devices.
    public var keys: SensorKeys
    /// The highest counter accepted from each device, per format. At most one entry per
    /// device with a key (only authenticated frames carry a counter).
    private var lastCounter: [Key: UInt32] = [:]

    private struct Key: Hashable, Sendable {
        var address: BluetoothAddress
        var format: SensorFormat
    }

    /// A decoder that decrypts with `keys`.
    public init(keys: SensorKeys = SensorKeys()) {
        self.keys = keys
    }

    /// The reading of `advertisement` (see `SensorDecoders.decode`); an encrypted frame whose
    /// counter is lower than the last one accepted from the device fails with `counterWentBack`.
    public mutating func decode(_ advertisement: SensorAdvertisement) -> Result<SensorReading, SensorDecodingError>? {
        guard let result = SensorDecoders.decode(advertisement, keys: keys) else { return nil }
        guard case .success(let reading) = result, let counter = reading.counter else { return result }
        let key = Key(address: advertisement.address, format: reading.format)
        if let last = lastCounter[key], counter < last {
            return .failure(SensorDecodingError(reading.format, .counterWentBack,
                                                "counter \(counter) is lower than \(last), already accepted from \(advertisement.address)"))
        }
        lastCounter[key] = counter
        return result
    }
}
