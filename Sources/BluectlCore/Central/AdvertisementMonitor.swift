import BluectlDBus
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One pattern of an or-patterns advertisement monitor: an advertisement
/// matches when one of its AD structures of type `adType` holds `bytes` at
/// `offset` of its data (BlueZ's `Patterns` entry `(yyay)`: offset, AD type, bytes, in
/// that order; docs/advertisement-monitor.md).
public struct AdvertisementPattern: Sendable, Equatable, Hashable {
    /// The AD type (0x16: 16-bit service data, 0xff: manufacturer data, …).
    public var adType: UInt8
    /// Where `bytes` start in the AD structure's data (after the type byte).
    public var offset: UInt8
    /// What must be there: 1 to 31 bytes, ending within the 31 bytes of an advertisement.
    public var bytes: [UInt8]

    /// A pattern as BlueZ takes it; throws `.invalidRequest` when `bytes` is empty or
    /// the pattern would end beyond 31 bytes (bluetoothd refuses such a monitor).
    public init(adType: UInt8, offset: UInt8 = 0, bytes: [UInt8]) throws(BluetoothError) {
        guard !bytes.isEmpty, Int(offset) + bytes.count <= 31 else {
            throw .invalidRequest("an advertisement pattern needs 1 to 31 bytes ending within 31 (offset \(offset), \(bytes.count) bytes)")
        }
        self.adType = adType
        self.offset = offset
        self.bytes = bytes
    }

    /// Advertisements carrying service data of `uuid` (AD type 0x16, 0x20 or 0x21 by the UUID's
    /// size; the UUID little-endian at offset 0).
    public static func serviceData(_ uuid: BluetoothUUID) -> AdvertisementPattern {
        if let short = uuid.uint16Value { return Self(verified: 0x16, bytes: [UInt8(short & 0xff), UInt8(short >> 8)]) }
        if let medium = uuid.uint32Value { return Self(verified: 0x20, bytes: (0..<4).map { UInt8((medium >> (8 * $0)) & 0xff) }) }
        return Self(verified: 0x21, bytes: uuid.bytes.reversed())
    }

    /// Advertisements carrying manufacturer data of `companyID` (AD type 0xff, the id little-endian).
    public static func manufacturerData(_ companyID: UInt16) -> AdvertisementPattern {
        Self(verified: 0xff, bytes: [UInt8(companyID & 0xff), UInt8(companyID >> 8)])
    }

    /// A pattern known to be valid (the factories').
    init(verified adType: UInt8, offset: UInt8 = 0, bytes: [UInt8]) {
        self.adType = adType
        self.offset = offset
        self.bytes = bytes
    }

    /// `(yyay)`: the start position first, then the AD type (bluetoothd 5.66's parse_patterns;
    /// the other order is "Invalid argument of property Patterns" and a Release).
    var dbusValue: DBusValue { .structure([.byte(offset), .byte(adType), .bytes(bytes)]) }
}

/// RSSI thresholds of a monitor (BlueZ's `RSSIHighThreshold`, `RSSIHighTimeout`,
/// `RSSILowThreshold`, `RSSILowTimeout`): a device is found once it is heard at or above
/// `high` for `highTimeout`, lost once below `low` (or unheard) for `lowTimeout`.
public struct AdvertisementMonitorRSSI: Sendable, Equatable {
    /// dBm, -127 to 20.
    public var high: Int
    /// 1 to 300 seconds.
    public var highTimeout: Int
    /// dBm, -127 to 20, at most `high`.
    public var low: Int
    /// 1 to 300 seconds.
    public var lowTimeout: Int

    /// Thresholds as BlueZ takes them (it refuses values out of range; docs/advertisement-monitor.md).
    public init(high: Int, highTimeout: Int, low: Int, lowTimeout: Int) {
        self.high = high
        self.highTimeout = highTimeout
        self.low = low
        self.lowTimeout = lowTimeout
    }
}

/// What an advertisement monitor reports: bluetoothd's `DeviceFound` / `DeviceLost`, once per
/// device until it is lost (bluetoothd 5.66 without RSSI thresholds calls `DeviceFound` at each
/// matching advertisement and never `DeviceLost`; a monitor of several objects hears a device from each).
public enum AdvertisementMonitorEvent: Sendable, Equatable {
    /// A device whose advertisement matches (BlueZ's Device1 object exists and is updated
    /// with each change of its advertisement while the monitor is registered).
    case deviceFound(BluetoothAddress)
    /// A device no longer heard as the monitor's RSSI thresholds say (without thresholds
    /// bluetoothd 5.66 never says it).
    case deviceLost(BluetoothAddress)
}

