// The GATT server's pure state machine (the code PeripheralManager runs),
// and the sizes an advertisement takes as bluetoothd lays it out.

@testable import BluectlCore
import Testing

@Suite("GattServerMachine")
struct GattServerMachineTests {
    /// 0: a readable, writable characteristic with a value; 1: one the application answers; 2: notify; 3: a descriptor.
    private func serving() -> GattServerMachine {
        var machine = GattServerMachine()
        _ = machine.handle(.add(first: 0, [
            .init(flags: [.read, .write], value: [1, 2, 3], automatic: true, isDescriptor: false),
            .init(flags: [.read, .write], value: [], automatic: false, isDescriptor: false),
            .init(flags: [.notify], value: [0], automatic: true, isDescriptor: false),
            .init(flags: [.read], value: [9], automatic: true, isDescriptor: true),
        ]))
        return machine
    }

    @Test("a value answers reads from the offset; past its end: Invalid Offset")
    func automaticReads() {
        var machine = serving()
        #expect(machine.handle(.read(1, attribute: 0, offset: 0)) == [.replyValue(1, [1, 2, 3]), .report(.request(1, answered: true))])
        #expect(machine.handle(.read(2, attribute: 0, offset: 3)) == [.replyValue(2, []), .report(.request(2, answered: true))])
        let past = machine.handle(.read(3, attribute: 0, offset: 4))
        guard case .replyError(3, .invalidOffset, _) = past.first else { Issue.record("\(past)"); return }
        #expect(machine.handle(.read(4, attribute: 3, offset: 0)).first == .replyValue(4, [9]), "a descriptor's value")
    }

    @Test("writes replace the value from the offset; a command gets no reply; more than 512 bytes: Invalid Attribute Value Length")
    func automaticWrites() {
        var machine = serving()
        #expect(machine.handle(.write(1, attribute: 0, offset: 1, value: [7, 8, 9], expectsReply: true)).first == .replyDone(1))
        #expect(machine.attributes[0]?.value == [1, 7, 8, 9])
        #expect(machine.handle(.write(2, attribute: 0, offset: 0, value: [5], expectsReply: false)).first == .forget(2))
        #expect(machine.attributes[0]?.value == [5])
        let long = machine.handle(.write(3, attribute: 0, offset: 0, value: Array(repeating: 0, count: 513), expectsReply: true))
        guard case .replyError(3, .invalidValueLength, _) = long.first else { Issue.record("\(long)"); return }
        #expect(machine.attributes[0]?.value == [5], "a refused write changes nothing")
    }

    @Test("without a value the request waits for the application, with a deadline; answered once; late answers and deadlines change nothing")
    func applicationAnswers() {
        var machine = serving()
        #expect(machine.handle(.read(1, attribute: 1, offset: 0)) == [.startDeadline(1), .report(.request(1, answered: false))])
        #expect(machine.isPending(1))
        #expect(machine.handle(.answer(1, .success([4, 2]))) == [.cancelDeadline(1), .replyValue(1, [4, 2])])
        #expect(machine.handle(.answer(1, .success([0]))) == [], "answered already")
        #expect(machine.handle(.deadline(1)) == [])

        _ = machine.handle(.write(2, attribute: 1, offset: 0, value: [1], expectsReply: true))
        #expect(machine.handle(.answer(2, .failure(.notAuthorized))) == [.cancelDeadline(2), .replyError(2, .notAuthorized, "refused by the application")])

        _ = machine.handle(.read(3, attribute: 1, offset: 0))
        #expect(machine.handle(.deadline(3)) == [.replyError(3, .failed, "the application did not answer in time"), .report(.expired(3))])
        #expect(!machine.isPending(3))
        #expect(machine.handle(.answer(3, .success([1]))) == [])
    }

    @Test("StartNotify per central, StopNotify after the last; updates reach subscribers only while notifying")
    func subscriptions() {
        var machine = serving()
        #expect(machine.handle(.update(attribute: 2, value: [1])) == [], "nobody subscribed: stored only")
        #expect(machine.attributes[2]?.value == [1])
        #expect(machine.handle(.startNotify(1, attribute: 2)) == [.replyDone(1), .emitNotifying(attribute: 2, true), .report(.subscribed(attribute: 2))])
        #expect(machine.handle(.startNotify(2, attribute: 2)) == [.replyDone(2), .report(.subscribed(attribute: 2))], "a second central")
        #expect(machine.handle(.update(attribute: 2, value: [2])) == [.emitValue(attribute: 2, [2])])
        #expect(machine.handle(.confirm(attribute: 2)) == [.report(.confirmed(attribute: 2))])
        #expect(machine.handle(.stopNotify(3, attribute: 2)) == [.replyDone(3), .emitNotifying(attribute: 2, false), .report(.unsubscribed(attribute: 2))])
        #expect(machine.handle(.stopNotify(4, attribute: 2)) == [.replyDone(4)])
        let refused = machine.handle(.startNotify(5, attribute: 0))
        guard case .replyError(5, .notSupported, _) = refused.first else { Issue.record("\(refused)"); return }
    }

