import BluectlDBus

/// Properties of one interface, with the variants unwrapped: name → value.
package typealias PropertyMap = SmallMap<DBusValue>

/// An object's interfaces: name → properties.
package typealias InterfaceMap = SmallMap<PropertyMap>

/// A map from names to values for the few names BlueZ gives an object or an
/// interface, as two small arrays rather than a `Dictionary`: ten to thirty
/// properties (one to four interfaces) are found about as fast by a linear
/// search, while a dictionary of 16 entries reserves 32 slots. The names are
/// an array of their own because objects announced alike have the same names
/// in the same order: the object tree builds its maps through `NameLists`,
/// so that a map shares its list of names with the maps built before it
/// (copied on write when a map gains or loses a name, and shared again
/// after), and holds only its values: 24 bytes each, where a name and a
/// value took 40. Names longer than a small string (15 bytes) that BlueZ
/// uses are shared (`SharedNames`), not stored once per list. Order is not
/// significant (`==` ignores it).
package struct SmallMap<Value: Sendable & Equatable>: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral,
    CustomStringConvertible {
    package typealias Element = (key: String, value: Value)

    /// `names[i]` is the name of `values[i]`; the two always have the same count.
    private var names: ContiguousArray<String>
    private var values: ContiguousArray<Value>

    package init() {
        names = []
        values = []
    }

    package init(dictionaryLiteral elements: (String, Value)...) {
        self.init(minimumCapacity: elements.count)
        for (key, value) in elements { self[key] = value }
    }

    package init(minimumCapacity: Int) {
        names = []
        values = []
        names.reserveCapacity(minimumCapacity)
        values.reserveCapacity(minimumCapacity)
    }

    /// `names` (distinct, from `NameLists`) with their values, in the same order.
    fileprivate init(names: ContiguousArray<String>, values: ContiguousArray<Value>) {
        self.names = names
        self.values = values
    }

    package var count: Int { values.count }
    package var isEmpty: Bool { values.isEmpty }
    package var keys: [String] { Array(names) }

    /// Whether this map's names are the very list `other`'s are (one array,
    /// shared through `NameLists`), not an equal copy: what the tests check.
    package func sharesNames(with other: SmallMap) -> Bool {
        !names.isEmpty && names.withUnsafeBufferPointer { mine in
            other.names.withUnsafeBufferPointer { $0.baseAddress == mine.baseAddress }
        }
    }

    private func index(of key: String) -> Int? {
        names.firstIndex(where: { sameName($0, key) })
    }

    package subscript(key: String) -> Value? {
        get { index(of: key).map { values[$0] } }
        set {
            if let i = index(of: key) {
                if let newValue {
                    values[i] = newValue
                } else {
                    names.remove(at: i)
                    values.remove(at: i)
                }
            } else if let newValue {
                names.append(SharedNames.shared(key))
                values.append(newValue)
            }
        }
    }

    /// Changes the value of `key` in place (nil, and nothing runs, when
    /// there is none): a get and a set would copy the value first, and a
    /// property map's storage with it.
    package mutating func modifyValue<Result>(forKey key: String, _ body: (inout Value) -> Result) -> Result? {
        guard let i = index(of: key) else { return nil }
        return body(&values[i])
    }

    /// `other`'s values replace ours.
    package mutating func merge(_ other: SmallMap) {
        for i in other.values.indices { self[other.names[i]] = other.values[i] }
    }

    /// A change's values replace ours (in the order they came: a name that
    /// came twice keeps its last value).
    package mutating func merge(changes changed: ChangedProperties) where Value == DBusValue {
        for (name, value) in changed { self[name] = value }
    }

    package mutating func removeValue(forKey key: String) {
        self[key] = nil
    }

    /// The entries in the map's order.
    package struct Iterator: IteratorProtocol {
        fileprivate let names: ContiguousArray<String>
        fileprivate let values: ContiguousArray<Value>
        fileprivate var index = 0

        package mutating func next() -> Element? {
            guard index < values.count else { return nil }
            defer { index += 1 }
            return (key: names[index], value: values[index])
        }
    }

    package func makeIterator() -> Iterator {
        Iterator(names: names, values: values)
    }

    package static func == (lhs: SmallMap, rhs: SmallMap) -> Bool {
        lhs.count == rhs.count && lhs.values.indices.allSatisfy { rhs[lhs.names[$0]] == lhs.values[$0] }
    }

    package var description: String {
        "[" + zip(names, values).map { "\($0): \($1)" }.joined(separator: ", ") + "]"
    }
}

