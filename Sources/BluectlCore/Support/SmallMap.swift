import BluectlDBus

/// Properties of one interface, with the variants unwrapped: name → value.
package typealias PropertyMap = SmallMap<DBusValue>

/// An object's interfaces: name → properties.
package typealias InterfaceMap = SmallMap<PropertyMap>

/// A map from names to values for the few names BlueZ gives an object or an
/// interface, as a small array rather than a `Dictionary`: ten to thirty
/// properties (one to four interfaces) are found about as fast by a linear
/// search, while a dictionary of 16 entries reserves 32 slots. With 10,000
/// devices in a scan that was 1.5 KB per device, half of bluectl's memory
/// (README, Figures). Names longer than a small string (15 bytes) that BlueZ
/// uses are shared (`SharedNames`), not stored once per object. Order is not significant
/// (`==` ignores it).
package struct SmallMap<Value: Sendable & Equatable>: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral,
    CustomStringConvertible {
    package typealias Element = (key: String, value: Value)

    private struct Entry: Sendable {
        let key: String
        var value: Value
    }
    private var entries: ContiguousArray<Entry>

    package init() { entries = [] }

    package init(dictionaryLiteral elements: (String, Value)...) {
        entries = []
        entries.reserveCapacity(elements.count)
        for (key, value) in elements { self[key] = value }
    }

    package init(minimumCapacity: Int) {
        entries = []
        entries.reserveCapacity(minimumCapacity)
    }

    package var count: Int { entries.count }
    package var isEmpty: Bool { entries.isEmpty }
    package var keys: [String] { entries.map(\.key) }
    package var values: [Value] { entries.map(\.value) }

    package subscript(key: String) -> Value? {
        get { entries.first(where: { Self.same($0.key, key) })?.value }
        set {
            if let i = entries.firstIndex(where: { Self.same($0.key, key) }) {
                if let newValue { entries[i].value = newValue } else { entries.remove(at: i) }
            } else if let newValue {
                entries.append(Entry(key: SharedNames.shared(key), value: newValue))
            }
        }
    }

    /// `other`'s values replace ours.
    /// `==`, but names of another length are told apart without a string
    /// comparison (most are, and a comparison of two heap strings is a call).
    @inline(__always)
    private static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a == b
    }

    /// Changes the value of `key` in place (nil, and nothing runs, when
    /// there is none): a get and a set would copy the value first, and a
    /// property map's storage with it.
    package mutating func modifyValue<Result>(forKey key: String, _ body: (inout Value) -> Result) -> Result? {
        guard let i = entries.firstIndex(where: { Self.same($0.key, key) }) else { return nil }
        return body(&entries[i].value)
    }

    package mutating func merge(_ other: SmallMap) {
        for entry in other.entries { self[entry.key] = entry.value }
    }

    package mutating func removeValue(forKey key: String) {
        self[key] = nil
    }

    package func makeIterator() -> some IteratorProtocol<Element> {
        entries.lazy.map { (key: $0.key, value: $0.value) }.makeIterator()
    }

    package static func == (lhs: SmallMap, rhs: SmallMap) -> Bool {
        lhs.count == rhs.count && lhs.entries.allSatisfy { rhs[$0.key] == $0.value }
    }

    package var description: String {
        "[" + entries.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
    }
}

extension SmallMap<DBusValue> {
    /// From `a{sv}` entries, variants unwrapped.
    package init(_ properties: [String: DBusValue]) {
        self.init(minimumCapacity: properties.count)
        for (key, value) in properties {  // keys are unique: no search
            entries.append(Entry(key: SharedNames.shared(key), value: value.unwrapped))
        }
    }
}

extension SmallMap<DBusValue> {
    /// From a PropertiesChanged's changed properties, variants unwrapped (a
    /// name repeated keeps its last value).
    package init(_ properties: [DBusProperty]) {
        self.init(minimumCapacity: properties.count)
        for property in properties {
            let value = property.value.unwrapped
            if properties.count > 1, let i = entries.firstIndex(where: { Self.same($0.key, property.name) }) {
                entries[i].value = value
            } else {
                entries.append(Entry(key: SharedNames.shared(property.name), value: value))
            }
        }
    }
}

extension SmallMap<DBusValue> {
    /// From the entries of an `a{sv}` as they came off the bus, variants
    /// unwrapped (a key repeated keeps its last value); nil when a key is
    /// not a string. No `Dictionary` in between: each key would be hashed
    /// for nothing.
    package init?(entries: [DBusDictEntry]) {
        self.init(minimumCapacity: entries.count)
        for entry in entries {
            guard case .string(let key) = entry.key else { return nil }
            self[key] = entry.value.unwrapped
        }
    }
}
