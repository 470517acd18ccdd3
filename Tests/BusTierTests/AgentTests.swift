// --agent keyboard-display end to end: the stand-in's Device1.Pair asks the
// agent bluectl registered (Mock.SetPairing), the questions appear on the
// controlling terminal — a pty driven by a Python script, with stdin
// /dev/null so that reading stdin instead of /dev/tty fails — and are
// refused when there is no terminal. Contract: README "--agent".

import Foundation
import Testing

/// Runs argv[4:] in a new session whose controlling terminal is a pty, stdin /dev/null,
/// stdout/stderr to files; answers argv[3] once the terminal shows argv[2]. Prints one
/// JSON object (tty, exit code, stdout, stderr) and copies bluectl's stderr to its own.
private let ptyDriver = #"""
import fcntl, json, os, select, sys, termios
outdir, prompt, answer = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
argv = sys.argv[4:]
out, err = os.path.join(outdir, 'pty.out'), os.path.join(outdir, 'pty.err')
master, slave = os.openpty()
pid = os.fork()
if pid == 0:
    os.setsid()
    os.close(master)
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    os.dup2(os.open('/dev/null', os.O_RDONLY), 0)
    os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
    os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
    os.close(slave)
    os.execv(argv[0], argv)
# the driver keeps the slave open: the master never reads EIO while bluectl has no tty fd open
tty, answered, status = b'', False, None
while True:
    r, _, _ = select.select([master], [], [], 0.05)
    if r:
        tty += os.read(master, 1024)
        if not answered and prompt in tty:
            os.write(master, (answer + '\n').encode())
            answered = True
    elif status is not None:
        break
    if status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
print(json.dumps({'tty': tty.decode(errors='replace'), 'code': os.waitstatus_to_exitcode(status),
                  'stdout': open(out).read(), 'stderr': open(err).read()}))
