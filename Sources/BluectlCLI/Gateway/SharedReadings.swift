import BluectlCore
import BluectlGateway

/// Several gateways feeding one Home Assistant device (`--home-assistant`, docs/gateway.md,
/// "Several gateways"), a pure value the gateway's owner task keeps.
///
/// Every gateway publishes a device's decoded readings on the shared topic
/// (`GatewayTopics.sharedDevice`) and reads that topic back; it knows the other gateways by
/// their retained status topics (`GatewayTopics.statuses`). A reading with a packet id (BTHome's
/// packet id, Xiaomi's frame counter, pvvx's counter, Ruuvi's measurement sequence) is published
/// on the shared topic once: a gateway does not publish an id that already arrived there, and
/// since gateways in one room hear a frame within milliseconds of each other, the gateway ranked
/// `r` among those online (their ids sorted) holds its reading back `r × hold` first, so the
/// first-ranked one's copy arrives before the others decide. A reading without an id is
/// published by every gateway that hears it (Home Assistant takes an unchanged state as no change).
struct SharedReadings: Sendable {
    /// This gateway's id.
    let me: String
    /// How long each rank holds a reading with a packet id back before publishing it.
    let hold: Duration
    /// The gateways whose status topic holds `online` (true) or something else (false): the
    /// availability of every config; this gateway from the start.
    private(set) var gateways: [String: Bool]
    /// The packet ids that arrived last on each device's shared topic (its address as published),
    /// the newest last, at most `remembered`: an id seen again among them is the same reading
    /// (a list, not a time window: packet ids wrap, BTHome's at 256).
    private var arrivedIDs: [String: [Int]] = [:]
    /// Readings held back, in the order heard.
    private var held: [Held] = []
    /// Until when, after a connection, the other gateways' statuses and the shared topics'
    /// retained records may still be arriving: a reading heard before then waits, and is ranked
    /// then (nil: not connected yet).
    private var settledAt: ContinuousClock.Instant?

    /// How many packet ids are remembered per device.
    static let remembered = 16

    /// A reading waiting for its turn (`hold` × rank).
    struct Held: Sendable {
        let address: String
        let packetID: Int
        let payload: [UInt8]
        var due: ContinuousClock.Instant
        /// Whether `due` comes from the rank (else from the settling after a connection).
        var ranked: Bool
    }

    init(me: String, hold: Duration = .seconds(1)) {
        self.me = me
        self.hold = hold
        gateways = [me: true]
    }

    /// The status topics of every gateway known, sorted: each config's `availability`.
    var availability: [String] { gateways.keys.sorted() }

    /// Where this gateway stands among those online (0: it publishes at once).
    var rank: Int { gateways.filter(\.value).keys.sorted().firstIndex(of: me) ?? 0 }

    /// Connected to the broker (again): what the subscriptions bring back arrives within `hold`.
    /// Readings held from before (the first connection, or an outage) wait for the settling too,
    /// and are ranked then.
    mutating func connected(now: ContinuousClock.Instant = .now) {
        let settled = now + hold
        settledAt = settled
        for index in held.indices {
            held[index].ranked = false
            held[index].due = settled
        }
    }

    /// Gateway `gateway`'s status said `payload` (empty: the retained status was cleared, the
    /// gateway is forgotten). True when the set of gateways changed: the configs must be
    /// published again with the new availability.
    mutating func status(of gateway: String, _ payload: [UInt8]) -> Bool {
        guard gateway != me else { return false }
        if payload.isEmpty { return gateways.removeValue(forKey: gateway) != nil }
        return gateways.updateValue(payload == Array("online".utf8), forKey: gateway) == nil
    }

