// The Home Assistant device configs of one gateway's run, and what other gateways put in them.

import BluectlCore

/// The device configs a gateway publishes (`HomeAssistantDiscovery`), a pure value kept by its
/// owner task: what this gateway makes of each device (components, each with what it was made
/// from, to make it again when the gateways change), and the components other gateways
/// published in the same device's config.
///
/// Home Assistant removes an entity whose component a newer config of its device leaves out,
/// and several gateways publish one device's config (a sensor heard in two rooms; a GATT device
/// one of them connects to, whose advertisements another hears), each making the components of
/// what it heard. So each carries the others' on: a gateway publishes a device's config again
/// when its own components change, or when the config on the broker (retained, read by every
/// gateway) lacks a component it knows of. The last config published then holds every gateway's
/// components: had it lacked one, the gateway knowing it would have published again after it.
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
        /// The config's `device`: from a reading when there is one (it names the model), else
        /// from a GATT value.
        var object: JSONLine
        var objectFromReading: Bool
        var components: [String: Component]
    }

    /// This gateway's devices, by node id (`bluectl_<mac>`).
    private(set) var devices: [String: Device] = [:]
    /// The components of each device's config on the broker that this gateway does not make, by node id.
    private var others: [String: [String: JSONLine]] = [:]

    /// Notes what `source` made; true when the device's config is to be published: a component
    /// new or changed, or the device object. A source with no component changes nothing.
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
        return changed
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

    /// The device's config: its object, and every component by id, this gateway's and the
    /// others' (this gateway's where both have one id). Nil for a device this gateway has not made.
    func config(_ node: String) -> [UInt8]? {
        guard let device = devices[node] else { return nil }
        var all = others[node] ?? [:]
        for (id, component) in device.components { all[id] = component.options }
        return HomeAssistantDiscovery.deviceConfig(device: device.object,
                                                   components: all.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    /// A device's config on the broker (`components`; none: it was removed) is noted; true when
    /// this gateway is to publish the device's config again: it made the device, and the config
    /// lacks a component it knows of. A removed config is not put back here (someone removed the
    /// device from Home Assistant): this gateway's next change or Home Assistant's start does.
    mutating func heard(_ node: String, components: [String: JSONLine]) -> Bool {
        guard !components.isEmpty else {
            others[node] = nil
            return false
        }
        var known = others[node] ?? [:]
        for (id, options) in components where devices[node]?.components[id] == nil { known[id] = options }
        others[node] = known
        guard let device = devices[node] else { return false }
        return device.components.keys.contains { components[$0] == nil } || known.keys.contains { components[$0] == nil }
    }
}
