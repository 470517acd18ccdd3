import Testing
@testable import BluectlCLI

@Suite("Sequence tracker (--check-sequence)")
struct SequenceTrackerTests {
    static func u32(_ n: UInt32, extra: [UInt8] = [0xee]) -> [UInt8] {
        [UInt8(n & 0xff), UInt8(n >> 8 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 24)] + extra
    }

    @Test("in order: no findings, counts only values")
    func inOrder() {
        var t = SequenceTracker(width: .u32)
        for n in UInt32(1000)..<1100 { #expect(t.observe(Self.u32(n)) == nil) }
        #expect(t.values == 100 && t.missing == 0 && t.late == 0 && t.repeated == 0)
    }

    @Test("a gap names what was expected and how many are missing")
    func gap() {
        var t = SequenceTracker(width: .u32)
        _ = t.observe(Self.u32(0))
        #expect(t.observe(Self.u32(1)) == nil)
        #expect(t.observe(Self.u32(5)) == .gap(expected: 2, got: 5, missing: 3))
        #expect(t.observe(Self.u32(6)) == nil)
        #expect(t.missing == 3)
        #expect(t.summary == "4 values, 3 missing, 0 late, 0 repeated")
    }

    @Test("a skipped number that arrives later is late (no longer missing); one seen twice is repeated")
    func lateAndRepeated() {
        var t = SequenceTracker(width: .u32)
        _ = t.observe(Self.u32(10))
        #expect(t.observe(Self.u32(12)) == .gap(expected: 11, got: 12, missing: 1))
        #expect(t.observe(Self.u32(11)) == .late(11))
        #expect(t.observe(Self.u32(11)) == .repeated(11))
        #expect(t.observe(Self.u32(12)) == .repeated(12))
        #expect(t.observe(Self.u32(13)) == nil)
        #expect(t.missing == 0 && t.late == 1 && t.repeated == 2 && t.values == 6)
    }

    @Test("numbers wrap: 255 → 0 in u8 and 65535 → 0 in u16 are in order; a gap across the wrap counts right")
    func wraps() {
        var t8 = SequenceTracker(width: .u8)
        _ = t8.observe([254])
        #expect(t8.observe([255]) == nil)
        #expect(t8.observe([0]) == nil)
        #expect(t8.observe([3]) == .gap(expected: 1, got: 3, missing: 2))
        var t16 = SequenceTracker(width: .u16)
        _ = t16.observe([0xfe, 0xff])
        #expect(t16.observe([0x01, 0x00]) == .gap(expected: 0xffff, got: 1, missing: 2))
    }

    @Test("a value shorter than the number is reported, not read past its end")
    func short() {
        var t = SequenceTracker(width: .u32)
        #expect(t.observe([1, 2]) == .short(length: 2))
        #expect(t.observe([]) == .short(length: 0))
        #expect(t.short == 2 && t.summary.contains("2 too short"))
    }

    @Test("only --check-sequence's names parse", arguments: ["u8", "u16", "u32", "U8", "u64", "", "32"])
    func widthNames(name: String) {
        #expect((SequenceTracker.Width(name: name) != nil) == ["u8", "u16", "u32"].contains(name))
    }
}
