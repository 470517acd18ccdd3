import BluectlCore
import BluectlGateway

/// Home Assistant's MQTT discovery, device-based (home-assistant.io/integrations/mqtt, "Device
/// discovery payload"; Home Assistant 2024.11 and later): one retained config per device on
/// `homeassistant/device/bluectl_<mac>/config`, its `components` one sensor entity per decoded
/// numeric measurement (id `<key>`, value `value_json.sensor.<key>`; in Theengs' layout
/// `value_json.<its field>`) and per numeric field of a decoded GATT value (id `<uuid>_<field>`).
/// In bluectl's layout a measurement's state is the device's shared topic
/// (`GatewayTopics.sharedDevice`), fed by every gateway, and the same config from every gateway
/// that knows the same gateways: available while any of them is online (`availability_mode: any`),
/// no `via_device` (a device heard by several gateways comes through none in particular). In
/// Theengs' layout it is Theengs Gateway's `+/+/BTtoMQTT/<MAC>`, which every gateway in that
/// layout feeds, with no availability and `via_device` this gateway, as Theengs Gateway's configs.
/// A GATT value's state is this gateway's characteristic topic, in both layouts.
/// Home Assistant drops an entity whose component a newer config of its device leaves out, so
/// each gateway's config of a device carries the components other gateways published in it too
/// (`HomeAssistantDevices`): the retained config holds every gateway's entities.
enum HomeAssistantDiscovery {
    /// Device class and state class of the quantities Home Assistant has a class for;
    /// other numbers are sensors with their unit and no class.
    static let classes: [String: (deviceClass: String, stateClass: String)] = [
        SensorQuantity.temperature.key: ("temperature", "measurement"),
        SensorQuantity.dewPoint.key: ("temperature", "measurement"),
        SensorQuantity.humidity.key: ("humidity", "measurement"),
        SensorQuantity.pressure.key: ("atmospheric_pressure", "measurement"),
        SensorQuantity.battery.key: ("battery", "measurement"),
        SensorQuantity.voltage.key: ("voltage", "measurement"),
        SensorQuantity.illuminance.key: ("illuminance", "measurement"),
        SensorQuantity.moisture.key: ("moisture", "measurement"),
        SensorQuantity.co2.key: ("carbon_dioxide", "measurement"),
        SensorQuantity.pm25.key: ("pm25", "measurement"),
        SensorQuantity.pm10.key: ("pm10", "measurement"),
        SensorQuantity.tvoc.key: ("volatile_organic_compounds", "measurement"),
        SensorQuantity.power.key: ("power", "measurement"),
        SensorQuantity.current.key: ("current", "measurement"),
        SensorQuantity.energy.key: ("energy", "total_increasing"),
        SensorQuantity.gas.key: ("gas", "total_increasing"),
        SensorQuantity.water.key: ("water", "total_increasing"),
        SensorQuantity.massKilograms.key: ("weight", "measurement"),
        SensorQuantity.massPounds.key: ("weight", "measurement"),
        SensorQuantity.distanceMillimetres.key: ("distance", "measurement"),
        SensorQuantity.distanceMetres.key: ("distance", "measurement"),
        SensorQuantity.speed.key: ("speed", "measurement"),
        SensorQuantity.conductivity.key: ("conductivity", "measurement"),
        SensorQuantity.precipitation.key: ("precipitation", "measurement"),
        SensorQuantity.volumeStorage.key: ("volume_storage", "measurement"),
        SensorQuantity.volumeFlowRate.key: ("volume_flow_rate", "measurement"),
    ]

    /// The device's id in Home Assistant's topics and ids: `bluectl_a4c138000027`.
    static func nodeID(_ address: BluetoothAddress) -> String {
        "bluectl_" + address.description.lowercased().filter { $0 != ":" }
    }

    /// The device's config topic: `homeassistant/device/bluectl_a4c138000027/config`.
    static func deviceTopic(_ node: String) -> String { "homeassistant/device/\(node)/config" }

    /// The filter of every device config (a gateway reads the ones of its devices:
    /// `HomeAssistantDevices.heard`). Subscribed to before the gateways' statuses: at a
    /// connection the retained configs come first.
    static let deviceTopics = "homeassistant/device/+/config"

