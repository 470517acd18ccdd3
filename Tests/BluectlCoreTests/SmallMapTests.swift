import BluectlDBus
import Testing
@testable import BluectlCore

@Suite("SmallMap: the object tree's compact maps")
struct SmallMapTests {
    @Test("subscript reads, sets, replaces and removes; count and keys follow")
    func subscriptSemantics() {
        var map: PropertyMap = ["RSSI": .int16(-60), "Name": .string("Thermo")]
        #expect(map["RSSI"] == .int16(-60))
        #expect(map["Missing"] == nil)
        map["RSSI"] = .int16(-40)
        map["ManufacturerData"] = .bytes([1, 2])
        #expect(map.count == 3)
        #expect(map["RSSI"] == .int16(-40))
        map["Name"] = nil
        map.removeValue(forKey: "Missing")
        #expect(map.count == 2)
        #expect(Set(map.keys) == ["RSSI", "ManufacturerData"])
        #expect(map.isEmpty == false)
    }

    @Test("names of the same length and different text stay apart")
    func sameLengthNames() {
        var map: PropertyMap = ["Paired": .boolean(true), "Bonded": .boolean(false)]
        map["Paired"] = .boolean(false)
        #expect(map["Paired"] == .boolean(false) && map["Bonded"] == .boolean(false) && map.count == 2)
        let long = String(repeating: "x", count: 20)
        map[long] = .boolean(true)
        #expect(map[String(repeating: "x", count: 19) + "y"] == nil)
        #expect(map[long] == .boolean(true))
    }

    @Test("== ignores order; merge lets the new value win; a{sv} variants are unwrapped")
    func equalityMergeAndUnwrapping() {
        let a: PropertyMap = ["A": .uint32(1), "B": .uint32(2)]
        let b: PropertyMap = ["B": .uint32(2), "A": .uint32(1)]
        #expect(a == b)
        #expect(a != ["A": .uint32(1)])
        #expect(a != ["A": .uint32(1), "B": .uint32(3)])
        var merged = a
        merged.merge(["B": .uint32(9), "C": .uint32(3)])
        #expect(merged == ["A": .uint32(1), "B": .uint32(9), "C": .uint32(3)])
        let fromBus = PropertyMap(["Connected": .variant(.boolean(true))])
        #expect(fromBus["Connected"] == .boolean(true))
        #expect(Dictionary(uniqueKeysWithValues: merged.map { ($0.key, $0.value) }).count == 3)
    }

    @Test("a change's properties read as a map: a name that came twice has its last value, variants unwrapped; merged so")
    func changedPropertiesAsAMap() {
        let changed = ChangedProperties([
            DBusProperty(name: "RSSI", value: .int16(-60)), DBusProperty(name: "Value", value: .variant(.bytes([1]))),
            DBusProperty(name: "RSSI", value: .int16(-40)),
        ])
        #expect(changed["RSSI"] == .int16(-40))
        #expect(changed["Value"] == .bytes([1]))
        #expect(changed["Name"] == nil)
        #expect(changed == ["Value": .bytes([1]), "RSSI": .int16(-40)])
        #expect(changed != ["Value": .bytes([1]), "RSSI": .int16(-60)])
        #expect(changed != ["RSSI": .int16(-40)])
        #expect(changed.contains { $0.key == "Value" } && !changed.contains { $0.key == "Name" })
        var map: PropertyMap = ["RSSI": .int16(-90), "Name": .string("x")]
        map.merge(changes: changed)
        #expect(map == ["RSSI": .int16(-40), "Name": .string("x"), "Value": .bytes([1])])
    }

    static func entries(_ pairs: [(String, DBusValue)]) -> [DBusDictEntry] {
        pairs.map { DBusDictEntry(.string($0.0), .variant($0.1)) }
    }