    /// A message arrived on a shared topic (another gateway's, or this one's own coming back):
    /// its packet id is noted; a payload without one, or not JSON, changes nothing.
    /// The device's readings still held that are older than it are dropped (published after
    /// it they would put an old state back on the retained topic): those heard before this
    /// gateway's own copy of it, or, when it heard none, all (heard before it arrived: older,
    /// unless the broker is slower than the sensor's next frame).
    /// An id seen before (this gateway's own copy coming back, a repeat) changes nothing; what
    /// arrives while settling after a connection (the retained record, what the broker queued
    /// while this gateway was away: old) only has its id noted and a held copy of it dropped.
    mutating func arrived(_ payload: [UInt8], now: ContinuousClock.Instant = .now) {
        guard let record = try? JSONInput.parse(payload) as? [String: Any], let address = record["address"] as? String,
              let packetID = ((record["sensor"] as? [String: Any])?["packet_id"] as? Double).flatMap({ Int(exactly: $0) }) else { return }
        if arrivedIDs[address]?.contains(packetID) == true { return }
        guard let settledAt, settledAt <= now else {
            held.removeAll { $0.address == address && $0.packetID == packetID }
            note(address, packetID)
            return
        }
        if let through = held.lastIndex(where: { $0.address == address && $0.packetID == packetID })
            ?? held.lastIndex(where: { $0.address == address }) {
            held = held[...through].filter { $0.address != address } + held[(through + 1)...]
        }
        note(address, packetID)
    }

    /// A reading this gateway heard, rendered for the shared topic: the payloads to publish now,
    /// in order (none: already there, or held back: `due`).
    /// A reading published now takes the device's readings still held with it, first: they are
    /// older (heard before it) and no other gateway published them (that would have dropped
    /// them, `arrived`); after it they would put an old state back on the retained topic.
    mutating func heard(_ address: String, packetID: Int?, payload: [UInt8], now: ContinuousClock.Instant = .now) -> [[UInt8]] {
        guard let packetID else {
            held.removeAll { $0.address == address }
            return [payload]
        }
        if arrivedIDs[address]?.contains(packetID) == true || held.contains(where: { $0.address == address && $0.packetID == packetID }) { return [] }
        guard let settledAt, settledAt <= now else {
            // Before the first connection only a device's newest reading waits: one per device.
            // While settling (connected) every reading waits, in order: they were heard live, and
            // the others may be settling too (lab: two gateways that connected within the second
            // before packet ids 0 and 1 came each kept only 1, and 0 reached neither's shared topic).
            if settledAt == nil { held.removeAll { $0.address == address && !$0.ranked } }
            held.append(Held(address: address, packetID: packetID, payload: payload, due: settledAt ?? now + hold, ranked: false))
            return []
        }
        let rank = rank
        guard rank > 0 else {
            let older = held.filter { $0.address == address && arrivedIDs[address]?.contains($0.packetID) != true }
            held.removeAll { $0.address == address }
            for reading in older { note(address, reading.packetID) }
            note(address, packetID)
            return older.map(\.payload) + [payload]
        }
        held.append(Held(address: address, packetID: packetID, payload: payload, due: now + hold * rank, ranked: true))
        return []
    }

    /// The held readings whose time has come and that no other gateway published meanwhile,
    /// in the order heard (each noted as published); a reading held while settling is ranked
    /// now, and waits its rank's turn.
    mutating func due(now: ContinuousClock.Instant = .now) -> [(address: String, payload: [UInt8])] {
        var ready: [(address: String, payload: [UInt8])] = []
        let rank = rank
        for index in held.indices where held[index].due <= now && !held[index].ranked {
            held[index].ranked = true
            held[index].due = now + hold * rank
        }
        let (turn, waiting) = (held.filter { $0.due <= now }, held.filter { $0.due > now })
        held = waiting
        for reading in turn where arrivedIDs[reading.address]?.contains(reading.packetID) != true {
            note(reading.address, reading.packetID)
            ready.append((reading.address, reading.payload))
        }
        return ready
    }

    private mutating func note(_ address: String, _ packetID: Int) {
        var ids = arrivedIDs[address, default: []]
        ids.removeAll { $0 == packetID }
        ids.append(packetID)
        if ids.count > Self.remembered { ids.removeFirst(ids.count - Self.remembered) }
        arrivedIDs[address] = ids
    }
}
