import BluectlCore

/// The one pairing agent of the proxy's pairings, however many run at once.
///
/// bluetoothd keeps one agent per bus connection (a second `RegisterAgent`
/// from the same connection fails `AlreadyExists`), and `Device1.Pair` asks
/// the caller's agent. So pairings through the proxy share an agent: the
/// first to start registers it, each `allow`s its device, and the last to
/// end unregisters it (none stays registered while nothing pairs, so a
/// bluetoothd restarted meanwhile gets a fresh registration). Registering
/// and unregistering follow one another (`teardown` is awaited first): the
/// agent's object path is the same each time.
actor ProxyPairing {
    private let central: CentralManager
    /// The registration of the agent in use (done or under way).
    private var agent: Task<PairingAgent, any Error>?
    /// Pairings using `agent`.
    private var users = 0
    /// The last unregistration, awaited before the next registration.
    private var teardown: Task<Void, Never>?
    /// The proxy is stopping: no more pairings.
    private var closed = false

    init(central: CentralManager) {
        self.central = central
    }

    /// Runs `body` (the pairing of `peripheral`) with the agent registered and
    /// answering for `peripheral`.
    func pairing<T: Sendable>(_ peripheral: Peripheral, _ body: @Sendable () async throws -> T) async throws -> T {
        let registration = try await acquire(peripheral)
        do {
            let result = try await body()
            release(registration)
            return result
        } catch {
            release(registration)
            throw error
        }
    }

    /// Unregisters the agent, whatever still pairs (the proxy stopping), and
    /// waits until bluetoothd has been told.
    func close() async {
        closed = true
        if agent != nil { unregister() }
        await teardown?.value
    }

    /// The registration `peripheral`'s pairing uses, done, with `peripheral` allowed.
    private func acquire(_ peripheral: Peripheral) async throws -> Task<PairingAgent, any Error> {
        guard !closed else { throw BluetoothError.cancelled("pairing: the proxy is stopping") }
        users += 1
        let registration: Task<PairingAgent, any Error>
        if let agent {
            registration = agent
        } else {
            let previous = teardown
            // Just works: the proxy has no one to show or type a passkey.
            registration = Task { [central] in
                await previous?.value
                return try await PairingAgent.register(central: central, for: [peripheral], capability: .noInputNoOutput)
            }
            agent = registration
        }
        do {
            try await registration.value.allow(peripheral)
        } catch {
            // Every pairing waiting on this registration fails with it.
            if agent == registration { (agent, users) = (nil, 0) }
            throw error
        }
        guard agent == registration else { throw BluetoothError.cancelled("pairing: the proxy is stopping") }
        return registration
    }

    /// One pairing on `registration` ended (if `close` unregistered it meanwhile, nothing to do).
    private func release(_ registration: Task<PairingAgent, any Error>) {
        guard agent == registration else { return }
        users -= 1
        if users == 0 { unregister() }
    }

    private func unregister() {
        guard let registration = agent else { return }
        agent = nil
        users = 0
        let previous = teardown
        teardown = Task {
            await previous?.value
            if let registered = try? await registration.value { await registered.unregister() }
        }
    }
}
