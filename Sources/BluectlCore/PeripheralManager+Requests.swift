import BluectlDBus

// bluetoothd's calls on the served objects, as events of the GATT server's
// machine (`GattServerMachine`, run by the generic `MachineDriver`), and the
// machine's actions carried out: replies to bluetoothd, PropertiesChanged
// signals, request deadlines (driver timers), events for the application.
// All on the loop.

extension PeripheralManager {
    /// On the loop, once (from `init`): the machine starts serving.
    func startServing() {
        driver.start { [weak self] action, _ in self?.perform(action) }
    }

    // MARK: - On the loop: bluetoothd's calls

    /// A method call on a served characteristic or descriptor.
    func handleAttributeCall(_ message: DBusMessage, attribute number: Int) {
        guard let served = server.value.attributes[number] else { return Self.refuse(message, connection) }
        let interface = served.descriptor == nil ? "org.bluez.GattCharacteristic1" : "org.bluez.GattDescriptor1"
        if message.interface == BlueZ.properties {
            return Self.answerProperties(message, connection, properties(of: number))
        }
        guard message.interface == nil || message.interface == interface, let member = message.member else {
            return Self.unknownMethod(message, connection)
        }
        // Stopped (the machine has ended): the objects go once bluetoothd
        // has let go of the application; until then its calls are refused.
        guard !driver.hasEnded else { return Self.refuse(message, connection) }
        let options = Self.options(message.arguments.last)
        switch (member, message.signature) {
        case ("ReadValue", "a{sv}"):
            let request = newRequest(message, served, kind: .read, options: options, value: [])
            driver.send(.read(request.id, attribute: number, offset: request.offset))
            keepIfPending(request.id)
        case ("WriteValue", "aya{sv}"):
            let bytes = message.arguments.first?.bytes ?? []
            let request = newRequest(message, served, kind: .write, options: options, value: bytes)
            driver.send(.write(request.id, attribute: number, offset: request.offset, value: bytes,
                               expectsReply: !message.noReplyExpected))
            keepIfPending(request.id)
        case ("StartNotify", ""), ("StopNotify", ""):
            let id = takeRequestID()
            server.value.calls[id] = message
            driver.send(member == "StartNotify" ? .startNotify(id, attribute: number) : .stopNotify(id, attribute: number))
        case ("Confirm", ""):
            if !message.noReplyExpected { try? connection.send(.methodReturn(to: message)) }
            driver.send(.confirm(attribute: number))
        default:
            Self.unknownMethod(message, connection)
        }
    }

    func takeRequestID() -> UInt64 {
        defer { server.value.nextRequest += 1 }
        return server.value.nextRequest
    }

    private func newRequest(_ message: DBusMessage, _ served: ServedAttribute, kind: ATTRequest.Kind,
                            options: [String: DBusValue], value: [UInt8]) -> ATTRequest {
        let id = takeRequestID()
        let central = options["device"]?.objectPath.map { DeviceInfo.addressFromPath($0) }
        let writeType = kind == .write ? BlueZ566.writeKind(options: options) : nil
        let request = ATTRequest(id: id, manager: self, kind: kind, characteristic: served.characteristic, descriptor: served.descriptor,
                                 central: central, offset: options["offset"]?.integer ?? 0, value: value, writeType: writeType,
                                 mtu: options["mtu"]?.integer)
        server.value.calls[id] = message
        server.value.requests[id] = request
        return request
    }

    /// A request the machine answered or refused at once is reported (or
    /// not) by now: only one waiting for the application is kept, until its
    /// deadline is cancelled or passes.
    private func keepIfPending(_ id: UInt64) {
        if !driver.machine.isPending(id) { server.value.requests[id] = nil }
    }

    // MARK: - On the loop: the machine's actions

    private func perform(_ action: GattServerMachine.Action) {
        switch action {
        case .replyValue(let id, let bytes):
            guard let call = server.value.calls.removeValue(forKey: id) else { return }
            try? connection.send(.methodReturn(to: call, arguments: [.bytes(bytes)]))
        case .replyDone(let id):
            guard let call = server.value.calls.removeValue(forKey: id) else { return }
            if !call.noReplyExpected { try? connection.send(.methodReturn(to: call)) }
        case .replyError(let id, let error, let why):
            guard let call = server.value.calls.removeValue(forKey: id) else { return }
            if !call.noReplyExpected { try? connection.send(.error(to: call, name: error.errorName, message: why)) }
        case .forget(let id):
            server.value.calls[id] = nil
        case .startDeadline(let id):
            driver.after(requestDeadline, .deadline(id), replacing: Self.deadline(of: id))
        case .cancelDeadline(let id):
            // Answered, its service removed, or the server stopping: the application hears no more of it.
            driver.cancelTimer(Self.deadline(of: id))
            server.value.requests[id] = nil
        case .emitValue(let number, let bytes):
            emitChange(number, ["Value": .bytes(bytes)])
        case .emitNotifying(let number, let on):
            emitChange(number, ["Notifying": .boolean(on)])
        case .report(let report):
            switch report {
            case .request(let id, _):
                guard let request = server.value.requests[id] else { return }
                continuation.yield(request.kind == .read ? .read(request) : .write(request))
            case .expired(let id):
                if let request = server.value.requests.removeValue(forKey: id) { continuation.yield(.requestExpired(request)) }
            case .subscribed(let number):
                if let served = server.value.attributes[number] { continuation.yield(.subscribed(served.characteristic)) }
            case .unsubscribed(let number):
                if let served = server.value.attributes[number] { continuation.yield(.unsubscribed(served.characteristic)) }
            case .confirmed(let number):
                if let served = server.value.attributes[number] { continuation.yield(.confirmed(served.characteristic)) }
            }
        case .unplanned(let what):
            Trace.unplanned(driver.label, what)
        }
    }

    /// The driver's timer key of a request's deadline.
    private static func deadline(of id: UInt64) -> String { "request \(id)" }

    private func emitChange(_ number: Int, _ changed: [String: DBusValue]) {
        guard let served = server.value.attributes[number] else { return }
        let interface = served.descriptor == nil ? "org.bluez.GattCharacteristic1" : "org.bluez.GattDescriptor1"
        try? connection.send(.signal(
            path: served.path, interface: BlueZ.properties, member: "PropertiesChanged",
            arguments: [.string(interface), .stringVariantDictionary(changed), .stringArray([])]))
    }
}