/// A registered `AdvertisementMonitor1` (or-patterns) on an adapter: bluetoothd scans
/// passively for the monitor's patterns while it is registered — no scan requests, so no
/// scan responses (the names most devices put there) — and updates the Device1 objects
/// of the devices that match. `events` ends when the monitor is stopped (`stop()`, the
/// consumer's cancellation, the monitor and its stream dropped) and fails when bluetoothd
/// releases it. bluetoothd stopping sends no Release, so `events` does not end then: a
/// passive scan (`ScanOptions.passive`) does, and stops its monitor. Nothing stays
/// registered in bluetoothd: stopping, a release and dropping unregister the application,
/// and bluetoothd drops it when this process leaves the bus.
public final class AdvertisementMonitor: Sendable {
    /// The adapter monitored.
    public let adapter: AdapterInfo
    /// The patterns (any one matches).
    public let patterns: [AdvertisementPattern]
    /// Each device found and lost, in bluetoothd's order.
    public let events: AsyncThrowingStream<AdvertisementMonitorEvent, any Error>

    private let central: CentralManager
    /// The application's root (its ObjectManager) and the monitor objects below it, one per
    /// `patternsPerObject` patterns.
    let root: ObjectPath
    private let monitorPaths: [ObjectPath]
    private let continuation: AsyncThrowingStream<AdvertisementMonitorEvent, any Error>.Continuation
    /// The loop's: whether Activate came (and who waits for it) and whether it was stopped.
    private let state: LoopBound<MonitorState>

    private struct MonitorState {
        /// The monitor objects bluetoothd activated; the monitor is in effect once all are.
        var activated: Set<ObjectPath> = []
        var waiting: [CheckedContinuation<Bool, Never>] = []
        var stopping: Task<BluetoothError?, Never>?
        /// The monitor objects that found each device and did not lose it: a device that matches
        /// patterns of two objects is found (and lost) once.
        var found: [BluetoothAddress: Set<ObjectPath>] = [:]
    }

    /// The most patterns one monitor may have (the kernel's limit for one of its monitors, "max
    /// number of supported patterns:16" in bluetoothd's log, kept although bluectl spreads them
    /// over objects of at most 7: three objects, three of the kernel's 32 monitors).
    public static let maxPatterns = 16

    /// The most patterns one monitor object carries (`BlueZ566.monitorPatternsPerObject`: more
    /// in one object and bluetoothd aborts); more are spread over several objects of the application.
    static let patternsPerObject = BlueZ566.monitorPatternsPerObject

    /// Numbers each application of this process (the paths must differ while several are registered).
    private static let counter = Atomic<Int>(0)

    /// `objects`: how many monitor objects carry the patterns (`objectPatterns`).
    private init(central: CentralManager, adapter: AdapterInfo, patterns: [AdvertisementPattern], objects: Int) {
        self.central = central
        self.adapter = adapter
        self.patterns = patterns
        let number = Self.counter.add(1, ordering: .relaxed).newValue
        root = ObjectPath("/org/bluectl/monitor\(getpid())_\(number)") ?? ObjectPath(verified: "/org/bluectl/monitor")
        monitorPaths = (0..<objects).map { [root] in root.appending("monitor\($0)")! }
        (events, continuation) = AsyncThrowingStream<AdvertisementMonitorEvent, any Error>.makeStream()
        state = LoopBound(MonitorState(), loop: central.mirror.loop)
    }

