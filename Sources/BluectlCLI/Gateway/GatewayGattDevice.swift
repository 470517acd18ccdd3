// One device's GATT work in `bluectl gateway` (the config's `devices.<MAC>`).

import BluectlCore
import BluectlGateway

/// A message for the broker, made off the owner task (a GATT value on the central's
/// loop, a device's event, a command's outcome) and published by the owner task in
/// the order it was handed over.
struct GatewayMessage: Sendable {
    let topic: String
    let payload: [UInt8]
    /// What the message carries when it is a characteristic's value (for Home Assistant's configs).
    var value: GattValue?
}

/// A characteristic's value as the gateway published it, and where from.
struct GattValue: Sendable {
    let device: BluetoothAddress
    let characteristic: BluetoothUUID
    let bytes: [UInt8]
}

/// How the gateway's GATT devices connect: the device commands' options (`--timeout` for
/// each set-up, `--retries`, the pairing agent) and whether `--adapter` was given.
struct GatewayGattSettings: Sendable {
    let options: DeviceCommandOptions
    let pairing: PairingSetup
    let adapterGiven: Bool
}

/// One device's GATT work: find it, connect (through the central's connect queue, as
/// every device command does: `DeviceSession`), subscribe to the config's
/// characteristics, read the others every N seconds; after a loss, set up again
/// (`ReconnectPolicy`'s waits, as `subscribe --reconnect`) until the gateway stops.
/// Values, events and command outcomes go to the owner task as `GatewayMessage`s.
///
/// A command from MQTT (another task) shares no state with the run: it asks the
/// library, which holds the device on the central's loop, whether the link is up.
final class GatewayGattDevice: Sendable {
    let address: BluetoothAddress
    let work: GatewayConfig.DeviceWork
    let session: DeviceSession
    private let topics: GatewayTopics
    private let options: DeviceCommandOptions
    private let send: @Sendable (GatewayMessage) -> Void

    /// The waits between set-up attempts, and which failures are worth waiting out.
    static let policy = ReconnectPolicy()

    init(address: BluetoothAddress, work: GatewayConfig.DeviceWork, central: CentralManager, adapter: AdapterInfo,
         settings: GatewayGattSettings, topics: GatewayTopics, send: @escaping @Sendable (GatewayMessage) -> Void) {
        self.address = address
        self.work = work
        self.topics = topics
        self.options = settings.options
        self.send = send
        session = DeviceSession(central: central, adapter: adapter, adapterGiven: settings.adapterGiven,
                                device: address.description, pairing: settings.pairing)
    }

    /// Sets up and serves the device until cancelled; after a loss, sets up again. A
    /// failure that cannot pass (a characteristic the device does not have, access
    /// refused) ends this device's work with a `device_failed` event; the gateway goes on.
    func run() async {
        var lostAt: ContinuousClock.Instant?
        var everUp = false
        var attempt = 1
        while !Task.isCancelled {
            let reason: String
            do {
                let (characteristics, sessions, peripheral) = try await setUp()
                attempt = 1
                everUp = true
                if let lostAt {
                    event("device_reconnected", ("away_s", .double(Self.seconds(since: lostAt))))
                } else {
                    event("device_connected")
                }
                lostAt = nil
                reason = await serve(characteristics, sessions: sessions, peripheral: peripheral)
            } catch {
                if Task.isCancelled { break }
                // What this attempt subscribed before it failed: stopped, not left
                // notifying beside the next attempt's sessions.
                for old in await session.forgetSessions() { await old.stop() }
                let failure = cliFailure(error, what: "GATT set-up")
                guard Self.policy.isRecoverable(error, afterSuccess: everUp) else {
                    session.say("gateway: \(TextSafety.oneLine(failure.message)); this device's GATT work stops")
                    event("device_failed", ("reason", .string(failure.message)))
                    break
                }
                attempt += 1
                let delay = Self.policy.delay(beforeAttempt: attempt)
                session.say("gateway: attempt \(attempt - 1) to \(everUp ? "reconnect" : "set up") failed: \(TextSafety.oneLine(failure.message)); next in \(Self.seconds(delay)) s")
                try? await Task.sleep(for: delay)
                continue
            }
            for old in await session.forgetSessions() { await old.stop() }
            if Task.isCancelled { break }
            session.say("gateway: \(reason); reconnecting")
            event("device_disconnected", ("reason", .string(reason)))
            lostAt = lostAt ?? .now
        }
    }

