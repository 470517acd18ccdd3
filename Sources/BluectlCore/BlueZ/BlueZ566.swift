import BluectlDBus

/// What bluetoothd 5.66 does that bluectl works around, in one place: a
/// named constant or function for each workaround, its doc comment saying
/// what 5.66 does and which pitfall of docs/bluez-pitfalls.md it is. The
/// code that works around it uses the name (the state machines take these
/// as their defaults), so moving to another BlueZ starts by reading this file.
///
/// The workarounds that are whole mechanisms have types of their own, named
/// here so that this list is complete:
/// - `ReadMarker` and `ReadCopyFilter` (pitfall 6): 5.66 emits
///   `PropertiesChanged(Value)` for every successful ReadValue, so other
///   bluectl processes can tell a read from a notification.
/// - `NotifyStateMachine`'s `join` (docs/notifications.md): 5.66 sends every
///   subscriber one Value signal per StartNotify client, so bluectl joins
///   another client's session instead of doubling every value.
/// - `Peripheral.acquireNotifications(for:onValue:)` (pitfall 7): 5.66 drops values
///   while an AcquireNotify socket is full, so the loop drains it as soon as
///   it is readable.
/// - `AdapterTurns` (pitfalls 14 and 15): one discovery per client and one
///   LE connection being made at a time, so finders and connects take turns.
/// - `ScanOptions.matches(_:)` (pitfall 9): discovery filters of all
///   clients are merged, so every result is checked against one's own.
/// - `GattServerMachine`'s StartNotify (pitfall 21): 5.66 calls a served
///   characteristic's StartNotify once per subscribing central, StopNotify
///   after the last one.
///
/// Not here: what any D-Bus client must do whatever the BlueZ version, such
/// as adding match rules before reading (pitfall 4: `BlueZMirror`,
/// `MachineDriver.follow`) and removing them (pitfall 5).
enum BlueZ566 {
    // MARK: - Connecting (pitfalls 1, 2, 15, 24, 29)

    /// What a `Device1.Connect` error reply means. 5.66 says most of it in
    /// the message of `org.bluez.Error.Failed`, not in the error's name:
    /// `le-connection-abort-by-local` (pitfall 1: BlueZ may have connected
    /// and aborted; wait for `Connected=false`, then try again),
    /// `br-connection-profile-unavailable` (a dual-mode device tried over
    /// BR/EDR), `le-connection-concurrent-connection-limit` and
    /// `le-connection-memory-allocation` (pitfall 15: the controller has no
    /// free connection slot; trying again at once finds it as full), and
    /// "in progress" or "busy" (pitfall 2, as `org.bluez.Error.InProgress`).
    /// The bus's own `UnknownObject` means the device was removed just
    /// before (pitfall 29: its removal not yet mirrored): the caller is
    /// told the device is gone, not libdbus's words.
    static func connectError(name: String, message: String) -> ConnectError {
        switch name {
        case "org.bluez.Error.AlreadyConnected": return .alreadyConnected
        case "org.bluez.Error.InProgress": return .inProgress
        case "org.freedesktop.DBus.Error.UnknownObject": return .deviceGone
        default: break
        }
        let lower = message.lowercased()
        if lower.contains("le-connection-abort-by-local") { return .abortedByLocal }
        if lower.contains("br-connection-profile-unavailable") { return .dualMode }
        if lower.contains("le-connection-concurrent-connection-limit") || lower.contains("le-connection-memory-allocation") {
            return .noSlot
        }
        if name == "org.bluez.Error.Failed", lower.contains("in progress") || lower.contains("busy") { return .inProgress }
        return .other
    }

    /// After `InProgress` (pitfall 2: a stale pending connect or another
    /// operation on the device), how long `ConnectionStateMachine` waits
    /// before it sends Connect again.
    static let connectRetryDelay: Duration = .milliseconds(250)

    /// How often `ConnectionStateMachine` asks bluetoothd for `Connected`
    /// after Connect's reply (pitfall 24): 5.66 does not always signal
    /// `Connected=true` — when the ATT channel is up before the kernel's
    /// Device Connected event, `device_add_connection` returns early
    /// ("already connected") without a PropertiesChanged. (It is only ever
    /// a missing *true*: a mirror that says connected is right.)
    static let connectPollInterval: Duration = .milliseconds(250)

    /// How often `DisconnectStateMachine` asks bluetoothd for `Connected`
    /// after Disconnect's reply: 5.66 does not always signal the link going
    /// down either (pitfall 24).
    static let disconnectPollInterval: Duration = .milliseconds(300)

    // MARK: - Service discovery (pitfalls 3, 24)

    /// How long `ServiceDiscoveryStateMachine` waits, once
    /// `ServicesResolved` is true with no service object exported yet, for
    /// the objects to appear (pitfall 3: 5.66 signals ServicesResolved, then
    /// exports the database in one burst of InterfacesAdded; after an
    /// aborted connection it can turn true before any object is there).
    static let servicesSettleTime: Duration = .milliseconds(500)

    /// How long no new GATT object must appear, in that burst, before the
    /// database counts as whole (pitfall 3).
    static let servicesQuietTime: Duration = .milliseconds(200)

