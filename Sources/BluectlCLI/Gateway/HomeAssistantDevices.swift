// The Home Assistant device configs of one gateway's run, and what other gateways put in them.

import BluectlCore

/// The device configs a gateway publishes (`HomeAssistantDiscovery`), a pure value kept by its
/// owner task: what this gateway makes of each device (components, each with what it was made
/// from, to make it again when the gateways change), the components other gateways published in
/// the same device's config, and when a config is to be published.
///
/// Home Assistant removes an entity whose component a newer config of its device leaves out
/// (from its registry too: the entity's id, area and name go with it), and several gateways
/// publish one device's config (a sensor heard in two rooms; a GATT device one of them connects
/// to, whose advertisements another hears), each making the components of what it heard. So:
/// - nothing is published while disconnected, nor before the retained configs of a connection
///   had `hold` to arrive (a gateway started again knows none of the others' components before
///   it reads them, and one cut off may have missed some): then every device this gateway made
///   or changed meanwhile, each carrying the others' components on;
/// - a config on the broker that lacks a component this gateway knows of (its own, or one it
///   carries) is answered with this gateway's config, `hold` later and only if the newest config
///   heard by then still lacks it: an out-of-date config (this gateway's own, coming back after a
///   newer one was published) or one of several gateways publishing at once is not answered.
/// While the gateways that made a device's components run, the last config published holds
/// them all: had it lacked one, the gateway knowing it would have published again after it.
/// Only the ids converge: a carried component keeps the options its gateway last published.
struct HomeAssistantDevices: Sendable {
    /// What a component was made from: a decoded advertisement's device and reading, or a GATT value.
    enum Source: Sendable {
        case sensor(DeviceInfo, SensorReading)
        case gatt(GattValue)
    }

    /// One of this gateway's components, and its source.
    struct Component: Sendable {
        var options: JSONLine
        let source: Source
    }

    /// This gateway's part of a device's config.
    struct Device: Sendable {
        /// This gateway's `device` object: from a reading when there is one (it names the
        /// model), else from a GATT value (then another gateway's that names a model is
        /// published instead: `config`).
        var object: JSONLine
        var objectFromReading: Bool
        var components: [String: Component]
    }

    /// How long the configs a subscription brings back take to arrive, and how long an answer
    /// to a config waits for a newer one.
    let hold: Duration
    /// This gateway's devices, by node id (`bluectl_<mac>`).
    private(set) var devices: [String: Device] = [:]
    /// The components of each device's config on the broker that this gateway does not make, by node id.
    private var others: [String: [String: JSONLine]] = [:]
    /// The device object of each device's config on the broker that names a model, by node id.
    private var othersObjects: [String: JSONLine] = [:]
    /// The component ids of the newest config heard of each device (none: removed, or not readable).
    private var heardIDs: [String: Set<String>] = [:]
    /// When the current connection's retained configs have had time to arrive (nil: not connected).
    private var quietUntil: ContinuousClock.Instant?
    /// Whether the current connection's retained configs have had time to arrive.
    private var settled = false
    /// The devices made or changed while not settled: published once settled.
    private var pending: Set<String> = []
    /// The devices whose config is to be published at a time, if it still lacks a component then.
    private var answers: [String: ContinuousClock.Instant] = [:]

    init(hold: Duration = .seconds(1)) {
        self.hold = hold
    }

    /// Whether configs are published now: connected, and the connection's retained configs had `hold`.
    var isSettled: Bool { settled }

    /// Connected to the broker (again): its retained configs arrive within `hold`; nothing is
    /// published before (`due` publishes what was made or changed meanwhile).
    mutating func connected(now: ContinuousClock.Instant = .now) {
        quietUntil = now + hold
        settled = false
    }

    /// The connection is lost: nothing is published (the session would keep a config to send at the next
    /// connection, before that connection's retained configs are read) until the next one settles.
    mutating func disconnected() {
        quietUntil = nil
        settled = false
    }

    /// Every device this gateway made is to be published once settled (its components were made
    /// again while not settled: `remake`).
    mutating func pendAll() {
        pending.formUnion(devices.keys)
    }

