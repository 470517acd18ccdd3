// The gateway's GATT devices together, and the commands MQTT sends them.

import BluectlCore
import BluectlGateway

/// Every GATT device of the config, each on its own task, and the commands from MQTT:
/// a command reaches a device only when the config allow-lists that device and
/// characteristic (`writable`); everything else is refused on the result topic.
/// Nothing else from MQTT reaches bluetoothd.
struct GatewayGatt: Sendable {
    let devices: [BluetoothAddress: GatewayGattDevice]
    private let tasks: [Task<Void, Never>]
    /// Allowed commands on their way to the writes (`command`), and the task that runs
    /// them, each write a child of it: `stop` ends the stream, gives the writes under way a
    /// moment, cancels the rest and awaits them, so none outlives the gateway's clean-up.
    private let writes: AsyncStream<Write>.Continuation
    private let writer: Task<Void, Never>
    private let central: CentralManager
    private let topics: GatewayTopics
    private let send: @Sendable (GatewayMessage) -> Void

    /// Starts every device's work (none without `devices` in the config).
    init(config: GatewayConfig, central: CentralManager, adapter: AdapterInfo, settings: GatewayGattSettings,
         topics: GatewayTopics, send: @escaping @Sendable (GatewayMessage) -> Void) {
        var devices: [BluetoothAddress: GatewayGattDevice] = [:]
        for (address, work) in config.devices {
            devices[address] = GatewayGattDevice(address: address, work: work, central: central, adapter: adapter,
                                                 settings: settings, topics: topics, send: send)
        }
        self.devices = devices
        tasks = devices.values.sorted { $0.address.description < $1.address.description }.map { device in
            Task { await device.run() }
        }
        self.central = central
        self.topics = topics
        self.send = send
        let (stream, writes) = AsyncStream<Write>.makeStream()
        self.writes = writes
        writer = Task {
            await withDiscardingTaskGroup { group in
                for await write in stream { group.addTask { await write.run(reply: send) } }
            }
        }
    }

    /// An allowed command: the value, for one device's characteristic, its outcome for `resultTopic`.
    private struct Write: Sendable {
        let device: GatewayGattDevice
        let characteristic: BluetoothUUID
        let bytes: [UInt8]
        let id: String?
        let resultTopic: String

        func run(reply: @Sendable (GatewayMessage) -> Void) async {
            let result: GatewayCommandResult
            switch await device.write(bytes, to: characteristic) {
            case .success(let type):
                var record = WriteRecord(device: device.address.description, characteristic: characteristic, bytes: bytes)
                record.type = type
                result = GatewayCommandResult(outcome: .done(record), id: id)
            case .failure(let failure):
                result = GatewayCommandResult(outcome: .failed(failure.message), id: id)
            }
            reply(result.message(resultTopic))
        }
    }

    /// Stops every device's work, then undoes what each set up (StopNotify, disconnect
    /// what the gateway connected, the agent): nothing stays registered in bluetoothd.
    /// Bounded as the device commands' clean-up is (`runDevicesCommand`).
    func stop(hurry: Bool) async {
        tasks.forEach { $0.cancel() }
        // The writes under way get a moment to end, then are cancelled (each is answered
        // `failed`); a later command is refused. None outlives the clean-up below.
        writes.finish()
        if await Deadline(after: hurry ? .milliseconds(300) : .seconds(2)).run(shielded: true, { [writer] in await writer.value }) == nil {
            writer.cancel()
        }
        let (tasks, writer, devices, central) = (tasks, writer, devices, central)
        _ = await Deadline(after: hurry ? .milliseconds(1500) : DeviceSession.settleLimit + .seconds(5)).run(shielded: true) {
            await writer.value
            for task in tasks { await task.value }
            await withTaskGroup(of: Void.self) { group in
                for device in devices.values { group.addTask { await device.session.cleanUp(hurry: hurry) } }
                // the discovery that found the devices: stopped, and answered
                group.addTask { await central.settleFinding() }
            }
        }
    }

    /// Handles a message on a command topic (`topics.command` parsed it): refused at once
    /// when the device or characteristic is not allow-listed or the payload is bad, else
    /// written by the gateway's writer task (`Write`); the outcome goes to the result topic.
    func command(device deviceText: String, characteristic characteristicText: String, payload: [UInt8]) {
        let resultTopic = topics.result(deviceText, characteristicText)
        let command: GatewayWriteCommand
        switch GatewayWriteCommand.parse(payload) {
        case .success(let parsed): command = parsed
        case .failure(let reason):
            return send(GatewayCommandResult(outcome: .refused(reason.text)).message(resultTopic))
        }
        let refuse = { (reason: String) in
            send(GatewayCommandResult(outcome: .refused(reason), id: command.id).message(resultTopic))
        }
        guard let address = BluetoothAddress(deviceText), let device = devices[address] else {
            return refuse("\(TextSafety.escapedForMessage(deviceText)) is not a device of this gateway's config")
        }
        guard let uuid = try? BluetoothUUID(characteristicText, kind: .characteristic) else {
            return refuse("\"\(TextSafety.escapedForMessage(characteristicText))\" is not a characteristic UUID or name")
        }
        guard device.work.writable.contains(uuid) else {
            return refuse("\(uuid.label) of \(address) is not writable from MQTT (the config's devices.\(address).writable)")
        }
        let write = Write(device: device, characteristic: uuid, bytes: command.bytes, id: command.id, resultTopic: resultTopic)
        // (After `stop`: GatewayRun refuses commands itself then, but a later caller is answered too.)
        if case .terminated = writes.yield(write) { refuse("the gateway is stopping") }
    }
}

