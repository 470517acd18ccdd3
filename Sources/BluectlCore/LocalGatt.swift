// The GATT database this machine serves (CoreBluetooth's CBMutableService,
// CBMutableCharacteristic, CBMutableDescriptor), as BlueZ's GattManager1
// takes it: docs/peripheral.md.

/// A permission or property of a served characteristic or descriptor, named
/// as BlueZ names it in `GattCharacteristic1.Flags` (doc/gatt-api.txt).
/// bluetoothd checks them before it asks this process anything: a central
/// reading a characteristic without `read` gets the ATT error "Read Not
/// Permitted" from bluetoothd itself; `encrypt-*` makes it pair first.
public enum GattFlag: String, Sendable, Hashable, CaseIterable, Comparable {
    case broadcast
    case read
    case writeWithoutResponse = "write-without-response"
    case write
    case notify
    case indicate
    case authenticatedSignedWrites = "authenticated-signed-writes"
    case extendedProperties = "extended-properties"
    case reliableWrite = "reliable-write"
    case writableAuxiliaries = "writable-auxiliaries"
    case encryptRead = "encrypt-read"
    case encryptWrite = "encrypt-write"
    case encryptNotify = "encrypt-notify"
    case encryptIndicate = "encrypt-indicate"
    case encryptAuthenticatedRead = "encrypt-authenticated-read"
    case encryptAuthenticatedWrite = "encrypt-authenticated-write"
    case encryptAuthenticatedNotify = "encrypt-authenticated-notify"
    case encryptAuthenticatedIndicate = "encrypt-authenticated-indicate"
    case secureRead = "secure-read"
    case secureWrite = "secure-write"
    case secureNotify = "secure-notify"
    case secureIndicate = "secure-indicate"
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

    /// Whether subscribers get indications (confirmed) rather than notifications.
    static func indicates(_ flags: Set<GattFlag>) -> Bool {
        !flags.isDisjoint(with: [.indicate, .encryptIndicate, .encryptAuthenticatedIndicate, .secureIndicate])
            && flags.isDisjoint(with: [.notify, .encryptNotify, .encryptAuthenticatedNotify, .secureNotify])
    }
}

/// A descriptor to serve (CBMutableDescriptor). The Client Characteristic
/// Configuration (0x2902) is bluetoothd's own and cannot be served.
public struct MutableDescriptor: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var flags: Set<GattFlag>
    /// What reads return; writes replace it.
    public var value: [UInt8]

    public init(uuid: BluetoothUUID, flags: Set<GattFlag> = [.read], value: [UInt8] = []) {
        self.uuid = uuid
        self.flags = flags
        self.value = value
    }
}

/// A characteristic to serve (CBMutableCharacteristic).
public struct MutableCharacteristic: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var flags: Set<GattFlag>
    /// With a value, the manager answers reads from it and stores every
    /// write in it by itself (the requests still arrive, already answered).
    /// Without (nil), each read and write arrives unanswered and the
    /// application answers it (`ATTRequest.respond`) before the deadline.
    public var value: [UInt8]?
    public var descriptors: [MutableDescriptor]

    public init(uuid: BluetoothUUID, flags: Set<GattFlag>, value: [UInt8]? = nil, descriptors: [MutableDescriptor] = []) {
        self.uuid = uuid
        self.flags = flags
        self.value = value
        self.descriptors = descriptors
    }
}

/// A service to serve (CBMutableService).
public struct MutableService: Sendable, Equatable {
    public var uuid: BluetoothUUID
    /// Primary (found by service discovery) or secondary.
    public var isPrimary: Bool
    public var characteristics: [MutableCharacteristic]

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
