// BeaconDecoding: the well-known beacon formats carried in advertisement data — Apple's
// iBeacon and AltBeacon (manufacturer data), Google's Eddystone UID, URL, TLM and EID frames
// (service data of 0xFEAA). Pure functions over bytes; a frame of the wrong length or with a
// value its specification reserves is not decoded, and the caller keeps showing it as hex.
// The layouts are in docs/beacons.md.

/// An iBeacon advertisement: manufacturer data of Apple (0x004C) that starts with type 0x02
/// and length 0x15, then the proximity UUID, major and minor (big-endian) and the measured power.
public struct IBeacon: Sendable, Equatable {
    /// The beacon's proximity UUID (a vendor's or a site's).
    public var proximityUUID: BluetoothUUID
    /// The major number: a group of beacons within the UUID.
    public var major: UInt16
    /// The minor number: one beacon within the major group.
    public var minor: UInt16
    /// The RSSI expected 1 m from the beacon, in dBm.
    public var measuredPower: Int8

    /// An iBeacon with these fields.
    public init(proximityUUID: BluetoothUUID, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// The manufacturer data (after the company identifier) that advertises this beacon.
    public var manufacturerData: [UInt8] {
        [0x02, 0x15] + proximityUUID.bytes + bigEndian(major) + bigEndian(minor) + [UInt8(bitPattern: measuredPower)]
    }
}

/// An AltBeacon advertisement: manufacturer data (of any company) that starts with the beacon
/// code 0xBEAC, then a 20-byte beacon ID, the reference RSSI and a byte the manufacturer defines.
public struct AltBeacon: Sendable, Equatable {
    /// The company identifier the data was advertised under (the spec's MFG ID).
    public var company: UInt16
    /// 20 bytes, big-endian; the first 16 usually identify the organisation.
    public var beaconID: [UInt8]
    /// The RSSI expected 1 m from the beacon, in dBm.
    public var referenceRSSI: Int8
    /// The MFG RESERVED byte, defined by the manufacturer.
    public var manufacturerReserved: UInt8

    /// An AltBeacon with these fields.
    public init(company: UInt16, beaconID: [UInt8], referenceRSSI: Int8, manufacturerReserved: UInt8) {
        self.company = company
        self.beaconID = beaconID
        self.referenceRSSI = referenceRSSI
        self.manufacturerReserved = manufacturerReserved
    }

    /// The manufacturer data (after the company identifier) that advertises this beacon.
    public var manufacturerData: [UInt8] {
        [0xBE, 0xAC] + beaconID + [UInt8(bitPattern: referenceRSSI), manufacturerReserved]
    }
}

/// An Eddystone-UID frame (type 0x00): a 10-byte namespace and a 6-byte instance.
public struct EddystoneUID: Sendable, Equatable {
    /// Calibrated TX power at 0 m, in dBm.
    public var txPower: Int8
    /// The 10-byte namespace (often a hash of a domain).
    public var namespace: [UInt8]
    /// The 6-byte instance within the namespace.
    public var instance: [UInt8]

    /// An Eddystone-UID frame with these fields.
    public init(txPower: Int8, namespace: [UInt8], instance: [UInt8]) {
        self.txPower = txPower
        self.namespace = namespace
        self.instance = instance
    }

    /// The service data of this frame, with the two reserved bytes (zero).
    public var serviceData: [UInt8] { [0x00, UInt8(bitPattern: txPower)] + namespace + instance + [0, 0] }
}

/// An Eddystone-URL frame (type 0x10): a URL compressed with a scheme prefix code and
/// expansion codes for common domain endings.
public struct EddystoneURL: Sendable, Equatable {
    /// Calibrated TX power at 0 m, in dBm.
    public var txPower: Int8
    /// The expanded URL (printable ASCII only), e.g. `https://goo.gl/Aq18zF`.
    public var url: String

    /// An Eddystone-URL frame with this transmit power and decoded URL.
    public init(txPower: Int8, url: String) {
        self.txPower = txPower
        self.url = url
    }

