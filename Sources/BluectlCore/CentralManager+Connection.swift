import BluectlDBus

/// Finding, connecting and disconnecting peripherals (CBCentralManager's
/// connection half), driven by `ConnectionStateMachine`.
extension CentralManager {
    /// The peripheral of a device in BlueZ's tree: the same object for the
    /// same device for as long as anyone holds it (from here, `findDevice`,
    /// `retrievePeripherals` …), so every handle shares its state, its
    /// connection transitions and its notification sessions.
    public func peripheral(_ device: DeviceInfo) -> Peripheral {
        mirror.loop.sync { [self] in
            if let existing = peripheralTable.value[device.path]?.value { return existing }
            let table = peripheralTable.value
            if table.count >= 64, table.count.nonzeroBitCount == 1 {
                peripheralTable.value = table.filter { $0.value.value != nil }   // forget dropped handles now and then
            }
            let made = Peripheral(central: self, path: device.path)
            peripheralTable.value[device.path] = WeakPeripheral(value: made)
            return made
        }
    }

    /// Devices already in BlueZ's tree with these addresses (on `adapter`,
    /// or any adapter). Bonded devices persist; others vanish after
    /// BlueZ's TemporaryTimeout.
    public func retrievePeripherals(withIdentifiers identifiers: [BluetoothAddress], adapter: AdapterInfo? = nil) -> [Peripheral] {
        let wanted = Set(identifiers)
        return devices(on: adapter)
            .filter { wanted.contains($0.address) }
            .map { peripheral($0) }
    }

    /// Connected devices advertising or offering one of `services` (all connected ones when empty).
    public func retrieveConnectedPeripherals(withServices services: [BluetoothUUID], adapter: AdapterInfo? = nil) -> [Peripheral] {
        let tree = mirror.tree
        return devices(on: adapter).filter { device in
            guard device.connected else { return false }
            if services.isEmpty { return true }
            if device.serviceUUIDs.contains(where: services.contains) { return true }
            return GattDatabase(tree: tree, device: device.path).services.contains { services.contains($0.uuid) }
        }.map { peripheral($0) }
    }

    /// The devices BlueZ knows (on `adapter`, or on any adapter when nil):
    /// those seen lately and the bonded ones, without scanning.
    public func devices(on adapter: AdapterInfo? = nil) -> [DeviceInfo] {
        Self.devices(in: mirror.tree, on: adapter?.path)
    }

    /// The devices in `tree` (on the adapter at `adapter`, or on any).
    static func devices(in tree: borrowing BlueZObjectTree, on adapter: ObjectPath?) -> [DeviceInfo] {
        tree.paths(with: BlueZ.deviceInterface).compactMap { path in
            guard let p = tree.properties(path, BlueZ.deviceInterface) else { return nil }
            let device = DeviceInfo(path: path, properties: p)
            if let adapter, device.adapter != adapter { return nil }
            return device
        }
    }

