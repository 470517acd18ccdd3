// The hot paths that Benchmarks/ measures, each a set-up (not measured) and
// one operation (measured). Every call into bluectl that is measured is in
// this file, and these are all of them:
//
//   MessageCodec.demarshal(_ bytes: [UInt8]) throws(DBusError) -> DBusMessage
//       libdbus's dbus_message_demarshal (what its loader does with the bytes
//       read from the socket) + MessageCodec.decode
//   MessageCodec.decode(_ raw: OpaquePointer) throws(DBusError) -> DBusMessage
//       what the bus thread calls per message popped (DBusConnection.handle)
//   BlueZObjectTree.apply(_ change: PropertiesChanged, at: ObjectPath) -> Change?
//       what BlueZMirror.apply does with each PropertiesChanged (the message's
//       typed decode, DBusMessage.propertiesChanged)
//   ScanTracker.handle(_ change: BlueZObjectTree.Change, in: borrowing BlueZObjectTree) -> Discovery?
//       what a scan's observer does with each change (CentralManager.startScan)
//   ScanCommand.line(_ discovery: Discovery, adapter: String, json: Bool) -> [UInt8]
//       scan's line per discovery (ScanCommand.run)
//   SubscribeOutput.line(_ bytes: [UInt8], characteristic: GattCharacteristic) -> [UInt8]
//   SubscribeOutput.value(_ bytes: [UInt8], characteristic: GattCharacteristic) -> OutputQueue.Outcome
//       subscribe's line per value, and the value queued (SubscribeJob.take)
//   NotifyEngine.changes(in: DBusMessage) -> (value: [UInt8]?, notifying: Bool?)?
//   ReadCopyFilter.value(_:serial:now:) -> InlineList<[UInt8]>
//   NotifyStateMachine.handle(_ event: Event) -> InlineList<NotifyAction>
//       a characteristic's value handler and its machine's step, per value
//   SensorDecoder.decode(_ advertisement: SensorAdvertisement) -> Result<SensorReading, SensorDecodingError>?
//       what a sensor-decoding scan's tracker adds per report (SensorCases.swift)
//
// When one of these changes its signature, this file is the one to adapt.
import CBenchSink
@testable import BluectlDBus
@testable import BluectlCore
@testable import BluectlCLI
#if canImport(Glibc)
import Glibc
#endif

/// One hot path: `prepare` builds its state and returns the operation to
/// repeat (each call is one operation: one message, one change, one line).
public struct HotPath: Sendable {
    /// Short and stable: the benchmark's name and HotPathCount's argument.
    public let name: String
    /// What one operation is, for tables.
    public let about: String
    public let prepare: @Sendable () -> () -> Void
}

/// Keeps a result alive to the optimizer (its address goes to a C function it cannot see).
@inline(__always)
func consume<T>(_ value: T) {
    withUnsafePointer(to: value) { bluectl_bench_consume($0) }
}

/// The mirror's state on the bus thread: the tree and a scan's tracker
/// (`--duplicates`, every device already seen once), mutated in place.
final class MirrorState {
    var tree = Fixtures.tree()
    var tracker = ScanTracker(adapter: Fixtures.adapter, options: { var o = ScanOptions(); o.duplicates = true; return o }())
    /// Changes to apply, in turn: `Fixtures.rotation` devices spread over the tree.
    let changes: [DBusMessage]
    /// Their typed bodies, as the connection decodes them (`DBusMessage.propertiesChanged`).
    let typed: [PropertiesChanged]
    private var next = 0

    init() {
        changes = (0..<Fixtures.rotation).map {
            Fixtures.devicePropertiesChanged($0 * (Fixtures.deviceCount / Fixtures.rotation), serial: UInt32($0 + 1))
        }
        typed = changes.map { $0.propertiesChanged! }
        _ = tracker.start(with: tree)
    }

    /// The next change, round-robin.
    func take() -> (path: ObjectPath, change: PropertiesChanged) {
        defer { next = (next + 1) % changes.count }
        return (changes[next].path!, typed[next])
    }
}

public enum HotPaths {
    public static let all: [HotPath] = decoding + mirror + rendering + sensors

    public static func named(_ name: String) -> HotPath? { all.first { $0.name == name } }

    // MARK: 1. decoding (the bus thread, per message)

    static let decoding: [HotPath] = [
        HotPath(name: "decode-device1-wire",
                about: "Device1 PropertiesChanged (RSSI, 14-byte ManufacturerData): wire bytes → libdbus demarshal → DBusMessage") {
            let bytes = Fixtures.wire(Fixtures.devicePropertiesChanged(1, serial: 7))
            return { consume(try! MessageCodec.demarshal(bytes)) }
        },
        HotPath(name: "decode-device1-loaded",
                about: "the same, already loaded by libdbus → DBusMessage (MessageCodec.decode alone)") {
            let raw = Fixtures.loaded(Fixtures.devicePropertiesChanged(1, serial: 7))
            return { consume(try! MessageCodec.decode(raw.pointer)) }
        },
        HotPath(name: "decode-value-wire",
                about: "GattCharacteristic1 PropertiesChanged, Value alone (20 bytes): wire bytes → DBusMessage") {
            let bytes = Fixtures.wire(Fixtures.valueChanged(7))
            return { consume(try! MessageCodec.demarshal(bytes)) }
        },
        HotPath(name: "decode-value-loaded",
                about: "the same, already loaded by libdbus → DBusMessage (MessageCodec.decode alone)") {
            let raw = Fixtures.loaded(Fixtures.valueChanged(7))
            return { consume(try! MessageCodec.decode(raw.pointer)) }
        },
    ]

    // MARK: 2. the mirror (the bus thread, per change)