    /// Scheme prefix codes 0x00…0x03.
    public static let schemes = ["http://www.", "https://www.", "http://", "https://"]
    /// Expansion codes 0x00…0x0D; 0x0E…0x20 and 0x7F…0xFF are reserved.
    public static let expansions = [
        ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
        ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov",
    ]
}

/// An unencrypted Eddystone-TLM frame (type 0x20, version 0x00): the beacon's telemetry.
public struct EddystoneTLM: Sendable, Equatable {
    /// Battery voltage in mV; nil when the beacon does not measure it (sent as 0).
    public var batteryMillivolts: UInt16?
    /// Temperature in °C (8.8 fixed point, so a multiple of 1/256); nil when not
    /// measured (sent as 0x8000).
    public var temperature: Double?
    /// Advertising PDUs sent since power-on or reboot.
    public var advertisementCount: UInt32
    /// Time since power-on or reboot, in units of 0.1 s.
    public var uptimeTenths: UInt32

    /// An Eddystone-TLM frame with these fields.
    public init(batteryMillivolts: UInt16?, temperature: Double?, advertisementCount: UInt32, uptimeTenths: UInt32) {
        self.batteryMillivolts = batteryMillivolts
        self.temperature = temperature
        self.advertisementCount = advertisementCount
        self.uptimeTenths = uptimeTenths
    }

    /// The TLM version this decodes (the encrypted version 0x01 is left alone).
    public static let version: UInt8 = 0

    /// The service data of this frame.
    public var serviceData: [UInt8] {
        let temp = temperature.map { UInt16(bitPattern: Int16(($0 * 256).rounded())) } ?? 0x8000
        return [0x20, Self.version] + bigEndian(batteryMillivolts ?? 0) + bigEndian(temp)
            + bigEndian(advertisementCount) + bigEndian(uptimeTenths)
    }
}

/// An Eddystone-EID frame (type 0x30): an 8-byte ephemeral identifier.
public struct EddystoneEID: Sendable, Equatable {
    /// Calibrated TX power at 0 m, in dBm.
    public var txPower: Int8
    /// The 8-byte rotating ephemeral identifier.
    public var ephemeralID: [UInt8]

    /// An Eddystone-EID frame with these fields.
    public init(txPower: Int8, ephemeralID: [UInt8]) {
        self.txPower = txPower
        self.ephemeralID = ephemeralID
    }

    /// The service data of this frame.
    public var serviceData: [UInt8] { [0x30, UInt8(bitPattern: txPower)] + ephemeralID }
}

/// A beacon decoded from one manufacturer-data or service-data entry.
public enum Beacon: Sendable, Equatable {
    /// Apple's iBeacon (manufacturer data of company 0x004C).
    case iBeacon(IBeacon)
    /// AltBeacon (manufacturer data, beacon code 0xBEAC).
    case altBeacon(AltBeacon)
    /// Eddystone-UID (service data of 0xFEAA, frame 0x00).
    case eddystoneUID(EddystoneUID)
    /// Eddystone-URL (service data of 0xFEAA, frame 0x10).
    case eddystoneURL(EddystoneURL)
    /// Eddystone-TLM telemetry (service data of 0xFEAA, frame 0x20).
    case eddystoneTLM(EddystoneTLM)
    /// Eddystone-EID (service data of 0xFEAA, frame 0x30).
    case eddystoneEID(EddystoneEID)

    /// The format as a snake_case key: `ibeacon`, `altbeacon`, `eddystone_uid`,
    /// `eddystone_url`, `eddystone_tlm`, `eddystone_eid`.
    public var kind: String {
        switch self {
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .eddystoneUID: "eddystone_uid"
        case .eddystoneURL: "eddystone_url"
        case .eddystoneTLM: "eddystone_tlm"
        case .eddystoneEID: "eddystone_eid"
        }
    }

    /// Named values in a fixed order per format (snake_case, units in the name where it
    /// helps); optional TLM readings only when the beacon measures them.
    public var fields: [DecodedField] {
        func f(_ name: String, _ value: DecodedFieldValue) -> DecodedField { DecodedField(name: name, value: value) }
        switch self {
        case .iBeacon(let b):
            return [f("uuid", .string(b.proximityUUID.uuidString)), f("major", .int(Int(b.major))),
                    f("minor", .int(Int(b.minor))), f("measured_power", .int(Int(b.measuredPower)))]
        case .altBeacon(let b):
            return [f("company", .int(Int(b.company))), f("id", .string(ByteFormats.hex(b.beaconID))),
                    f("reference_rssi", .int(Int(b.referenceRSSI))), f("mfg_reserved", .int(Int(b.manufacturerReserved)))]
        case .eddystoneUID(let b):
            return [f("namespace", .string(ByteFormats.hex(b.namespace))), f("instance", .string(ByteFormats.hex(b.instance))),
                    f("tx_power", .int(Int(b.txPower)))]
        case .eddystoneURL(let b):
            return [f("url", .string(b.url)), f("tx_power", .int(Int(b.txPower)))]
        case .eddystoneTLM(let b):
            var out = [f("version", .int(Int(EddystoneTLM.version)))]
            if let mv = b.batteryMillivolts { out.append(f("battery_mv", .int(Int(mv)))) }
            if let t = b.temperature { out.append(f("temperature_c", .double(t))) }
            out.append(f("adv_count", .int(Int(b.advertisementCount))))
            out.append(f("uptime_s", .double(Double(b.uptimeTenths) / 10)))
            return out
        case .eddystoneEID(let b):
            return [f("eid", .string(ByteFormats.hex(b.ephemeralID))), f("tx_power", .int(Int(b.txPower)))]
        }
    }

