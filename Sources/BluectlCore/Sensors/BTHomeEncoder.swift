/// Builds BTHome v2 service data (of 0xFCD2; bthome.io/format and /encryption, 2026-04-30)
/// from named values: what `bluectl advertise --bthome temperature=21.5` sends, so that a
/// Linux machine is a BTHome sensor. `BTHome` decodes what it builds.
///
/// - Names: the spec's property in snake_case (`temperature`, `garage_door`, `pm2.5`; the
///   properties the spec names twice with other units carry theirs: `distance_mm`,
///   `distance_m`, `mass_kg`, `mass_lb`, `volume_ml`; binary sensors whose property also
///   names a sensor say their true state: `battery_low`, `power_on`, `wet`, `gas_detected`),
///   or the quantity's JSON key (`temperature_c`). A second value of the same quantity is a
///   repeated object, named with `_2` (`temperature_2`), and so on.
/// - Objects: of the objects for a quantity, the lowest id whose factor represents the value
///   exactly and whose range holds it (21.5 °C: 0x02, sint16 × 0.01; 400 °C: 0x45, × 0.1);
///   when none is exact, the finest factor whose range holds it (the value rounded to it).
///   The packet id (0x00) first, then the quantities in the order of their first object's id;
///   a repeated quantity's objects stay in the order given (their order is their meaning:
///   `temperature`, `temperature_2`), so when its values need different objects the ids
///   within it may descend (the spec asks for ascending ids so that older receivers can stop
///   at a new one; these are all known ids).
/// - Each `update` is a new frame: the packet id advances (wrapping at 255) and, when
///   encrypted, the counter. An event (button, dimmer) is sent in the frame of the update
///   that sets it, and `none` in its place afterwards; a command only in that frame.
/// - Encrypted: the nonce holds the address centrals see, so give the adapter's (an adapter
///   with LE privacy advertises from another address, and nobody can decrypt).
public struct BTHomeEncoder: Sendable {
    /// One value to send: which repeated object of its quantity it is, in order.
    private struct Entry: Sendable {
        var quantity: SensorQuantity
        var value: SensorValue
        /// Set by the current update (an event is sent once).
        var fresh: Bool
    }

    private var entries: [Entry] = []
    private let key: [UInt8]?
    private let address: BluetoothAddress?
    /// The packet id of the current frame.
    public private(set) var packetID: UInt8
    /// The encryption counter of the current frame (encrypted frames only).
    public private(set) var counter: UInt32
    /// The current frame: the service data of 0xFCD2.
    public private(set) var serviceData: [UInt8] = []

    /// An encoder of `values` (see above for names), plain, or encrypted with `key` for the
    /// device `address` from `counter` on (start it where the device's last run ended, or
    /// from the time: receivers refuse a counter that goes back). Refused when a name is of
    /// no BTHome object, a value does not fit its object, or the key is not 16 bytes.
    public init(_ values: [(name: String, value: SensorValue)], key: [UInt8]? = nil, address: BluetoothAddress? = nil,
                counter: UInt32 = 0, packetID: UInt8 = 0) throws(BluetoothError) {
        if let key {
            guard key.count == 16 else { throw .invalidRequest("a BTHome key is 16 bytes (32 hex digits), not \(key.count)") }
            guard address != nil else { throw .invalidRequest("an encrypted BTHome frame needs the advertiser's address (its nonce holds it)") }
        }
        self.key = key
        self.address = address
        self.counter = counter
        self.packetID = packetID
        try apply(values)
        serviceData = try frame()
    }

    /// The values, in the order they were first set.
    public var values: [SensorMeasurement] { entries.map { SensorMeasurement($0.quantity, $0.value) } }

    /// The current frame as `BTHome` reads it: its values, packet id and counter.
    public var reading: SensorReading {
        (try? BTHome.frame(serviceData, address: address ?? BluetoothAddress(uint64: 0)!, key: key))
            ?? SensorReading(format: .bthome, encrypted: key != nil, measurements: values)
    }