    static let mirror: [HotPath] = [
        HotPath(name: "apply-device1",
                about: "a decoded Device1 PropertiesChanged applied to a tree of 10,000 devices (BlueZObjectTree.apply)") {
            let state = MirrorState()
            return {
                let (path, change) = state.take()
                consume(state.tree.apply(change, at: path))
            }
        },
        HotPath(name: "apply-track-device1",
                about: "the same, then a `--duplicates` scan's ScanTracker.handle (DeviceInfo of the device, a Discovery)") {
            let state = MirrorState()
            return {
                let (path, change) = state.take()
                let applied = state.tree.apply(change, at: path)!
                consume(state.tracker.handle(applied, in: state.tree))
            }
        },
        HotPath(name: "apply-value",
                about: "a decoded notification (Value) applied to the same tree (the mirror applies every one)") {
            let state = MirrorState()
            let changes = (0..<Fixtures.rotation).map { Fixtures.valueChanged($0).propertiesChanged! }
            var next = 0
            return {
                let change = changes[next]
                next = (next + 1) % changes.count
                consume(state.tree.apply(change, at: Fixtures.characteristicPath))
            }
        },
    ]

    // MARK: 3. rendering (the consumer, per event)

    static let rendering: [HotPath] = [
        HotPath(name: "scan-line-json", about: "`scan --json`: one discovery's line (ScanCommand.line)") {
            let discovery = Self.discovery()
            return { consume(ScanCommand.line(discovery, adapter: "hci0", json: true)) }
        },
        HotPath(name: "scan-line-text", about: "`scan` in a pipe: one discovery's text line (ScanCommand.line)") {
            let discovery = Self.discovery()
            return { consume(ScanCommand.line(discovery, adapter: "hci0", json: false)) }
        },
        HotPath(name: "subscribe-line-json", about: "`subscribe --json`: one 20-byte value's line (SubscribeOutput.line)") {
            let (output, characteristic, value) = Self.subscribe(.json)
            return { consume(output.line(value, characteristic: characteristic)) }
        },
        HotPath(name: "subscribe-line-hex", about: "`subscribe --format hex`: one value's line (hex dump and ASCII)") {
            let (output, characteristic, value) = Self.subscribe(.hex)
            return { consume(output.line(value, characteristic: characteristic)) }
        },
        HotPath(name: "subscribe-line-default", about: "`subscribe` in a pipe (no --format): one value's line (plain hex)") {
            let (output, characteristic, value) = Self.subscribe(nil)
            return { consume(output.line(value, characteristic: characteristic)) }
        },
        HotPath(name: "subscribe-value-raw",
                about: "`subscribe --format raw`: one value queued to stdout as it is (SubscribeOutput.value; stdout: /dev/null)") {
            let (output, characteristic, value) = Self.subscribe(.raw)
            return { consume(output.value(value, characteristic: characteristic)) }
        },
        HotPath(name: "scan-event-json",
                about: "`scan --json --duplicates`, one advertisement end to end: decode (loaded) + apply + track + line") {
            let state = MirrorState()
            let loaded = state.changes.map { Fixtures.loaded($0) }
            var next = 0
            return {
                let message = try! MessageCodec.decode(loaded[next].pointer)
                next = (next + 1) % loaded.count
                let change = state.tree.apply(message.propertiesChanged!, at: message.path!)!
                let discovery = state.tracker.handle(change, in: state.tree)!
                consume(ScanCommand.line(discovery, adapter: "hci0", json: true))
            }
        },
        HotPath(name: "notify-event-raw",
                about: "`subscribe --format raw`, one notification end to end after libdbus: decode (loaded) + apply + the value handler's read + the machine's step + queued") {
            let state = MirrorState()
            let loaded = (1...Fixtures.rotation).map { Fixtures.loaded(Fixtures.valueChanged($0)) }  // serial 0 is no serial
            var machine = NotifyStateMachine()
            _ = machine.handle(.start)
            _ = machine.handle(.startSucceeded)
            var reads = ReadCopyFilter()
            let (output, characteristic, _) = Self.subscribe(.raw)
            var next = 0
            return {
                let message = try! MessageCodec.decode(loaded[next].pointer)
                next = (next + 1) % loaded.count
                consume(state.tree.apply(message.propertiesChanged!, at: message.path!))
                guard let value = NotifyEngine.changes(in: message)?.value else { return }
                for bytes in reads.value(value, serial: message.serial, now: .now) {
                    for case .deliver(let delivered) in machine.handle(.value(bytes)) {
                        consume(output.value(delivered, characteristic: characteristic))
                    }
                }
            }
        },
    ]

    /// A scan's discovery of a device as the tracker reports a change of it.
    static func discovery() -> Discovery {
        let state = MirrorState()
        let (path, change) = state.take()
        let applied = state.tree.apply(change, at: path)!
        return state.tracker.handle(applied, in: state.tree)!
    }

    /// `subscribe`'s output for one device (stdout: /dev/null), the NUS TX
    /// characteristic and a 20-byte value.
    static func subscribe(_ format: ValueFormat?) -> (SubscribeOutput, GattCharacteristic, [UInt8]) {
        let fd = open("/dev/null", O_WRONLY)
        precondition(fd >= 0, "cannot open /dev/null")
        let output = SubscribeOutput(format: format, device: "C0:00:00:00:00:00", queue: OutputQueue(fd: fd, capacity: 100_000))
        let characteristic = GattCharacteristic(
            path: Fixtures.characteristicPath, properties: PropertyMap(Fixtures.characteristicProperties.stringKeyedDictionary!))!
        return (output, characteristic, Fixtures.notificationValue(7))
    }
}
