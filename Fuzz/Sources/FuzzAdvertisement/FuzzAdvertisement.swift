// Fuzz target: what a remote device controls — its advertisement (BlueZ's
// Device1 properties: ManufacturerData, ServiceData, UUIDs, names, RSSI, …)
// and its characteristic values (CharacteristicDecoding).
//
// First byte even — characteristic mode: a characteristic (mostly one bluectl
// decodes) and the rest as its value. Properties: a decoded value comes only
// from a UUID `canDecode` names, only when the value has exactly the length
// its flags imply, and fields are named snake_case. Second byte 0xE0…0xEF —
// beacon mode instead: a company identifier and the rest as manufacturer data
// (of Apple, or of that company) or as Eddystone service data, through
// BeaconDecoding. Properties: decoded exactly when the layout matches; a
// decoded iBeacon, AltBeacon or Eddystone UID/TLM/EID re-encodes to the same
// bytes; a URL is printable ASCII after a scheme.
//
// First byte odd — advertisement mode: a Device1 property map drawn by
// ValueGenerator (each known property usually of BlueZ's type, sometimes of
// any type), announced through InterfacesAdded into a BlueZObjectTree, seen
// by a ScanTracker and read as DeviceInfo; then changed by PropertiesChanged.
// Properties: DeviceInfo reports exactly the well-typed entries (an RSSI of
// 127, "not available", as none); the same InterfacesAdded marshalled by
// libdbus and decoded gives the same tree; the device's beacons are those of
// its entries one by one.
import FuzzSupport
#if canImport(Glibc)
import Glibc
#endif
@testable import BluectlCore
@testable import BluectlDBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() & 1 == 0 {
        characteristic(&input)
    } else {
        var generator = ValueGenerator(input, maxDepth: 4)
        advertisement(&generator)
    }
    return 0
}

// MARK: - Characteristic values

let decodable: [UInt16] = [0x2A19, 0x2A37, 0x2A38, 0x2A1C, 0x2A6E, 0x2A00, 0x2A24, 0x2A25, 0x2A26, 0x2A27, 0x2A28, 0x2A29]

func characteristic(_ input: inout FuzzInput) {
    let choice = input.byte()
    if (0xE0..<0xF0).contains(choice) {
        beaconFrame(kind: choice & 0x0F, &input)
        return
    }
    let uuid16 = choice < 0xF0 ? decodable[Int(choice) % decodable.count] : UInt16(truncatingIfNeeded: input.integer(2))
    let value = input.rest()
    let decoded = CharacteristicDecoding.decode(uuid16: uuid16, value)
    check(decoded == CharacteristicDecoding.decode(uuid: BluetoothUUID(uint16: uuid16), value), "decode by UUID differs")
    guard let decoded else {
        switch uuid16 {
        case 0x2A00, 0x2A24...0x2A29: check(false, "a string characteristic did not decode")
        case 0x2A19: check(value.count != 1 || value[0] > 100, "battery level \(value) not decoded")
        case 0x2A38: check(value.count != 1 || value[0] > 6, "body sensor location \(value) not decoded")
        case 0x2A6E: check(value.count != 2, "temperature \(value) not decoded")
        case 0x2A37: check(heartRateLengthOK(value) == false, "heart rate \(value) not decoded")
        default: break
        }
        return
    }
    check(CharacteristicDecoding.canDecode(uuid16: uuid16), "decoded \(uuid16) that canDecode denies")
    checkFieldNames(decoded.fields)
    switch uuid16 {
    case 0x2A19: check(value.count == 1 && decoded.fields[0].value == .int(Int(value[0])), "battery level \(value)")
    case 0x2A37: check(heartRateLengthOK(value) == true, "heart rate \(value) decoded as \(decoded)")
    case 0x2A1C:
        let flags = value[0]
        let expected = 5 + (flags & 0x02 != 0 ? 7 : 0) + (flags & 0x04 != 0 ? 1 : 0)
        check(value.count == expected, "temperature measurement of \(value.count) bytes, flags \(flags), decoded")
    case 0x2A6E: check(value.count == 2, "temperature \(value)")
    case 0x2A00, 0x2A24...0x2A29:
        var end = value.count
        while end > 0, value[end - 1] == 0 { end -= 1 }
        check(decoded.summary == String(decoding: value[..<end], as: UTF8.self), "string characteristic \(value)")
    default: break
    }
}

/// Fields exist, are named snake_case, each name once.
func checkFieldNames(_ fields: [DecodedField]) {
    check(!fields.isEmpty, "no fields")
    let names = fields.map(\.name)
    check(Set(names).count == names.count, "repeated field names \(names)")
    check(names.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (0x61...0x7A).contains($0) || $0 == 0x5F } }, "field names \(names)")
}