    /// Sets `changes` (a new name is added) and makes the next frame: the packet id and
    /// counter advance. Refused, with nothing changed, like `init`.
    public mutating func update(_ changes: [(name: String, value: SensorValue)]) throws(BluetoothError) {
        var next = self
        for index in next.entries.indices { next.entries[index].fresh = false }
        try next.apply(changes)
        // the events of the last frame happened once: none now (a command has no "none": it goes)
        next.entries = next.entries.compactMap { entry in
            guard !entry.fresh, case .event = entry.value else { return entry }
            if entry.quantity == .command { return nil }
            var none = entry
            none.value = .event("none")
            return none
        }
        next.packetID &+= 1
        if key != nil { next.counter &+= 1 }
        next.serviceData = try next.frame()
        self = next
    }

    /// The value `text` stands for as the object `name` takes it: a number (`21.5`), a whole
    /// number for counts and ids, `true`/`false`/`1`/`0`/`on`/`off` for binary sensors, an
    /// event's name (`press`; a dimmer's or command's steps after a colon, `rotate_left:3`),
    /// text as it is, raw bytes in hex, a firmware version as `1.2.3` or `1.2.3.4`.
    public static func value(_ text: String, for name: String) throws(BluetoothError) -> SensorValue {
        let object = try objects(named: name).objects[0]
        func refuse(_ expected: String) -> BluetoothError {
            .invalidRequest("\(name) takes \(expected), not \"\(text)\"")
        }
        switch object.encoding {
        case .number:
            guard let number = Double(text), number.isFinite else { throw refuse("a number") }
            return .number(number)
        case .integer:
            guard let number = Int(text) else { throw refuse("a whole number") }
            return .integer(number)
        case .binary:
            switch text.lowercased() {
            case "1", "true", "on", "yes": return .flag(true)
            case "0", "false", "off", "no": return .flag(false)
            default: throw refuse("true or false (1 or 0)")
            }
        case .button, .dimmer, .command:
            let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
            guard let event = parts.first else { throw refuse("an event") }
            guard parts.count == 2 else { return .event(event) }
            guard let steps = Int(parts[1]) else { throw refuse("an event and its steps, e.g. rotate_left:3") }
            return .event(event, steps: steps)
        case .text, .firmwareVersion:
            return .text(text)
        case .raw:
            do {
                return .bytes(text.isEmpty ? [] : try ByteFormats.parseHex(text))
            } catch {
                throw refuse("hex bytes")
            }
        case .packetID:
            throw .invalidRequest("the packet id advances by itself")
        }
    }

    // MARK: - Building

    /// `name`'s objects (one quantity) and which of its repeated objects it is (`_2`: 2).
    private static func objects(named name: String) throws(BluetoothError) -> (objects: [BTHomeObject], occurrence: Int) {
        var base = name.lowercased()
        var occurrence = 1
        var objects = BTHomeObjects.objects(named: base)
        if objects.isEmpty, let underscore = base.lastIndex(of: "_"), let n = Int(base[base.index(after: underscore)...]), n >= 2 {
            occurrence = n
            base = String(base[..<underscore])
            objects = BTHomeObjects.objects(named: base)
        }
        guard let first = objects.first else {
            if name.lowercased() == "packet_id" { throw .invalidRequest("the packet id advances by itself") }
            throw .invalidRequest("\(name) is not a BTHome v2 object (bthome.io/format; docs/sensors.md lists the names)")
        }
        if objects.contains(where: { $0.quantity != first.quantity }) {
            let keys = Set(objects.map(\.quantity.key)).sorted().joined(separator: ", ")
            throw .invalidRequest("\(name) names more than one quantity: say which (\(keys))")
        }
        return (objects, occurrence)
    }