    /// One short line for people, e.g. `iBeacon e2c56db5-dffb-48d2-b060-d0f5a71096e0 major 1 minor 2, -59 dBm at 1 m`
    /// or `Eddystone-URL https://goo.gl/Aq18zF, -18 dBm at 0 m`. Only ASCII the decoder
    /// checked: safe to print.
    public var summary: String {
        switch self {
        case .iBeacon(let b):
            return "iBeacon \(b.proximityUUID.uuidString) major \(b.major) minor \(b.minor), \(b.measuredPower) dBm at 1 m"
        case .altBeacon(let b):
            return "AltBeacon \(ByteFormats.hex(b.beaconID)), \(b.referenceRSSI) dBm at 1 m"
        case .eddystoneUID(let b):
            return "Eddystone-UID \(ByteFormats.hex(b.namespace)) \(ByteFormats.hex(b.instance)), \(b.txPower) dBm at 0 m"
        case .eddystoneURL(let b):
            return "Eddystone-URL \(b.url), \(b.txPower) dBm at 0 m"
        case .eddystoneTLM(let b):
            var parts: [String] = []
            if let mv = b.batteryMillivolts { parts.append("\(mv) mV") }
            if let t = b.temperature { parts.append("\(t) °C") }
            parts.append("adv count \(b.advertisementCount)")
            parts.append("up \(Double(b.uptimeTenths) / 10) s")
            return "Eddystone-TLM " + parts.joined(separator: ", ")
        case .eddystoneEID(let b):
            return "Eddystone-EID \(ByteFormats.hex(b.ephemeralID)), \(b.txPower) dBm at 0 m"
        }
    }
}

/// Decoders of the beacon formats. Each takes the bytes of one advertisement-data entry and
/// returns nil for anything else, for a truncated or overlong frame and for reserved values;
/// none traps on any input.
public enum BeaconDecoding {
    /// Apple's company identifier, under which iBeacons advertise.
    public static let appleCompany: UInt16 = 0x004C
    /// The Eddystone service (0xFEAA), under whose service data the frames travel.
    public static let eddystoneService = BluetoothUUID(uint16: 0xFEAA)

    /// The beacon in the manufacturer data of `company` (bytes after the company identifier):
    /// an iBeacon (Apple, 23 bytes starting 02 15) or an AltBeacon (24 bytes starting BE AC).
    public static func beacon(company: UInt16, data: [UInt8]) -> Beacon? {
        if company == appleCompany, let b = iBeacon(data) { return .iBeacon(b) }
        return altBeacon(company: company, data).map { .altBeacon($0) }
    }

    /// The beacon in the service data of `service`: an Eddystone frame under 0xFEAA.
    public static func beacon(service: BluetoothUUID, data: [UInt8]) -> Beacon? {
        service == eddystoneService ? eddystone(data) : nil
    }

    /// Every beacon the device advertises: manufacturer data by company identifier, then
    /// service data by UUID.
    public static func beacons(in device: DeviceInfo) -> [Beacon] {
        // The entries tried where they lie and only the beacons found put in
        // order: most advertisements hold none, and sorting each map first
        // was two arrays per scan event for nothing.
        var byCompany: [(key: UInt16, beacon: Beacon)] = []
        for (company, data) in device.manufacturerData {
            if let found = beacon(company: company, data: data) { byCompany.append((company, found)) }
        }
        var byService: [(key: BluetoothUUID, beacon: Beacon)] = []
        for (uuid, data) in device.serviceData {
            if let found = beacon(service: uuid, data: data) { byService.append((uuid, found)) }
        }
        if byCompany.isEmpty && byService.isEmpty { return [] }
        return byCompany.sorted { $0.key < $1.key }.map(\.beacon) + byService.sorted { $0.key < $1.key }.map(\.beacon)
    }