// MARK: - Beacons

/// Kind 0: manufacturer data of Apple; 1: of the company read from the input; 2 and up:
/// Eddystone service data.
func beaconFrame(kind: UInt8, _ input: inout FuzzInput) {
    let company = UInt16(truncatingIfNeeded: input.integer(2))
    let d = input.rest()
    switch kind {
    case 0, 1:
        let owner = kind == 0 ? BeaconDecoding.appleCompany : company
        let beacon = BeaconDecoding.beacon(company: owner, data: d)
        let isIBeacon = owner == BeaconDecoding.appleCompany && d.count == 23 && d[0] == 0x02 && d[1] == 0x15
        let isAltBeacon = d.count == 24 && d[0] == 0xBE && d[1] == 0xAC
        switch beacon {
        case .iBeacon(let b)?: check(isIBeacon && b.manufacturerData == d, "iBeacon \(d) → \(b)")
        case .altBeacon(let b)?: check(isAltBeacon && b.company == owner && b.manufacturerData == d, "AltBeacon \(d) → \(b)")
        case nil: check(!isIBeacon && !isAltBeacon, "manufacturer data \(d) of \(owner) not decoded")
        case let other?: check(false, "manufacturer data decoded as \(other)")
        }
        if let beacon { checkBeacon(beacon) }
    default:
        let beacon = BeaconDecoding.beacon(service: BeaconDecoding.eddystoneService, data: d)
        check(beacon == BeaconDecoding.eddystone(d), "by service and by frame differ")
        check(BeaconDecoding.beacon(service: BluetoothUUID(uint16: company), data: d) == nil || company == 0xFEAA,
              "a beacon under service \(company)")
        let type = d.first ?? 0xFF
        switch beacon {
        case .eddystoneUID(let b)?:
            check(type == 0x00 && (d.count == 18 || d.count == 20) && b.serviceData.prefix(18) == d.prefix(18), "UID \(d) → \(b)")
        case .eddystoneURL(let b)?:
            check(urlFrameOK(d), "URL \(d) decoded as \(b.url)")
            check(EddystoneURL.schemes.contains { b.url.hasPrefix($0) }, "URL \(b.url) without a scheme")
            check(b.url.utf8.allSatisfy { (0x21...0x7E).contains($0) }, "URL \(b.url) not printable ASCII")
        case .eddystoneTLM(let b)?: check(type == 0x20 && b.serviceData == d, "TLM \(d) → \(b)")
        case .eddystoneEID(let b)?: check(type == 0x30 && b.serviceData == d, "EID \(d) → \(b)")
        case nil:
            let expected = switch type {
            case 0x00: d.count == 18 || d.count == 20
            case 0x10: urlFrameOK(d)
            case 0x20: d.count == 14 && d[1] == 0
            case 0x30: d.count == 10
            default: false
            }
            check(!expected, "Eddystone frame \(d) not decoded")
        case let other?: check(false, "service data decoded as \(other)")
        }
        if let beacon { checkBeacon(beacon) }
    }
}

/// An Eddystone-URL frame's layout: type, TX power, scheme 0…3, up to 17 bytes that are
/// expansion codes or printable ASCII.
func urlFrameOK(_ d: [UInt8]) -> Bool {
    d.count >= 3 && d.count <= 20 && d[0] == 0x10 && d[2] <= 3 && d[3...].allSatisfy { $0 <= 0x0D || (0x21...0x7E).contains($0) }
}

func checkBeacon(_ beacon: Beacon) {
    checkFieldNames(beacon.fields)
    check(!beacon.kind.isEmpty && !beacon.summary.isEmpty, "kind or summary empty")
    // Printable ASCII but for TLM's "°".
    check(beacon.summary.unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) || $0 == "°" }, "summary \(beacon.summary)")
}

/// Heart Rate Measurement: whether the value is as long as its flags say:
/// flags, bpm (1 or 2), energy (0 or 2), RR intervals (0, or 2 each and at least one).
func heartRateLengthOK(_ v: [UInt8]) -> Bool {
    guard let flags = v.first else { return false }
    let fixed = 1 + (flags & 0x01 != 0 ? 2 : 1) + (flags & 0x08 != 0 ? 2 : 0)
    guard v.count >= fixed else { return false }
    let rest = v.count - fixed
    return flags & 0x10 != 0 ? rest > 0 && rest % 2 == 0 : rest == 0
}

// MARK: - Advertisements

