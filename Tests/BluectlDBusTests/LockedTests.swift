import Testing
@testable import BluectlDBus

@Suite("Locked")
struct LockedTests {
    struct Unique: ~Copyable { var count = 1 }

    @Test("reflection shows a Locked without its value, also a ~Copyable one (it used to trap)")
    func reflection() {
        var text = ""
        dump(Locked(Unique()), to: &text)
        #expect(text.contains("Locked") && !text.contains("count"), "\(text)")
        text = ""
        dump(Locked(42), to: &text)
        #expect(!text.contains("42"), "\(text)")
    }

    @Test("withLock reads and writes the value")
    func withLock() {
        let locked = Locked(Unique())
        locked.withLock { $0.count += 1 }
        #expect(locked.withLock { $0.count } == 2)
    }
}
