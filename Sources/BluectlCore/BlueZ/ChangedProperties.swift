import BluectlDBus

/// The properties a `PropertiesChanged` changed, as a tree's change carries
/// them to its listeners and observers: the signal's own array, read like a
/// map (a name that came twice has its last value; variants unwrapped).
///
/// Not a `PropertyMap` built for the change: per notification value that was
/// an allocation and a lookup of the names, for observers that look at their
/// device's changes and never at a characteristic's values.
package struct ChangedProperties: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    package typealias Element = (key: String, value: DBusValue)

    private let properties: [DBusProperty]

    /// The changed properties of a `PropertiesChanged`, in the order they came.
    package init(_ properties: [DBusProperty]) {
        self.properties = properties
    }

    package init(dictionaryLiteral elements: (String, DBusValue)...) {
        self.init(elements.map { DBusProperty(name: $0.0, value: $0.1) })
    }

    /// The value of `key` (the last one, should it come twice), its variant unwrapped.
    package subscript(key: String) -> DBusValue? {
        properties.last(where: { sameName($0.name, key) })?.value.unwrapped
    }

    /// The names that came, without their values (a scan asks which came,
    /// per advertisement, and reads no value).
    package var names: LazyMapSequence<[DBusProperty], String> { properties.lazy.map(\.name) }

    /// Each property as it came (a name that came twice comes twice; the
    /// later value is the one that counts), its variant unwrapped.
    package struct Iterator: IteratorProtocol {
        fileprivate var rest: IndexingIterator<[DBusProperty]>

        package mutating func next() -> Element? {
            rest.next().map { (key: $0.name, value: $0.value.unwrapped) }
        }
    }

    package func makeIterator() -> Iterator {
        Iterator(rest: properties.makeIterator())
    }

    /// As maps: the same names with the same last values, in any order.
    package static func == (lhs: ChangedProperties, rhs: ChangedProperties) -> Bool {
        let names = Set(lhs.properties.map(\.name))
        return names == Set(rhs.properties.map(\.name)) && names.allSatisfy { lhs[$0] == rhs[$0] }
    }
}
