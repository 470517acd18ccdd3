import BluectlDBus
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// CBCharacteristicProperties from BlueZ's `Flags`.
public struct CharacteristicProperties: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The value may be broadcast in advertisements.
    public static let broadcast = CharacteristicProperties(rawValue: 1 << 0)
    /// The value can be read.
    public static let read = CharacteristicProperties(rawValue: 1 << 1)
    /// The value can be written without a response (Write Command).
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 1 << 2)
    /// The value can be written with a response (Write Request).
    public static let write = CharacteristicProperties(rawValue: 1 << 3)
    /// The value can be notified (no confirmation).
    public static let notify = CharacteristicProperties(rawValue: 1 << 4)
    /// The value can be indicated (confirmed by the central).
    public static let indicate = CharacteristicProperties(rawValue: 1 << 5)
    /// Signed writes without a response.
    public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 1 << 6)
    /// More properties are in the Extended Properties descriptor.
    public static let extendedProperties = CharacteristicProperties(rawValue: 1 << 7)
    /// Reliable (queued, verified) writes.
    public static let reliableWrite = CharacteristicProperties(rawValue: 1 << 8)
    /// Reading needs encryption (pairing).
    public static let encryptedRead = CharacteristicProperties(rawValue: 1 << 9)
    /// Writing needs encryption (pairing).
    public static let encryptedWrite = CharacteristicProperties(rawValue: 1 << 10)

    /// From BlueZ's flag strings ("read", "encrypt-read", "write-without-response", …).
    public init(flags: [String]) {
        var p: CharacteristicProperties = []
        for flag in flags {
            switch flag {
            case "broadcast": p.insert(.broadcast)
            case "read": p.insert(.read)
            case "encrypt-read", "encrypt-authenticated-read", "secure-read": p.formUnion([.read, .encryptedRead])
            case "write-without-response": p.insert(.writeWithoutResponse)
            case "write": p.insert(.write)
            case "encrypt-write", "encrypt-authenticated-write", "secure-write": p.formUnion([.write, .encryptedWrite])
            case "notify": p.insert(.notify)
            case "indicate": p.insert(.indicate)
            case "authenticated-signed-writes": p.insert(.authenticatedSignedWrites)
            case "extended-properties": p.insert(.extendedProperties)
            case "reliable-write": p.insert(.reliableWrite)
            default: break
            }
        }
        self = p
    }

    /// A read is allowed.
    public var canRead: Bool { contains(.read) }
    /// A write with a response is allowed (plain or reliable).
    public var canWriteWithResponse: Bool { !isDisjoint(with: [.write, .reliableWrite]) }
    /// A write without a response is allowed (plain or signed).
    public var canWriteWithoutResponse: Bool { !isDisjoint(with: [.writeWithoutResponse, .authenticatedSignedWrites]) }
    /// The value can be subscribed to (notify or indicate).
    public var canNotify: Bool { !isDisjoint(with: [.notify, .indicate]) }
}

/// CBCharacteristicWriteType.
public enum WriteType: String, Sendable, Equatable {
    /// An ATT Write Request (BlueZ `type` "request"): the peripheral answers.
    case withResponse
    /// An ATT Write Command (BlueZ `type` "command"): no answer.
    case withoutResponse

    var bluezType: String { self == .withResponse ? "request" : "command" }
}

/// A GATT service as BlueZ exports it (`GattService1`).
public struct GattService: Sendable, Equatable {
    package var path: ObjectPath
    package var device: ObjectPath
    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Primary (true) or secondary, included by another service.
    public var isPrimary: Bool
    /// The attribute handle (BlueZ ≥ 5.47 exports it), or nil.
    public var handle: Int?
    /// Paths of included services.
    package var includes: [ObjectPath]

    package init?(path: ObjectPath, properties p: PropertyMap) {
        guard let text = p["UUID"]?.string, let uuid = try? BluetoothUUID(text) else { return nil }
        self.path = path
        self.uuid = uuid
        device = p["Device"]?.objectPath ?? path.parent ?? path
        isPrimary = p["Primary"]?.bool ?? true
        handle = p["Handle"]?.integer ?? BlueZ566.attributeHandle(fromPath: path)
        includes = (p["Includes"]?.array ?? []).compactMap(\.objectPath)
    }
}

/// A characteristic (`GattCharacteristic1`).
public struct GattCharacteristic: Sendable, Equatable {
    package var path: ObjectPath
    package var service: ObjectPath
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// BlueZ's flag strings, as given.
    public var flags: [String]
    /// The properties parsed from `flags`.
    public var properties: CharacteristicProperties
    /// The ATT handle of its value declaration, when BlueZ reports it.
    public var handle: Int?
    /// The ATT MTU of the connection (BlueZ ≥ 5.62), or nil.
    public var mtu: Int?
    /// Whether BlueZ has notifications or indications on for it (any client's).
    public var isNotifying: Bool
    /// The last value BlueZ cached (read or notified), if any.
    public var value: [UInt8]?

