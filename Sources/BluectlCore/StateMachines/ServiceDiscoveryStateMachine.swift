/// Waiting for BlueZ's own GATT discovery (its 5.66 races: `BlueZ566`): bluetoothd
/// discovers the whole database itself and sets `Device1.ServicesResolved`;
/// we wait for it while racing `Connected=false`, the device's removal and a
/// timeout. ServicesResolved can flip true before the service objects are
/// exported (in the lab it usually does: bluetoothd signals it, then
/// exports the database in one burst of InterfacesAdded), so with no service
/// object yet the machine settles: it waits for the objects to appear and
/// then for a short quiet time with no new one, so that the database it
/// reports is whole. Signals can be missing (bluetoothd
/// 5.66 does not always emit them), so while it waits it also asks
/// bluetoothd every `pollInterval`.
package struct ServiceDiscoveryStateMachine: StateMachine, Equatable {
    package enum State: Sendable, Equatable {
        case idle
        case waiting
        /// ServicesResolved is true but no GattService1 object exists yet.
        case settling
        case resolved
        case failed(DiscoveryFailure)
    }

    package enum Event: Sendable, Equatable {
        /// Begin, with `Device1` as it is now and how many service objects the device has.
        case start(connected: Bool, servicesResolved: Bool, serviceObjects: Int)
        case servicesResolvedChanged(Bool, serviceObjects: Int)
        /// A GATT object of the device (service, characteristic or descriptor) appeared.
        case serviceAdded
        case connectedChanged(Bool)
        case deviceRemoved
        /// bluetoothd left the bus (stopped or crashed).
        case bluetoothdStopped
        case settleTimerFired
        case timeout
        /// Time to ask bluetoothd again (`schedulePoll`).
        case pollTimerFired
        /// bluetoothd's answer to `askDevice` (nil: no answer).
        case polled(DeviceStatus?)
    }

    /// What `askDevice` learns.
    package struct DeviceStatus: Sendable, Equatable {
        package var connected: Bool
        package var servicesResolved: Bool
        package var serviceObjects: Int

        package init(connected: Bool, servicesResolved: Bool, serviceObjects: Int) {
            self.connected = connected
            self.servicesResolved = servicesResolved
            self.serviceObjects = serviceObjects
        }
    }

    package enum Action: Sendable, Equatable {
        /// (Re)start the one settle timer: a new start replaces the running one.
        case startSettleTimer(Duration)
        /// Ask bluetoothd for `Device1` (GetAll); answer with `polled`.
        case askDevice
        /// Send `pollTimerFired` after the delay.
        case schedulePoll(after: Duration)
        /// Discovery is complete: read the objects now.
        case done
        case fail(DiscoveryFailure)
        /// An event no transition plans for in this state: changes nothing;
        /// the driver reports it.
        case unplanned(String)
    }

    package private(set) var state: State = .idle
    package let settleTime: Duration
    /// How long no new GATT object must appear before a settling database is whole.
    package let quietTime: Duration
    package let pollInterval: Duration

    package init(settleTime: Duration = BlueZ566.servicesSettleTime, quietTime: Duration = BlueZ566.servicesQuietTime,
                 pollInterval: Duration = BlueZ566.servicesPollInterval) {
        self.settleTime = settleTime
        self.quietTime = quietTime
        self.pollInterval = pollInterval
    }

    package var isFinished: Bool {
        switch state {
        case .resolved, .failed: return true
        default: return false
        }
    }

    package mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.idle, .start(let connected, let resolved, let objects)):
            guard connected else { return fail(.notConnected) }
            guard resolved else {
                state = .waiting
                return [.schedulePoll(after: pollInterval)]
            }
            return resolvedNow(serviceObjects: objects)

        case (.waiting, .pollTimerFired), (.settling, .pollTimerFired):
            return [.askDevice]

        case (.waiting, .polled(let status?)), (.settling, .polled(let status?)):
            guard status.connected else { return fail(.disconnected) }
            if state == .waiting, status.servicesResolved {
                return resolvedFromPoll(serviceObjects: status.serviceObjects)
            }
            return [.schedulePoll(after: pollInterval)]

        case (.waiting, .polled(nil)), (.settling, .polled(nil)):
            return [.schedulePoll(after: pollInterval)]

        case (.waiting, .servicesResolvedChanged(true, let objects)):
            return resolvedNow(serviceObjects: objects)

        case (.settling, .servicesResolvedChanged(false, _)):
            state = .waiting
            return []

        case (.settling, .serviceAdded):
            // more of the burst: wait for it to end
            return [.startSettleTimer(quietTime)]

        case (.settling, .settleTimerFired):
            state = .resolved
            return [.done]

        case (.waiting, .connectedChanged(false)), (.settling, .connectedChanged(false)):
            return fail(.disconnected)

        case (.waiting, .deviceRemoved), (.settling, .deviceRemoved):
            return fail(.deviceRemoved)

        case (.waiting, .bluetoothdStopped), (.settling, .bluetoothdStopped):
            return fail(.bluetoothdStopped)

        case (.waiting, .timeout):
            return fail(.timeout)

        case (.settling, .timeout):
            // Resolved, but nothing exported: report what is there.
            state = .resolved
            return [.done]

        case (.resolved, _), (.failed, _):
            // Documented ignore: finished; later changes are not this wait's.
            return []

        case (.waiting, .servicesResolvedChanged(false, _)), (.settling, .servicesResolvedChanged(true, _)),
             (.waiting, .connectedChanged(true)), (.settling, .connectedChanged(true)),
             (.waiting, .serviceAdded), (.waiting, .settleTimerFired):
            // Documented ignore: no news (a property set to what it was),
            // services appearing before ServicesResolved, or the settle
            // timer of a settling that ServicesResolved=false ended.
            return []

        default:
            return [.unplanned("\(state) + \(event)")]
        }
    }

    private mutating func resolvedNow(serviceObjects: Int) -> [Action] {
        if serviceObjects > 0 {
            state = .resolved
            return [.done]
        }
        state = .settling
        return [.startSettleTimer(settleTime)]
    }

    /// The actions of `polled` when it resolves: done, or the settle timer and polling on.
    private mutating func resolvedFromPoll(serviceObjects: Int) -> [Action] {
        let actions = resolvedNow(serviceObjects: serviceObjects)
        return state == .settling ? actions + [.schedulePoll(after: pollInterval)] : actions
    }

    private mutating func fail(_ failure: DiscoveryFailure) -> [Action] {
        state = .failed(failure)
        return [.fail(failure)]
    }
}

package enum DiscoveryFailure: Sendable, Equatable, CustomStringConvertible {
    case notConnected
    case disconnected
    case deviceRemoved
    case bluetoothdStopped
    case timeout

    package var description: String {
        switch self {
        case .notConnected: return "the device is not connected"
        case .disconnected: return "the device disconnected before its services were resolved"
        case .deviceRemoved: return "the device disappeared from BlueZ before its services were resolved"
        case .bluetoothdStopped: return "bluetoothd stopped before the services were resolved"
        case .timeout: return "services not resolved in time"
        }
    }
}