    /// Writes `bytes` to `characteristic` (allow-listed: the caller checked), the way
    /// `write` does (with response unless the characteristic only takes it without);
    /// the outcome for the result topic.
    func write(_ bytes: [UInt8], to characteristic: BluetoothUUID) async -> Result<WriteType, CLIFailure> {
        guard let peripheral = try? await session.known(address.description), await peripheral.isConnected(),
              let chr = try? peripheral.characteristic(.uuid(characteristic)) else {
            if Task.isCancelled { return .failure(Self.stopped(characteristic.label)) }
            return .failure(CLIFailure(.unavailable, "\(address) is not connected now (the gateway is connecting to it)"))
        }
        let type = WriteType.preferred(for: chr)
        let deadline = Deadline(seconds: options.timeout)
        do {
            try await deadline.run(orThrow: BluetoothError.timeout("write \(chr.uuid.label)")) {
                try await peripheral.writeValue(bytes, for: chr, type: type)
            }
            return .success(type)
        } catch where Task.isCancelled {
            return .failure(Self.stopped(chr.uuid.label))
        } catch {
            return .failure(cliFailure(error, what: "write \(chr.uuid.label)"))
        }
    }

    /// A write's answer when the gateway stopped first (`GatewayGatt.stop` cancels the writes it does not wait for).
    private static func stopped(_ characteristic: String) -> CLIFailure {
        CLIFailure(.terminated, "the gateway stopped before the write of \(characteristic) was answered (it may have reached the device)")
    }

    // MARK: - Set-up and serving

    private typealias Link = [BluetoothUUID: (Peripheral, GattCharacteristic)]

    /// Find, connect, look the characteristics up and subscribe, within `--timeout`.
    private func setUp() async throws -> (Link, [NotificationSession], Peripheral) {
        let deadline = Deadline(seconds: options.timeout)
        let (session, work, address, topics, send) = (session, work, address, topics, send)
        return try await deadline.run(orThrow: BluetoothError.timeout("GATT set-up of \(address)")) {
            let peripheral = try await Self.known(address, session: session, deadline: deadline)
            session.registerAgent(for: peripheral)
            try await session.connect(peripheral, options: self.options, deadline: deadline, onQueued: await session.sayQueued)
            // Asked of bluetoothd, not the mirror: 5.66 does not always signal Connected=true
            // (Peripheral.fetchDeviceProperties); in the lab the mirror said disconnected on
            // every attempt while the link was up.
            guard await peripheral.isConnected() else { throw BluetoothError.disconnected("the link went down during the set-up") }
            var link: Link = [:]
            for uuid in work.subscribe + work.read.map(\.characteristic) + work.writable where link[uuid] == nil {
                link[uuid] = (peripheral, try peripheral.characteristic(.uuid(uuid)))
            }
            var sessions: [NotificationSession] = []
            for uuid in work.subscribe {
                let chr = link[uuid]!.1
                // On the central's loop, in the order values arrive: rendered there, as subscribe's lines are.
                let s = try await peripheral.subscribe(to: chr, onValue: { value in
                    send(Self.valueMessage(value, characteristic: chr.uuid, device: address, topics: topics))
                })
                await session.keep(s)
                sessions.append(s)
            }
            return (link, sessions, peripheral)
        }
    }

