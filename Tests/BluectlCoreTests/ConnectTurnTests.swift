import BluectlDBus
import Testing
@testable import BluectlCore

/// Connects on one adapter take turns (`AdapterTurns`): the second waits,
/// told how many are ahead, and sends nothing to bluetoothd until the first
/// has ended; a wait longer than its timeout ends in a timeout of its own.
@Suite(.timeLimit(.minutes(1))) struct ConnectTurnTests {
    static let second = Fixture.device(Fixture.hci0, "AA_BB_CC_DD_EE_02")

    /// The next call to `member` on `path` (the first device's driver may poll in between).
    static func nextCall(_ lab: EmbeddedBlueZ, _ member: String, on path: ObjectPath) async -> DBusMessage? {
        while let call = await lab.bus.nextCall(member) {
            if call.path == path { return call }
            lab.bus.reply(to: call, [.stringVariantDictionary(["Connected": .boolean(true)])])
        }
        return nil
    }

    /// A central knowing two disconnected sensors on hci0, and their peripherals.
    static func start() async throws -> (EmbeddedBlueZ, Peripheral, Peripheral) {
        let lab = try await EmbeddedBlueZ.start(twoSensors())
        let adapter = try lab.central.adapter(named: "hci0")
        let second = try #require(try lab.central.knownDevice(Self.second.rawValue, adapter: adapter))
        return (lab, try lab.peripheral, second)
    }

    static func twoSensors() -> [ObjectPath: [String: [String: DBusValue]]] {
        var objects = EmbeddedBlueZ.sensor(connected: false, resolved: false)
        var other = Fixture.deviceProperties(name: "Second")
        other["Address"] = .string("AA:BB:CC:DD:EE:02")
        objects[second] = [BlueZ.deviceInterface: other]
        return objects
    }

    /// The first connect succeeds; then the second, its turn come, looks and connects.
    static func connectFirstThenSecond(_ lab: EmbeddedBlueZ, _ firstConnect: DBusMessage,
                                       _ connectingFirst: Task<Bool, any Error>) async throws {
        lab.bus.reply(to: firstConnect)
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        #expect(try await connectingFirst.value == true)

        let look = try #require(await nextCall(lab, "GetAll", on: second))
        lab.bus.reply(to: look, [.stringVariantDictionary(["Connected": .boolean(false)])])
        let secondConnect = try #require(await lab.bus.nextCall("Connect"))
        #expect(secondConnect.path == second)
        lab.bus.reply(to: secondConnect)
        lab.changed(second, BlueZ.deviceInterface, ["Connected": .boolean(true)])
    }

    @Test func secondConnectWaitsForTheFirstToEnd() async throws {
        let (lab, first, second) = try await Self.start()
        defer { lab.close() }
        let connectingFirst = Task { try await lab.central.connect(first, timeout: .seconds(30)) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        let firstConnect = try #require(await lab.bus.nextCall("Connect"))
        #expect(firstConnect.path == EmbeddedBlueZ.device)

        let (queued, queuedContinuation) = AsyncStream<Int>.makeStream()
        let connectingSecond = Task {
            try await lab.central.connect(second, timeout: .seconds(30)) { ahead in queuedContinuation.yield(ahead) }
        }
        var aheads = queued.makeAsyncIterator()
        #expect(await aheads.next() == 1)
        #expect(lab.calls("Connect").count == 1, "the second Connect waits for its turn")
        #expect(!lab.calls("GetAll").contains { $0.path == Self.second }, "and does not even look before it")

        try await Self.connectFirstThenSecond(lab, firstConnect, connectingFirst)
        #expect(try await connectingSecond.value == true)
    }

    @Test func aWaitLongerThanItsTimeoutIsATimeoutAndLeavesTheLine() async throws {
        let (lab, first, second) = try await Self.start()
        defer { lab.close() }
        let connectingFirst = Task { try await lab.central.connect(first, timeout: .seconds(60)) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        let firstConnect = try #require(await lab.bus.nextCall("Connect"))

        let (queued, queuedContinuation) = AsyncStream<Int>.makeStream()
        let connectingSecond = Task {
            try await lab.central.connect(second, timeout: .seconds(5)) { ahead in queuedContinuation.yield(ahead) }
        }
        var aheads = queued.makeAsyncIterator()
        #expect(await aheads.next() == 1)
        lab.bus.advance(by: .seconds(5))
        await #expect(throws: BluetoothError.timeout("connect to AA:BB:CC:DD:EE:02: still waiting for the adapter's turn")) {
            try await connectingSecond.value
        }
        #expect(lab.calls("Connect").count == 1, "the second never sent its Connect")

        // The first is unaffected, and the line is empty after it: a third connect goes at once.
        lab.bus.reply(to: firstConnect)
        lab.changed(EmbeddedBlueZ.device, BlueZ.deviceInterface, ["Connected": .boolean(true)])
        #expect(try await connectingFirst.value == true)
        let third = Task { try await lab.central.connect(second, timeout: .seconds(5)) }
        let look = try #require(await Self.nextCall(lab, "GetAll", on: Self.second))
        lab.bus.reply(to: look, [.stringVariantDictionary(["Connected": .boolean(true)])])
        #expect(try await third.value == false, "connected already, as bluetoothd answered")
    }

    /// A waiter cancelled while in line leaves it: a connect after it is
    /// told one is ahead (not two), gets the turn when the first ends, and
    /// the cancelled one never sends anything to bluetoothd.
    @Test func aCancelledWaiterLeavesTheLine() async throws {
        let (lab, first, second) = try await Self.start()
        defer { lab.close() }
        let connectingFirst = Task { try await lab.central.connect(first, timeout: .seconds(30)) }
        try await lab.answerGetAll(["Connected": .boolean(false)])
        let firstConnect = try #require(await lab.bus.nextCall("Connect"))

        let (queued, queuedContinuation) = AsyncStream<Int>.makeStream()
        var aheads = queued.makeAsyncIterator()
        let cancelled = Task {
            try await lab.central.connect(second, timeout: .seconds(30)) { ahead in queuedContinuation.yield(ahead) }
        }
        #expect(await aheads.next() == 1)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }

        let connectingAgain = Task {
            try await lab.central.connect(second, timeout: .seconds(30)) { ahead in queuedContinuation.yield(ahead) }
        }
        #expect(await aheads.next() == 1, "the cancelled waiter is no longer ahead")
        try await Self.connectFirstThenSecond(lab, firstConnect, connectingFirst)
        #expect(try await connectingAgain.value == true)
        #expect(lab.calls("Connect").map(\.path) == [EmbeddedBlueZ.device, Self.second], "one Connect each, none from the cancelled wait")
    }
}
