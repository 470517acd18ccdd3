import BluectlDBus

// What a `PeripheralManager` hands the application: handles of what it
// serves, its events, and a central's requests to answer.

/// A served service (what `PeripheralManager.add` returns).
public struct PublishedService: Sendable, Hashable {
    /// Its type.
    public let uuid: BluetoothUUID
    /// Primary or secondary.
    public let isPrimary: Bool
    /// Its characteristics, in the order they were defined.
    public let characteristics: [PublishedCharacteristic]
    package let number: Int
    package let root: ObjectPath

    /// The characteristic with this UUID (the first, when there are several).
    public func characteristic(_ uuid: BluetoothUUID) -> PublishedCharacteristic? {
        characteristics.first { $0.uuid == uuid }
    }
}

/// A served characteristic: what `updateValue` takes and events name.
public struct PublishedCharacteristic: Sendable, Hashable {
    /// Its type.
    public let uuid: BluetoothUUID
    /// The UUID of the service it belongs to.
    public let serviceUUID: BluetoothUUID
    /// Its flags, as defined.
    public let flags: Set<GattFlag>
    package let attribute: Int
    /// Its descriptors, in the order they were defined.
    public internal(set) var descriptors: [PublishedDescriptor]
}

/// A served descriptor.
public struct PublishedDescriptor: Sendable, Hashable {
    /// Its type.
    public let uuid: BluetoothUUID
    /// Its flags, as defined.
    public let flags: Set<GattFlag>
    package let attribute: Int
}

/// What a `PeripheralManager` reports (CBPeripheralManagerDelegate's calls).
public enum PeripheralEvent: Sendable {
    /// A central reads (didReceiveRead). Already answered when the
    /// characteristic has a value (`request.isAnswered`); else answer it.
    case read(ATTRequest)
    /// A central writes (didReceiveWrite); answered already when the
    /// characteristic has a value, which now holds what was written.
    case write(ATTRequest)
    /// A request was not answered within the deadline; bluetoothd was told it failed.
    case requestExpired(ATTRequest)
    /// A central subscribed (bluetoothd does not say which).
    case subscribed(PublishedCharacteristic)
    /// The last subscribed central unsubscribed or disconnected.
    case unsubscribed(PublishedCharacteristic)
    /// A central confirmed an indication.
    case confirmed(PublishedCharacteristic)
    /// `updateValue` takes values again (peripheralManagerIsReady(toUpdateSubscribers:)).
    case readyToUpdateSubscribers
    /// bluetoothd removed an advertisement by itself (its timeout ran out, or
    /// the adapter went away).
    case advertisingStopped(AdvertisementData)
    /// bluetoothd stopped or crashed: the services and advertisements are
    /// registered again when it is back (`restored`).
    case bluetoothdStopped
    /// bluetoothd is back (or the adapter was powered on again) and what it
    /// had forgotten (or silenced: the advertisements) was registered again,
    /// except what `failures` names.
    case restored(failures: [String])
}

/// A central's read or write of a served characteristic or descriptor
/// (CBATTRequest), to be answered once with `respond`.
public final class ATTRequest: Sendable, CustomStringConvertible {
    /// Read or write.
    public enum Kind: Sendable {
        /// ATT Read (or Read Blob, at `offset`).
        case read
        /// ATT Write (request, command or part of a reliable write).
        case write
    }
    /// How a central wrote (BlueZ's `type` option).
    public enum WriteKind: String, Sendable {
        /// ATT Write Request: the central waits for the answer.
        case request
        /// ATT Write Command (without response): no answer goes back.
        case command
        /// Part of a reliable (queued) write.
        case reliable
    }

    let id: UInt64
    private weak let manager: PeripheralManager?
    /// Read or write.
    public let kind: Kind
    /// The characteristic asked about (or whose descriptor is).
    public let characteristic: PublishedCharacteristic
    /// The descriptor, when the request is about one of the characteristic's descriptors.
    public let descriptor: PublishedDescriptor?
    /// The central (bluetoothd names it, except for requests it makes itself).
    public let central: BluetoothAddress?
    /// Where in the value the read starts or the write goes (long values).
    public let offset: Int
    /// What is written (empty for a read).
    public let value: [UInt8]
    /// How the central wrote, when bluetoothd says (5.66 does not).
    public let writeType: WriteKind?
    /// The link's ATT MTU, when bluetoothd says.
    public let mtu: Int?

    init(id: UInt64, manager: PeripheralManager, kind: Kind, characteristic: PublishedCharacteristic, descriptor: PublishedDescriptor?,
         central: BluetoothAddress?, offset: Int, value: [UInt8], writeType: WriteKind?, mtu: Int?) {
        self.id = id
        self.manager = manager
        self.kind = kind
        self.characteristic = characteristic
        self.descriptor = descriptor
        self.central = central
        self.offset = offset
        self.value = value
        self.writeType = writeType
        self.mtu = mtu
    }

    /// Whether it still waits for `respond` (false when the manager answered
    /// it from the value, it was answered, or it expired).
    public var isPending: Bool { manager?.isPending(id) ?? false }

    /// Answers a read with `value` (from `offset` on: the bytes the central
    /// gets), or accepts a write (`value` is ignored). False when it was
    /// answered already or expired.
    @discardableResult
    public func respond(with value: [UInt8] = []) -> Bool { manager?.answer(self, .success(value)) ?? false }

    /// Refuses the request with an ATT error.
    @discardableResult
    public func respond(withError error: ATTError) -> Bool { manager?.answer(self, .failure(error)) ?? false }

    public var description: String {
        let what = descriptor.map { "descriptor \($0.uuid.label) of " } ?? ""
        return "\(kind == .read ? "read" : "write") of \(what)\(characteristic.uuid.label) by \(central?.description ?? "?") at \(offset)"
    }
}
