import BluectlDBus

/// A DNS-SD service to announce on the local network over mDNS (`MDNSPublication`).
package struct MDNSService: Sendable, Equatable {
    /// The instance name ("attic-proxy"; at most 63 bytes, DNS-SD's bound).
    package var name: String
    /// The service type, "_esphomelib._tcp".
    package var type: String
    /// The TXT record's strings, "key=value", in order.
    package var txt: [String]

    package init(name: String, type: String, txt: [String]) {
        self.name = name
        self.type = type
        self.txt = txt
    }
}

/// One service announced over mDNS by the host's avahi-daemon, through its
/// D-Bus API on the system bus (the central's connection: no second mDNS
/// stack in the process, and Avahi answers for the host as it does for its
/// other services). `AvahiPublicationMachine` decides; this performs its
/// calls on the central's event loop and hands it Avahi's answers and
/// signals there, so its state is a `LoopBound` and needs no lock.
///
/// `publish(port:)` starts it from any thread, without waiting; what
/// becomes of it is told to `onEvent` (on the loop: it must return quickly).
/// The service is published over IPv4 only (`AVAHI_PROTO_INET`): the
/// proxy listens on IPv4, and a client resolving it over IPv6 would get an
/// address nothing listens on. `withdraw()` frees Avahi's entry group
/// (Avahi would also drop it when this process leaves the bus).
package final class MDNSPublication: Sendable {
    /// Avahi's bus name and interfaces.
    package static let avahi = "org.freedesktop.Avahi"
    static let serverInterface = "org.freedesktop.Avahi.Server"
    static let groupInterface = "org.freedesktop.Avahi.EntryGroup"
    /// AVAHI_IF_UNSPEC, AVAHI_PROTO_INET.
    static let anyInterface: Int32 = -1, ipv4: Int32 = 0

    private struct Running {
        var machine: AvahiPublicationMachine
        var port: UInt16 = 0
        var signals: DBusConnection.SubscriptionToken?
        var owners: DBusConnection.SubscriptionToken?
        var finished = false
    }

    private let connection: DBusConnection
    private let service: MDNSService
    private let callTimeout: Duration
    private let onEvent: @Sendable (MDNSPublicationEvent) -> Void
    private let running: LoopBound<Running>
    private let ended = HandOff<Void>()

    /// Announces `service` over `central`'s bus connection once `publish(port:)` is called.
    package init(central: CentralManager, service: MDNSService, callTimeout: Duration = .seconds(5),
                 onEvent: @escaping @Sendable (MDNSPublicationEvent) -> Void) {
        connection = central.connection
        self.service = service
        self.callTimeout = callTimeout
        self.onEvent = onEvent
        running = LoopBound(Running(machine: AvahiPublicationMachine(name: service.name)), loop: central.connection.loop)
    }

    /// Starts announcing the service on `port`: follows avahi-daemon's owner
    /// and its signals, then publishes (at once when it runs, else when it comes).
    package func publish(port: UInt16) {
        Task { [self] in
            await connection.loop.submit { [self] in running.value.port = port }
            let owners = connection.onOwnerChange { [self] name, owner in
                guard name == Self.avahi else { return }
                send(owner == nil ? .daemonVanished : .daemonAppeared)
            }
            let signals: DBusConnection.SubscriptionToken
            do {
                // The server's StateChanged and every entry group's (the
                // machine keeps its own group's); only from Avahi's owner,
                // which this tracks from now on.
                signals = try await connection.subscribe(SignalFilter(sender: Self.avahi, member: "StateChanged"),
                                                         timeout: callTimeout) { [self] message in signal(message) }
            } catch {
                connection.dropSubscription(owners)
                connection.loop.execute { [self] in
                    guard !running.value.finished else { return }   // withdrawn meanwhile
                    onEvent(.failed("cannot follow \(Self.avahi) on the system bus: \(error)"))
                    send(.stop)
                }
                return
            }
            connection.loop.execute { [self] in
                guard !running.value.finished else {
                    connection.dropSubscription(owners)
                    connection.dropSubscription(signals)
                    return
                }
                running.value.owners = owners
                running.value.signals = signals
                send(.start(daemonRunning: connection.owner(of: Self.avahi) != nil))
            }
        }
    }

    /// Withdraws the service (Avahi's `Free`) and returns once Avahi
    /// answered, or at once when nothing was published.
    package func withdraw() async {
        connection.loop.execute { [self] in send(.stop) }
        try? await ended.wait()
    }

    // MARK: - On the loop

    private func send(_ event: AvahiPublicationMachine.Event) {
        guard !running.value.finished else { return }
        for action in running.value.machine.handle(event) { perform(action) }
    }

    private func signal(_ message: DBusMessage) {
        let arguments = message.arguments
        guard case .int32(let state)? = arguments.first, let path = message.path else { return }
        switch message.interface {
        case Self.serverInterface? where path == .root:
            send(.serverStateChanged(state))
        case Self.groupInterface?:
            send(.groupStateChanged(path, state, error: arguments.count > 1 ? arguments[1].string ?? "" : ""))
        default:
            break
        }
    }

    private func perform(_ action: AvahiPublicationMachine.Action) {
        switch action {
        case .getServerState(let epoch):
            call(.getState, .root, Self.serverInterface, epoch: epoch) { reply in
                guard case .int32(let state)? = reply.first else { return nil }
                return .serverStateRead(state, epoch: epoch)
            }
        case .newGroup(let epoch):
            call(.entryGroupNew, .root, Self.serverInterface, epoch: epoch) { reply in
                reply.first?.objectPath.map { .groupCreated($0, epoch: epoch) }
            }
        case .addService(let group, let name, let reset, let epoch):
            if reset {
                // In order before AddService (one connection, one destination); its
                // answer tells nothing AddService's does not.
                connection.call(.methodCall(destination: Self.avahi, path: group, interface: Self.groupInterface, member: "Reset"),
                                timeout: callTimeout) { _ in }
            }
            let arguments: [DBusValue] = [
                .int32(Self.anyInterface), .int32(Self.ipv4), .uint32(0), .string(name), .string(service.type),
                .string(""), .string(""), .uint16(running.value.port),
                .array(element: DBusSignature(verified: "ay"), service.txt.map { .bytes(Array($0.utf8)) }),
            ]
            call(.addService, group, Self.groupInterface, arguments, epoch: epoch) { _ in .serviceAdded(epoch: epoch) }
        case .commit(let group, let epoch):
            call(.commit, group, Self.groupInterface, epoch: epoch) { _ in .committed(epoch: epoch) }
        case .alternativeName(let name, let epoch):
            call(.alternativeName, .root, Self.serverInterface, [.string(name)], epoch: epoch) { reply in
                reply.first?.string.map { .alternativeName($0, epoch: epoch) }
            }
        case .free(let group):
            connection.call(.methodCall(destination: Self.avahi, path: group, interface: Self.groupInterface, member: "Free"),
                            timeout: callTimeout) { [self] _ in send(.freed) }
        case .report(let event):
            onEvent(event)
        case .finish:
            running.value.finished = true
            if let token = running.value.signals { connection.dropSubscription(token) }
            if let token = running.value.owners { connection.dropSubscription(token) }
            ended.settle(.success(()))
        }
    }

    /// Calls `call` on Avahi and hands the machine `answer`'s event for the
    /// reply's arguments (a reply of the wrong shape, or an error, as `callFailed`).
    private func call(_ call: AvahiPublicationMachine.Call, _ path: ObjectPath, _ interface: String,
                      _ arguments: [DBusValue] = [], epoch: UInt32,
                      answer: @escaping @Sendable ([DBusValue]) -> AvahiPublicationMachine.Event?) {
        let message = DBusMessage.methodCall(destination: Self.avahi, path: path, interface: interface,
                                             member: call.rawValue, arguments: arguments)
        connection.call(message, timeout: callTimeout) { [self] result in
            switch result {
            case .success(let reply):
                send(answer(reply.arguments)
                     ?? .callFailed(call, name: "unexpected reply", message: "signature \"\(reply.signature)\"", epoch: epoch))
            case .failure(.remote(let name, let message)):
                send(.callFailed(call, name: name, message: message, epoch: epoch))
            case .failure(let error):
                send(.callFailed(call, name: "\(error)", message: "", epoch: epoch))
            }
        }
    }
}