/// The lists of names that maps built before hold, for a new map with the
/// same names in the same order to share (`SmallMap`): BlueZ announces its
/// objects alike (each device's Device1 with the same properties, as far as
/// it knows the same things), so a few lists serve a whole scan. Owned by
/// whoever builds the maps (the object tree, on its event loop). At most 16
/// are kept: a list found moves one place to the front, and once 16 are
/// kept a new one replaces the last, so a list in use climbs past the
/// unused ones and only the last place turns over.
package struct NameLists: Sendable {
    private var lists: [ContiguousArray<String>] = []

    package init() {}

    /// The list `name(0) … name(count - 1)`: a kept one, or a new one
    /// (kept from now on); nil when a name is nil or repeated (the caller
    /// then builds its map name by name).
    mutating func list(count: Int, _ name: (Int) -> String?) -> ContiguousArray<String>? {
        search: for index in lists.indices where lists[index].count == count {
            for i in 0..<count {
                guard let candidate = name(i), sameName(candidate, lists[index][i]) else { continue search }
            }
            if index > 0 { lists.swapAt(index, index - 1) }
            return lists[max(index - 1, 0)]
        }
        var list = ContiguousArray<String>()
        list.reserveCapacity(count)
        for i in 0..<count {
            guard let candidate = name(i), !list.contains(candidate) else { return nil }
            list.append(SharedNames.shared(candidate))
        }
        if lists.count < 16 { lists.append(list) } else { lists[lists.count - 1] = list }
        return list
    }
}

extension SmallMap {
    /// A map of `count` values, `name(i)` and `value(i)` each, its names
    /// shared through `lists`; nil when a name is nil or repeated.
    init?(count: Int, sharing lists: inout NameLists, name: (Int) -> String?, value: (Int) -> Value) {
        if count == 0 {
            self.init()
            return
        }
        guard let names = lists.list(count: count, name) else { return nil }
        var values = ContiguousArray<Value>()
        values.reserveCapacity(count)
        for i in 0..<count { values.append(value(i)) }
        self.init(names: names, values: values)
    }

    /// Takes a kept list equal to its names (or keeps its own, from now on).
    mutating func shareNames(through lists: inout NameLists) {
        guard !names.isEmpty, let shared = lists.list(count: names.count, { names[$0] }) else { return }
        names = shared
    }

    /// Runs `body` on the map; if that gave the map a list of names of its
    /// own (a name added or removed copies a shared list), shares a kept list
    /// again (BlueZ invalidates every device's RSSI when discovery stops).
    package mutating func changingNames<Result>(through lists: inout NameLists,
                                                 _ body: (inout SmallMap) -> Result) -> Result {
        let before = namesAddress
        let result = body(&self)
        if namesAddress != before { shareNames(through: &lists) }
        return result
    }

    private var namesAddress: UnsafeRawPointer? {
        names.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }
}

extension SmallMap<DBusValue> {
    /// From `a{sv}` entries, variants unwrapped.
    package init(_ properties: [String: DBusValue]) {
        self.init(minimumCapacity: properties.count)
        for (key, value) in properties {  // keys are unique: no search
            names.append(SharedNames.shared(key))
            values.append(value.unwrapped)
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

extension SmallMap<DBusValue> {
    /// `init?(entries:)`, the names shared through `lists`.
    package init?(entries: [DBusDictEntry], sharing lists: inout NameLists) {
        let name: (Int) -> String? = { if case .string(let key) = entries[$0].key { key } else { nil } }
        if let map = SmallMap(count: entries.count, sharing: &lists, name: name, value: { entries[$0].value.unwrapped }) {
            self = map
        } else {
            self.init(entries: entries)
        }
    }
}