    private mutating func apply(_ changes: [(name: String, value: SensorValue)]) throws(BluetoothError) {
        for (name, value) in changes {
            let (objects, occurrence) = try Self.objects(named: name)
            let quantity = objects[0].quantity
            let existing = entries.indices.filter { entries[$0].quantity == quantity }
            if occurrence <= existing.count {
                entries[existing[occurrence - 1]].value = value
                entries[existing[occurrence - 1]].fresh = true
            } else if occurrence == existing.count + 1 {
                entries.append(Entry(quantity: quantity, value: value, fresh: true))
            } else {
                throw .invalidRequest("\(name): there is no \(quantity.key) number \(occurrence - 1) to follow")
            }
            _ = try Self.object(for: objects, values: [value], name: name)
        }
    }

    /// The frame of the current entries.
    private func frame() throws(BluetoothError) -> [UInt8] {
        // each quantity's values in their order (a repeated quantity's order is its meaning:
        // temperature, temperature_2), the quantities by the id of their first object
        var groups: [[(object: BTHomeObject, value: SensorValue)]] = []
        var done = Set<SensorQuantity>()
        for entry in entries where done.insert(entry.quantity).inserted {
            let objects = BTHomeObjects.all.filter { $0.quantity == entry.quantity && $0.encoding != .packetID }
            var group: [(object: BTHomeObject, value: SensorValue)] = []
            for same in entries where same.quantity == entry.quantity {
                group.append((try Self.object(for: objects, values: [same.value], name: entry.quantity.key), same.value))
            }
            groups.append(group)
        }
        var payload: [UInt8] = [0x00, packetID]
        for group in groups.sorted(by: { $0[0].object.id < $1[0].object.id }) {
            for (object, value) in group { payload += try Self.encode(value, as: object) }
        }
        guard let key, let address else { return [0x40] + payload }
        let info: UInt8 = 0x41
        let counterBytes = (0..<4).map { UInt8(truncatingIfNeeded: counter >> (8 * UInt32($0))) }
        guard let sealed = AESCCM.seal(plaintext: payload, key: key, nonce: address.bytes + [0xD2, 0xFC, info] + counterBytes,
                                       tagLength: 4) else {
            throw .unexpected("libcrypto refused to encrypt a BTHome frame")
        }
        return [info] + sealed.ciphertext + counterBytes + sealed.tag
    }

    /// The object that carries every value of a quantity (see the type's comment).
    private static func object(for objects: [BTHomeObject], values: [SensorValue], name: String) throws(BluetoothError) -> BTHomeObject {
        switch objects[0].encoding {
        case .number, .integer:
            let numbers = values.compactMap(number)
            guard numbers.count == values.count else { throw .invalidRequest("\(name) takes numbers") }
            return try fitting(objects, numbers, name: name)
        case .firmwareVersion:
            let components = Set(values.map { value -> Int in
                guard case .text(let text) = value else { return 0 }
                return text.split(separator: ".", omittingEmptySubsequences: false).count
            })
            guard components.count == 1, let object = objects.first(where: { $0.length == components.first }) else {
                throw .invalidRequest("\(name) takes a version of 3 or 4 numbers, e.g. 1.2.3")
            }
            return object
        default:
            return objects[0]
        }
    }

    /// The lowest id that holds every number exactly, else the finest factor that holds them.
    private static func fitting(_ objects: [BTHomeObject], _ numbers: [Double], name: String) throws(BluetoothError) -> BTHomeObject {
        let holding = objects.filter { object in numbers.allSatisfy { object.integerRange.contains(raw($0, object) ?? .max) } }
        if let exact = holding.first(where: { object in numbers.allSatisfy { isExact($0, object) } }) { return exact }
        guard let finest = holding.min(by: { Double($0.numerator) / Double($0.denominator) < Double($1.numerator) / Double($1.denominator) }) else {
            let ranges = objects.map { object -> String in
                let range = object.integerRange
                let low = Double(range.lowerBound * object.numerator) / Double(object.denominator)
                let high = Double(range.upperBound * object.numerator) / Double(object.denominator)
                return "\(low)…\(high)"
            }
            throw .invalidRequest("\(name) \(numbers.map { "\($0)" }.joined(separator: ", ")) is outside every BTHome object's range (\(ranges.joined(separator: ", ")))")
        }
        if case .integer = finest.encoding, !numbers.allSatisfy({ $0 == $0.rounded() }) {
            throw .invalidRequest("\(name) takes whole numbers")
        }
        return finest
    }

