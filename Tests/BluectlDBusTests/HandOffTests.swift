#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BluectlDBus

@Suite("HandOff: one result from another thread, first settle wins")
struct HandOffTests {
    @Test("a result settled before the wait is returned at once")
    func settledFirst() async throws {
        let handOff = HandOff<[UInt8]>()
        #expect(handOff.settle(.success([1, 2, 3])))
        #expect(try await handOff.wait() == [1, 2, 3])
    }

    @Test("a result settled on another thread while the task waits reaches it")
    func settledFromThread() async throws {
        let handOff = HandOff<String>()
        startThread(name: "handoff-test") {
            // settle only after the waiter has had the chance to suspend
            while !handOff.hasWaiterForTesting { sched_yield() }
            handOff.settle(.success("reply"))
        }
        #expect(try await handOff.wait() == "reply")
    }

    @Test("the first settle wins; later ones are ignored and say so")
    func firstWins() async throws {
        let handOff = HandOff<Int>()
        #expect(handOff.settle(.failure(CancellationError())))
        #expect(!handOff.settle(.success(7)))
        await #expect(throws: CancellationError.self) { try await handOff.wait() }
    }
}
