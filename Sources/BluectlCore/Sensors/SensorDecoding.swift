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
        BTHome.self,
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
        decode(advertisement, keys: keys, with: all)
    }

    /// `decode` with these decoders, in this order.
    package static func decode(_ advertisement: SensorAdvertisement, keys: SensorKeys,
                               with decoders: [any SensorFormatDecoder.Type]) -> Result<SensorReading, SensorDecodingError>? {
        for decoder in decoders {
            if let result = decoder.decode(advertisement, keys: keys) { return result }
        }
        return nil
    }
}

/// Decodes the advertisements of many devices over time: `SensorDecoders.decode`, plus what
/// a stream of advertisements needs. A value: one owner (a scan keeps one on its event loop).
///
/// - The counter of a device's encrypted frames must not go backwards: a lower one is
///   reported as `counterWentBack`, not accepted (an equal one is: a frame repeated).
///   bthome-ble also accepts a lower counter under 100, as a device restarted; that lets
///   anyone replay any of a device's first 100 frames at any time, so here a restarted
///   device's counter is accepted again only after `forgetCounter(of:)`.
/// - BlueZ keeps the latest data of each service UUID a device advertised, so a device that
///   alternates formats (the pvvx firmware sends 0x181A, 0xFCD2 and 0xFE95 frames in turn)
///   shows several entries at once. The entry that changed since this decoder last saw the
///   device is decoded first; when none changed, or on a first sighting, the formats are
///   tried in `SensorDecoders`' order.
public struct SensorDecoder: Sendable {
    /// The keys of encrypted devices.
    public var keys: SensorKeys
    /// The highest counter accepted from each device, per format. At most one entry per
    /// device with a key (only authenticated frames carry a counter).
    private var lastCounter: [Key: UInt32] = [:]
    /// The service data last seen of each device that advertises more than one entry (the
    /// only ones that need it): at most one entry per such device in range.
    private var lastServiceData: [BluetoothAddress: [BluetoothUUID: [UInt8]]] = [:]

    private struct Key: Hashable, Sendable {
        var address: BluetoothAddress
        var format: SensorFormat
    }

    /// The formats it tries, in order.
    private let decoders: [any SensorFormatDecoder.Type]

    /// A decoder that decrypts with `keys`.
    public init(keys: SensorKeys = SensorKeys()) {
        self.init(keys: keys, decoders: SensorDecoders.all)
    }

    /// A decoder of these formats only (tests).
    package init(keys: SensorKeys, decoders: [any SensorFormatDecoder.Type]) {
        self.keys = keys
        self.decoders = decoders
    }

    /// The reading of `advertisement` (see `SensorDecoders.decode`, and above for the entry
    /// decoded first); an encrypted frame whose counter is lower than the last one accepted
    /// from the device fails with `counterWentBack`.
    public mutating func decode(_ advertisement: SensorAdvertisement) -> Result<SensorReading, SensorDecodingError>? {
        guard let result = changedEntry(of: advertisement) ?? SensorDecoders.decode(advertisement, keys: keys, with: decoders) else {
            return nil
        }
        guard case .success(let reading) = result, let counter = reading.counter else { return result }
        let key = Key(address: advertisement.address, format: reading.format)
        if let last = lastCounter[key], counter < last {
            return .failure(SensorDecodingError(reading.format, .counterWentBack,
                                                "counter \(counter) is lower than \(last), already accepted from \(advertisement.address)"))
        }
        lastCounter[key] = counter
        return result
    }

    /// Accepts the next counter of `address` whatever it is (a device known to have started
    /// again from a lower counter, after a battery change).
    public mutating func forgetCounter(of address: BluetoothAddress) {
        lastCounter = lastCounter.filter { $0.key.address != address }
    }

    /// The result of the first service data entry (by UUID) that changed since the device was
    /// last seen and that a format recognises; nil when the device has one entry, is seen for
    /// the first time, or no changed entry is of a sensor format.
    private mutating func changedEntry(of advertisement: SensorAdvertisement) -> Result<SensorReading, SensorDecodingError>? {
        guard advertisement.serviceData.count > 1 else { return nil }
        let previous = lastServiceData.updateValue(advertisement.serviceData, forKey: advertisement.address)
        guard let previous else { return nil }
        for (uuid, bytes) in advertisement.serviceData.sorted(by: { $0.key < $1.key }) where previous[uuid] != bytes {
            var single = advertisement
            single.serviceData = [uuid: bytes]
            if let result = SensorDecoders.decode(single, keys: keys, with: decoders) { return result }
        }
        return nil
    }
}