    /// Registers a monitor for `patterns` on `adapter` (`AdvertisementMonitorManager1.RegisterMonitor`)
    /// and returns once bluetoothd activated it. Throws `.notSupported` when the adapter offers no
    /// or-patterns monitors (bluetoothd 5.66 offers them only with `--experimental`), `.invalidRequest`
    /// without a pattern or with more than `maxPatterns`, `.timeout` when bluetoothd does not activate it within the call timeout.
    public static func register(central: CentralManager, adapter: AdapterInfo, patterns: [AdvertisementPattern],
                                rssi: AdvertisementMonitorRSSI? = nil) async throws(BluetoothError) -> AdvertisementMonitor {
        guard (1...maxPatterns).contains(patterns.count) else {
            throw .invalidRequest("an advertisement monitor takes 1 to \(maxPatterns) patterns, not \(patterns.count)")
        }
        if let reason = central.advertisementMonitorUnavailability(adapter: adapter) { throw .notSupported(reason) }
        let objects = objectPatterns(patterns)
        let monitor = AdvertisementMonitor(central: central, adapter: adapter, patterns: patterns, objects: objects.count)
        monitor.export(objects: zip(monitor.monitorPaths, objects).map { ($0, properties($1, rssi)) })
        let (root, monitorPaths) = (monitor.root, monitor.monitorPaths)
        monitor.continuation.onTermination = { [weak monitor] termination in
            guard case .cancelled = termination else { return }
            if let monitor { return monitor.stopSoon() }
            // the monitor and its stream dropped without stop(): what it registered goes
            Task { _ = await AdvertisementMonitor.unregister(central: central, adapter: adapter, root: root, monitorPaths: monitorPaths) }
        }
        Trace.log("monitor \(adapter.name): RegisterMonitor \(monitor.root) (\(patterns.count) patterns, \(monitorPaths.count) objects)")
        do {
            _ = try await central.connection.callMethod(
                destination: BlueZ.service, path: adapter.path, interface: BlueZ.monitorManagerInterface,
                member: "RegisterMonitor", arguments: [.objectPath(monitor.root)], timeout: central.callTimeout)
        } catch {
            // a call that timed out or was cancelled may still register the application: undone
            // (UnregisterMonitor after it; DoesNotExist when it did not), in a task of its own so
            // that a cancellation does not cancel the undoing
            await Task { _ = await unregister(central: central, adapter: adapter, root: root, monitorPaths: monitorPaths) }.value
            throw BluetoothError.from(error, operation: "register an advertisement monitor on \(adapter.name)")
        }
        switch await Deadline(after: central.callTimeout).run(shielded: false, { await monitor.activation() }) {
        case true?:
            return monitor
        case false?:
            await monitor.stop()
            throw .notSupported("bluetoothd released the advertisement monitor on \(adapter.name) instead of activating it")
        case nil:
            await monitor.stop()
            throw .timeout("bluetoothd to activate the advertisement monitor on \(adapter.name)")
        }
    }

    /// Unregisters the monitor (`UnregisterMonitor`) and stops serving its objects, once however
    /// often asked; `events` ends. Returns the call's failure, if any (bluetoothd gone: nothing left).
    @discardableResult
    public func stop() async -> BluetoothError? {
        await state.loop.submit { [self] in stopOnLoop() }.value
    }

    // MARK: - On the loop

    private func stopOnLoop() -> Task<BluetoothError?, Never> {
        if let stopping = state.value.stopping { return stopping }
        let (central, adapter, root, monitorPaths) = (central, adapter, root, monitorPaths)
        let task = Task { await Self.unregister(central: central, adapter: adapter, root: root, monitorPaths: monitorPaths) }
        state.value.stopping = task
        continuation.finish()
        resumeWaiters()
        return task
    }

    private func stopSoon() { state.loop.execute { [self] in _ = stopOnLoop() } }

    /// `UnregisterMonitor`, then the objects no longer served: with the monitor's parts only,
    /// so that a monitor dropped without `stop()` is undone too.
    private static func unregister(central: CentralManager, adapter: AdapterInfo, root: ObjectPath,
                                   monitorPaths: [ObjectPath]) async -> BluetoothError? {
        Trace.log("monitor \(adapter.name): UnregisterMonitor \(root)")
        defer { unexport(central.connection, root: root, monitorPaths: monitorPaths) }
        do {
            _ = try await central.connection.callMethod(
                destination: BlueZ.service, path: adapter.path, interface: BlueZ.monitorManagerInterface,
                member: "UnregisterMonitor", arguments: [.objectPath(root)], timeout: central.callTimeout)
            return nil
        } catch {
            return BluetoothError.from(error, operation: "unregister the advertisement monitor on \(adapter.name)")
        }
    }

    /// Whether bluetoothd activated the monitor (false: it was released or stopped first).
    private func activation() async -> Bool {
        await withCheckedContinuation { (waiter: CheckedContinuation<Bool, Never>) in
            state.loop.execute { [self] in
                if isActive || state.value.stopping != nil {
                    waiter.resume(returning: isActive)
                } else {
                    state.value.waiting.append(waiter)
                }
            }
        }
    }

    private func resumeWaiters() {
        let waiting = state.value.waiting
        state.value.waiting = []
        for waiter in waiting { waiter.resume(returning: isActive) }
    }

    /// Whether bluetoothd activated every monitor object (on the loop).
    private var isActive: Bool { state.value.activated.count == monitorPaths.count }

    /// Serves the root's ObjectManager and each monitor object with its properties.
    private func export(objects: [(ObjectPath, [String: DBusValue])]) {
        let managed = objects.map { ($0.0, [BlueZ.monitorInterface: $0.1]) }
        let connection = central.connection
        connection.export(root) { message, connection in
            guard message.interface == BlueZ.objectManager || message.interface == nil, message.member == "GetManagedObjects" else {
                return PeripheralManager.unknownMethod(message, connection)
            }
            // not `self`: the served objects must not keep a dropped monitor alive
            try? connection.send(.methodReturn(to: message, arguments: [PeripheralManager.managedObjects(managed)]))
        }
        for (path, interfaces) in managed {
            connection.export(path) { [weak self] message, connection in
                guard let self else { return PeripheralManager.refuse(message, connection) }
                if message.interface == BlueZ.properties { return PeripheralManager.answerProperties(message, connection, interfaces) }
                handle(message, object: path, connection)
            }
        }
    }

