import Foundation
import Synchronization
import Testing
@testable import BluectlCLI

@Suite("Restore store (--restore-id)")
struct RestoreStoreTests {
    static func temporaryHome() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("restore-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("identifiers: letters, digits, '.', '_', '-'; no path tricks", arguments: [
        ("logger", true), ("hr.sensor_1-a", true), (String(repeating: "a", count: 64), true),
        ("", false), (".hidden", false), ("../etc", false), ("a/b", false), ("a b", false),
        (String(repeating: "a", count: 65), false), ("é", false), ("a\u{0}", false),
    ])
    func identifiers(id: String, valid: Bool) {
        #expect(RestoreStore.isValid(id) == valid)
        #expect((try? RestoreStore(identifier: id, environment: ["HOME": "/h"])) != nil || !valid)
    }

    @Test("the folder: $XDG_STATE_HOME/bluectl, else ~/.local/state/bluectl (a relative XDG_STATE_HOME is ignored)")
    func folder() throws {
        #expect(try RestoreStore(identifier: "x", environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]).path == "/s/bluectl/x.json")
        #expect(try RestoreStore(identifier: "x", environment: ["XDG_STATE_HOME": "rel", "HOME": "/h"]).path == "/h/.local/state/bluectl/x.json")
        #expect(try RestoreStore(identifier: "x", environment: ["HOME": "/h"]).path == "/h/.local/state/bluectl/x.json")
    }

    @Test("save then load round-trips; nothing saved is nil; a corrupt file is an error naming it")
    func roundTrip() throws {
        let home = try Self.temporaryHome()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let store = try RestoreStore(identifier: "t", environment: ["XDG_STATE_HOME": home])
        #expect(try store.load() == nil)
        var state = CentralRestoreState(
            command: "subscribe", adapter: "hci1",
            peripherals: [.init(device: "AA:BB:CC:DD:EE:FF", address: "AA:BB:CC:DD:EE:FF", state: "connected")],
            subscriptions: [.init(device: "AA:BB:CC:DD:EE:FF", characteristic: "2a37", notifying: true)])
        try store.save(state)
        let loaded = try #require(try store.load())
        #expect(!loaded.saved.isEmpty)
        state.saved = loaded.saved
        #expect(loaded == state)
        let mode = try FileManager.default.attributesOfItem(atPath: store.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try Data("{\"version\":".utf8).write(to: URL(fileURLWithPath: store.path))
        #expect(throws: RestoreStoreError.self) { try store.load() }
        // No temporary files are left behind.
        let left = try FileManager.default.contentsOfDirectory(atPath: home + "/bluectl")
        #expect(left == ["t.json"])
    }

    @Test("a reader never sees a partial file while states of changing size are saved (what kill -9 would leave)")
    func atomicAgainstReaders() throws {
        let home = try Self.temporaryHome()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let store = try RestoreStore(identifier: "busy", environment: ["XDG_STATE_HOME": home])
        try store.save(CentralRestoreState(command: "subscribe"))
        let done = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        let bad = Atomic<Int>(0)
        // A thread of its own, so the reader runs however busy the test pool is.
        let finished = DispatchSemaphore(value: 0)
        Thread {
            while !done.load(ordering: .acquiring) {
                do {
                    guard try store.load() != nil else { bad.add(1, ordering: .relaxed); continue }
                    reads.add(1, ordering: .relaxed)
                } catch {
                    bad.add(1, ordering: .relaxed)
                }
            }
            finished.signal()
        }.start()
        var i = 0
        while i < 300 || reads.load(ordering: .relaxed) < 100 {
            let subs = (0..<(i % 17)).map { CentralRestoreState.Subscription(device: "dev\($0)", characteristic: "2a37", notifying: $0 % 2 == 0) }
            try store.save(CentralRestoreState(command: "subscribe", subscriptions: subs))
            i += 1
        }
        done.store(true, ordering: .releasing)
        finished.wait()
        #expect(bad.load(ordering: .relaxed) == 0)
        #expect(reads.load(ordering: .relaxed) > 0)
    }
}