    /// Notes what `source` made; true when the device's config is to be published now: settled,
    /// and a component new or changed, or the device object (else it waits: `due`). A source
    /// with no component changes nothing.
    mutating func note(_ made: HomeAssistantDiscovery.Made, from source: Source) -> Bool {
        guard !made.components.isEmpty else { return false }
        let fromReading = if case .sensor = source { true } else { false }
        var device = devices[made.node] ?? Device(object: made.device, objectFromReading: fromReading, components: [:])
        var changed = devices[made.node] == nil
        if fromReading || !device.objectFromReading, device.object != made.device {
            device.object = made.device
            device.objectFromReading = fromReading
            changed = true
        }
        for (id, options) in made.components where device.components[id]?.options != options {
            device.components[id] = Component(options: options, source: source)
            changed = true
        }
        devices[made.node] = device
        guard changed else { return false }
        if !settled { pending.insert(made.node) }
        return settled
    }

    /// Makes this gateway's components again with `make` (the gateways' availability changed).
    mutating func remake(_ make: (Source) -> HomeAssistantDiscovery.Made?) {
        for (node, device) in devices {
            for (id, component) in device.components {
                guard let options = make(component.source)?.components.first(where: { $0.id == id })?.options else { continue }
                devices[node]?.components[id]?.options = options
            }
        }
    }

    /// The device's config: its object (this gateway's from a reading, else another gateway's
    /// that names a model, else this gateway's from a GATT value), and every component by id,
    /// this gateway's and the others' (this gateway's where both have one id). Nil for a device
    /// this gateway has not made.
    func config(_ node: String) -> [UInt8]? {
        guard let device = devices[node] else { return nil }
        var all = others[node] ?? [:]
        for (id, component) in device.components { all[id] = component.options }
        let object = device.objectFromReading ? device.object : othersObjects[node] ?? device.object
        return HomeAssistantDiscovery.deviceConfig(device: object, components: all.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    /// A device's config on the broker (`HomeAssistantDiscovery.parse`): its `components` (none:
    /// removed) and its `device` object when it names a model; nil for a payload that is not a
    /// config with components. A config that lacks a component
    /// this gateway knows of is answered `hold` later (`due`) if the newest config by then still
    /// lacks it; a removed one is not (someone removed the device from Home Assistant: another
    /// gateway's config, this gateway's next change, or Home Assistant's `online` brings it back);
    /// one that cannot be read is written over.
    mutating func heard(_ node: String, _ config: (components: [String: JSONLine], object: JSONLine?)?,
                        now: ContinuousClock.Instant = .now) {
        guard let config, !config.components.isEmpty else {
            if config == nil {
                heardIDs[node] = []   // lacks every component: written over
            } else {
                heardIDs[node] = nil  // removed: nothing to answer
                others[node] = nil
                othersObjects[node] = nil
            }
            if lacks(node), answers[node] == nil { answers[node] = now + hold }
            return
        }
        heardIDs[node] = Set(config.components.keys)
        var known = others[node] ?? [:]
        for (id, options) in config.components where devices[node]?.components[id] == nil { known[id] = options }
        others[node] = known
        if let object = config.object { othersObjects[node] = object }
        if lacks(node), answers[node] == nil { answers[node] = now + hold }
    }

    /// The devices whose config is to be published now: when a connection's retained configs
    /// have had `hold`, those made or changed while not settled (at the first connection, every
    /// device) and those whose newest config heard lacks a component; once settled, those whose
    /// answer is due and whose newest config heard still lacks a component.
    mutating func due(now: ContinuousClock.Instant = .now) -> [String] {
        if !settled {
            guard let quietUntil, now >= quietUntil else { return [] }
            settled = true
            answers = [:]
            let ready = pending.union(devices.keys.filter { lacks($0) })
            pending = []
            return ready.sorted()
        }
        let ready = answers.filter { $0.value <= now }.keys.sorted()
        for node in ready { answers[node] = nil }
        return ready.filter { lacks($0) }
    }

    /// Whether the newest config heard of `node` lacks a component this gateway knows of (this
    /// gateway made the device; a removed config lacks nothing).
    private func lacks(_ node: String) -> Bool {
        guard let device = devices[node], let ids = heardIDs[node] else { return false }
        return device.components.keys.contains { !ids.contains($0) } || (others[node] ?? [:]).keys.contains { !ids.contains($0) }
    }
}
