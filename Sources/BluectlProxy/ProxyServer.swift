#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BluectlCore
import ESPHomeAPI
import Logging

/// `bluectl proxy`'s TCP server: ESPHome's native API (plaintext or Noise framing)
/// for several clients at once, and the scan whose advertisements it
/// forwards to those that subscribed.
///
/// Everything runs on the central's event loop, beside the bus: the
/// listening socket and every client's socket are non-blocking and watched
/// by the loop's poll (`CentralManager.watch`, as `serve` watches stdin and
/// the notify engine an AcquireNotify socket), the scan's results arrive
/// there too (`startScan(onDiscovery:)`), and each client's state
/// (its frame decoder, its `ProxySessionMachine`, its unsent bytes and its
/// batch of advertisements) is a `LoopBound`. So an advertisement goes from
/// bluetoothd's signal to the clients' sockets with no hand-over to another
/// thread and no lock, and one client's garbage ends only that client.
/// (One task per client would have needed the advertisements handed to
/// each task, and the client table shared between them.)
///
/// The loop watches readability only: a client's answers and batches are
/// written at once as far as its socket takes them, the rest kept and
/// retried at every flush (each 100 ms, as ESPHome flushes its batches);
/// a client that lets more than `maxUnsent` bytes pile up is disconnected.
package final class ProxyServer: Sendable {
    /// Advertisements per `BluetoothLERawAdvertisementsResponse` (ESPHome's
    /// `BLUETOOTH_PROXY_ADVERTISEMENT_BATCH_SIZE`).
    package static let batchSize = 16
    /// The RSSI sent for a report whose strength the controller did not
    /// measure: `NO_RSSI_VALUE` of bleak-retry-connector (habluetooth's), the weakest, so Home Assistant
    /// never prefers this proxy for a device on a reading it does not have.
    package static let noRSSI: Int32 = -127
    /// How often batches are sent when not full (ESPHome: 100 ms).
    package static let flushInterval = Duration.milliseconds(100)
    /// Unsent bytes after which a client that does not read is dropped.
    package static let maxUnsent = 1 << 20

    private struct Client {
        let fd: Int32
        /// Unique for the server's life (a closed socket's fd is reused): what `ProxyLinks` knows the client by.
        let id: UInt64
        let peer: String
        var watch: LoopWatch?
        var transport: FrameTransport
        var machine: ProxySessionMachine
        var unsent: [UInt8] = []
        var batch: [BluetoothLERawAdvertisement] = []
    }

    private struct State {
        var listenFD: Int32 = -1
        var listenWatch: LoopWatch?
        var clients: [Int32: Client] = [:]
        var nextID: UInt64 = 1
        var stopped = false
        /// Advertisements sent, all clients together (for the log).
        var forwarded = 0
        /// The scan's state, as `BluetoothScannerStateResponse` tells the subscribed clients.
        var scanner = BluetoothScannerState.starting
    }

    private let central: CentralManager
    private let identity: ProxyIdentity
    /// The Noise pre-shared key (nil: the plaintext API).
    private let psk: [UInt8]?
    private let state: LoopBound<State>
    /// The connections to devices the clients asked for (GATT through the proxy).
    private let links: ProxyLinks
    private let logger = Logger(label: "bluectl")

    /// `psk`: the 32-byte Noise key (`--key-file`); nil serves the plaintext API.
    /// `connectTimeout`: each device connect's time (`--connect-timeout`).
    package init(central: CentralManager, identity: ProxyIdentity, psk: [UInt8]? = nil,
                 connectTimeout: Duration = ProxyLinks.defaultConnectTimeout) {
        self.central = central
        self.identity = identity
        self.psk = psk
        state = central.loopBound(State())
        links = ProxyLinks(central: central, connectTimeout: connectTimeout)
    }

    /// Opens the listening socket on `port` of every IPv4 address (0: a
    /// free port) and starts accepting clients; returns the port.
    package func listen(port: UInt16) async throws(ProxyError) -> UInt16 {
        // SOCK_NONBLOCK and SOCK_CLOEXEC are O_NONBLOCK and O_CLOEXEC (the kernel's
        // include/linux/net.h): the SOCK_ names are macros whose owning C module here
        // depends on which module included <sys/socket.h> first; the O_ names are Glibc's.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | O_NONBLOCK | O_CLOEXEC, 0)
        guard fd >= 0 else { throw .socket("socket", errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: INADDR_ANY)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw .socket("bind to port \(port)", code)
        }
        guard Glibc.listen(fd, 16) == 0 else {
            let code = errno
            close(fd)
            throw .socket("listen", code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        await central.onLoop { [self] in
            state.value.listenFD = fd
            state.value.listenWatch = central.watch(fd) { [self] in acceptClients() }
            // The links answer a client by its id, and tell every subscribed client of the slots.
            links.attach(send: { [weak self] id, frame in
                guard let self, let fd = state.value.clients.first(where: { $0.value.id == id })?.key else { return }
                perform([.send(frame)], fd)
            }, changed: { [weak self] in
                guard let self else { return }
                let frame = ProxySessionMachine.frame(links.freeResponse())
                for (fd, client) in state.value.clients where client.machine.connectionsFreeSubscribed {
                    perform([.send(frame)], fd)
                }
            })
        }
        return UInt16(bigEndian: actual.sin_port)
    }

    /// Hands one scan result to the subscribed clients: on the loop (the scan's sink).
    package func forward(_ discovery: Discovery) {
        let device = discovery.device
        // No RSSI: no advertisement seen in this scan, unless the controller reported one without its strength.
        guard let rssi = device.rssi.map(Int32.init) ?? (device.rssiUnavailable ? Self.noRSSI : nil) else { return }
        var advertisement = BluetoothLERawAdvertisement()
        advertisement.address = device.address.uint64Value
        advertisement.addressType = RawAdvertisement.addressType(device.addressType)
        advertisement.rssi = rssi
        advertisement.data = Data(RawAdvertisement.data(for: device))
        for fd in state.value.clients.keys where state.value.clients[fd]?.machine.subscribed == true {
            state.value.clients[fd]?.batch.append(advertisement)
            if (state.value.clients[fd]?.batch.count ?? 0) >= Self.batchSize { sendBatch(fd) }
        }
    }

    /// Sends every client's batch and retries unsent bytes: each `flushInterval`, on the loop.
    package func flush() {
        for fd in Array(state.value.clients.keys) {
            sendBatch(fd)
            write(fd)
        }
    }

    /// How many clients are connected (on the loop).
    package var clientCount: Int { state.value.clients.count }

    /// Closes every client and the listening socket (on the loop).
    package func stop() {
        state.value.stopped = true
        for fd in Array(state.value.clients.keys) { drop(fd, reason: nil) }
        if let watch = state.value.listenWatch { central.unwatch(watch) }
        state.value.listenWatch = nil
        if state.value.listenFD >= 0 { close(state.value.listenFD) }
        state.value.listenFD = -1
    }

    /// Serves until cancelled: listens on `port`, scans `adapter` with every
    /// advertisement reported (BlueZ's discovery: an active scan), forwards
    /// them, and flushes the batches every `flushInterval`. `listening` is
    /// told the port once clients can connect. The first scan failing ends
    /// the proxy with its error; a scan that ends later because bluetoothd
    /// went away or dropped the adapter (a crash, a restart) is started
    /// again once they are back, the clients staying connected meanwhile.
    package func run(adapter: AdapterInfo, port: UInt16, listening: @Sendable (UInt16) -> Void) async throws {
        let bound = try await listen(port: port)
        await central.onLoop { [self] in links.use(adapter) }
        var session: ScanSession
        do {
            session = try await startScan(adapter)
        } catch {
            await central.onLoop { [self] in stop() }
            throw error
        }
        await central.onLoop { [self] in scanner(.running) }
        listening(bound)
        let flusher = Task { [self, central] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.flushInterval)
                central.onLoopSoon { [self] in flush() }
            }
        }
        defer { flusher.cancel() }
        while true {
            do {
                for try await _ in session.discoveries {}   // the sink has them; this only ends or fails
                break   // cancelled (Ctrl-C, SIGTERM)
            } catch BluetoothError.bluetoothdNotRunning, BluetoothError.adapterNotFound {
                logger.warning("proxy: bluetoothd or \(adapter.name) went away: scanning again once they are back")
                await central.onLoop { [self] in scanner(.failed) }
                guard let resumed = await resumeScan(adapter) else { break }
                session = resumed
                await central.onLoop { [self] in scanner(.running) }
                logger.warning("proxy: scanning \(adapter.name) again")
            } catch {
                await central.onLoop { [self] in stop() }
                throw error
            }
        }
        await central.onLoop { [self] in stop() }
        await links.closeAll()
        _ = try? await session.stop()
    }

    private func startScan(_ adapter: AdapterInfo) async throws(BluetoothError) -> ScanSession {
        var options = ScanOptions()
        options.duplicates = true
        return try await central.startScan(adapter: adapter, options: options, onDiscovery: { [self] in forward($0) })
    }

    /// Waits for bluetoothd to export `adapter` again and starts the scan;
    /// nil when cancelled. A start that fails (bluetoothd still coming up) is
    /// tried again each second.
    private func resumeScan(_ adapter: AdapterInfo) async -> ScanSession? {
        while !Task.isCancelled {
            do {
                try await central.waitForAdapter(adapter, timeout: .seconds(60))
                return try await startScan(adapter)
            } catch {
                if Task.isCancelled { return nil }
                logger.info("proxy: not scanning yet: \(error)")
                try? await Task.sleep(for: .seconds(1))
            }
        }
        return nil
    }

    // MARK: - On the loop

    private func acceptClients() {
        while !state.value.stopped {
            var peer = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let fd = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(state.value.listenFD, $0, &length)
                }
            }
            guard fd >= 0 else {
                if errno != EAGAIN, errno != EWOULDBLOCK, errno != EINTR {
                    logger.warning("proxy: accept failed: \(String(cString: strerror(errno)))")
                }
                return
            }
            // (accept4 is not in Swift's Glibc module: the flags are set here.)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let name = Self.describe(peer)
            let transport: FrameTransport = psk.map {
                .noise(NoiseTransport(psk: $0, name: identity.name, mac: identity.bluetoothAddress))
            } ?? .plain(FrameDecoder())
            var client = Client(fd: fd, id: state.value.nextID, peer: name, transport: transport,
                                machine: ProxySessionMachine(identity: identity))
            state.value.nextID += 1
            client.watch = central.watch(fd) { [self] in readable(fd) }
            state.value.clients[fd] = client
            logger.info("proxy: client \(name) connected (\(state.value.clients.count) now)")
        }
    }

    private func readable(_ fd: Int32) {
        guard state.value.clients[fd] != nil else { return }
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { return }
        guard n > 0 else {
            drop(fd, reason: nil, how: n == 0 ? "closed the connection" : "failed: \(String(cString: strerror(errno)))")
            return
        }
        guard let received = state.value.clients[fd]?.transport.receive(chunk[0..<n]) else { return }
        if !received.reply.isEmpty {
            state.value.clients[fd]?.unsent.append(contentsOf: received.reply)
            write(fd)
        }
        for frame in received.frames {
            guard let actions = state.value.clients[fd]?.machine.handle(frame) else { return }
            perform(actions, fd)
        }
        if let failure = received.failure { drop(fd, reason: failure) }
    }

    private func perform(_ actions: [ProxySessionMachine.Action], _ fd: Int32) {
        for action in actions {
            guard let client = state.value.clients[fd] else { return }
            switch action {
            case .send(let frame):
                if let bytes = state.value.clients[fd]?.transport.encode(frame) {
                    state.value.clients[fd]?.unsent.append(contentsOf: bytes)
                }
                write(fd)
            case .subscribeAdvertisements, .unsubscribeAdvertisements:
                state.value.clients[fd]?.batch = []   // the machine's `subscribed` says which
            case .device(let address, let request):
                logger.debug("proxy: \(client.peer): \(ProxyLinks.describe(address)): \(request)")
                links.handle(request, address: address, client: client.id)
            case .sendScannerState:
                perform([.send(scannerState())], fd)
            case .setScannerMode(let active):
                // BlueZ's discovery has no passive LE scan (only advertisement
                // monitors, experimental in 5.66): the mode stays active, and says so.
                if !active { logger.info("proxy: \(client.peer) asked for a passive scan: BlueZ's discovery scans actively; the mode stays active") }
                perform([.send(scannerState())], fd)
            case .subscribeConnectionsFree:
                perform([.send(ProxySessionMachine.frame(links.freeResponse()))], fd)
            case .releaseConnections:
                links.release(client: client.id)
            case .log(let line):
                logger.debug("proxy: \(client.peer): \(line)")
            case .close(let reason):
                drop(fd, reason: reason)
            }
        }
    }

    /// The scan's state and mode: always active, configured and running alike (`setScannerMode`).
    private func scannerState() -> PlaintextFrame {
        var response = BluetoothScannerStateResponse()
        response.state = state.value.scanner
        (response.mode, response.configuredMode) = (.active, .active)
        return ProxySessionMachine.frame(response)
    }

    /// A new state of the scan, told to the clients subscribed to advertisements (on the loop).
    private func scanner(_ now: BluetoothScannerState) {
        guard state.value.scanner != now else { return }
        state.value.scanner = now
        for (fd, client) in state.value.clients where client.machine.subscribed { perform([.sendScannerState], fd) }
    }

    private func sendBatch(_ fd: Int32) {
        guard let batch = state.value.clients[fd]?.batch, !batch.isEmpty else { return }
        var response = BluetoothLERawAdvertisementsResponse()
        response.advertisements = batch
        state.value.clients[fd]?.batch = []
        if let bytes = state.value.clients[fd]?.transport.encode(ProxySessionMachine.frame(response)) {
            state.value.clients[fd]?.unsent.append(contentsOf: bytes)
        }
        state.value.forwarded += batch.count
        write(fd)
    }

    /// Writes what the socket takes now.
    private func write(_ fd: Int32) {
        guard let unsent = state.value.clients[fd]?.unsent, !unsent.isEmpty else { return }
        let n = unsent.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n < 0 {
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                drop(fd, reason: nil, how: "failed: \(String(cString: strerror(errno)))")
                return
            }
        } else {
            state.value.clients[fd]?.unsent.removeFirst(n)
        }
        if (state.value.clients[fd]?.unsent.count ?? 0) > Self.maxUnsent {
            drop(fd, reason: "it does not read: more than \(Self.maxUnsent) bytes unsent")
        }
    }

    /// Closes a client: `reason` (a protocol error) is logged as a warning, `how` (the peer's own end) at info.
    private func drop(_ fd: Int32, reason: String?, how: String = "disconnected") {
        guard let client = state.value.clients.removeValue(forKey: fd) else { return }
        links.release(client: client.id)   // its connections and notifications (none: nothing)
        if let watch = client.watch { central.unwatch(watch) }
        close(fd)
        if let reason {
            logger.warning("proxy: client \(client.peer) disconnected: \(reason)")
        } else {
            logger.info("proxy: client \(client.peer) \(how) (\(state.value.clients.count) left)")
        }
    }

    private static func describe(_ peer: sockaddr_in) -> String {
        let ip = UInt32(bigEndian: peer.sin_addr.s_addr)
        return "\(ip >> 24).\(ip >> 16 & 0xff).\(ip >> 8 & 0xff).\(ip & 0xff):\(UInt16(bigEndian: peer.sin_port))"
    }
}

/// Why the proxy's server could not start.
package enum ProxyError: Error, CustomStringConvertible {
    /// A socket call failed with this errno.
    case socket(String, Int32)

    package var description: String {
        switch self {
        case .socket(let what, let code): "cannot \(what): \(String(cString: strerror(code)))"
        }
    }
}
