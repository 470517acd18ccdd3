import Foundation
import Testing
@testable import BluectlDBus

/// A throwaway dbus-daemon (session configuration: everything allowed).
final class ScratchBus: @unchecked Sendable {
    let process = Process()
    let address: String

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--session", "--nofork", "--nopidfile", "--print-address=1"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        var line = Data()
        let handle = out.fileHandleForReading
        while !line.contains(0x0a) {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        address = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// kill + waitpid: Foundation's waitUntilExit can hang off the main thread.
    deinit {
        let pid = process.processIdentifier
        kill(pid, SIGKILL)  // a scratch bus needs no clean shutdown
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

@Suite(.timeLimit(.minutes(1))) struct DBusConnectionTests {
    @Test func callsTheBusDaemon() async throws {
        let bus = try ScratchBus()
        let connection = try DBusConnection.connect(address: bus.address)
        defer { connection.close() }
        #expect(connection.uniqueName.hasPrefix(":"))
        let reply = try await connection.callMethod(
            destination: DBusConnection.busName, path: ObjectPath("/org/freedesktop/DBus")!,
            interface: DBusConnection.busName, member: "ListNames", timeout: .seconds(5))
        #expect(reply.first?.stringArray?.contains(connection.uniqueName) == true)
    }

    @Test func errorRepliesKeepTheirName() async throws {
        let bus = try ScratchBus()
        let connection = try DBusConnection.connect(address: bus.address)
        defer { connection.close() }
        await #expect(throws: DBusError.self) {
            _ = try await connection.callMethod(
                destination: "org.bluez", path: ObjectPath("/org/bluez")!, interface: "org.bluez.Adapter1",
                member: "StartDiscovery", timeout: .seconds(5))
        }
        do {
            _ = try await connection.callMethod(
                destination: "org.bluez", path: ObjectPath("/org/bluez")!, interface: "org.bluez.Adapter1",
                member: "StartDiscovery", timeout: .seconds(5))
        } catch let error as DBusError {
            #expect(error.remoteName == "org.freedesktop.DBus.Error.ServiceUnknown")
        }
    }

    /// A peer that never answers: our own timer fails the call.
    @Test func timeoutsFire() async throws {
        let bus = try ScratchBus()
        let silent = try DBusConnection.connect(address: bus.address)
        let caller = try DBusConnection.connect(address: bus.address)
        defer { silent.close(); caller.close() }
        let calls = Locked(0)
        silent.export(ObjectPath("/never")!) { _, _ in calls.withLock { $0 += 1 } }
        let start = ContinuousClock.now
        do {
            _ = try await caller.callMethod(
                destination: silent.uniqueName, path: ObjectPath("/never")!, interface: "org.example.Never",
                member: "Answer", timeout: .milliseconds(300))
            Issue.record("the call should have timed out")
        } catch let error as DBusError {
            #expect(error == .timedOut(method: "org.example.Never.Answer", seconds: 0.3))
        }
        // Not early: the deadline is on this same clock, set after `start`, and a call
        // only expires once it has passed, so this holds on any machine, however slow.
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(300))
        #expect(calls.withLock { $0 } == 1, "the call reached the peer, which kept quiet")
    }

    @Test func exportedObjectsAnswerAndUnknownOnesError() async throws {
        let bus = try ScratchBus()
        let server = try DBusConnection.connect(address: bus.address)
        let client = try DBusConnection.connect(address: bus.address)
        defer { server.close(); client.close() }
        server.export(ObjectPath("/echo")!) { call, connection in
            try? connection.send(.methodReturn(to: call, arguments: call.arguments))
        }
        let echoed = try await client.callMethod(
            destination: server.uniqueName, path: ObjectPath("/echo")!, interface: "org.example.Echo",
            member: "Echo", arguments: [.bytes([1, 2, 3]), .string("hi")], timeout: .seconds(5))
        #expect(echoed == [.bytes([1, 2, 3]), .string("hi")])
        do {
            _ = try await client.callMethod(
                destination: server.uniqueName, path: ObjectPath("/nothing")!, interface: "org.example.Echo",
                member: "Echo", timeout: .seconds(5))
            Issue.record("expected UnknownObject")
        } catch let error as DBusError {
            #expect(error.remoteName == "org.freedesktop.DBus.Error.UnknownObject")
        }
    }

    /// Signals subscribed for a well-known name are accepted only from its
    /// current owner; a rogue client sending the same signal is ignored, and
    /// when ownership moves, the new owner is believed and the old one not.
    @Test func signalsOnlyFromTheCurrentOwner() async throws {
        let bus = try ScratchBus()
        let listener = try DBusConnection.connect(address: bus.address)
        let owner = try DBusConnection.connect(address: bus.address)
        let rogue = try DBusConnection.connect(address: bus.address)
        defer { listener.close(); owner.close(); rogue.close() }
        let requestName = { (connection: DBusConnection) async throws -> Int? in
            try await connection.callMethod(
                destination: DBusConnection.busName, path: ObjectPath("/org/freedesktop/DBus")!,
                interface: DBusConnection.busName, member: "RequestName",
                arguments: [.string("org.example.Owner"), .uint32(0)], timeout: .seconds(5)).first?.integer
        }
        #expect(try await requestName(owner) == 1)
        let received = Locked<[String]>([])
        let (stream, continuation) = AsyncStream<String>.makeStream()
        _ = try await listener.subscribe(SignalFilter(sender: "org.example.Owner", interface: "org.example.Sig", member: "Hello")) { message in
            let who = message.arguments.first?.string ?? "?"
            received.withLock { $0.append(who) }
            continuation.yield(who)
        }
        #expect(listener.owner(of: "org.example.Owner") == owner.uniqueName)
        let hello = { (text: String) in
            DBusMessage.signal(path: ObjectPath("/x")!, interface: "org.example.Sig", member: "Hello", arguments: [.string(text)])
        }
        try rogue.send(hello("rogue-1"))
        try owner.send(hello("owner-1"))
        var iterator = stream.makeAsyncIterator()
        #expect(await iterator.next() == "owner-1")
        // Ownership moves: the rogue takes the name after the owner leaves.
        owner.close()
        try await waitUntil { listener.owner(of: "org.example.Owner") == nil }
        #expect(try await requestName(rogue) == 1)
        try await waitUntil { listener.owner(of: "org.example.Owner") == rogue.uniqueName }
        try rogue.send(hello("new-owner-1"))
        #expect(await iterator.next() == "new-owner-1")
        #expect(received.withLock { $0 } == ["owner-1", "new-owner-1"])
    }

    @Test func pendingCallsFailWhenTheBusGoesAway() async throws {
        var bus: ScratchBus? = try ScratchBus()
        let silent = try DBusConnection.connect(address: bus!.address)
        let caller = try DBusConnection.connect(address: bus!.address)
        defer { silent.close(); caller.close() }
        silent.export(ObjectPath("/never")!) { _, _ in }
        async let outcome: Result<[DBusValue], DBusError> = {
            do {
                return .success(try await caller.callMethod(
                    destination: silent.uniqueName, path: ObjectPath("/never")!, interface: "org.example.Never",
                    member: "Answer", timeout: .seconds(30)))
            } catch let error as DBusError {
                return .failure(error)
            } catch {
                return .failure(.invalidArgument("\(error)"))
            }
        }()
        try await Task.sleep(for: .milliseconds(200))
        bus = nil  // kills the daemon
        let result = await outcome
        #expect(result == .failure(.disconnected))
        #expect(!caller.isConnected)
    }

    @Test func connectingToNothingSaysWhere() {
        #expect(throws: DBusError.connectionFailed(address: "unix:path=/nonexistent/bus", reason: "Failed to connect to socket /nonexistent/bus: No such file or directory")) {
            _ = try DBusConnection.connect(address: "unix:path=/nonexistent/bus")
        }
        #expect(throws: DBusError.self) { _ = try DBusConnection.connect(address: "garbage") }
    }
}

func waitUntil(_ condition: @Sendable () -> Bool) async throws {
    for _ in 0..<200 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("condition not met within 2 s")
}