    private static func number(_ value: SensorValue) -> Double? {
        switch value {
        case .number(let number): number
        case .integer(let integer): Double(integer)
        default: nil
        }
    }

    /// The integer the object sends for `value`, rounded to its factor; nil when out of Int64.
    private static func raw(_ value: Double, _ object: BTHomeObject) -> Int64? {
        let scaled = (value * Double(object.denominator) / Double(object.numerator)).rounded()
        return abs(scaled) < 9.0e18 ? Int64(scaled) : nil
    }

    private static func isExact(_ value: Double, _ object: BTHomeObject) -> Bool {
        guard let raw = raw(value, object) else { return false }
        return abs(Double(raw * object.numerator) / Double(object.denominator) - value) <= 1e-9 * max(1, abs(value))
    }

    /// The object's bytes (id first) for `value`.
    private static func encode(_ value: SensorValue, as object: BTHomeObject) throws(BluetoothError) -> [UInt8] {
        func refuse(_ expected: String) -> BluetoothError {
            .invalidRequest("\(object.name) takes \(expected), not \(value)")
        }
        func littleEndian(_ raw: Int64) -> [UInt8] {
            (0..<object.length).map { UInt8(truncatingIfNeeded: raw >> (8 * Int64($0))) }
        }
        func event(_ names: [UInt8: String]) throws(BluetoothError) -> (UInt8, Int?) {
            guard case .event(let name, let steps) = value,
                  let id = names.first(where: { $0.value == name })?.key else {
                throw refuse("one of " + names.values.sorted().joined(separator: ", "))
            }
            if let steps, !(0...255).contains(steps) { throw refuse("0 to 255 steps") }
            return (id, steps)
        }
        switch object.encoding {
        case .number, .integer:
            guard let number = number(value), let raw = raw(number, object) else { throw refuse("a number") }
            return [object.id] + littleEndian(raw)
        case .binary:
            guard case .flag(let on) = value else { throw refuse("true or false") }
            return [object.id, on ? 1 : 0]
        case .button:
            let (id, _) = try event(BTHomeObjects.buttonEvents)
            return [object.id, id]
        case .dimmer:
            let (id, steps) = try event(BTHomeObjects.dimmerEvents)
            return [object.id, id, UInt8(steps ?? 0)]
        case .command:
            let (id, steps) = try event(BTHomeObjects.commandOpcodes)
            let arguments = steps.map { [UInt8($0)] } ?? []
            return [object.id, UInt8(arguments.count), id] + arguments
        case .text:
            guard case .text(let text) = value else { throw refuse("text") }
            let bytes = Array(text.utf8)
            guard bytes.count <= 255 else { throw refuse("at most 255 bytes of text") }
            return [object.id, UInt8(bytes.count)] + bytes
        case .raw:
            guard case .bytes(let bytes) = value, bytes.count <= 255 else { throw refuse("at most 255 bytes") }
            return [object.id, UInt8(bytes.count)] + bytes
        case .firmwareVersion:
            guard case .text(let text) = value else { throw refuse("a version") }
            let parts = text.split(separator: ".", omittingEmptySubsequences: false).map { UInt8($0) }
            guard parts.count == object.length, parts.allSatisfy({ $0 != nil }) else { throw refuse("\(object.length) numbers of 0 to 255") }
            return [object.id] + parts.reversed().map { $0! }
        case .packetID:
            throw .invalidRequest("the packet id advances by itself")
        }
    }
}