/// A write command's payload: the value in hex as `write` takes it (`0102`, `01 02`,
/// `01:02`), or a JSON object `{"value": "0102"}` or `{"utf8": "text"}`, with an optional
/// `"id"` echoed in the result.
struct GatewayWriteCommand: Sendable, Equatable {
    var bytes: [UInt8]
    var id: String?

    struct Refusal: Error, Equatable { var text: String }

    /// The longest payload taken (a GATT value is at most 512 bytes: 1024 hex digits and some JSON).
    static let maxPayload = 4096

    static func parse(_ payload: [UInt8]) -> Result<GatewayWriteCommand, Refusal> {
        guard payload.count <= maxPayload else { return .failure(Refusal(text: "the payload is over \(maxPayload) bytes")) }
        guard let first = payload.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else {
            return .failure(Refusal(text: "an empty payload (expected the value in hex, or {\"value\": \"HEX\"} or {\"utf8\": \"TEXT\"})"))
        }
        guard first == UInt8(ascii: "{") else {
            guard let text = String(validating: payload, as: UTF8.self) else { return .failure(Refusal(text: "the payload is not UTF-8")) }
            return hex(text).map { GatewayWriteCommand(bytes: $0) }
        }
        let object: [String: Any]
        do {
            guard let parsed = try JSONInput.parse(payload) as? [String: Any] else {
                return .failure(Refusal(text: "expected a JSON object"))
            }
            object = parsed
        } catch {
            return .failure(Refusal(text: "not valid JSON" + (JSONInput.problem(error).map { " (\($0))" } ?? "")))
        }
        if let unknown = object.keys.sorted().first(where: { !["value", "utf8", "id"].contains($0) }) {
            return .failure(Refusal(text: "unknown key \"\(TextSafety.escapedForMessage(unknown))\" (expected value, utf8, id)"))
        }
        var command = GatewayWriteCommand(bytes: [])
        if let id = object["id"] {
            guard let id = id as? String else { return .failure(Refusal(text: "id: expected a string")) }
            command.id = id
        }
        switch (object["value"], object["utf8"]) {
        case (let value?, nil):
            guard let text = value as? String else { return .failure(Refusal(text: "value: expected a string of hex digits")) }
            switch hex(text) {
            case .success(let bytes): command.bytes = bytes
            case .failure(let refusal): return .failure(refusal)
            }
        case (nil, let utf8?):
            guard let text = utf8 as? String else { return .failure(Refusal(text: "utf8: expected a string")) }
            command.bytes = Array(text.utf8)
        default:
            return .failure(Refusal(text: "expected exactly one of value (hex) and utf8"))
        }
        guard command.bytes.count <= 512 else { return .failure(Refusal(text: "the value is over 512 bytes (a GATT value's limit)")) }
        return .success(command)
    }

    private static func hex(_ text: String) -> Result<[UInt8], Refusal> {
        do {
            let bytes = try ByteFormats.parseHex(text)
            return bytes.isEmpty ? .failure(Refusal(text: "no value given")) : .success(bytes)
        } catch {
            return .failure(Refusal(text: "invalid value: \(error)"))
        }
    }
}

/// A command's outcome on its result topic: `{"result": "done", …write --json's record}`,
/// `{"result": "refused", "reason": …}` (never sent to the device) or
/// `{"result": "failed", "reason": …}` (the device or BlueZ said no); `id` when the command had one.
struct GatewayCommandResult: OutputRecord {
    enum Outcome {
        case done(WriteRecord)
        case refused(String)
        case failed(String)
    }

    let outcome: Outcome
    var id: String?

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        switch outcome {
        case .done(let record):
            sink.json("result", .string("done"))
            sink.json("id", id.map { .string($0) })
            record.describe(into: &sink)
        case .refused(let reason), .failed(let reason):
            if case .refused = outcome { sink.json("result", .string("refused")) } else { sink.json("result", .string("failed")) }
            sink.json("id", id.map { .string($0) })
            sink.json("reason", .string(reason))
        }
    }

    func message(_ topic: String) -> GatewayMessage {
        GatewayMessage(topic: topic, payload: jsonObject(capacity: 256).renderedBytes(newline: false))
    }
}