    /// The device `text` names on `adapter`: an address, a D-Bus path, or a
    /// name/alias in BlueZ's tree; if unknown, scans for it until `timeout`.
    /// Finders on one adapter share one discovery (`FindingDiscovery`):
    /// each is done as soon as its device turns up in BlueZ's tree, and the
    /// last one out stops the discovery, so finding several devices at once
    /// costs one scan, never a refused `StartDiscovery`.
    /// Throws `BluetoothError.deviceNotFound`, or `.invalidRequest` when a name is ambiguous.
    public func findDevice(_ text: String, adapter: AdapterInfo, timeout: Duration) async throws -> Peripheral {
        if let found = try await lookUpFromTask(text, adapter: adapter) { return found }
        let adapterPath = adapter.path
        let found = try await withThrowingTaskGroup(of: DeviceInfo?.self) { group -> DeviceInfo? in
            group.addTask { [mirror] in
                let box = LoopBound<DeviceInfo?>(nil, loop: mirror.loop)
                _ = await mirror.waitUntil(timeout: timeout) { tree, _ in
                    // Asked on every change of the tree while scanning: a look at names first, cheap.
                    guard Self.mayName(text, in: tree, on: adapterPath) else { return false }
                    box.value = try? Self.match(text, among: Self.devices(in: tree, on: adapterPath))
                    return box.value != nil
                }
                return await mirror.loop.submit { box.value }
            }
            group.addTask { [self] in
                // Ends when the device is found (cancelled) or at the time limit.
                try await finding.scan(on: adapter, of: self, for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            for try await device in group {
                if let device { return device }
            }
            return nil
        }
        if let found { return await mirror.loop.submit { [self] in peripheral(found) } }
        // It may have appeared without an advertisement we matched (a name change).
        if let found = try await lookUpFromTask(text, adapter: adapter) { return found }
        throw BluetoothError.deviceNotFound("\(text) (not known to BlueZ on \(adapter.name) and not seen while scanning)")
    }

    /// The device `text` names among those BlueZ already knows on `adapter`
    /// (no scan); nil when unknown.
    public func knownDevice(_ text: String, adapter: AdapterInfo) throws -> Peripheral? {
        try lookUp(text, adapter: adapter)
    }

    /// `knownDevice(_:adapter:)` for async code: looked up on the central's
    /// event loop and handed over, without blocking the calling thread.
    func lookUpFromTask(_ text: String, adapter: AdapterInfo) async throws -> Peripheral? {
        try await mirror.loop.submit { [self] in Result { try lookUp(text, adapter: adapter) } }.get()
    }

    private func lookUp(_ text: String, adapter: AdapterInfo) throws -> Peripheral? {
        try Self.match(text, among: devices(on: adapter)).map { peripheral($0) }
    }

    /// Whether a device on `adapter` in `tree` may be the one `text` names
    /// (`match` decides): its object for an address, else a device of that
    /// name or alias, compared as text without reading the rest.
    static func mayName(_ text: String, in tree: borrowing BlueZObjectTree, on adapter: ObjectPath) -> Bool {
        if let address = BluetoothAddress(text) {
            return adapter.appending(address.pathElement).map { tree.properties($0, BlueZ.deviceInterface) != nil } ?? false
        }
        if text.hasPrefix("/") { return true }
        let lower = text.lowercased()
        for path in tree.paths(with: BlueZ.deviceInterface) where path.parent == adapter {
            guard let p = tree.properties(path, BlueZ.deviceInterface) else { continue }
            for key in ["Name", "Alias"] {
                if let name = p[key]?.string, name == text || name.lowercased() == lower { return true }
            }
        }
        return false
    }

    /// The device among `all` that `text` names: its path, its address, or
    /// its name or alias (exactly, else ignoring case); throws when a name
    /// matches more than one.
    static func match(_ text: String, among all: [DeviceInfo]) throws -> DeviceInfo? {
        if text.hasPrefix("/") {
            return all.first { $0.path.rawValue == text }
        }
        if let address = BluetoothAddress(text) {
            return all.first { $0.address == address }
        }
        var matches = all.filter { $0.name == text || $0.alias == text }
        if matches.isEmpty {
            matches = all.filter { $0.name?.lowercased() == text.lowercased() || $0.alias?.lowercased() == text.lowercased() }
        }
        if matches.count > 1 {
            throw BluetoothError.invalidRequest(
                "device name \"\(text)\" is ambiguous: \(matches.map(\.address.description).joined(separator: ", ")); give an address")
        }
        return matches.first
    }

    /// `Device1.Connect` with BlueZ's real failure modes handled (abort-by-local
    /// → wait for Connected=false and retry; InProgress → retry after a
    /// delay; dual-mode devices reported as such), `retries` extra attempts,
    /// all within `timeout`. Returns whether this call made the connection
    /// (false: it was connected already). Cancelling the calling task
    /// cancels the attempt (Disconnect) and throws `CancellationError`.
    ///
    /// Connects on one adapter take turns (`AdapterTurns`): while another
    /// connect of this central is being made there, this one waits, within
    /// `timeout`, and `onQueued` is told how many are ahead of it.
    @discardableResult
    public func connect(_ peripheral: Peripheral, timeout: Duration = .seconds(30), retries: Int = 2,
                        onQueued: (@Sendable (_ ahead: Int) -> Void)? = nil) async throws -> Bool {
        let path = peripheral.path
        let id = peripheral.identifier.description
        // Connected already, as the mirror has it (the missing signal of
        // 5.66 is only ever a missing *true*): nothing to run.
        let seen = await mirror.properties(path, BlueZ.deviceInterface)
        guard let seen else { throw BluetoothError.deviceNotFound(id) }
        if seen["Connected"]?.bool == true { return false }
        let start = ContinuousClock.now
        let turn = try await turns.take(.connect, on: seen["Adapter"]?.objectPath ?? path.parent ?? path, timeout: timeout,
                                        what: "connect to \(id)", onQueued: onQueued)
        defer { turns.release(turn) }
        let timeout = timeout - (ContinuousClock.now - start)
        let callTimeout = self.callTimeout
        let driver = MachineDriver<ConnectionStateMachine, Bool>(
            mirror: mirror, machine: ConnectionStateMachine(maxAttempts: retries + 1), label: "connect \(id)")
        // Follow first, then look (pitfall 4): nothing changes unseen in between.
        driver.follow { change, tree in
            switch change.fate(ofDevice: path, in: tree) {
            case .changed(let changed)?: return changed["Connected"]?.bool.map { [.connectedChanged($0)] } ?? []
            case .gone?: return [.deviceRemoved]
            case .bluetoothdStopped?: return [.bluetoothdStopped]
            case nil: return []
            }
        }
        let (now, _) = await driver.look(peripheral.deviceGetAll, timeout: .seconds(5))
        if Peripheral.deviceProperties(in: now)?["Connected"]?.bool ?? false {
            driver.abandon()
            return false
        }
        return try await driver.run(start: .start(alreadyConnected: false), cancel: .cancel, setUp: { driver in
            driver.after(timeout, .timeout)
            peripheral.local.value.transition = .connecting
            driver.onEnd { peripheral.local.value.transition = nil }
        }, perform: { action, driver in
            switch action {
            case .callConnect:
                driver.call(peripheral.deviceMessage("Connect"), timeout: callTimeout) { [mirror = driver.mirror] result in
                    switch result {
                    case .success:
                        return .connectSucceeded
                    case .failure(let error):
                        // bluetoothd gone: the bus answers the pending call for it
                        // (NoReply), after its NameOwnerChanged (bus order).
                        guard mirror.bluetoothdRunning else { return .bluetoothdStopped }
                        let (name, message) = error.nameAndMessage
                        return .connectFailed(name: name, message: message)
                    }
                }
            case .askConnected:
                // Connected=true may never be signalled (see Peripheral.fetchDeviceProperties): ask.
                driver.call(peripheral.deviceGetAll, timeout: .seconds(2)) { result in
                    .polled(connected: Peripheral.deviceProperties(in: result)?["Connected"]?.bool)
                }
            case .schedulePoll(let delay):
                driver.after(delay, .pollTimerFired)
            case .scheduleRetry(let delay):
                driver.after(delay, .retryTimerFired)
            case .callDisconnect:
                driver.call(peripheral.deviceMessage("Disconnect"), timeout: .seconds(5)) { _ in .disconnectFinished }
            case .succeed:
                driver.answer(.success(true))
            case .reportCancelled:
                driver.answer(.failure(CancellationError()))
            case .unplanned(let what):
                Trace.unplanned(driver.label, what)
            case .fail(let failure):
                driver.answer(.failure(Self.error(failure, id)))
            }
        })
    }

    static func error(_ failure: ConnectionFailure, _ id: String) -> BluetoothError {
        let operation = "connect to \(id)"
        switch failure {
        case .timeout: return .timeout(operation)
        case .inProgress: return .inProgress("\(operation): \(failure)")
        case .deviceRemoved: return .deviceNotFound("\(id) (removed by BlueZ while connecting)")
        case .bluetoothdStopped: return .bluetoothdStopped("connecting to \(id)")
        case .abortedByLocal, .dualMode, .noSlot:
            return .bluez(name: "org.bluez.Error.Failed", message: failure.description, operation: operation)
        case .bluez(let name, let message):
            return BluetoothError(DBusError.remote(name: name, message: message), operation: operation)
        }
    }

    /// `Device1.Disconnect`, then waits for `Connected=false` (at most
    /// `timeout`), driven by `DisconnectStateMachine`.
    public func cancelPeripheralConnection(_ peripheral: Peripheral, timeout: Duration = .seconds(10)) async throws {
        let path = peripheral.path
        let id = peripheral.identifier
        let callTimeout = min(self.callTimeout, timeout)
        let driver = MachineDriver<DisconnectStateMachine, Void>(
            mirror: mirror, machine: DisconnectStateMachine(), label: "disconnect \(id)")
        // Follow first, then look (pitfall 4).
        driver.follow { change, tree in
            switch change.fate(ofDevice: path, in: tree) {
            case .changed(let changed)?: return changed["Connected"]?.bool.map { [.connectedChanged($0)] } ?? []
            case .gone?, .bluetoothdStopped?: return [.deviceGone]
            case nil: return []
            }
        }
        let (now, _) = await driver.look(peripheral.deviceGetAll, timeout: .seconds(5))
        var connected = Peripheral.deviceProperties(in: now)?["Connected"]?.bool
        if connected == nil { connected = await mirror.properties(path, BlueZ.deviceInterface)?["Connected"]?.bool }
        try await driver.run(start: .start(connected: connected ?? false), cancel: .timeout, setUp: { driver in
            driver.after(timeout, .timeout)
            peripheral.local.value.transition = .disconnecting
            driver.onEnd { peripheral.local.value.transition = nil }
        }, perform: { action, driver in
            switch action {
            case .callDisconnect:
                driver.call(peripheral.deviceMessage("Disconnect"), timeout: callTimeout) { result in
                    switch result {
                    case .success: return .disconnectSucceeded
                    case .failure(let error):
                        let (name, message) = error.nameAndMessage
                        return .disconnectFailed(name: name, message: message)
                    }
                }
            case .askConnected:
                driver.call(peripheral.deviceGetAll, timeout: .seconds(2)) { result in
                    .polled(connected: Peripheral.deviceProperties(in: result)?["Connected"]?.bool)
                }
            case .schedulePoll(let delay):
                driver.after(delay, .pollTimerFired)
            case .succeed:
                driver.answer(.success(()))
            case .fail(.timeout):
                driver.answer(.failure(BluetoothError.timeout("disconnect \(id)")))
            case .fail(.bluez(let name, let message)):
                driver.answer(.failure(BluetoothError(DBusError.remote(name: name, message: message), operation: "disconnect \(id)")))
            case .unplanned(let what):
                Trace.unplanned(driver.label, what)
            }
        })
    }
}

/// A table entry that does not keep its peripheral alive (a peripheral holds
/// its central: a strong table would be a cycle).
struct WeakPeripheral: Sendable {
    weak var value: Peripheral?
}
