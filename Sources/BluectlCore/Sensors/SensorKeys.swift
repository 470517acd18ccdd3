/// The AES-128 keys of encrypted sensors, by device address: BTHome's encryption keys and
/// Xiaomi's bindkeys (16 bytes each).
public struct SensorKeys: Sendable, Equatable {
    /// The 16-byte key of each device.
    public private(set) var keys: [BluetoothAddress: [UInt8]]

    /// No keys: encrypted frames are reported as `noKey`.
    public init() {
        keys = [:]
    }

    /// These keys; an entry that is not 16 bytes is refused with the address it belongs to.
    public init(_ keys: [BluetoothAddress: [UInt8]]) throws(SensorKeyError) {
        for (address, key) in keys where key.count != 16 {
            throw SensorKeyError(address: address.description, reason: "the key has \(key.count) bytes, not 16")
        }
        self.keys = keys
    }

    /// Keys as a keys file holds them: addresses (`A4:C1:38:44:55:66`) to 32 hex digits
    /// (`ByteFormats.parseHex`'s forms).
    public init(hex entries: [String: String]) throws(SensorKeyError) {
        var keys: [BluetoothAddress: [UInt8]] = [:]
        for (text, hex) in entries.sorted(by: { $0.key < $1.key }) {
            guard let address = BluetoothAddress(text) else {
                throw SensorKeyError(address: text, reason: "not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
            }
            guard let key = try? ByteFormats.parseHex(hex), key.count == 16 else {
                throw SensorKeyError(address: text, reason: "the key is not 32 hex digits (16 bytes)")
            }
            keys[address] = key
        }
        self.keys = keys
    }

    /// The key of `address`, if there is one.
    public subscript(_ address: BluetoothAddress) -> [UInt8]? { keys[address] }
}

/// A sensor key that cannot be used: whose, and why (one line).
public struct SensorKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The address as given.
    public var address: String
    /// Why its key cannot be used.
    public var reason: String

    /// `key of A4:C1:38:44:55:66: the key is not 32 hex digits`.
    public var description: String { "key of \(address): \(reason)" }
}