    @Test("stop fails what waits, turns notifications off, and refuses every later call")
    func stopping() {
        var machine = serving()
        _ = machine.handle(.read(1, attribute: 1, offset: 0))
        _ = machine.handle(.startNotify(2, attribute: 2))
        #expect(machine.handle(.stop) == [.cancelDeadline(1), .replyError(1, .failed, "the server is stopping"), .emitNotifying(attribute: 2, false)])
        #expect(machine.isFinished)
        #expect(machine.handle(.read(3, attribute: 0, offset: 0)) == [.replyError(3, .failed, "the server is stopping")])
        #expect(machine.handle(.write(4, attribute: 0, offset: 0, value: [1], expectsReply: false)) == [.forget(4)])
        #expect(machine.handle(.update(attribute: 2, value: [1])) == [])
    }

    @Test("removing a service fails its waiting requests")
    func removal() {
        var machine = serving()
        _ = machine.handle(.read(1, attribute: 1, offset: 0))
        #expect(machine.handle(.remove([0, 1])) == [.cancelDeadline(1), .replyError(1, .failed, "the service was removed")])
        #expect(machine.attributes[0] == nil)
        guard case .replyError(2, .failed, _) = machine.handle(.read(2, attribute: 0, offset: 0)).first else { Issue.record("served after removal"); return }
    }
}

@Suite("AdvertisementData and served definitions")
struct AdvertisementDataTests {
    @Test("lengths as bluetoothd lays the data out; the name goes to the scan response")
    func lengths() throws {
        var data = AdvertisementData(localName: "sensor", serviceUUIDs: [try BluetoothUUID("180d"), try BluetoothUUID("180f")])
        #expect(data.advertisingDataLength == 3 + 2 + 4)
        #expect(data.scanResponseLength == 2 + 6)
        data.serviceUUIDs.append(try BluetoothUUID("12345678-1234-5678-1234-56789abcdef0"))
        #expect(data.advertisingDataLength == 3 + (2 + 4) + (2 + 16))
        data.manufacturerData[0xffff] = [1, 2]
        data.serviceData[try BluetoothUUID("feaa")] = [3]
        data.appearance = 0x0341
        data.includesTxPower = true
        #expect(data.advertisingDataLength == 3 + 6 + 18 + 6 + 5 + 4 + 3)
        #expect(throws: BluetoothError.self) { try data.check() }
        do {
            try data.check()
        } catch {
            #expect("\(error)" == "advertisement of 45 bytes is longer than the adapter's 31 (flags 3, service UUIDs 24, service data 5, manufacturer data 6, appearance 4, TX power 3)")
        }
        try data.check(maximumLength: 251)
        let broadcast = AdvertisementData(manufacturerData: [0x004c: Array(repeating: 0, count: 27)], isConnectable: false, isDiscoverable: false)
        #expect(broadcast.advertisingDataLength == 31, "no flags when neither connectable nor discoverable")
        try broadcast.check()
    }

    @Test("a service definition bluetoothd or ATT would refuse is refused first, with the place named")
    func validation() throws {
        let uuid = try BluetoothUUID("2a37")
        func problem(_ characteristic: MutableCharacteristic) -> String? {
            do {
                try MutableService(uuid: try BluetoothUUID("180d"), characteristics: [characteristic]).validate()
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(problem(MutableCharacteristic(uuid: uuid, flags: [.read])) == nil)
        #expect(problem(MutableCharacteristic(uuid: uuid, flags: [])) == "characteristics[0].flags: empty; a characteristic needs at least one flag")
        #expect(problem(MutableCharacteristic(uuid: uuid, flags: [.authorize])) == "characteristics[0].flags: none allows reading, writing or subscribing")
        #expect(problem(MutableCharacteristic(uuid: uuid, flags: [.read], value: Array(repeating: 0, count: 513)))
                == "characteristics[0].value: 513 bytes, longer than ATT's 512")
        #expect(problem(MutableCharacteristic(uuid: uuid, flags: [.notify], descriptors: [
            MutableDescriptor(uuid: try BluetoothUUID("2902"), flags: [.read])])) == "characteristics[0].descriptors[0].uuid: 2902 (Client Characteristic Configuration) is bluetoothd's own")
        #expect(problem(MutableCharacteristic(uuid: uuid, flags: [.notify], descriptors: [
            MutableDescriptor(uuid: try BluetoothUUID("2901"), flags: [.indicate])])) == "characteristics[0].descriptors[0].flags: \"indicate\" is not a descriptor flag")
    }

    @Test("the write type: BlueZ's option when given, else unknown (5.66 sends none; its ATT server takes either kind)")
    func writeKind() {
        #expect(BlueZ566.writeKind(options: ["type": .string("reliable")]) == .reliable)
        #expect(BlueZ566.writeKind(options: ["type": .string("command")]) == .command)
        #expect(BlueZ566.writeKind(options: [:]) == nil)
        #expect(BlueZ566.writeKind(options: ["type": .string("other")]) == nil)
    }
}