    /// The summaries of the device's beacons joined by "; ", or nil when it advertises none:
    /// what a one-line view of the device shows.
    public static func summary(of device: DeviceInfo) -> String? {
        let all = beacons(in: device)
        return all.isEmpty ? nil : all.map(\.summary).joined(separator: "; ")
    }

    /// iBeacon manufacturer data (after Apple's company identifier): exactly 23 bytes.
    public static func iBeacon(_ d: [UInt8]) -> IBeacon? {
        guard d.count == 23, d[0] == 0x02, d[1] == 0x15, let uuid = BluetoothUUID(bytes: d[2..<18]) else { return nil }
        return IBeacon(proximityUUID: uuid, major: be16(d, 18), minor: be16(d, 20), measuredPower: Int8(bitPattern: d[22]))
    }

    /// AltBeacon manufacturer data (after the company identifier): exactly 24 bytes.
    public static func altBeacon(company: UInt16, _ d: [UInt8]) -> AltBeacon? {
        guard d.count == 24, d[0] == 0xBE, d[1] == 0xAC else { return nil }
        return AltBeacon(company: company, beaconID: Array(d[2..<22]), referenceRSSI: Int8(bitPattern: d[22]),
                         manufacturerReserved: d[23])
    }

    /// An Eddystone frame (the service data of 0xFEAA): UID (18 bytes, or 20 with the
    /// reserved bytes), URL (3 to 20), TLM version 0 (14), EID (10). The encrypted TLM
    /// and unknown frame types are not decoded.
    public static func eddystone(_ d: [UInt8]) -> Beacon? {
        guard d.count >= 2 else { return nil }
        let tx = Int8(bitPattern: d[1])
        switch d[0] {
        case 0x00:
            guard d.count == 18 || d.count == 20 else { return nil }
            return .eddystoneUID(EddystoneUID(txPower: tx, namespace: Array(d[2..<12]), instance: Array(d[12..<18])))
        case 0x10:
            return eddystoneURL(d).map { .eddystoneURL($0) }
        case 0x20:
            guard d.count == 14, d[1] == EddystoneTLM.version else { return nil }
            let battery = be16(d, 2)
            let temp = be16(d, 4)
            return .eddystoneTLM(EddystoneTLM(
                batteryMillivolts: battery == 0 ? nil : battery,
                temperature: temp == 0x8000 ? nil : Double(Int16(bitPattern: temp)) / 256,
                advertisementCount: be32(d, 6), uptimeTenths: be32(d, 10)))
        case 0x30:
            guard d.count == 10 else { return nil }
            return .eddystoneEID(EddystoneEID(txPower: tx, ephemeralID: Array(d[2..<10])))
        default:
            return nil
        }
    }

    /// Frame type, TX power, scheme prefix code, then up to 17 bytes of URL: printable
    /// ASCII (0x21…0x7E) or expansion codes (0x00…0x0D).
    private static func eddystoneURL(_ d: [UInt8]) -> EddystoneURL? {
        guard (3...20).contains(d.count), Int(d[2]) < EddystoneURL.schemes.count else { return nil }
        var url = EddystoneURL.schemes[Int(d[2])]
        for b in d[3...] {
            if Int(b) < EddystoneURL.expansions.count {
                url += EddystoneURL.expansions[Int(b)]
            } else if (0x21...0x7E).contains(b) {
                url.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                return nil
            }
        }
        return EddystoneURL(txPower: Int8(bitPattern: d[1]), url: url)
    }

    private static func be16(_ d: [UInt8], _ i: Int) -> UInt16 { UInt16(d[i]) << 8 | UInt16(d[i + 1]) }

    private static func be32(_ d: [UInt8], _ i: Int) -> UInt32 { UInt32(be16(d, i)) << 16 | UInt32(be16(d, i + 2)) }
}

private func bigEndian(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(truncatingIfNeeded: v)] }

private func bigEndian(_ v: UInt32) -> [UInt8] { bigEndian(UInt16(v >> 16)) + bigEndian(UInt16(truncatingIfNeeded: v)) }
