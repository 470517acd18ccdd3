#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BluectlCore
import ESPHomeAPI
import Logging

/// The proxy's connections to devices for its API clients (ESPHome's
/// `bluetooth_proxy` connections): a fixed number of slots shared by all
/// clients, each connection owned by the client that asked for it, and the
/// GATT requests on it carried out with BluectlCore's `Peripheral`.
///
/// The table is the loop's (a `LoopBound`, beside the server's clients).
/// Each connection has one task that connects, resolves the services,
/// reports, then waits for the link to go down; each GATT request runs in a
/// task of its own. Every task hands its outcome back to the loop, where it
/// is answered only if the connection is still the one it started on (its
/// `serial`): an answer for a connection released meanwhile is dropped, as
/// the client was told of the release. Notification values arrive on the
/// loop (`subscribe(to:onValue:)`) and go straight to the owner's socket.
package final class ProxyLinks: Sendable {
    /// Connections at once, all clients together. ESPHome's default (3),
    /// which Home Assistant's connection scheduling is tuned for; a BlueZ
    /// controller holds more LE links (commonly 5 to 10), but bluetoothd
    /// connects one device at a time and the controller's links are shared
    /// with every other program on the machine, so the proxy claims a few.
    package static let slots = 3
    /// How long a connect (with its retries, and a wait for the device to be
    /// back) and the service resolution each may take, unless the command
    /// line says (`--connect-timeout`).
    package static let defaultConnectTimeout = Duration.seconds(20)
    /// ESPHome's own error for a request on a device that is not connected.
    static let notConnected: Int32 = -1
    /// ESP-IDF's `ESP_GATT_ERROR` (133), for a failure with no ATT error code.
    static let gattError: Int32 = 0x85
    /// ESP-IDF's `ESP_GATT_WRONG_STATE` (130): cache clearing on a connected or bonded device.
    static let wrongState: Int32 = 0x82
    /// ESP-IDF's `ESP_GATT_ILLEGAL_PARAMETER` (135): a device BlueZ does not know.
    static let unknownDevice: Int32 = 0x87
    /// `ESP_GATT_CONN_FAIL_ESTABLISH` (0x3e) and `…_TERMINATE_PEER_USER` (0x13), as connection errors.
    static let connectFailed: Int32 = 0x3E, linkLost: Int32 = 0x13

    struct Link {
        /// Which connection this is (an address connected again is another).
        let serial: UInt64
        /// The client (`ProxyServer`'s id) that connected it.
        let owner: UInt64
        let peripheral: Peripheral
        var connected = false
        var mtu: UInt32 = 0
        /// Disconnecting (a request, or its client gone): the slot is freed when done.
        var releasing = false
        var task: Task<Void, Never>?
        var notifications: [UInt32: NotificationSession] = [:]
    }

    private struct State {
        var links: [UInt64: Link] = [:]
        var serial: UInt64 = 0
        var adapter: AdapterInfo?
        /// The releases under way, by connection serial (`closeAll` waits for them).
        var releases: [UInt64: Task<Void, Never>] = [:]
        /// Sends a frame to a client by id, if it is still connected (the server's).
        var send: @Sendable (UInt64, PlaintextFrame) -> Void = { _, _ in }
        /// The slots changed: the server sends `freeResponse()` to its subscribed clients.
        var changed: @Sendable () -> Void = {}
    }

    private let central: CentralManager
    private let state: LoopBound<State>
    /// The agent the pairings share (bluetoothd takes one per bus connection).
    private let pairing: ProxyPairing
    private let logger = Logger(label: "bluectl")

    /// Each connect's time (`defaultConnectTimeout`, or the command line's).
    let connectTimeout: Duration

    package init(central: CentralManager, connectTimeout: Duration = ProxyLinks.defaultConnectTimeout) {
        self.central = central
        self.connectTimeout = connectTimeout
        state = central.loopBound(State())
        pairing = ProxyPairing(central: central)
    }

    /// How answers reach the server's clients (on the loop, before any client
    /// connects): `send` a frame to a client by id, and `changed` when the
    /// slots change (the server sends `freeResponse()` to those subscribed).
    package func attach(send: @escaping @Sendable (UInt64, PlaintextFrame) -> Void, changed: @escaping @Sendable () -> Void) {
        state.value.send = send
        state.value.changed = changed
    }

    private func send(_ client: UInt64, _ frame: PlaintextFrame) { state.value.send(client, frame) }
    private func changed() { state.value.changed() }

    /// The adapter whose devices are connected (the one scanned); on the loop.
    package func use(_ adapter: AdapterInfo) { state.value.adapter = adapter }

    /// The slots as ESPHome reports them: free, the limit, and the addresses in use.
    package func freeResponse() -> BluetoothConnectionsFreeResponse {
        var response = BluetoothConnectionsFreeResponse()
        response.free = UInt32(Self.slots - state.value.links.count)
        response.limit = UInt32(Self.slots)
        response.allocated = state.value.links.keys.sorted()
        return response
    }

    /// Carries out `request` for `client` (on the loop).
    package func handle(_ request: ProxySessionMachine.DeviceRequest, address: UInt64, client: UInt64) {
        switch request {
        case .connect(let cached): connect(address, cached: cached, client: client)
        case .disconnect: disconnect(address, client: client)
        case .pair: pair(address, client: client)
        case .unpair, .clearCache: forget(address, clearCache: request == .clearCache, client: client)
        case .services: services(address, client: client)
        case .read(let handle):
            operate(address, client, handle) { peripheral in
                var response = BluetoothGATTReadResponse()
                response.data = Data(try await peripheral.readValue(for: peripheral.characteristic(.handle(Int(handle)))))
                return response
            }
        case .write(let handle, let data, let withResponse):
            operate(address, client, handle, write: true) { peripheral in
                let characteristic = try peripheral.characteristic(.handle(Int(handle)))
                try await peripheral.writeValue(data, for: characteristic, type: withResponse ? .withResponse : .withoutResponse)
                return withResponse ? BluetoothGATTWriteResponse() : nil
            }
        case .readDescriptor(let handle):
            operate(address, client, handle) { peripheral in
                var response = BluetoothGATTReadResponse()
                response.data = Data(try await peripheral.readValue(for: Self.descriptor(handle, of: peripheral).descriptor))
                return response
            }
        case .writeDescriptor(let handle, let data):
            writeDescriptor(address, client, handle, data)
        case .notify(let handle, let enable):
            notify(address, client, handle, enable: enable, answer: BluetoothGATTNotifyResponse())
        }
    }

    /// Releases every connection of `client` (gone); on the loop.
    package func release(client: UInt64) {
        for (address, link) in state.value.links where link.owner == client { release(address, tellOwner: false) }
    }

    /// Releases every connection and waits until each is down and the
    /// pairing agent unregistered (the proxy stopping).
    package func closeAll() async {
        let releases = await central.onLoop { [self] in
            for address in Array(state.value.links.keys) { release(address, tellOwner: false) }
            return Array(state.value.releases.values)
        }
        for release in releases { await release.value }
        await pairing.close()
    }

    // MARK: - Connections (on the loop)

    private func connect(_ address: UInt64, cached: Bool, client: UInt64) {
        let id = Self.describe(address)
        if let link = state.value.links[address] {
            if link.owner == client, link.connected, !link.releasing {
                logger.debug("proxy: \(id) is connected already")
                sendConnection(client, address, connected: true, mtu: link.mtu)
                changed()
            } else {
                // Another client's, being connected or released: refused, not left waiting.
                logger.info("proxy: connect to \(id) refused: \(link.owner != client ? "another client's connection" : link.releasing ? "disconnecting" : "already connecting")")
                if link.owner != client || link.releasing { sendConnection(client, address, connected: false) }
            }
            return
        }
        guard state.value.links.count < Self.slots else {
            logger.warning("proxy: no free connection slot for \(id) (\(Self.slots) of \(Self.slots) in use)")
            sendConnection(client, address, connected: false)
            return
        }
        guard let bdaddr = BluetoothAddress(uint64: address),
              let peripheral = central.retrievePeripherals(withIdentifiers: [bdaddr], adapter: state.value.adapter).first else {
            logger.info("proxy: connect to \(id) refused: BlueZ does not know the device (not seen by the scan)")
            sendConnection(client, address, connected: false, error: Self.unknownDevice)
            return
        }
        state.value.serial += 1
        let serial = state.value.serial
        var link = Link(serial: serial, owner: client, peripheral: peripheral)
        link.task = Task { [self] in await run(serial, address, peripheral) }
        state.value.links[address] = link
        logger.info("proxy: connecting \(id) (\(cached ? "with" : "without") cache; \(state.value.links.count) of \(Self.slots) slots)")
        changed()
    }

    /// The connection's task: connect, resolve the services, report, then wait for the link to go down.
    private func run(_ serial: UInt64, _ address: UInt64, _ peripheral: Peripheral) async {
        let mtu: Int
        do {
            try await connectOnceMoreIfGone(peripheral)
            try await peripheral.discoverServices(timeout: connectTimeout)
            mtu = peripheral.mtu ?? 23
        } catch {
            if Task.isCancelled { return }   // released meanwhile: the release answers
            central.onLoopSoon { [self] in ended(serial, address, error: Self.connectFailed, "connect failed: \(error)") }
            return
        }
        central.onLoopSoon { [self] in established(serial, address, mtu: UInt32(mtu)) }
        let reason = await linkDown(peripheral)
        if Task.isCancelled { return }   // released: the release answers
        central.onLoopSoon { [self] in ended(serial, address, error: Self.linkLost, reason) }
    }

    /// Connects within `connectTimeout`. When BlueZ dropped the device as
    /// the connect went out (its object gone: seen in the lab a moment after
    /// bluetoothd restarted) or bluetoothd stopped meanwhile, the proxy's own
    /// scan brings the device back as soon as it advertises: this waits for
    /// it to be in BlueZ's tree again, its adapter powered, and tries once
    /// more in the time left. Home Assistant's client does not retry a
    /// failed connect by itself.
    private func connectOnceMoreIfGone(_ peripheral: Peripheral) async throws {
        let deadline = ContinuousClock.now + connectTimeout
        do {
            try await central.connect(peripheral, timeout: connectTimeout)
        } catch let error as BluetoothError {
            let why: String
            switch error {
            case .deviceNotFound: why = "BlueZ dropped it while connecting"
            case .bluetoothdStopped: why = "bluetoothd stopped while connecting"
            default: throw error
            }
            logger.info("proxy: \(peripheral.identifier): \(why); trying again once the scan sees it")
            guard await central.waitUntilConnectable(peripheral, timeout: deadline - ContinuousClock.now - Self.leastConnectTime) else {
                if Task.isCancelled { throw CancellationError() }
                throw BluetoothError.deviceNotFound(
                    "\(peripheral.identifier) (\(why), and not back in BlueZ's tree on a powered adapter within \(connectTimeout))")
            }
            try await central.connect(peripheral, timeout: deadline - ContinuousClock.now)
        }
    }

    /// The least time worth a second connect: waiting for the device ends this much before the deadline.
    static let leastConnectTime = Duration.seconds(1)

    /// How often a connection's link is asked of bluetoothd: 5.66 does not
    /// always signal `Connected` (true after a connect, false after a loss:
    /// docs/bluez-pitfalls.md, 24), so the signals alone can miss a drop, or
    /// a mirror still saying false right after the connect would look like one.
    static let linkPollInterval = Duration.seconds(2)

    /// Waits until the link is down (BlueZ's signal, or bluetoothd asked
    /// every `linkPollInterval` saying so) or the task is cancelled; the reason.
    private func linkDown(_ peripheral: Peripheral) async -> String {
        await withTaskGroup(of: String?.self) { group in
            group.addTask {
                for await event in peripheral.connectionEvents() {
                    if case .disconnected(let reason) = event { return reason }
                }
                return nil   // cancelled, or the bus connection lost (the poll decides)
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.linkPollInterval)
                    if !Task.isCancelled, !(await peripheral.isConnected()) { return "bluetoothd says it is not connected" }
                }
                return nil
            }
            var reason: String?
            for await result in group {
                if let result { reason = result; break }
                if Task.isCancelled { break }
            }
            group.cancelAll()
            return reason ?? "released"
        }
    }

    private func established(_ serial: UInt64, _ address: UInt64, mtu: UInt32) {
        guard let link = state.value.links[address], link.serial == serial, !link.releasing else { return }
        state.value.links[address]?.connected = true
        state.value.links[address]?.mtu = mtu
        logger.info("proxy: connected \(Self.describe(address)) (MTU \(mtu))")
        sendConnection(link.owner, address, connected: true, mtu: mtu)
    }

    /// The connect failed or the link went down: the owner is told, the slot freed.
    private func ended(_ serial: UInt64, _ address: UInt64, error: Int32, _ why: String) {
        guard let link = state.value.links[address], link.serial == serial, !link.releasing else { return }
        state.value.links[address] = nil
        logger.info("proxy: \(Self.describe(address)): \(why)")
        let sessions = Array(link.notifications.values)
        if !sessions.isEmpty { Task { for session in sessions { await session.stop() } } }
        sendConnection(link.owner, address, connected: false, error: error)
        changed()
    }

    private func disconnect(_ address: UInt64, client: UInt64) {
        guard let link = state.value.links[address], link.owner == client, !link.releasing else {
            // Not connected through this client: it is disconnected as far as it is concerned.
            sendConnection(client, address, connected: false)
            send(client, ProxySessionMachine.frame(freeResponse()))
            return
        }
        release(address, tellOwner: true)
    }

    /// Stops the connection's task, its notifications, then disconnects; the
    /// slot is freed (and the owner told, `tellOwner`) once the link is down.
    private func release(_ address: UInt64, tellOwner: Bool) {
        guard let link = state.value.links[address], !link.releasing else { return }
        state.value.links[address]?.releasing = true
        state.value.links[address]?.notifications = [:]
        let sessions = Array(link.notifications.values)
        let release = Task { [self, central] in
            link.task?.cancel()
            await link.task?.value
            for session in sessions { await session.stop() }
            do {
                try await central.cancelPeripheralConnection(link.peripheral)
            } catch {
                logger.warning("proxy: disconnecting \(Self.describe(address)): \(error)")
            }
            central.onLoopSoon { [self] in
                state.value.releases[link.serial] = nil
                guard state.value.links[address]?.serial == link.serial else { return }
                state.value.links[address] = nil
                logger.info("proxy: disconnected \(Self.describe(address)) (\(state.value.links.count) of \(Self.slots) slots in use)")
                if tellOwner { sendConnection(link.owner, address, connected: false) }
                changed()
            }
        }
        state.value.releases[link.serial] = release
    }

    // MARK: - Pairing and BlueZ's records

    private func pair(_ address: UInt64, client: UInt64) {
        guard let link = connectedLink(address, client) else {
            var response = BluetoothDevicePairingResponse()
            response.address = address
            response.error = Self.notConnected
            send(client, ProxySessionMachine.frame(response))
            return
        }
        let peripheral = link.peripheral
        answer(address, link.serial, client) { [pairing, connectTimeout] in
            var response = BluetoothDevicePairingResponse()
            response.address = address
            do {
                try await pairing.pairing(peripheral) { try await peripheral.pair(timeout: connectTimeout) }
                response.paired = true
            } catch {
                response.error = Self.gattCode(error, write: false)
            }
            return response
        } failure: { error in
            var response = BluetoothDevicePairingResponse()
            response.address = address
            response.error = Self.gattCode(error, write: false)
            return response
        }
    }

    /// Unpair, or clear the GATT cache: BlueZ keeps both in its record of the
    /// device and drops them together (`RemoveDevice`; the scan finds the
    /// device again). Clearing the cache is refused while the device is
    /// connected or bonded, as it would cost the connection or the bond.
    private func forget(_ address: UInt64, clearCache: Bool, client: UInt64) {
        @Sendable func response(_ success: Bool, _ error: Int32) -> PlaintextFrame {
            if clearCache {
                var response = BluetoothDeviceClearCacheResponse()
                (response.address, response.success, response.error) = (address, success, error)
                return ProxySessionMachine.frame(response)
            }
            var response = BluetoothDeviceUnpairingResponse()
            (response.address, response.success, response.error) = (address, success, error)
            return ProxySessionMachine.frame(response)
        }
        guard let bdaddr = BluetoothAddress(uint64: address),
              let peripheral = central.retrievePeripherals(withIdentifiers: [bdaddr], adapter: state.value.adapter).first else {
            send(client, response(false, Self.unknownDevice))
            return
        }
        if clearCache, state.value.links[address] != nil || peripheral.info?.paired == true {
            logger.info("proxy: cache of \(Self.describe(address)) not cleared: it is connected or bonded (BlueZ clears it only with the bond)")
            send(client, response(false, Self.wrongState))
            return
        }
        Task { [self, central] in
            let frame: PlaintextFrame
            do {
                frame = response(try await central.removeDevice(peripheral), 0)
                logger.info("proxy: \(clearCache ? "cleared the cache of" : "unpaired") \(Self.describe(address)) (BlueZ's record removed)")
            } catch {
                frame = response(false, Self.gattCode(error, write: true))
            }
            central.onLoopSoon { [self] in send(client, frame) }
        }
    }

    // MARK: - Services, reads, writes, notifications

    private func services(_ address: UInt64, client: UInt64) {
        guard let link = connectedLink(address, client) else {
            sendGattError(client, address, 0, Self.notConnected)
            return
        }
        let database = link.peripheral.database
        // One response per service, then done, as ESPHome sends them.
        for service in database.services {
            var response = BluetoothGATTGetServicesResponse()
            response.address = address
            var entry = BluetoothGATTService()
            entry.uuid = Self.split(service.uuid)
            entry.handle = UInt32(service.handle ?? 0)
            for characteristic in database.characteristics(of: service) {
                var c = BluetoothGATTCharacteristic()
                c.uuid = Self.split(characteristic.uuid)
                c.handle = UInt32(characteristic.handle ?? 0)
                // BlueZ's flags as the ATT properties byte (the same bits as ESP-IDF's).
                c.properties = UInt32(characteristic.properties.rawValue & 0xff)
                c.descriptors = database.descriptors(of: characteristic).map { descriptor in
                    var d = BluetoothGATTDescriptor()
                    d.uuid = Self.split(descriptor.uuid)
                    d.handle = UInt32(descriptor.handle ?? 0)
                    return d
                }
                entry.characteristics.append(c)
            }
            response.services = [entry]
            send(client, ProxySessionMachine.frame(response))
        }
        var done = BluetoothGATTGetServicesDoneResponse()
        done.address = address
        send(client, ProxySessionMachine.frame(done))
    }

    /// A write to a Client Characteristic Configuration descriptor (0x2902)
    /// turns its characteristic's notifications on or off (BlueZ refuses
    /// such writes: StartNotify and StopNotify own the descriptor); any
    /// other descriptor is written.
    private func writeDescriptor(_ address: UInt64, _ client: UInt64, _ handle: UInt32, _ data: [UInt8]) {
        guard let link = connectedLink(address, client) else {
            sendGattError(client, address, handle, Self.notConnected)
            return
        }
        var written = BluetoothGATTWriteResponse()
        (written.address, written.handle) = (address, handle)
        if let (descriptor, characteristic) = try? Self.descriptor(handle, of: link.peripheral),
           descriptor.uuid == BluetoothUUID(uint16: 0x2902), let valueHandle = characteristic.handle {
            notify(address, client, UInt32(valueHandle), enable: data.contains { $0 != 0 }, answer: written, handle: handle)
            return
        }
        operate(address, client, handle, write: true) { peripheral in
            try await peripheral.writeValue(data, for: Self.descriptor(handle, of: peripheral).descriptor)
            return BluetoothGATTWriteResponse()
        }
    }

    /// Turns the notifications of the characteristic at `valueHandle` on or
    /// off and answers `answer` (for `handle`, the request's); values go to
    /// the owner as `BluetoothGATTNotifyDataResponse`s.
    private func notify(_ address: UInt64, _ client: UInt64, _ valueHandle: UInt32, enable: Bool,
                        answer: some APIMessage & AddressedResponse, handle: UInt32? = nil) {
        let handle = handle ?? valueHandle
        guard let link = connectedLink(address, client) else {
            sendGattError(client, address, handle, Self.notConnected)
            return
        }
        var answer = answer
        (answer.address, answer.handle) = (address, handle)
        let serial = link.serial
        if !enable {
            let session = state.value.links[address]?.notifications.removeValue(forKey: valueHandle)
            let frame = ProxySessionMachine.frame(answer)
            Task { [self, central] in
                await session?.stop()
                central.onLoopSoon { [self] in if state.value.links[address]?.serial == serial { send(client, frame) } }
            }
            return
        }
        guard link.notifications[valueHandle] == nil else {
            send(client, ProxySessionMachine.frame(answer))
            return
        }
        let peripheral = link.peripheral
        let frame = ProxySessionMachine.frame(answer)
        Task { [self, central] in
            do {
                let characteristic = try peripheral.characteristic(.handle(Int(valueHandle)))
                let session = try await peripheral.subscribe(to: characteristic) { [self] value in
                    notified(serial, address, valueHandle, value)
                }
                central.onLoopSoon { [self] in
                    guard let now = state.value.links[address], now.serial == serial, !now.releasing,
                          now.notifications[valueHandle] == nil else {
                        Task { await session.stop() }   // released, or turned on twice meanwhile
                        if state.value.links[address]?.serial == serial { send(client, frame) }
                        return
                    }
                    state.value.links[address]?.notifications[valueHandle] = session
                    send(client, frame)
                }
            } catch {
                central.onLoopSoon { [self] in
                    logger.info("proxy: \(Self.describe(address)) notify handle \(handle): \(error)")
                    if state.value.links[address]?.serial == serial { sendGattError(client, address, handle, Self.gattCode(error, write: true)) }
                }
            }
        }
    }

    /// A notified value (on the loop, where it arrives): to the owner.
    private func notified(_ serial: UInt64, _ address: UInt64, _ handle: UInt32, _ value: [UInt8]) {
        guard let link = state.value.links[address], link.serial == serial, !link.releasing else { return }
        var data = BluetoothGATTNotifyDataResponse()
        (data.address, data.handle, data.data) = (address, handle, Data(value))
        send(link.owner, ProxySessionMachine.frame(data))
    }

    /// Runs one GATT operation in a task and answers with its message (nil:
    /// nothing to answer), or with `BluetoothGATTErrorResponse`.
    private func operate<M: APIMessage & AddressedResponse>(_ address: UInt64, _ client: UInt64, _ handle: UInt32, write: Bool = false,
                                                            _ body: @escaping @Sendable (Peripheral) async throws -> M?) {
        guard let link = connectedLink(address, client) else {
            sendGattError(client, address, handle, Self.notConnected)
            return
        }
        let peripheral = link.peripheral
        answer(address, link.serial, client) {
            guard var message = try await body(peripheral) else { return nil as M? }
            (message.address, message.handle) = (address, handle)
            return message
        } failure: { error in
            var response = BluetoothGATTErrorResponse()
            (response.address, response.handle, response.error) = (address, handle, Self.gattCode(error, write: write))
            return response
        }
    }

    /// Runs `body` in a task; its message, or `failure`'s for its error, is
    /// sent to `client` if connection `serial` is still up.
    private func answer<M: APIMessage, F: APIMessage>(_ address: UInt64, _ serial: UInt64, _ client: UInt64,
                                                      _ body: @escaping @Sendable () async throws -> M?,
                                                      failure: @escaping @Sendable (any Error) -> F) {
        Task { [self, central] in
            let frame: PlaintextFrame?
            do {
                frame = try await body().map { ProxySessionMachine.frame($0) }
            } catch {
                logger.info("proxy: \(Self.describe(address)): \(error)")
                frame = ProxySessionMachine.frame(failure(error))
            }
            guard let frame else { return }
            central.onLoopSoon { [self] in if state.value.links[address]?.serial == serial { send(client, frame) } }
        }
    }

    private func connectedLink(_ address: UInt64, _ client: UInt64) -> Link? {
        guard let link = state.value.links[address], link.owner == client, link.connected, !link.releasing else { return nil }
        return link
    }

    private func sendConnection(_ client: UInt64, _ address: UInt64, connected: Bool, mtu: UInt32 = 0, error: Int32 = 0) {
        var response = BluetoothDeviceConnectionResponse()
        (response.address, response.connected, response.mtu, response.error) = (address, connected, mtu, error)
        send(client, ProxySessionMachine.frame(response))
    }

    private func sendGattError(_ client: UInt64, _ address: UInt64, _ handle: UInt32, _ error: Int32) {
        var response = BluetoothGATTErrorResponse()
        (response.address, response.handle, response.error) = (address, handle, error)
        send(client, ProxySessionMachine.frame(response))
    }
}
