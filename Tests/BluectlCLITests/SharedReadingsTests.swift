import BluectlGateway
import Testing
@testable import BluectlCLI

/// Several gateways on one shared state topic (`SharedReadings`, docs/gateway.md, "Several
/// gateways"): who publishes a reading with a packet id, when, and who does not.
@Suite("gateway: shared state topics fed by several gateways")
struct SharedReadingsTests {
    private let address = "A4:C1:38:00:00:27"
    private let start = ContinuousClock.now

    /// A record as the gateways publish it, with packet id `id`.
    private func record(_ id: Int, gateway: String = "other") -> [UInt8] {
        Array(#"{"address":"\#(address)","sensor":{"format":"bthome","encrypted":false,"packet_id":\#(id),"temperature_c":20.0},"gateway":"\#(gateway)"}"#.utf8)
    }

    /// Connected and settled at `start + 1 s`, knowing `others`' statuses.
    private func settled(_ me: String, others: [String: String] = [:]) -> SharedReadings {
        var shared = SharedReadings(me: me)
        shared.connected(now: start)
        for (gateway, status) in others { _ = shared.status(of: gateway, Array(status.utf8)) }
        return shared
    }

    @Test("First in rank: published at once, and once; an id another gateway published is not")
    func firstInRank() {
        var shared = settled("alpha", others: ["beta": "online"])
        let now = start + .seconds(2)
        #expect(shared.rank == 0)
        let outcome1 = shared.heard(address, packetID: 1, payload: record(1), now: now)
        #expect(outcome1 == [record(1)])
        let outcome2 = shared.heard(address, packetID: 1, payload: record(1), now: now)
        #expect(outcome2.isEmpty, "the same id again")
        shared.arrived(record(2, gateway: "beta"), now: now)
        let outcome3 = shared.heard(address, packetID: 2, payload: record(2), now: now)
        #expect(outcome3.isEmpty, "beta published it")
        let outcome4 = shared.heard(address, packetID: nil, payload: [1], now: now)
        #expect(outcome4 == [[1]], "no id: always")
    }

    @Test("Second in rank: held one hold, published unless the first published it meanwhile")
    func secondInRank() {
        var shared = settled("beta", others: ["alpha": "online", "gamma": "offline"])
        let now = start + .seconds(2)
        #expect(shared.rank == 1 && shared.availability == ["alpha", "beta", "gamma"])
        let outcome5 = shared.heard(address, packetID: 7, payload: record(7), now: now)
        #expect(outcome5.isEmpty)
        let outcome6 = shared.heard(address, packetID: 8, payload: record(8), now: now)
        #expect(outcome6.isEmpty)
        let outcome7 = shared.due(now: now + .milliseconds(900))
        #expect(outcome7.isEmpty)
        shared.arrived(record(7, gateway: "alpha"), now: now)
        let due = shared.due(now: now + .seconds(1))
        #expect(due.map(\.payload) == [record(8)] && due.map(\.address) == [address], "7 came from alpha; 8 did not")
        let outcome8 = shared.due(now: now + .seconds(5))
        #expect(outcome8.isEmpty, "each once")
        // alpha gone offline: beta first.
        _ = shared.status(of: "alpha", Array("offline".utf8))
        #expect(shared.rank == 0)
        let outcome9 = shared.heard(address, packetID: 9, payload: record(9), now: now)
        #expect(outcome9 == [record(9)])
    }

    @Test("Before settling, the newest reading per device waits, then takes its rank's turn")
    func settling() {
        var shared = SharedReadings(me: "beta")
        let outcome10 = shared.heard(address, packetID: 1, payload: record(1), now: start)
        #expect(outcome10.isEmpty)
        let outcome11 = shared.heard(address, packetID: 2, payload: record(2), now: start)
        #expect(outcome11.isEmpty)
        shared.connected(now: start)
        _ = shared.status(of: "alpha", Array("online".utf8))
        let outcome12 = shared.due(now: start + .seconds(1))
        #expect(outcome12.isEmpty, "ranked now: second, one hold more")
        let outcome13 = shared.due(now: start + .seconds(2))
        #expect(outcome13.map(\.payload) == [record(2)], "only the newest")
    }

    @Test("While settling after a connection every reading waits, in order (seen in the lab: 0 and 1 heard in the settling second, 0 on neither gateway's shared topic)")
    func everyReadingWhileSettling() {
        var alpha = settled("alpha", others: ["beta": "online"])
        let heard0 = alpha.heard(address, packetID: 0, payload: record(0), now: start + .milliseconds(600))
        let heard1 = alpha.heard(address, packetID: 1, payload: record(1), now: start + .milliseconds(800))
        #expect(heard0.isEmpty && heard1.isEmpty, "settling")
        let first = alpha.due(now: start + .seconds(1))
        #expect(first.map(\.payload) == [record(0), record(1)], "first in rank: both, in order")
        var beta = settled("beta", others: ["alpha": "online"])
        let held0 = beta.heard(address, packetID: 0, payload: record(0), now: start + .milliseconds(600))
        let held1 = beta.heard(address, packetID: 1, payload: record(1), now: start + .milliseconds(800))
        #expect(held0.isEmpty && held1.isEmpty, "settling")
        let ranked = beta.due(now: start + .seconds(1))
        #expect(ranked.isEmpty, "ranked now: second, one hold more")
        let second = beta.due(now: start + .seconds(2))
        #expect(second.map(\.payload) == [record(0), record(1)], "alpha published neither: both, in order")
    }

    @Test("A reading published at once takes the device's older ones still held with it, first (seen in the lab: 1 then 0)")
    func newerFirst() {
        var shared = SharedReadings(me: "alpha")
        let early = shared.heard(address, packetID: 0, payload: record(0), now: start)
        #expect(early.isEmpty, "before the first connection: held")
        shared.connected(now: start)
        let later = shared.heard(address, packetID: 1, payload: record(1), now: start + .seconds(1))
        #expect(later == [record(0), record(1)], "0 first, then 1")
        let due = shared.due(now: start + .seconds(3))
        #expect(due.isEmpty, "each once: \(due.map(\.payload))")
    }

    @Test("Another gateway's newer reading drops the older ones held here (seen in the lab: 0 published after 1 and 2)")
    func olderHeldDropped() {
        var shared = settled("beta", others: ["alpha": "online"])
        let now = start + .seconds(2)
        #expect(shared.heard(address, packetID: 0, payload: record(0), now: now).isEmpty)
        #expect(shared.heard(address, packetID: 1, payload: record(1), now: now).isEmpty)
        #expect(shared.heard(address, packetID: 2, payload: record(2), now: now).isEmpty)
        shared.arrived(record(1, gateway: "alpha"), now: now)
        let due = shared.due(now: now + .seconds(1))
        #expect(due.map(\.payload) == [record(2)], "0 is older than alpha's 1; 2 is newer: \(due.map(\.payload))")
        // a reading this gateway did not hear arrives: everything held before it is older
        #expect(shared.heard(address, packetID: 3, payload: record(3), now: now).isEmpty)
        shared.arrived(record(4, gateway: "alpha"), now: now)
        #expect(shared.due(now: now + .seconds(5)).isEmpty)
    }

    @Test("A gateway's own published reading coming back changes nothing: the next one held is still published")
    func ownReadingBack() {
        var shared = settled("beta", others: ["alpha": "online"])
        let now = start + .seconds(2)
        #expect(shared.heard(address, packetID: 7, payload: record(7), now: now).isEmpty)
        #expect(shared.heard(address, packetID: 8, payload: record(8), now: now + .milliseconds(500)).isEmpty)
        #expect(shared.due(now: now + .seconds(1)).map(\.payload) == [record(7)])
        shared.arrived(record(7, gateway: "beta"), now: now + .milliseconds(1100))
        #expect(shared.due(now: now + .milliseconds(1500)).map(\.payload) == [record(8)])
    }

    @Test("A packet id that is no integer (1e300, 1.5) is ignored, not a trap")
    func badPacketID() {
        var shared = settled("alpha")
        for id in ["1e300", "1.5", "-1e19"] {
            shared.arrived(Array(#"{"address": "\#(address)", "sensor": {"packet_id": \#(id)}}"#.utf8), now: start + .seconds(2))
        }
        #expect(shared.heard(address, packetID: 1, payload: record(1), now: start + .seconds(2)) == [record(1)])
    }

    @Test("After a connection (again), readings held before it and what the broker brings back wait for the settling")
    func heldAcrossConnection() {
        var shared = SharedReadings(me: "alpha")
        #expect(shared.heard(address, packetID: 5, payload: record(5), now: start).isEmpty)
        shared.connected(now: start + .seconds(5))
        #expect(shared.due(now: start + .milliseconds(5200)).isEmpty, "still settling")
        // the retained record (id 4, older) arrives while settling: noted, nothing held dropped
        shared.arrived(record(4, gateway: "beta"), now: start + .milliseconds(5300))
        #expect(shared.due(now: start + .seconds(6)).map(\.payload) == [record(5)], "ranked once settled: first, at once")
    }

    @Test("Statuses: a new gateway or a cleared one changes the availability; a status again does not")
    func statuses() {
        var shared = SharedReadings(me: "alpha")
        let outcome14 = shared.status(of: "beta", Array("online".utf8))
        #expect(outcome14)
        let outcome15 = shared.status(of: "beta", Array("offline".utf8))
        #expect(!outcome15)
        let outcome16 = shared.status(of: "alpha", Array("offline".utf8))
        #expect(!outcome16, "its own status changes nothing")
        let outcome17 = shared.status(of: "beta", [])
        #expect(outcome17)
        #expect(shared.availability == ["alpha"])
    }

    @Test("Packet ids wrap: only the last 16 count as seen")
    func wrap() {
        var shared = settled("alpha")
        let now = start + .seconds(2)
        for id in 0..<20 { let outcome18 = shared.heard(address, packetID: id, payload: record(id), now: now); #expect(outcome18 == [record(id)]) }
        let outcome19 = shared.heard(address, packetID: 3, payload: record(3), now: now)
        #expect(outcome19 == [record(3)], "3 is 17 readings back")
        let outcome20 = shared.heard(address, packetID: 19, payload: record(19), now: now)
        #expect(outcome20.isEmpty)
    }

    @Test("Topics: the shared device topic and the status filter")
    func topics() {
        #expect(GatewayTopics.sharedDevice(address) == "bluectl/sensors/\(address)")
        #expect(GatewayTopics.isSharedDevice("bluectl/sensors/\(address)"))
        #expect(!GatewayTopics.isSharedDevice("bluectl/hall/devices/\(address)"))
        #expect(GatewayTopics.statusGateway("bluectl/hall/status") == "hall")
        #expect(GatewayTopics.statusGateway("bluectl/hall/events") == nil)
    }
}
