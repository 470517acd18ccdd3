import BluectlDBus

/// Keeping one DNS-SD service published through Avahi's D-Bus API
/// (`org.freedesktop.Avahi`), as a pure machine: the daemon's comings and
/// goings, its answers and its signals in, the calls to make out
/// (`MDNSPublication` makes them). The order is Avahi's own client
/// library's (avahi-client's `client-publish-service` example): wait for
/// the server to be running, `EntryGroupNew`, `AddService`, `Commit`; on a
/// name collision take `GetAlternativeServiceName`, `Reset` the group and
/// add the service again; while the server re-registers its host name
/// (state REGISTERING or COLLISION) the group is reset and the service
/// added again once it runs. avahi-daemon leaving the bus takes the group
/// with it: the service is published again when a daemon is back.
///
/// Each attempt has an `epoch`: the calls of an attempt carry it and so do
/// their answers, and an answer from an abandoned attempt (the daemon
/// left, the server re-registered) changes nothing.
package struct AvahiPublicationMachine: StateMachine, Equatable {
    /// avahi-daemon's server states (`AvahiServerState`).
    package enum ServerState {
        package static let running: Int32 = 2
    }

    /// An entry group's states (`AvahiEntryGroupState`).
    package enum GroupState {
        package static let established: Int32 = 2
        package static let collision: Int32 = 3
        package static let failure: Int32 = 4
    }

    /// The error Avahi answers `AddService` with when the name is taken on this host.
    package static let collisionError = "org.freedesktop.Avahi.CollisionError"
    /// Names tried after collisions before giving up (Avahi counts "NAME #2", "NAME #3", …).
    package static let maxRenames = 10

    package enum State: Sendable, Equatable {
        case idle
        /// avahi-daemon is not on the bus: published when it comes.
        case noDaemon
        /// Asked for the server's state, or it is not running yet.
        case waitingForServer
        case creatingGroup
        case adding
        case committing
        /// Committed: the group registers (probes), then is established.
        case committed
        /// After a collision: asking Avahi for the next name.
        case renaming
        /// Avahi refused; nothing more is tried until a daemon comes back.
        case failed
        /// `Free` sent.
        case stopping
        case stopped
    }

    /// The call an answer (or a failure) belongs to.
    package enum Call: String, Sendable, Equatable {
        case getState = "GetState"
        case entryGroupNew = "EntryGroupNew"
        case addService = "AddService"
        case commit = "Commit"
        case alternativeName = "GetAlternativeServiceName"
    }

    package enum Event: Sendable, Equatable {
        /// Started, with whether org.freedesktop.Avahi has an owner now.
        case start(daemonRunning: Bool)
        case daemonAppeared
        case daemonVanished
        /// `GetState`'s answer.
        case serverStateRead(Int32, epoch: UInt32)
        /// The server's `StateChanged` signal.
        case serverStateChanged(Int32)
        case groupCreated(ObjectPath, epoch: UInt32)
        case serviceAdded(epoch: UInt32)
        case committed(epoch: UInt32)
        /// An entry group's `StateChanged` signal (any group: others are ignored).
        case groupStateChanged(ObjectPath, Int32, error: String)
        case alternativeName(String, epoch: UInt32)
        case callFailed(Call, name: String, message: String, epoch: UInt32)
        /// `Free` answered (or failed, or timed out).
        case freed
        case stop
    }

    package enum Action: Sendable, Equatable {
        case getServerState(epoch: UInt32)
        case newGroup(epoch: UInt32)
        /// `Reset` first (a group that held the service before), then `AddService`.
        case addService(group: ObjectPath, name: String, reset: Bool, epoch: UInt32)
        case commit(group: ObjectPath, epoch: UInt32)
        case alternativeName(of: String, epoch: UInt32)
        case free(ObjectPath)
        case report(MDNSPublicationEvent)
        /// The end: let go of the subscriptions.
        case finish
    }

    package private(set) var state: State = .idle
    /// The name published (or being published): the caller's, or Avahi's alternative after a collision.
    package private(set) var name: String
    package private(set) var group: ObjectPath?
    package private(set) var epoch: UInt32 = 0
    /// Whether the group has held the service (a re-add resets it first).
    private var groupUsed = false
    private var renames = 0

    package init(name: String) {
        self.name = name
    }

    package var isFinished: Bool { state == .stopped }

    package mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.stopped, _):
            return []
        case (.stopping, .freed):
            state = .stopped
            return [.finish]
        case (.stopping, _):
            return []
        case (_, .stop):
            guard let group else {
                state = .stopped
                return [.finish]
            }
            state = .stopping
            self.group = nil
            return [.free(group)]
        case (.idle, .start(let running)):
            return running ? askServer() : waitForDaemon(.daemonNotRunning)
        case (.idle, _):
            return []
        case (.noDaemon, .daemonAppeared):
            return askServer()
        case (.noDaemon, _):
            return []
        case (_, .daemonVanished):
            return waitForDaemon(.daemonLeft)
        case (_, .daemonAppeared):
            return []   // already followed (a new owner without the old one leaving first)
        case (_, .serverStateRead(let server, let epoch)) where epoch == self.epoch:
            return serverState(server)
        case (_, .serverStateChanged(let server)):
            return serverState(server)
        case (.creatingGroup, .groupCreated(let path, let epoch)) where epoch == self.epoch:
            group = path
            return add(to: path)
        case (.adding, .serviceAdded(let epoch)) where epoch == self.epoch:
            guard let group else { return [] }   // (always there while adding)
            state = .committing
            return [.commit(group: group, epoch: epoch)]
        case (.committing, .committed(let epoch)) where epoch == self.epoch:
            state = .committed
            return []
        case (.committing, .groupStateChanged(let path, let groupState, let error)),
             (.committed, .groupStateChanged(let path, let groupState, let error)):
            // (REGISTERING is signalled before Commit's answer: avahi-daemon commits, then answers.)
            return path == group ? self.groupState(groupState, error: error) : []
        case (.renaming, .alternativeName(let next, let epoch)) where epoch == self.epoch:
            guard let group else { return [] }   // (always there while renaming)
            let previous = name
            name = next
            return [.report(.renamed(from: previous, to: next))] + add(to: group)
        case (_, .callFailed(.addService, Self.collisionError, _, let epoch)) where epoch == self.epoch && state == .adding:
            return collided()
        case (_, .callFailed(let call, let errorName, let message, let epoch)) where epoch == self.epoch:
            state = .failed
            return [.report(.failed("\(call.rawValue): " + (message.isEmpty ? errorName : "\(errorName): \(message)")))]
        default:
            return []   // an answer from an abandoned attempt, another group's signal
        }
    }

    private mutating func askServer() -> [Action] {
        epoch &+= 1
        state = .waitingForServer
        return [.getServerState(epoch: epoch)]
    }

    /// The daemon is gone: so is its group.
    private mutating func waitForDaemon(_ why: MDNSPublicationEvent) -> [Action] {
        epoch &+= 1
        state = .noDaemon
        group = nil
        groupUsed = false
        return [.report(why)]
    }

    private mutating func serverState(_ server: Int32) -> [Action] {
        switch state {
        case .waitingForServer where server == ServerState.running:
            if let group { return add(to: group) }
            state = .creatingGroup
            return [.newGroup(epoch: epoch)]
        case .creatingGroup, .adding, .committing, .committed, .renaming:
            // (A `where` after these patterns would bind to `.renaming` alone.)
            // RUNNING again changes nothing: the StateChanged signal and
            // GetState's answer both say it when the daemon has just started.
            guard server != ServerState.running else { return [] }
            // The host name is being registered again: the service goes
            // (reset with the next add) and comes back once the server runs.
            epoch &+= 1
            state = .waitingForServer
            return []
        default:
            return []
        }
    }

    private mutating func add(to group: ObjectPath) -> [Action] {
        state = .adding
        let reset = groupUsed
        groupUsed = true
        return [.addService(group: group, name: name, reset: reset, epoch: epoch)]
    }

    private mutating func groupState(_ groupState: Int32, error: String) -> [Action] {
        switch groupState {
        case GroupState.established:
            renames = 0
            return [.report(.published(name: name))]
        case GroupState.collision:
            return collided()
        case GroupState.failure:
            state = .failed
            return [.report(.failed("the entry group failed" + (error.isEmpty ? "" : ": \(error)")))]
        default:
            return []   // uncommitted, registering
        }
    }

    private mutating func collided() -> [Action] {
        renames += 1
        guard renames <= Self.maxRenames else {
            state = .failed
            return [.report(.failed("\(Self.maxRenames) names after \"\(name)\" are taken on the network too"))]
        }
        state = .renaming
        return [.alternativeName(of: name, epoch: epoch)]
    }
}

/// What happens to a published service (`MDNSPublication`'s reports).
package enum MDNSPublicationEvent: Sendable, Equatable {
    /// Avahi announced the service under `name` (and answers for it).
    case published(name: String)
    /// Another service on the network has `from`: published as `to` instead.
    case renamed(from: String, to: String)
    /// avahi-daemon is not on the system bus (published if it comes).
    case daemonNotRunning
    /// avahi-daemon left the system bus (published again when it is back).
    case daemonLeft
    /// Avahi refused (the reason in its words); tried again only after a daemon restart.
    case failed(String)
}