    /// How often `ServiceDiscoveryStateMachine` asks bluetoothd for
    /// `ServicesResolved` while it waits: 5.66 does not always signal it
    /// (pitfall 24).
    static let servicesPollInterval: Duration = .milliseconds(500)

    /// The attribute handle of a remote GATT object: 5.66 names its objects
    /// by handle (`service000a`, `char000b`, `desc000d`, hex) and exports no
    /// `Handle` property for them (pitfall 25). The handle from the last
    /// path element, or nil.
    static func attributeHandle(fromPath path: ObjectPath) -> Int? {
        let last = path.lastComponent
        for prefix in ["service", "char", "desc"] where last.hasPrefix(prefix) {
            let digits = last.dropFirst(prefix.count)
            guard digits.count == 4, let value = Int(digits, radix: 16), value > 0 else { return nil }
            return value
        }
        return nil
    }

    // MARK: - Reads and writes (pitfalls 2, 26)

    /// How often a ReadValue or WriteValue answered `InProgress` is tried
    /// again (pitfall 2; bleak retries every 10 ms), and for how long at most
    /// by default (`Peripheral.retryingInProgress`).
    static let inProgressRetryInterval: Duration = .milliseconds(10)
    /// See `inProgressRetryInterval`.
    static let inProgressRetryLimit: Duration = .seconds(3)

    /// The longest value a write stream sends in one Write Command (pitfall
    /// 27): 5.66's AcquireWrite reader cuts a datagram at 512 bytes, and
    /// 5.66 as a GATT server drops a Write Command whose value is over 510
    /// (measured in the lab at MTU 517: 510 arrived, 511 and 512 were lost).
    static let streamedWriteValueLimit = 510

    /// Whether a write without response longer than the 23-byte default
    /// is to ask bluetoothd for the characteristic's `MTU` before it is
    /// refused (pitfall 26): 5.66 drops `MTU` from a disconnected device's
    /// cached objects and brings it back on reconnection without a signal
    /// (gatt-client.c `characteristic_mtu_exists`), so the mirror may not know it.
    static func mayHaveLostMTU(_ characteristic: GattCharacteristic, type: WriteType, length: Int, limit: Int) -> Bool {
        length > limit && type == .withoutResponse && characteristic.mtu == nil
    }

    /// Whether a connected device's characteristic lacks its `MTU` once the
    /// services are resolved (pitfall 26): 5.66 drops it from a cached
    /// characteristic while the device is away and, when the device is back,
    /// answers it again without a signal (the exchange on the new link
    /// notifies nobody: the characteristic's exchange callback was registered
    /// on the old link's ATT). Then it is asked for (`Properties.Get`) and
    /// recorded in the mirror, so that `Peripheral.mtu` and the write limits
    /// are the link's and not the 23-byte default (`bluectl proxy` reported
    /// MTU 23 for links of 517 in the lab).
    static func mtuMissing(_ characteristic: PropertyMap?) -> Bool {
        characteristic != nil && characteristic?["MTU"] == nil
    }

    // MARK: - Advertisement monitors (pitfall 28)

    /// The most patterns bluectl puts in one `AdvertisementMonitor1` object: 5.66 sizes its
    /// Add Adv Patterns Monitor command in a byte (`uint8_t cp_len`, 1 + 34 bytes a pattern,
    /// 8 + 34 with RSSI thresholds), so past 7 patterns the size wraps, the buffer it allocates is
    /// short, the patterns are copied past its end and bluetoothd aborts on the corrupted heap
    /// ("malloc(): invalid size (unsorted)" in the lab). More patterns go in more objects of the
    /// same application (`AdvertisementMonitor`).
    static let monitorPatternsPerObject = 7

    // MARK: - The peripheral role (pitfalls 20, 22, 23)

    /// How a central wrote a served characteristic: BlueZ's `type` option
    /// of `WriteValue`, where bluetoothd sends it. 5.66 does not (its options
    /// are `device`, `link`, `mtu`, `offset`), and its ATT server accepts
    /// either kind of write on any writable characteristic (pitfall 20; the
    /// lab saw a Write Request on a write-without-response-only one), so
    /// without it: nil.
    static func writeKind(options: [String: DBusValue]) -> ATTRequest.WriteKind? {
        options["type"]?.string.flatMap(ATTRequest.WriteKind.init(rawValue:))
    }

    /// How many advertisements an adapter can have at once: 5.66's
    /// `LEAdvertisingManager1.SupportedInstances` is the number of *free*
    /// instances, not the total (pitfall 22), so the total adds the active ones.
    static func totalAdvertisingInstances(supportedInstances free: Int?, activeInstances active: Int?) -> Int? {
        free.map { $0 + (active ?? 0) }
    }

    /// Whether an adapter powered off and on again silences the
    /// advertisements registered on it (pitfall 23): 5.66 still counts them
    /// in `ActiveInstances`, but in the lab no central heard or connected to
    /// them any more until they were registered again, which
    /// `PeripheralManager` then does.
    static let powerCycleSilencesAdvertisements = true
}
