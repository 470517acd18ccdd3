import BluectlDBus
import Testing
@testable import BluectlCore

/// Publishing through Avahi: the calls in Avahi's order, collisions, the
/// server re-registering, avahi-daemon coming and going, answers from an
/// abandoned attempt. (The bus tier runs it against a real avahi-daemon:
/// Tests/BusTierTests/ProxyMDNSTests.swift.)
@Suite struct AvahiPublicationMachineTests {
    typealias M = AvahiPublicationMachine
    let group = ObjectPath(verified: "/Client1/EntryGroup1")
    let other = ObjectPath(verified: "/Client1/EntryGroup2")
    let running = M.ServerState.running, registering: Int32 = 1

    /// Started with the daemon running, up to the group created and the service added.
    func added(_ name: String = "attic") -> M {
        var m = M(name: name)
        #expect(m.handle(.start(daemonRunning: true)) == [.getServerState(epoch: 1)])
        #expect(m.handle(.serverStateRead(running, epoch: 1)) == [.newGroup(epoch: 1)])
        #expect(m.handle(.groupCreated(group, epoch: 1)) == [.addService(group: group, name: name, reset: false, epoch: 1)])
        return m
    }

    /// … then committed and established.
    func established(_ name: String = "attic") -> M {
        var m = added(name)
        #expect(m.handle(.serviceAdded(epoch: 1)) == [.commit(group: group, epoch: 1)])
        #expect(m.handle(.groupStateChanged(group, 1, error: "")) == [], "REGISTERING comes before Commit's answer")
        #expect(m.handle(.committed(epoch: 1)) == [])
        #expect(m.handle(.groupStateChanged(group, M.GroupState.established, error: "")) == [.report(.published(name: name))])
        #expect(m.state == .committed)
        return m
    }

    @Test func publishesInAvahisOrderAndFreesTheGroupAtTheEnd() {
        var m = established()
        #expect(m.handle(.groupStateChanged(other, M.GroupState.collision, error: "")) == [], "another group's signal")
        #expect(m.handle(.stop) == [.free(group)])
        #expect(m.handle(.groupStateChanged(group, M.GroupState.collision, error: "")) == [], "nothing but Free's answer counts now")
        #expect(!m.isFinished)
        #expect(m.handle(.freed) == [.finish])
        #expect(m.isFinished)
        #expect(m.handle(.daemonAppeared) == [])
    }

    @Test func aServerNotRunningYetIsWaitedFor() {
        var m = M(name: "attic")
        _ = m.handle(.start(daemonRunning: true))
        #expect(m.handle(.serverStateRead(registering, epoch: 1)) == [], "the daemon is still registering its host name")
        #expect(m.state == .waitingForServer)
        #expect(m.handle(.serverStateChanged(running)) == [.newGroup(epoch: 1)])
    }

    @Test func noDaemonIsReportedOnceAndThePublicationWaitsForIt() {
        var m = M(name: "attic")
        #expect(m.handle(.start(daemonRunning: false)) == [.report(.daemonNotRunning)])
        #expect(m.handle(.daemonVanished) == [])
        #expect(m.handle(.serverStateChanged(running)) == [], "nothing to ask before a daemon is there")
        #expect(m.handle(.daemonAppeared) == [.getServerState(epoch: 2)])
        #expect(m.handle(.serverStateRead(running, epoch: 2)) == [.newGroup(epoch: 2)])
        // stopping before any group exists ends at once
        #expect(m.handle(.stop) == [.finish])
        #expect(m.isFinished)
    }

    @Test func theDaemonRestartingPublishesAgainInANewGroup() {
        var m = established()
        #expect(m.handle(.daemonVanished) == [.report(.daemonLeft)])
        #expect(m.group == nil, "the group went with the daemon")
        #expect(m.handle(.committed(epoch: 1)) == [], "a late answer from the old daemon")
        #expect(m.handle(.daemonAppeared) == [.getServerState(epoch: 3)])
        #expect(m.handle(.serverStateRead(running, epoch: 3)) == [.newGroup(epoch: 3)])
        #expect(m.handle(.groupCreated(other, epoch: 3)) == [.addService(group: other, name: "attic", reset: false, epoch: 3)])
        #expect(m.handle(.stop) == [.free(other)])
    }

