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
}