/// Device1 properties and their types in BlueZ.
let deviceProperties: [(String, FuzzType)] = [
    ("Address", .basic(UInt8(ascii: "s"))), ("AddressType", .basic(UInt8(ascii: "s"))),
    ("Name", .basic(UInt8(ascii: "s"))), ("Alias", .basic(UInt8(ascii: "s"))),
    ("RSSI", .basic(UInt8(ascii: "n"))), ("TxPower", .basic(UInt8(ascii: "n"))),
    ("UUIDs", .array(.basic(UInt8(ascii: "s")))),
    ("ManufacturerData", .dictionary(key: UInt8(ascii: "q"), value: .variant)),
    ("ServiceData", .dictionary(key: UInt8(ascii: "s"), value: .variant)),
    ("AdvertisingFlags", .bytes), ("Appearance", .basic(UInt8(ascii: "q"))),
    ("Icon", .basic(UInt8(ascii: "s"))), ("Adapter", .basic(UInt8(ascii: "o"))),
    ("Connected", .basic(UInt8(ascii: "b"))), ("Paired", .basic(UInt8(ascii: "b"))),
    ("Bonded", .basic(UInt8(ascii: "b"))), ("Trusted", .basic(UInt8(ascii: "b"))),
    ("ServicesResolved", .basic(UInt8(ascii: "b"))),
]

let adapter = ObjectPath(verified: "/org/bluez/hci0")

/// BLUECTL_FUZZ_VERBOSE=1: print what an input generates (to replay an artifact).
let verbose = getenv("BLUECTL_FUZZ_VERBOSE") != nil

/// A property map: a count, then per entry a key choice and a type choice.
func propertyMap(_ g: inout ValueGenerator) -> [DBusDictEntry] {
    let count = Int(g.input.byte() % 12)
    return (0..<count).map { _ in
        let choice = g.input.byte()
        let key: String
        let type: FuzzType
        if Int(choice) < 224 {
            let known = deviceProperties[Int(choice) % deviceProperties.count]
            key = known.0
            // Mostly BlueZ's type; sometimes anything.
            type = g.input.byte() < 224 ? known.1 : g.type(depth: 1)
        } else {
            key = g.string()
            type = g.type(depth: 1)
        }
        return DBusDictEntry(.string(key), .variant(g.value(of: type, depth: 1)))
    }
}

func advertisement(_ g: inout ValueGenerator) {
    let pathChoice = g.input.byte()
    let path: ObjectPath = pathChoice < 128
        ? adapter.appending("dev_AA_BB_CC_DD_EE_\(String(pathChoice, radix: 16, uppercase: true))")!
        : (ObjectPath(g.string()) ?? adapter)
    let added = propertyMap(&g)
    let addedArguments: [DBusValue] = [
        .objectPath(path),
        .dictionary(key: .string, value: DBusSignature(unchecked: "a{sv}"), [
            DBusDictEntry(.string(BlueZ.deviceInterface), .dictionary(key: .string, value: .variant, added)),
        ]),
    ]
    var options = ScanOptions()
    options.duplicates = g.input.bool()
    if g.input.bool() { options.services = [BluetoothUUID(uint16: UInt16(truncatingIfNeeded: g.input.integer(2)))] }
    if g.input.bool() { options.rssi = Int(Int8(bitPattern: g.input.byte())) }
    if g.input.bool() { options.nameContains = g.string() }
    if g.input.bool() { options.pattern = g.string() }

    if verbose { say("options: \(options)\nInterfacesAdded: \(addedArguments)") }

    var tree = BlueZObjectTree()
    var tracker = ScanTracker(adapter: adapter, options: options)
    guard let change = tree.apply(interfacesAdded: addedArguments) else {
        check(false, "InterfacesAdded with a{sa{sv}} refused")
        return
    }
    let discovery = tracker.handle(change, in: tree)
    let properties = tree.properties(path, BlueZ.deviceInterface) ?? [:]
    let device = DeviceInfo(path: path, properties: properties)
    checkDevice(device, properties)
    if let discovery {
        check(discovery.kind == .discovered && discovery.device == device, "first sighting \(discovery)")
        check(device.adapter == adapter, "discovery on another adapter")
    }
    if options == ScanOptions(), device.adapter == adapter {
        check(discovery != nil, "an unfiltered scan missed \(device)")
    }

    // The same announcement through libdbus's marshaller gives the same tree.
    let signal = DBusMessage.signal(path: .root, interface: BlueZ.objectManager, member: "InterfacesAdded", arguments: addedArguments)
    if let wire = try? MessageCodec.marshal(signal), !properties.contains(where: { $0.value.containsNaN }) {
        guard let back = try? MessageCodec.demarshal(wire) else {
            check(false, "libdbus rejected InterfacesAdded bluectl encoded")
            return
        }
        var tree2 = BlueZObjectTree()
        _ = tree2.apply(interfacesAdded: back.arguments)
        check(tree2 == tree, "InterfacesAdded through the wire built another tree")
    }

    // A later PropertiesChanged: merged, invalidated keys gone.
    let changed = propertyMap(&g)
    let invalidated = (0..<Int(g.input.byte() % 3)).map { _ in
        deviceProperties[Int(g.input.byte()) % deviceProperties.count].0
    }
    let change2 = tree.apply(propertiesChangedAt: path, arguments: [
        .string(BlueZ.deviceInterface), .dictionary(key: .string, value: .variant, changed), .stringArray(invalidated),
    ])
    check(change2 != nil, "PropertiesChanged for a known object refused")
    let merged = tree.properties(path, BlueZ.deviceInterface) ?? [:]
    for key in invalidated { check(merged[key] == nil, "invalidated \(key) kept") }
    let lastChanged = Dictionary(changed.map { ($0.key.string!, $0.value.unwrapped) }, uniquingKeysWith: { _, new in new })
    for (key, value) in lastChanged where !invalidated.contains(key) {
        check(merged[key].map { sameBits($0, value) } == true, "changed \(key) not merged")
    }
    if let change2 { _ = tracker.handle(change2, in: tree) }
    checkDevice(DeviceInfo(path: path, properties: merged), merged)
}