    @Test func aCollisionTakesAvahisAlternativeNameInTheSameGroup() {
        var m = established()
        #expect(m.handle(.groupStateChanged(group, M.GroupState.collision, error: "")) == [.alternativeName(of: "attic", epoch: 1)])
        #expect(m.handle(.alternativeName("attic #2", epoch: 1))
                == [.report(.renamed(from: "attic", to: "attic #2")), .addService(group: group, name: "attic #2", reset: true, epoch: 1)])
        #expect(m.handle(.serviceAdded(epoch: 1)) == [.commit(group: group, epoch: 1)])
        #expect(m.handle(.committed(epoch: 1)) == [])
        #expect(m.handle(.groupStateChanged(group, M.GroupState.established, error: "")) == [.report(.published(name: "attic #2"))])
        #expect(m.name == "attic #2")
    }

    @Test func aNameTakenOnThisHostIsALocalCollision() {
        var m = added()
        #expect(m.handle(.callFailed(.addService, name: M.collisionError, message: "Local name collision", epoch: 1))
                == [.alternativeName(of: "attic", epoch: 1)])
        #expect(m.handle(.alternativeName("attic #2", epoch: 1))
                == [.report(.renamed(from: "attic", to: "attic #2")), .addService(group: group, name: "attic #2", reset: true, epoch: 1)])
    }

    @Test func collisionsWithoutEndGiveUp() {
        var m = added("n")
        var actions: [M.Action] = []
        for attempt in 1...M.maxRenames {
            actions = m.handle(.callFailed(.addService, name: M.collisionError, message: "", epoch: 1))
            #expect(actions == [.alternativeName(of: m.name, epoch: 1)])
            _ = m.handle(.alternativeName("n #\(attempt + 1)", epoch: 1))
        }
        actions = m.handle(.callFailed(.addService, name: M.collisionError, message: "", epoch: 1))
        #expect(actions == [.report(.failed("10 names after \"n #11\" are taken on the network too"))])
        #expect(m.state == .failed)
        #expect(m.handle(.stop) == [.free(group)], "the group is freed all the same")
    }

    @Test func runningSaidTwiceChangesNothing() {
        // The daemon just started: its StateChanged(RUNNING) signal came before GetState's answer.
        var m = M(name: "attic")
        #expect(m.handle(.start(daemonRunning: true)) == [.getServerState(epoch: 1)])
        #expect(m.handle(.serverStateChanged(running)) == [.newGroup(epoch: 1)])
        #expect(m.handle(.serverStateRead(running, epoch: 1)) == [], "the group is being made")
        #expect(m.state == .creatingGroup && m.epoch == 1)
        #expect(m.handle(.groupCreated(group, epoch: 1)) == [.addService(group: group, name: "attic", reset: false, epoch: 1)],
                "the answer is still awaited, not dropped as stale")
        var done = established()
        #expect(done.handle(.serverStateChanged(running)) == [])
        #expect(done.state == .committed && done.epoch == 1)
    }

    @Test func theServerReRegisteringItsHostNameAddsTheServiceAgain() {
        var m = established()
        #expect(m.handle(.serverStateChanged(registering)) == [])
        #expect(m.state == .waitingForServer)
        #expect(m.handle(.groupStateChanged(group, M.GroupState.established, error: "")) == [], "the old registration")
        #expect(m.handle(.serverStateChanged(running)) == [.addService(group: group, name: "attic", reset: true, epoch: 2)])
        #expect(m.handle(.serviceAdded(epoch: 1)) == [], "an answer of the abandoned attempt")
        #expect(m.handle(.serviceAdded(epoch: 2)) == [.commit(group: group, epoch: 2)])
    }

    @Test func avahiRefusingIsReportedInItsWordsAndEndsTheAttempt() {
        var m = added()
        #expect(m.handle(.callFailed(.addService, name: "org.freedesktop.Avahi.NotPermittedError", message: "Not permitted", epoch: 1))
                == [.report(.failed("AddService: org.freedesktop.Avahi.NotPermittedError: Not permitted"))])
        #expect(m.state == .failed)
        #expect(m.handle(.serverStateChanged(running)) == [], "nothing is tried again by the same daemon")
        #expect(m.handle(.daemonVanished) == [.report(.daemonLeft)])
        #expect(m.handle(.daemonAppeared) == [.getServerState(epoch: 3)], "a new daemon is tried")

        var failed = M(name: "attic")
        _ = failed.handle(.start(daemonRunning: true))
        #expect(failed.handle(.serverStateRead(running, epoch: 1)) == [.newGroup(epoch: 1)])
        #expect(failed.handle(.groupStateChanged(group, M.GroupState.failure, error: "")) == [], "not its group (none yet)")
        #expect(failed.handle(.groupCreated(group, epoch: 1)).count == 1)
        _ = failed.handle(.serviceAdded(epoch: 1))
        #expect(failed.handle(.groupStateChanged(group, M.GroupState.failure, error: "Not supported"))
                == [.report(.failed("the entry group failed: Not supported"))])
    }

    @Test func stopBeforeTheStartEndsAtOnce() {
        var m = M(name: "attic")
        #expect(m.handle(.stop) == [.finish])
        #expect(m.handle(.start(daemonRunning: true)) == [], "a start after the end does nothing")
    }
}