    /// The device once BlueZ knows it. The gateway's own scan (duplicates on, running all
    /// along) is what makes it known: no second, finding discovery of the same client
    /// beside it (`DeviceSession.find` would start one; with the gateway's scan running,
    /// the bus tier crashed in that pairing: a task group's finished child task resumed).
    private static func known(_ address: BluetoothAddress, session: DeviceSession, deadline: Deadline) async throws -> Peripheral {
        while true {
            if let peripheral = try await session.known(address.description) { return peripheral }
            guard deadline.remaining > .milliseconds(250) else {
                throw BluetoothError.deviceNotFound("\(address) (not known to BlueZ and not heard by the gateway's scan)")
            }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Until the link is lost (its reason) or the task is cancelled: notifications flow
    /// through their sinks, the periodic reads run. Each watcher is a task of its own that
    /// says the first reason to stop on `ends`; all are cancelled and awaited before this returns.
    private func serve(_ link: Link, sessions: [NotificationSession], peripheral: Peripheral) async -> String {
        let (work, address, topics, send) = (work, address, topics, send)
        let (ends, end) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(1))
        var watchers: [Task<Void, Never>] = []
        // The link, looked at every second (Connected, asked of bluetoothd: the mirror can miss
        // Connected=true, above): a device with nothing subscribed shows its loss here.
        watchers.append(Task {
            while !Task.isCancelled, await peripheral.isConnected() {
                try? await Task.sleep(for: .seconds(1))
            }
            end.yield("the link went down")
        })
        for s in sessions {
            watchers.append(Task {
                do {
                    for try await _ in s.values {}
                    end.yield("notifications of \(s.characteristic.uuid.label) ended")
                } catch {
                    end.yield(cliFailure(error, what: "notifications").message)
                }
            })
        }
        for periodic in work.read {
            guard let entry = link[periodic.characteristic] else { continue }
            let chr = entry.1
            // Computed here, not in the task: with `periodic` captured by the task (its `every`
            // read there), Swift 6.3.1's build of this closure crashed the gateway on the bus
            // tier (SIGSEGV, a jump to 0 when the task was next resumed; docs/gateway.md).
            let interval = Duration.milliseconds(Int64(periodic.every * 1000))
            watchers.append(Task {
                while !Task.isCancelled {
                    do {
                        let value = try await peripheral.readValue(for: chr)
                        send(Self.valueMessage(value, characteristic: chr.uuid, device: address, topics: topics))
                    } catch BluetoothError.disconnected(let reason) {
                        end.yield(reason)
                        return
                    } catch {
                        if Task.isCancelled { return }
                        send(Self.eventMessage("read_failed", device: address, topics: topics,
                                               [("characteristic", .string(chr.uuid.uuidString)),
                                                ("reason", .string(cliFailure(error, what: "read").message))]))
                    }
                    try? await Task.sleep(for: interval)
                }
            })
        }
        var reason = "stopped"
        for await first in ends {
            reason = first
            break
        }
        watchers.forEach { $0.cancel() }
        for watcher in watchers { await watcher.value }
        return reason
    }

    // MARK: - Messages

    /// A value as `subscribe --json` prints it (`read --json`'s record with its time), on
    /// the characteristic's topic.
    static func valueMessage(_ value: [UInt8], characteristic: BluetoothUUID, device: BluetoothAddress,
                             topics: GatewayTopics) -> GatewayMessage {
        let record = ValueRecord(time: ValueText.timestamp(), device: device.description, characteristic: characteristic,
                                 bytes: value, format: .json, namesCharacteristic: true)
        return GatewayMessage(topic: topics.gatt(device.description, characteristic.shortString),
                              payload: record.jsonObject(capacity: 256).renderedBytes(newline: false),
                              value: GattValue(device: device, characteristic: characteristic, bytes: value))
    }

    /// `{"event": name, "device": MAC, …}` on the events topic.
    static func eventMessage(_ name: String, device: BluetoothAddress, topics: GatewayTopics,
                             _ fields: [(String, JSONValue)] = []) -> GatewayMessage {
        var line = JSONLine()
        line.add("event", name)
        line.add("device", device.description)
        for (key, value) in fields { line.add(key, value) }
        return GatewayMessage(topic: topics.events, payload: line.renderedBytes(newline: false))
    }

    private func event(_ name: String, _ fields: (String, JSONValue)...) {
        send(Self.eventMessage(name, device: address, topics: topics, fields))
    }

    private static func seconds(since instant: ContinuousClock.Instant) -> Double {
        (seconds(ContinuousClock.now - instant) * 10).rounded() / 10
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

extension WriteType {
    /// How `write` writes a characteristic when not told: with response when it allows
    /// that or lists neither, else without.
    static func preferred(for chr: GattCharacteristic) -> WriteType {
        chr.properties.canWriteWithResponse || !chr.properties.canWriteWithoutResponse ? .withResponse : .withoutResponse
    }
}
