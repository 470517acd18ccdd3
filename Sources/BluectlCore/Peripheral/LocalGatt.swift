// The GATT database this machine serves (CoreBluetooth's CBMutableService,
// CBMutableCharacteristic, CBMutableDescriptor), as BlueZ's GattManager1
// takes it: docs/peripheral.md.

/// A permission or property of a served characteristic or descriptor, named
/// as BlueZ names it in `GattCharacteristic1.Flags` (doc/gatt-api.txt).
/// bluetoothd checks them before it asks this process anything: a central
/// reading a characteristic without `read` gets the ATT error "Read Not
/// Permitted" from bluetoothd itself; `encrypt-*` makes it pair first.
public enum GattFlag: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Broadcast in advertising data (bluetoothd's server-configuration descriptor).
    case broadcast
    /// Centrals may read.
    case read
    /// Centrals may write without a response (ATT Write Command).
    case writeWithoutResponse = "write-without-response"
    /// Centrals may write with a response (ATT Write Request).
    case write
    /// Centrals may subscribe to notifications.
    case notify
    /// Centrals may subscribe to indications (confirmed).
    case indicate
    /// Signed writes without response.
    case authenticatedSignedWrites = "authenticated-signed-writes"
    /// Has extended properties (bluetoothd adds the descriptor).
    case extendedProperties = "extended-properties"
    /// Reliable (queued) writes.
    case reliableWrite = "reliable-write"
    /// The user description descriptor is writable.
    case writableAuxiliaries = "writable-auxiliaries"
    /// Reading needs an encrypted link (pairing).
    case encryptRead = "encrypt-read"
    /// Writing needs an encrypted link.
    case encryptWrite = "encrypt-write"
    /// Notifications need an encrypted link.
    case encryptNotify = "encrypt-notify"
    /// Indications need an encrypted link.
    case encryptIndicate = "encrypt-indicate"
    /// Reading needs an authenticated (MITM-protected) encrypted link.
    case encryptAuthenticatedRead = "encrypt-authenticated-read"
    /// Writing needs an authenticated encrypted link.
    case encryptAuthenticatedWrite = "encrypt-authenticated-write"
    /// Notifications need an authenticated encrypted link.
    case encryptAuthenticatedNotify = "encrypt-authenticated-notify"
    /// Indications need an authenticated encrypted link.
    case encryptAuthenticatedIndicate = "encrypt-authenticated-indicate"
    /// Reading needs LE Secure Connections.
    case secureRead = "secure-read"
    /// Writing needs LE Secure Connections.
    case secureWrite = "secure-write"
    /// Notifications need LE Secure Connections.
    case secureNotify = "secure-notify"
    /// Indications need LE Secure Connections.
    case secureIndicate = "secure-indicate"
    /// Each access is authorized by the application (bluetoothd asks before reads and writes).
    case authorize

    /// The flags a descriptor may carry (bluetoothd's `parse_desc_flags`).
    public static let descriptorFlags: Set<GattFlag> = [
        .read, .write, .encryptRead, .encryptWrite, .encryptAuthenticatedRead, .encryptAuthenticatedWrite,
        .secureRead, .secureWrite, .authorize,
    ]

    /// In declaration order, so that flag lists print the same every time.
    public static func < (a: GattFlag, b: GattFlag) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// Whether a central may read with these flags (plain or encrypted).
    static func allowsRead(_ flags: Set<GattFlag>) -> Bool {
        !flags.isDisjoint(with: [.read, .encryptRead, .encryptAuthenticatedRead, .secureRead])
    }

    /// Whether a central may write (any kind) with these flags.
    static func allowsWrite(_ flags: Set<GattFlag>) -> Bool {
        !flags.isDisjoint(with: [.write, .writeWithoutResponse, .reliableWrite, .authenticatedSignedWrites,
                                 .encryptWrite, .encryptAuthenticatedWrite, .secureWrite])
    }

    /// Whether a central may subscribe (notifications or indications).
    static func allowsSubscribe(_ flags: Set<GattFlag>) -> Bool {
        !flags.isDisjoint(with: [.notify, .indicate, .encryptNotify, .encryptIndicate, .encryptAuthenticatedNotify,
                                 .encryptAuthenticatedIndicate, .secureNotify, .secureIndicate])
    }
}

/// A descriptor to serve (CBMutableDescriptor). The Client Characteristic
/// Configuration (0x2902) is bluetoothd's own and cannot be served.
public struct MutableDescriptor: Sendable, Equatable {
    /// Its type (2901: Characteristic User Description, …).
    public var uuid: BluetoothUUID
    /// What centrals may do (`GattFlag.descriptorFlags`).
    public var flags: Set<GattFlag>
    /// What reads return; writes replace it.
    public var value: [UInt8]

    /// A descriptor; readable by default.
    public init(uuid: BluetoothUUID, flags: Set<GattFlag> = [.read], value: [UInt8] = []) {
        self.uuid = uuid
        self.flags = flags
        self.value = value
    }
}