    @Test("maps built alike through NameLists share one list of names; a change copies it for that map alone")
    func sharedNames() throws {
        var lists = NameLists()
        let a = try #require(PropertyMap(entries: Self.entries([("Address", .string("A")), ("RSSI", .int16(-60))]), sharing: &lists))
        var b = try #require(PropertyMap(entries: Self.entries([("Address", .string("B")), ("RSSI", .int16(-70))]), sharing: &lists))
        #expect(a.sharesNames(with: b))
        #expect(a == ["Address": .string("A"), "RSSI": .int16(-60)], "variants are unwrapped")
        // the same names in another order, or other names: a list of their own
        let c = try #require(PropertyMap(entries: Self.entries([("RSSI", .int16(-1)), ("Address", .string("C"))]), sharing: &lists))
        #expect(!c.sharesNames(with: a))
        #expect(c == ["Address": .string("C"), "RSSI": .int16(-1)])
        // a value changed in place keeps the list; a name added or removed copies it
        b["RSSI"] = .int16(-50)
        #expect(b.sharesNames(with: a) && b["RSSI"] == .int16(-50) && a["RSSI"] == .int16(-60))
        b["Name"] = .string("Thermo")
        #expect(!b.sharesNames(with: a))
        #expect(b == ["Address": .string("B"), "RSSI": .int16(-50), "Name": .string("Thermo")])
        #expect(a == ["Address": .string("A"), "RSSI": .int16(-60)], "the other maps keep their names")
        var e = try #require(PropertyMap(entries: Self.entries([("Address", .string("E")), ("RSSI", .int16(-3))]), sharing: &lists))
        #expect(e.sharesNames(with: a))
        e["Address"] = nil
        #expect(e == ["RSSI": .int16(-3)] && a.count == 2 && c.count == 2)
        // the copy is shared again: b's names (Address, RSSI, Name) are kept from now on
        var f = try #require(PropertyMap(entries: Self.entries([("Address", .string("F")), ("RSSI", .int16(-4))]), sharing: &lists))
        f["Name"] = .string("Other")
        #expect(!f.sharesNames(with: b))
        b.shareNames(through: &lists)
        f.shareNames(through: &lists)
        #expect(f.sharesNames(with: b) && f["Name"] == .string("Other") && b["Name"] == .string("Thermo"))
    }

    @Test("through NameLists: a name repeated keeps its last value, a name that is not a string fails, as without")
    func sharedNamesMalformed() {
        var lists = NameLists()
        let repeated = PropertyMap(entries: Self.entries([("RSSI", .int16(-60)), ("Name", .string("x")), ("RSSI", .int16(-40))]),
                                   sharing: &lists)
        #expect(repeated == ["RSSI": .int16(-40), "Name": .string("x")])
        #expect(PropertyMap(entries: [DBusDictEntry(.uint16(1), .variant(.boolean(true)))], sharing: &lists) == nil)
        let kept = PropertyMap(entries: Self.entries([("RSSI", .int16(1)), ("Name", .string("x"))]), sharing: &lists)
        #expect(kept?.count == 2)
        let late = PropertyMap(entries: Self.entries([("RSSI", .int16(1))]) + [DBusDictEntry(.byte(1), .variant(.int16(2)))],
                               sharing: &lists)
        #expect(late == nil, "a name that is not a string where a kept list has a name")
        let empty = PropertyMap(entries: [], sharing: &lists)
        #expect(empty?.isEmpty == true)
    }

    @Test("NameLists keeps 16 lists: a new one takes the last place, so a list in use stays and a rare one goes")
    func nameListsBound() throws {
        var lists = NameLists()
        func map(_ i: Int) throws -> PropertyMap {
            try #require(PropertyMap(entries: Self.entries([("P\(i)", .uint32(UInt32(i)))]), sharing: &lists))
        }
        let first = try map(0)
        var fifteen = first, fourteen = first
        for i in 1..<16 {
            fourteen = fifteen
            fifteen = try map(i)
        }
        #expect(try map(0).sharesNames(with: first), "16 kept")
        #expect(try map(15).sharesNames(with: fifteen))   // found: moves one place up, 14's list is last now
        let sixteen = try map(16)   // takes the last place: 14's
        #expect(try map(15).sharesNames(with: fifteen), "the list in use stays")
        #expect(try !map(14).sharesNames(with: fourteen), "the last one was pushed out; an equal one is made")
        #expect(try !map(16).sharesNames(with: sixteen), "and took the last place in turn")
        #expect(try map(0) == ["P0": .uint32(0)])
    }
}