    package init?(path: ObjectPath, properties p: PropertyMap) {
        guard let text = p["UUID"]?.string, let uuid = try? BluetoothUUID(text) else { return nil }
        self.path = path
        self.uuid = uuid
        service = p["Service"]?.objectPath ?? path.parent ?? path
        flags = p["Flags"]?.stringArray ?? []
        properties = CharacteristicProperties(flags: flags)
        handle = p["Handle"]?.integer ?? BlueZ566.attributeHandle(fromPath: path)
        mtu = p["MTU"]?.integer
        isNotifying = p["Notifying"]?.bool ?? false
        value = p["Value"]?.bytes
    }

    /// Whether `Flags` list this kind of write.
    public func supports(_ type: WriteType) -> Bool {
        type == .withResponse ? properties.canWriteWithResponse : properties.canWriteWithoutResponse
    }

    /// CoreBluetooth's `maximumWriteValueLength(for:)`: MTU − 3 for a write
    /// without response (23 − 3 when BlueZ does not say), 512 for a write
    /// with response (BlueZ splits it into a long write).
    public func maximumWriteValueLength(for type: WriteType) -> Int {
        switch type {
        case .withResponse: return 512
        case .withoutResponse: return max(20, (mtu ?? 23) - 3)
        }
    }
}

/// A descriptor (`GattDescriptor1`).
public struct GattDescriptor: Sendable, Equatable {
    package var path: ObjectPath
    package var characteristic: ObjectPath
    /// The descriptor's UUID.
    public var uuid: BluetoothUUID
    /// BlueZ's flags for it ("read", "write", "encrypt-read", …).
    public var flags: [String]
    /// Its ATT handle, when BlueZ reports it.
    public var handle: Int?

    package init?(path: ObjectPath, properties p: PropertyMap) {
        guard let text = p["UUID"]?.string, let uuid = try? BluetoothUUID(text) else { return nil }
        self.path = path
        self.uuid = uuid
        characteristic = p["Characteristic"]?.objectPath ?? path.parent ?? path
        flags = p["Flags"]?.stringArray ?? []
        handle = p["Handle"]?.integer ?? BlueZ566.attributeHandle(fromPath: path)
    }

    /// BlueZ lists no flags for many descriptors; only an explicit list without a read flag says no.
    public var canRead: Bool {
        flags.isEmpty || flags.contains { $0.hasSuffix("read") }
    }

    /// BlueZ allows writing it (any of its write flags).
    public var canWrite: Bool {
        flags.isEmpty || flags.contains { $0.hasSuffix("write") }
    }
}

/// A device's GATT database as BlueZ shows it: a pure value read from the tree.
public struct GattDatabase: Sendable, Equatable {
    /// Every service, in handle order.
    public var services: [GattService]
    /// Every characteristic, in handle order.
    public var characteristics: [GattCharacteristic]
    /// Every descriptor, in handle order.
    public var descriptors: [GattDescriptor]

    /// Everything exported under `device`, in handle order (path order when there are no handles).
    package init(tree: BlueZObjectTree, device: ObjectPath) {
        var services: [GattService] = []
        var characteristics: [GattCharacteristic] = []
        var descriptors: [GattDescriptor] = []
        for (path, interfaces) in tree.objects where path.isDescendant(of: device) {
            if let p = interfaces[BlueZ.serviceInterface], let s = GattService(path: path, properties: p) { services.append(s) }
            if let p = interfaces[BlueZ.characteristicInterface], let c = GattCharacteristic(path: path, properties: p) {
                characteristics.append(c)
            }
            if let p = interfaces[BlueZ.descriptorInterface], let d = GattDescriptor(path: path, properties: p) { descriptors.append(d) }
        }
        self.services = services.sorted { Self.order($0.handle, $0.path, $1.handle, $1.path) }
        self.characteristics = characteristics.sorted { Self.order($0.handle, $0.path, $1.handle, $1.path) }
        self.descriptors = descriptors.sorted { Self.order($0.handle, $0.path, $1.handle, $1.path) }
    }

    /// A database of these attributes (each list in handle order).
    public init(services: [GattService], characteristics: [GattCharacteristic], descriptors: [GattDescriptor]) {
        self.services = services
        self.characteristics = characteristics
        self.descriptors = descriptors
    }

    private static func order(_ h1: Int?, _ p1: ObjectPath, _ h2: Int?, _ p2: ObjectPath) -> Bool {
        if let h1, let h2, h1 != h2 { return h1 < h2 }
        return p1 < p2
    }

    /// The characteristics of `service`, in handle order.
    public func characteristics(of service: GattService) -> [GattCharacteristic] {
        characteristics.filter { $0.service == service.path }
    }

    /// The descriptors of `characteristic`, in handle order.
    public func descriptors(of characteristic: GattCharacteristic) -> [GattDescriptor] {
        descriptors.filter { $0.characteristic == characteristic.path }
    }