    /// The device whose config `topic` is, when bluectl made it (`bluectl_<mac>`); nil for any other topic.
    static func node(ofDeviceTopic topic: String) -> String? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 4, levels[0] == "homeassistant", levels[1] == "device", levels[3] == "config",
              levels[2].hasPrefix("bluectl_") else { return nil }
        return String(levels[2])
    }

    /// What one source (a reading, a GATT value) makes of a device's config: the device
    /// object and the components, in order.
    struct Made: Sendable {
        let node: String
        let device: JSONLine
        let components: [(id: String, options: JSONLine)]
    }

    /// The components of `reading`'s numeric measurements (ids its JSON keys, `_2` for a second
    /// of a quantity, as scan prints them).
    /// `gateways`: the ids of the gateways whose status makes the device available (bluectl's layout).
    static func components(device: DeviceInfo, reading: SensorReading, topics: GatewayTopics, gateways: [String]) -> Made {
        let shared = topics.layout == .bluectl
        let node = nodeID(device.address)
        let keyed = reading.keyedMeasurements
        let components = zip(reading.measurements, keyed).compactMap { measurement, keyed -> (id: String, options: JSONLine)? in
            switch keyed.value {
            case .number, .integer: break
            default: return nil   // events, flags and text are not sensors with a state to graph
            }
            var config = JSONLine()
            config.add("platform", "sensor")
            config.add("name", keyed.key)
            config.add("unique_id", "\(node)_\(keyed.key)")
            let address = device.address.description
            config.add("state_topic", shared ? GatewayTopics.sharedDevice(address) : GatewayTopics.anyTheengsDevice(address))
            let field = topics.layout == .theengs ? TheengsRecord.field(keyed.key) : "sensor.\(keyed.key)"
            config.add("value_template", "{{ value_json.\(field) }}")
            if let classes = classes[measurement.quantity.key] {
                config.add("device_class", classes.deviceClass)
                config.add("state_class", classes.stateClass)
            } else {
                config.add("state_class", "measurement")
            }
            if !measurement.quantity.unit.isEmpty { config.add("unit_of_measurement", measurement.quantity.unit) }
            // Theengs' layout: no availability, as Theengs Gateway's configs (any gateway may feed the state).
            if shared {
                config.add("availability", objects: gateways.map { gateway in
                    var entry = JSONLine()
                    entry.add("topic", GatewayTopics(gateway: gateway).status)
                    return entry
                })
                config.add("availability_mode", "any")
            }
            return (keyed.key, config)
        }
        // Shared: the address, what every gateway knows alike (a name depends on what each
        // hears: a passive scan gets no scan response); Theengs' layout: the name heard.
        return Made(node: node, device: deviceObject(device.address, name: shared ? nil : device.name,
                                                     model: reading.model ?? reading.format.rawValue, topics: topics),
                    components: components)
    }

    /// What Home Assistant makes of a decoded GATT field: device class (nil: none), unit, state class.
    typealias GattEntity = (deviceClass: String?, unit: String, stateClass: String)

    /// The numeric fields of `CharacteristicDecoding`'s values that are sensors to graph, by
    /// field name (the same name means the same quantity in every characteristic that has it).
    /// 2A1C's `temperature` takes its unit from the value's `unit` field (`gattComponents`).
    static let gattEntities: [String: GattEntity] = [
        "level_percent": ("battery", "%", "measurement"),
        "bpm": (nil, "bpm", "measurement"),
        "celsius": ("temperature", "°C", "measurement"),
        "temperature": ("temperature", "°C", "measurement"),
        "humidity_percent": ("humidity", "%", "measurement"),
        "pressure_hpa": ("atmospheric_pressure", "hPa", "measurement"),
        "uv_index": (nil, "", "measurement"),
        "irradiance_w_m2": ("irradiance", "W/m²", "measurement"),
        "illuminance_lux": ("illuminance", "lx", "measurement"),
        "elevation_m": ("distance", "m", "measurement"),
    ]

    /// The components of the numeric fields of a GATT value `decoded` from `characteristic` of
    /// `address` (`gattEntities`), one entity each, id `<uuid>_<field>`. The state is this
    /// gateway's characteristic topic (`subscribe --json`'s records, `value_json.decoded.<field>`),
    /// available with this gateway: a GATT connection is one gateway's, whatever the layout.
    static func gattComponents(_ address: BluetoothAddress, characteristic: BluetoothUUID, decoded: DecodedCharacteristic,
                            topics: GatewayTopics) -> Made {
        let node = nodeID(address)
        let numeric = decoded.fields.compactMap { field -> (DecodedField, GattEntity)? in
            switch field.value {
            case .int, .double: gattEntities[field.name].map { (field, $0) }
            default: nil
            }
        }
        let fahrenheit = decoded.fields.contains { $0.name == "unit" && $0.value == .string("fahrenheit") }
        let characteristicName = characteristic.name ?? characteristic.shortString
        let components = numeric.map { field, entity -> (id: String, options: JSONLine) in
            var entity = entity
            if field.name == "temperature", fahrenheit { entity.unit = "°F" }
            let object = "\(characteristic.shortString)_\(field.name)"
            var config = JSONLine()
            config.add("platform", "sensor")
            // One field: the characteristic's name says it ("Battery Level"); several: which one too.
            config.add("name", numeric.count == 1 ? characteristicName : "\(characteristicName) \(field.name)")
            config.add("unique_id", "\(node)_\(object)")
            config.add("state_topic", topics.gatt(address.description, characteristic.shortString))
            config.add("value_template", "{{ value_json.decoded.\(field.name) }}")
            if let deviceClass = entity.deviceClass { config.add("device_class", deviceClass) }
            config.add("state_class", entity.stateClass)
            if !entity.unit.isEmpty { config.add("unit_of_measurement", entity.unit) }
            config.add("availability_topic", topics.status)
            return (object, config)
        }
        return Made(node: node, device: deviceObject(address, name: nil, model: nil, topics: topics), components: components)
    }

    /// What of a decoded value its configs depend on: its fields' names, and the unit a value
    /// names (2A1C's `unit`). Values of one shape make the same configs.
    static func gattShape(_ decoded: DecodedCharacteristic) -> [String] {
        decoded.fields.map { field in
            if field.name == "unit", case .string(let unit) = field.value { "unit=\(unit)" } else { field.name }
        }
    }

    /// A device's config: `device`, `origin` (bluectl) and `components` by id, in that order.
    static func deviceConfig(device: JSONLine, components: [(id: String, options: JSONLine)]) -> [UInt8] {
        var config = JSONLine()
        config.add("device", object: device)
        var origin = JSONLine()
        origin.add("name", "bluectl")
        origin.add("sw_version", Bluectl.version)
        config.add("origin", object: origin)
        var all = JSONLine()
        for component in components { all.add(component.id, object: component.options) }
        config.add("components", object: all)
        return config.renderedBytes(newline: false)
    }

    /// A device config another gateway published (or this one, coming back): its components by
    /// id, each as the object it holds (`components`, or its abbreviation `cmps`), and its
    /// `device` object when that names a model (a gateway that heard the device's advertisements
    /// made it); no components for an empty payload (the config removed). Nil when it is not
    /// such a config.
    static func parse(deviceConfig payload: [UInt8]) -> (components: [String: JSONLine], object: JSONLine?)? {
        if payload.isEmpty { return ([:], nil) }
        guard let root = try? JSONInput.parse(payload) as? [String: Any],
              let all = (root["components"] ?? root["cmps"]) as? [String: Any] else { return nil }
        var components: [String: JSONLine] = [:]
        for (id, value) in all {
            guard let object = value as? [String: Any] else { return nil }
            components[id] = JSONLine(parsed: object)
        }
        let device = (root["device"] ?? root["dev"]) as? [String: Any]
        let object = device.flatMap { $0["model"] != nil || $0["mdl"] != nil ? JSONLine(parsed: $0) : nil }
        return (components, object)
    }

    /// A device object: the identifiers every config of `address` shares (Home Assistant
    /// makes them one device), its name (`name`, else the address) and model when known; in
    /// Theengs' layout also `via_device`, this gateway.
    private static func deviceObject(_ address: BluetoothAddress, name: String?, model: String?, topics: GatewayTopics) -> JSONLine {
        var object = JSONLine()
        object.add("identifiers", strings: [nodeID(address)])
        object.add("name", name ?? address.description)
        if let model { object.add("model", model) }
        if topics.layout == .theengs { object.add("via_device", "bluectl_gateway_\(topics.gateway)") }
        return object
    }
}