/// A characteristic to serve (CBMutableCharacteristic).
public struct MutableCharacteristic: Sendable, Equatable {
    /// Its type.
    public var uuid: BluetoothUUID
    /// Its properties and permissions, as BlueZ names them.
    public var flags: Set<GattFlag>
    /// With a value, the manager answers reads from it and stores every
    /// write in it by itself (the requests still arrive, already answered).
    /// Without (nil), each read and write arrives unanswered and the
    /// application answers it (`ATTRequest.respond`) before the deadline.
    public var value: [UInt8]?
    /// Its descriptors (the CCCD is bluetoothd's, added for notify and indicate).
    public var descriptors: [MutableDescriptor]

    /// A characteristic; without a value, the application answers its requests.
    public init(uuid: BluetoothUUID, flags: Set<GattFlag>, value: [UInt8]? = nil, descriptors: [MutableDescriptor] = []) {
        self.uuid = uuid
        self.flags = flags
        self.value = value
        self.descriptors = descriptors
    }
}

/// A service to serve (CBMutableService).
public struct MutableService: Sendable, Equatable {
    /// Its type.
    public var uuid: BluetoothUUID
    /// Primary (found by service discovery) or secondary.
    public var isPrimary: Bool
    /// Its characteristics, in the order centrals find them.
    public var characteristics: [MutableCharacteristic]

    /// A service; primary by default.
    public init(uuid: BluetoothUUID, isPrimary: Bool = true, characteristics: [MutableCharacteristic] = []) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
    }

    /// The longest attribute value ATT allows (Core Specification Vol 3 Part F 3.2.9).
    public static let maximumValueLength = 512

    /// Refuses what bluetoothd would refuse at registration, or what could
    /// never work, naming the place (`characteristics[1].flags`): no flags,
    /// a descriptor flag a descriptor cannot have, a served CCCD, a value
    /// longer than 512 bytes, a characteristic that can neither be read,
    /// written nor subscribed to.
    public func validate() throws(BluetoothError) {
        for (c, characteristic) in characteristics.enumerated() {
            let place = "characteristics[\(c)]"
            if characteristic.flags.isEmpty { throw .invalidRequest("\(place).flags: empty; a characteristic needs at least one flag") }
            if !GattFlag.allowsRead(characteristic.flags), !GattFlag.allowsWrite(characteristic.flags),
               !GattFlag.allowsSubscribe(characteristic.flags), !characteristic.flags.contains(.broadcast) {
                throw .invalidRequest("\(place).flags: none allows reading, writing or subscribing")
            }
            if let value = characteristic.value, value.count > Self.maximumValueLength {
                throw .invalidRequest("\(place).value: \(value.count) bytes, longer than ATT's \(Self.maximumValueLength)")
            }
            for (d, descriptor) in characteristic.descriptors.enumerated() {
                let place = "\(place).descriptors[\(d)]"
                if descriptor.uuid == BluetoothUUID(uint16: 0x2902) {
                    throw .invalidRequest("\(place).uuid: 2902 (Client Characteristic Configuration) is bluetoothd's own")
                }
                if descriptor.flags.isEmpty { throw .invalidRequest("\(place).flags: empty; a descriptor needs at least one flag") }
                if let bad = descriptor.flags.subtracting(GattFlag.descriptorFlags).sorted().first {
                    throw .invalidRequest("\(place).flags: \"\(bad.rawValue)\" is not a descriptor flag")
                }
                if descriptor.value.count > Self.maximumValueLength {
                    throw .invalidRequest("\(place).value: \(descriptor.value.count) bytes, longer than ATT's \(Self.maximumValueLength)")
                }
            }
        }
    }
}

/// The ATT error a request is answered with, as the D-Bus error bluetoothd
/// turns into it (bluetoothd's `dbus_error_to_att_ecode`).
public enum ATTError: String, Error, Sendable, CaseIterable {
    /// Unlikely Error (0x0e): a failure with no better name.
    case failed = "org.bluez.Error.Failed"
    /// Busy (bluetoothd's 0xfe, "already in progress").
    case inProgress = "org.bluez.Error.InProgress"
    /// Read or Write Not Permitted (0x02 / 0x03).
    case notPermitted = "org.bluez.Error.NotPermitted"
    /// Invalid Attribute Value Length (0x0d).
    case invalidValueLength = "org.bluez.Error.InvalidValueLength"
    /// Invalid Offset (0x07).
    case invalidOffset = "org.bluez.Error.InvalidOffset"
    /// Insufficient Authorization (0x08).
    case notAuthorized = "org.bluez.Error.NotAuthorized"
    /// Request Not Supported (0x06).
    case notSupported = "org.bluez.Error.NotSupported"

    /// The D-Bus error name bluetoothd expects.
    public var errorName: String { rawValue }
}
