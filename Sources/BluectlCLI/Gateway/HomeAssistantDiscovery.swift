import BluectlCore
import BluectlGateway

/// Home Assistant's MQTT discovery (home-assistant.io/integrations/sensor.mqtt): one
/// retained config per decoded numeric measurement of a device, on
/// `homeassistant/sensor/bluectl_<mac>/<key>/config`, whose value is read out of the state's
/// JSON (`value_json.sensor.<key>`; in Theengs' layout `value_json.<its field>`).
/// In bluectl's layout the state is the device's shared topic (`GatewayTopics.sharedDevice`),
/// fed by every gateway, and the config the same bytes from every gateway that knows the same
/// gateways: available while any of them is online (`availability_mode: any`), no `via_device`
/// (a device heard by several gateways comes through none in particular). In Theengs' layout
/// it is this gateway's device topic, available with this gateway, `via_device` this gateway.
/// Home Assistant reads retained configs when it starts, so each is published when it
/// changes (a device, measurement or gateway new to this run; in Theengs' layout, a name heard later).
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

    /// The config topics and payloads for `reading`'s numeric measurements (its JSON keys,
    /// `_2` for a second of a quantity, as scan prints them).
    /// `gateways`: the ids of the gateways whose status makes the device available (bluectl's layout).
    static func configs(device: DeviceInfo, reading: SensorReading, topics: GatewayTopics,
                        gateways: [String]) -> [(topic: String, payload: [UInt8])] {
        let shared = topics.layout == .bluectl
        let node = nodeID(device.address)
        let keyed = reading.keyedMeasurements
        return zip(reading.measurements, keyed).compactMap { measurement, keyed in
            switch keyed.value {
            case .number, .integer: break
            default: return nil   // events, flags and text are not sensors with a state to graph
            }
            var config = JSONLine()
            config.add("name", keyed.key)
            config.add("unique_id", "\(node)_\(keyed.key)")
            config.add("state_topic", shared ? GatewayTopics.sharedDevice(device.address.description) : topics.device(device.address.description))
            let field = topics.layout == .theengs ? TheengsRecord.field(keyed.key) : "sensor.\(keyed.key)"
            config.add("value_template", "{{ value_json.\(field) }}")
            if let classes = classes[measurement.quantity.key] {
                config.add("device_class", classes.deviceClass)
                config.add("state_class", classes.stateClass)
            } else {
                config.add("state_class", "measurement")
            }
            if !measurement.quantity.unit.isEmpty { config.add("unit_of_measurement", measurement.quantity.unit) }
            if shared {
                config.add("availability", objects: gateways.map { gateway in
                    var entry = JSONLine()
                    entry.add("topic", GatewayTopics(gateway: gateway).status)
                    return entry
                })
                config.add("availability_mode", "any")
            } else {
                config.add("availability_topic", topics.status)
            }
            var deviceObject = JSONLine()
            deviceObject.add("identifiers", strings: [node])
            // Shared: the address, what every gateway knows alike (a name depends on what each
            // hears: a passive scan gets no scan response); Theengs' layout: the name heard.
            deviceObject.add("name", shared ? device.address.description : device.name ?? device.address.description)
            deviceObject.add("model", reading.model ?? reading.format.rawValue)
            if !shared { deviceObject.add("via_device", "bluectl_gateway_\(topics.gateway)") }
            config.add("device", object: deviceObject)
            return ("homeassistant/sensor/\(node)/\(keyed.key)/config", config.renderedBytes(newline: false))
        }
    }
}