# bluectl's stderr on ours too, where the harness looks for sanitizer reports
sys.stderr.write(open(err).read())
"""#

@Suite("pairing agent: --agent keyboard-display asks on the terminal", .timeLimit(.minutes(3)))
struct AgentTests {
    /// bluectl connect --pair --agent keyboard-display under a pty.
    private func pairOnTerminal(_ bus: PrivateBus, prompt: String, answer: String) async throws -> JSONValue {
        let args = [try BusTier.bluectlExecutable(), "connect", heartRateAddress, "--pair", "--agent", "keyboard-display"]
        let r = try await bus.spawn(BusTier.python, ["-c", ptyDriver, bus.directory.path, prompt, answer] + args)
            .wait(timeout: .seconds(60))
        guard r.exitCode == 0, let last = r.stdoutLines.last else { throw BusTierError("pty driver failed: \(r)") }
        return try JSONValue.parse(last)
    }

    @Test("RequestConfirmation: the passkey is shown on the terminal, 'yes' pairs")
    func confirmationOnTerminal() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestConfirmation", 123456)
            let r = try await pairOnTerminal(bus, prompt: "(yes/no)", answer: "yes")
            #expect(r["code"] == .int(0), "\(r)")
            #expect(r["tty"]?.string?.contains("confirm passkey 123456 for \(heartRateAddress)") == true, "\(r)")
            #expect(r["stdout"]?.string?.contains("paired") == true, "\(r)")
            let log = try await bus.agentLog()
            #expect(log.map(\.method) == ["RequestConfirmation"])
            #expect(log.map(\.outcome) == ["ok"])
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(true))
        }
    }

    @Test("RequestPasskey: the passkey typed on the terminal reaches BlueZ")
    func passkeyOnTerminal() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 654321)
            let r = try await pairOnTerminal(bus, prompt: "enter the passkey", answer: "654321")
            #expect(r["code"] == .int(0), "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["ok:654321"])
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(true))
        }
    }

    @Test("'no' at the terminal: rejected, pairing fails (77) saying why; not paired")
    func refusedOnTerminal() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestConfirmation", 111111)
            let r = try await pairOnTerminal(bus, prompt: "(yes/no)", answer: "no")
            #expect(r["code"] == .int(77), "\(r)")
            let stderr = r["stderr"]?.string ?? ""
            #expect(stderr.split(separator: "\n").count == 1, "\(r)")
            #expect(stderr.contains("AuthenticationRejected") && stderr.contains("not confirmed"), "\(r)")
            #expect(try await bus.agentLog().first?.outcome.hasPrefix("error:org.bluez.Error.Rejected") == true)
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(false))
        }
    }

    @Test("no controlling terminal: the agent refuses, exit 77 with one line saying so")
    func noTerminal() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 1)
            // setsid: a session of its own, so no controlling terminal even if the test runner has one
            let r = try await bus.spawn("/usr/bin/setsid", ["-w", try BusTier.bluectlExecutable(), "connect", heartRateAddress,
                                                            "--pair", "--agent", "keyboard-display"]).wait(timeout: .seconds(30))
            expectCleanFailure(r, 77, "no terminal to ask on")
            #expect(try await bus.agentLog().first?.outcome.contains("no terminal") == true)
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(false))
        }
    }

    @Test("the default agent (no-input-no-output) refuses a PIN it cannot enter")
    func defaultAgentRefusesPin() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            // legacy PIN pairing asks the agent whatever its IO capability (BlueZ 5.66 device_request_pincode)
            try await bus.setPairing(heartRatePath, "RequestPinCode", 1)
            let r = try await bus.runBluectl(["connect", heartRateAddress, "--pair"])
            expectCleanFailure(r, 77, "cannot enter a PIN or passkey")
            #expect(try await bus.agentLog().map(\.method) == ["RequestPinCode"])
        }
    }

    @Test("the default agent (no-input-no-output) is never asked for a passkey: BlueZ pairs NoInputNoOutput, the peripheral refuses (79, --passkey suggested)")
    func defaultAgentNoPasskey() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 1)
            let r = try await bus.runBluectl(["connect", heartRateAddress, "--pair"])
            expectCleanFailure(r, 79, "failed authentication")
            #expect(r.stderr.contains("AuthenticationFailed") && r.stderr.contains("--passkey"), "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["error:io capability NoInputNoOutput"], "no agent call")
            #expect(try await bus.pairLog().map(\.capability) == ["NoInputNoOutput"])
        }
    }

    @Test("Pair uses the IO capability of the caller's agent (keyboard-display)")
    func pairCapabilityRecorded() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 654321)
            _ = try await pairOnTerminal(bus, prompt: "enter the passkey", answer: "654321")
            let log = try await bus.pairLog()
            #expect(log.map(\.capability) == ["KeyboardDisplay"])
            #expect(log.first.map { $0.agentOwner == $0.caller } == true, "bluectl's own agent")
        }
    }

    // Unattended: --passkey / --pin / BLUECTL_PASSKEY / @FILE, no terminal involved
    // (setsid: no controlling terminal, so nothing could have been asked).

    /// `bluectl ARGS` in a session without a controlling terminal.
    private func runWithoutTerminal(_ bus: PrivateBus, _ args: [String], environment: [String: String] = [:]) async throws -> ProcessResult {
        try await bus.spawn("/usr/bin/setsid", ["-w", try BusTier.bluectlExecutable()] + args, environment: environment)
            .wait(timeout: .seconds(30))
    }

    @Test("--passkey: the agent registers KeyboardOnly and enters the passkey; paired, exit 0",
          arguments: [["--passkey", "004321"], ["--agent", "keyboard-display", "--passkey", "004321"]])
    func passkeyOption(options: [String]) async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 4321)
            let r = try await runWithoutTerminal(bus, ["connect", heartRateAddress, "--pair"] + options)
            #expect(r.exitCode == 0, "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["ok:4321"])
            let capability = options.contains("keyboard-display") ? "KeyboardDisplay" : "KeyboardOnly"
            #expect(try await bus.pairLog().map(\.capability) == [capability])
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(true))
        }
    }

    @Test("a wrong --passkey: BlueZ's AuthenticationFailed, exit 79 with one line; not paired, the passkey not shown")
    func wrongPasskey() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 654321)
            let r = try await runWithoutTerminal(bus, ["pair", heartRateAddress, "--passkey", "111111"])
            expectCleanFailure(r, 79, "failed authentication: a wrong passkey or PIN")
            #expect(!r.stderr.contains("111111") && !r.stderr.contains("654321"), "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["ok:111111"])
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(false))
        }
    }

    @Test("the passkey from BLUECTL_PASSKEY, or from a file only its owner may read (--passkey @FILE); the PIN from --pin")
    func secretsFromEnvironmentAndFile() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 777)
            let r = try await runWithoutTerminal(bus, ["pair", heartRateAddress], environment: ["BLUECTL_PASSKEY": "000777"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["ok:777"])
        }
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPasskey", 123456)
            let file = bus.directory.appendingPathComponent("passkey").path
            #expect(FileManager.default.createFile(atPath: file, contents: Data("123456\n".utf8), attributes: [.posixPermissions: 0o600]))
            let r = try await runWithoutTerminal(bus, ["pair", heartRateAddress, "--passkey", "@" + file])
            #expect(r.exitCode == 0, "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["ok:123456"])
        }
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestPinCode", 2468)
            let r = try await runWithoutTerminal(bus, ["pair", heartRateAddress, "--pin", "2468"])
            #expect(r.exitCode == 0, "\(r)")
            #expect(try await bus.agentLog().map(\.outcome) == ["ok:2468"])
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(true))
        }
    }

    @Test("--passkey answers a confirmation only for the same passkey: another is refused (77), the device not paired")
    func passkeyConfirmation() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            try await bus.setPairing(heartRatePath, "RequestConfirmation", 222222)
            // keyboard-display can be asked to confirm; the passkey given decides, the terminal is not asked
            let r = try await runWithoutTerminal(bus, ["pair", heartRateAddress, "--agent", "keyboard-display", "--passkey", "333333"])
            expectCleanFailure(r, 77, "is not the one given")
            #expect(try await bus.property(heartRatePath, "org.bluez.Device1", "Paired")["data"] == .bool(false))
        }
    }
}
