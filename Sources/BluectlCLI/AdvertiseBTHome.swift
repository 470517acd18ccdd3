// `bluectl advertise --bthome NAME=VALUE [--bthome-key HEX]`: this machine as a BTHome v2
// sensor, its values changed by JSON lines on stdin.

import ArgumentParser
import BluectlCore
#if canImport(Glibc)
import Glibc
#endif

extension AdvertiseCommand {
    /// The frames' encoder for --bthome (nil without it), encrypting for `address` with
    /// --bthome-key. The counter starts at the Unix time in seconds: it rises across runs
    /// (receivers refuse one that goes back) unless a run sent more changes than seconds passed.
    func bthomeEncoder(address: BluetoothAddress?) throws -> BTHomeEncoder? {
        guard !bthome.isEmpty else {
            if bthomeKey != nil { throw ValidationError("--bthome-key needs --bthome") }
            return nil
        }
        if serviceData.contains(where: { (try? Self.pair($0, option: "--service-data").0).flatMap { try? parseServiceUUID($0, option: "") } == BTHome.serviceUUID }) {
            throw ValidationError("--bthome and --service-data fcd2=… cannot be used together (both are BTHome's service data)")
        }
        var values: [(name: String, value: SensorValue)] = []
        for entry in bthome {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ValidationError("invalid --bthome \"\(TextSafety.escapedForMessage(entry))\": expected NAME=VALUE, e.g. temperature=21.5")
            }
            do {
                values.append((parts[0], try BTHomeEncoder.value(parts[1], for: parts[0])))
            } catch {
                throw ValidationError("invalid --bthome \"\(TextSafety.escapedForMessage(entry))\": \(error)")
            }
        }
        let key = try bthomeKey.map { text in
            guard let bytes = try? ByteFormats.parseHex(text), bytes.count == 16 else {
                throw ValidationError("invalid --bthome-key: expected 32 hex digits (16 bytes)")
            }
            return bytes
        }
        if key != nil, address == nil {
            throw CLIFailure(.unavailable, "the adapter reports no address: an encrypted BTHome frame's nonce needs it")
        }
        do {
            return try BTHomeEncoder(values, key: key, address: address, counter: UInt32(truncatingIfNeeded: time(nil)))
        } catch {
            throw ValidationError("invalid --bthome: \(error)")
        }
    }

    /// Applies stdin's lines, `{"temperature":21.7,"button":"press"}`, one frame each, until
    /// cancelled (the end of stdin ends nothing: advertising goes on); a bad line is reported
    /// on stderr and skipped. stdin is read on the loop (`StandardInputFeed`) and handed over a
    /// line at a time: the next is not read until bluetoothd has answered this one's change,
    /// so a fast producer is held back by the pipe and no line is dropped.
    static func feedBTHome(_ manager: PeripheralManager, _ advertisement: Advertisement, data: AdvertisementData,
                           encoder: BTHomeEncoder, json: Bool, output: OutputQueue) async throws {
        let central = manager.central
        let (lines, handOver) = AsyncStream.makeStream(of: (line: String, number: Int).self)
        let (room, roomMade) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let lineHandedOver = central.loopBound(false)
        let feed = StandardInputFeed(central: central, apply: { line, number in
            if lineHandedOver.value { return false }
            lineHandedOver.value = true
            handOver.yield((line, number))
            return true
        }, waitForRoom: { for await _ in room { return } })
        feed.start()
        defer { feed.stop() }
        var encoder = encoder
        var data = data
        for await (line, number) in lines {
            // the next frame replaces the current one only once bluetoothd has it: a change
            // that does not fit leaves the values as they were
            if !line.allSatisfy(\.isWhitespace) {
                var next = encoder
                var nextData = data
                do {
                    try next.update(try changes(line))
                    nextData.serviceData[BTHome.serviceUUID] = next.serviceData
                    try await manager.updateAdvertising(advertisement, to: nextData)
                    (encoder, data) = (next, nextData)
                    var record = ServerEventRecord(event: "updated", adapter: manager.adapter, services: [], advertised: data)
                    record.sensor = encoder.reading
                    output.line(record.line(json: json) ?? "")
                } catch {
                    output.notice("stdin line \(number): \(error)")
                }
            }
            await central.onLoop { lineHandedOver.value = false }
            roomMade.yield()
        }
    }

    /// A stdin line's values: a JSON object of names and numbers, booleans or strings (an
    /// event, text, hex), each read as `--bthome NAME=VALUE` reads its value.
    static func changes(_ line: String) throws -> [(name: String, value: SensorValue)] {
        guard let object = try? JSONInput.parse(Array(line.utf8)) as? [String: Any], !object.isEmpty else {
            throw ValidationError("not a JSON object of BTHome names and values, e.g. {\"temperature\":21.7}")
        }
        return try object.sorted { $0.key < $1.key }.map { name, value in
            let text: String
            switch value {
            case let number as Double:
                text = number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
            case let flag as Bool: text = flag ? "true" : "false"
            case let string as String: text = string
            default: throw ValidationError("\(TextSafety.escapedForMessage(name)): expected a number, true/false or a string")
            }
            return (name, try BTHomeEncoder.value(text, for: name))
        }
    }
}