/// DeviceInfo holds exactly the well-typed parts of `p`.
func checkDevice(_ d: DeviceInfo, _ p: PropertyMap) {
    check(d.address == (p["Address"]?.string.flatMap { BluetoothAddress($0) } ?? DeviceInfo.addressFromPath(d.path)), "address \(d.address)")
    check(d.name == p["Name"]?.string && d.alias == p["Alias"]?.string, "name/alias")
    check(d.rssi == p["RSSI"]?.integer.flatMap { $0 == 127 ? nil : $0 } && d.txPower == p["TxPower"]?.integer, "rssi/tx power")
    let uuidStrings = p["UUIDs"]?.stringArray ?? []
    check(d.serviceUUIDs.count <= uuidStrings.count, "more service UUIDs than strings")
    check(d.serviceUUIDs == uuidStrings.compactMap { try? BluetoothUUID($0) }, "service UUIDs")
    var manufacturer: [UInt16: [UInt8]] = [:]
    for entry in p["ManufacturerData"]?.dictionaryEntries ?? [] {
        if case .uint16(let company) = entry.key, let bytes = entry.value.bytes { manufacturer[company] = bytes }
    }
    check(d.manufacturerData == manufacturer, "manufacturer data \(d.manufacturerData) from \(String(describing: p["ManufacturerData"]))")
    for (uuid, bytes) in d.serviceData {
        let entries = p["ServiceData"]?.dictionaryEntries ?? []
        check(entries.contains { $0.key.string.flatMap { try? BluetoothUUID($0) } == uuid && $0.value.bytes == bytes },
              "service data \(uuid) not in the map")
    }
    check(d.advertisingFlags == p["AdvertisingFlags"]?.bytes, "flags")
    if let name = d.name, !name.isEmpty { check(d.displayName == name, "display name") }
    _ = ScanOptions().matches(d)
    let beacons = BeaconDecoding.beacons(in: d)
    let oneByOne = d.manufacturerData.compactMap { BeaconDecoding.beacon(company: $0.key, data: $0.value) }
        + d.serviceData.compactMap { BeaconDecoding.beacon(service: $0.key, data: $0.value) }
    check(beacons.count == oneByOne.count && oneByOne.allSatisfy(beacons.contains), "device beacons \(beacons)")
    check((BeaconDecoding.summary(of: d) == nil) == beacons.isEmpty, "summary without beacons")
    beacons.forEach(checkBeacon)
}

/// Equal, a NaN equal to a NaN with the same bits.
func sameBits(_ a: DBusValue, _ b: DBusValue) -> Bool {
    a.containsNaN || b.containsNaN ? String(describing: a) == String(describing: b) : a == b
}

extension DBusValue {
    var containsNaN: Bool {
        switch self {
        case .double(let d): d.isNaN
        case .array(_, let items), .structure(let items): items.contains(where: \.containsNaN)
        case .dictionary(_, _, let entries): entries.contains { $0.key.containsNaN || $0.value.containsNaN }
        case .variant(let inner): inner.containsNaN
        default: false
        }
    }
}