    private static func unexport(_ connection: DBusConnection, root: ObjectPath, monitorPaths: [ObjectPath]) {
        for path in monitorPaths { connection.unexport(path) }
        connection.unexport(root)
    }

    /// The patterns of each monitor object: `patternsPerObject` at most, in order.
    static func objectPatterns(_ patterns: [AdvertisementPattern]) -> [[AdvertisementPattern]] {
        stride(from: 0, to: patterns.count, by: patternsPerObject).map { Array(patterns[$0..<min($0 + patternsPerObject, patterns.count)]) }
    }

    /// Activate, Release, DeviceFound, DeviceLost to monitor object `object`: only from bluetoothd.
    private func handle(_ message: DBusMessage, object: ObjectPath, _ connection: DBusConnection) {
        guard message.interface == BlueZ.monitorInterface || message.interface == nil else {
            return PeripheralManager.unknownMethod(message, connection)
        }
        guard message.sender == connection.owner(of: BlueZ.service) else {
            if !message.noReplyExpected {
                try? connection.send(.error(to: message, name: "org.bluez.Error.Rejected", message: "only bluetoothd may call"))
            }
            return
        }
        let device = message.arguments.first?.objectPath
        Trace.log("monitor \(adapter.name) \(object.lastComponent): \(message.member ?? "?")" + (device.map { " \($0)" } ?? ""))
        switch message.member {
        case "Activate":
            state.value.activated.insert(object)
            if isActive { resumeWaiters() }
        case "Release":
            // bluetoothd keeps the application registered after releasing its monitor: unregistered here
            continuation.finish(throwing: BluetoothError.bluez(
                name: "org.bluez.Error.Failed", message: "bluetoothd released the monitor", operation: "monitor advertisements on \(adapter.name)"))
            _ = stopOnLoop()
        case "DeviceFound", "DeviceLost":
            guard let device else { return PeripheralManager.unknownMethod(message, connection) }
            let address = central.mirror.tree.properties(device, BlueZ.deviceInterface)
                .map { DeviceInfo(path: device, properties: $0).address } ?? DeviceInfo.addressFromPath(device)
            var finders = state.value.found[address, default: []]
            let wasFound = !finders.isEmpty
            if message.member == "DeviceFound" { finders.insert(object) } else { finders.remove(object) }
            state.value.found[address] = finders.isEmpty ? nil : finders
            if wasFound != !finders.isEmpty { continuation.yield(wasFound ? .deviceLost(address) : .deviceFound(address)) }
        default:
            return PeripheralManager.unknownMethod(message, connection)
        }
        if !message.noReplyExpected { try? connection.send(.methodReturn(to: message)) }
    }

    /// The monitor object's AdvertisementMonitor1 properties.
    static func properties(_ patterns: [AdvertisementPattern], _ rssi: AdvertisementMonitorRSSI?) -> [String: DBusValue] {
        var properties: [String: DBusValue] = [
            "Type": .string("or_patterns"),
            "Patterns": .array(element: DBusSignature("(yyay)")!, patterns.map(\.dbusValue)),
        ]
        if let rssi {
            properties["RSSIHighThreshold"] = .int16(Int16(clamping: rssi.high))
            properties["RSSIHighTimeout"] = .uint16(UInt16(clamping: rssi.highTimeout))
            properties["RSSILowThreshold"] = .int16(Int16(clamping: rssi.low))
            properties["RSSILowTimeout"] = .uint16(UInt16(clamping: rssi.lowTimeout))
        }
        return properties
    }
}

extension CentralManager {
    /// Why `adapter` offers no or-patterns advertisement monitors, or nil when it does
    /// (its `AdvertisementMonitorManager1` lists "or_patterns": bluetoothd 5.66 exports the
    /// manager only when started with `--experimental`, and with a kernel that has the
    /// management interface's monitor commands).
    public func advertisementMonitorUnavailability(adapter: AdapterInfo) -> String? {
        guard let manager = mirror.tree.properties(adapter.path, BlueZ.monitorManagerInterface) else {
            return "\(adapter.name) has no AdvertisementMonitorManager1 (bluetoothd 5.66 offers it only with --experimental)"
        }
        guard manager["SupportedMonitorTypes"]?.stringArray?.contains("or_patterns") ?? false else {
            return "\(adapter.name)'s AdvertisementMonitorManager1 supports no or_patterns monitor"
        }
        return nil
    }
}