    /// The service `characteristic` belongs to.
    public func service(of characteristic: GattCharacteristic) -> GattService? {
        services.first { $0.path == characteristic.service }
    }

    /// Services with one of `uuids` (all when empty).
    public func services(matching uuids: [BluetoothUUID]) -> [GattService] {
        uuids.isEmpty ? services : services.filter { uuids.contains($0.uuid) }
    }

    // MARK: lookup (duplicate UUIDs are legal: docs/bluez-pitfalls.md, 10)

    /// The one characteristic `selector` names, optionally within services of `service`.
    public func characteristic(_ selector: AttributeSelector, service: BluetoothUUID? = nil) throws(BluetoothError) -> GattCharacteristic {
        let scope = service.map { uuid in Set(services.filter { $0.uuid == uuid }.map(\.path)) }
        let candidates = characteristics.filter { scope?.contains($0.service) ?? true }
        let matches = candidates.filter { selector.matches(uuid: $0.uuid, path: $0.path, handle: $0.handle) }
        switch matches.count {
        case 1: return matches[0]
        case 0:
            let existing = candidates.map { Self.label($0.uuid, $0.handle) }
            throw .attributeNotFound(kind: "characteristic", what: selector.description, existing: existing)
        default:
            throw .ambiguous(kind: "characteristic", what: selector.description,
                             candidates: matches.map { Self.candidate($0.path, $0.handle) })
        }
    }

    /// The one descriptor `selector` names under `characteristic`.
    public func descriptor(_ selector: AttributeSelector, of characteristic: GattCharacteristic) throws(BluetoothError) -> GattDescriptor {
        let candidates = descriptors(of: characteristic)
        let matches = candidates.filter { selector.matches(uuid: $0.uuid, path: $0.path, handle: $0.handle) }
        switch matches.count {
        case 1: return matches[0]
        case 0:
            throw .attributeNotFound(kind: "descriptor", what: selector.description,
                            existing: candidates.map { Self.label($0.uuid, $0.handle) })
        default:
            throw .ambiguous(kind: "descriptor", what: selector.description,
                             candidates: matches.map { Self.candidate($0.path, $0.handle) })
        }
    }

    static func label(_ uuid: BluetoothUUID, _ handle: Int?) -> String {
        guard let handle else { return uuid.label }
        return uuid.label + " handle " + AttributeSelector.hex(handle)
    }

    static func candidate(_ path: ObjectPath, _ handle: Int?) -> String {
        if let handle { return "handle:\(AttributeSelector.hex(handle)) (\(path.rawValue))" }
        return path.rawValue
    }
}

/// How a user names an attribute: by UUID, or (when UUIDs repeat) by object path or handle.
public enum AttributeSelector: Sendable, Equatable, CustomStringConvertible {
    /// The attribute with this UUID (it must be the only one).
    case uuid(BluetoothUUID)
    /// The attribute at BlueZ's object path, as bluetoothctl shows it
    /// ("/org/bluez/hci0/dev_…/service000a/char000b"); a valid path.
    case path(String)
    /// The attribute with this ATT handle.
    case handle(Int)

    /// "2a19", "battery_level", a full UUID, "/org/bluez/hci0/dev_…/service000a/char000b",
    /// or "handle:11" / "handle:0x000b".
    public init(_ text: String, kind: BluetoothUUID.Kind) throws(BluetoothError) {
        let trimmed = text.trimmingWhitespace()
        if trimmed.hasPrefix("/") {
            guard ObjectPath(trimmed) != nil else { throw .invalidRequest("invalid object path \"\(trimmed)\"") }
            self = .path(trimmed)
            return
        }
        if trimmed.lowercased().hasPrefix("handle:") {
            let number = trimmed.dropFirst("handle:".count)
            let value = number.lowercased().hasPrefix("0x") ? Int(number.dropFirst(2), radix: 16) : Int(number)
            guard let value, (1...0xFFFF).contains(value) else {
                throw .invalidRequest("invalid handle \"\(trimmed)\": expected handle:N or handle:0xNNNN (1…65535)")
            }
            self = .handle(value)
            return
        }
        do {
            self = .uuid(try BluetoothUUID(trimmed, kind: kind))
        } catch {
            throw .invalidRequest("\(error)")
        }
    }

    func matches(uuid: BluetoothUUID, path: ObjectPath, handle: Int?) -> Bool {
        switch self {
        case .uuid(let wanted): return uuid == wanted
        case .path(let wanted): return path.rawValue == wanted
        case .handle(let wanted): return handle == wanted
        }
    }

    public var description: String {
        switch self {
        case .uuid(let uuid): return uuid.name.map { "\(uuid.shortString) (\($0))" } ?? uuid.uuidString
        case .path(let path): return path
        case .handle(let handle): return "handle " + Self.hex(handle)
        }
    }

    /// A handle as bluectl shows it everywhere (`discover`, messages): "0x0021".
    static func hex(_ handle: Int) -> String {
        let digits = String(handle, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

