import BluectlCore

/// A device's state in Theengs Gateway's layout (`--layout theengs`): Theengs Decoder's
/// field names for what both decode, so dashboards made for Theengs keep working.
/// `id` and `mac` the address, `name`, `rssi`, Theengs' identity of the device (`brand`,
/// `model`, `model_id`, `type`) where it is known (`TheengsIdentity`), else `model` alone
/// (bluectl's model or format), then each measurement: under Theengs' name where one is known
/// (`keys`), else under scan's key.
struct TheengsRecord: OutputRecord {
    let device: DeviceInfo
    let reading: SensorReading?

    /// scan's measurement keys → Theengs Decoder's property names, as theengsdecoder 2.5.0
    /// names the same readings of the frames in Tests/SensorReference (theengs_compare.py).
    static let keys: [String: String] = [
        SensorQuantity.temperature.key: "tempc", SensorQuantity.humidity.key: "hum", SensorQuantity.pressure.key: "pres",
        SensorQuantity.battery.key: "batt", SensorQuantity.voltage.key: "volt", SensorQuantity.illuminance.key: "lux",
        SensorQuantity.moisture.key: "moi", "movement_counter": "mov", SensorQuantity.rotation.key: "rot",
    ]

    /// The field a measurement has in this layout.
    static func field(_ key: String) -> String { keys[key] ?? key }

    func describe<Sink: RecordSink>(into sink: inout Sink) {
        sink.json("id", .string(device.address.description))
        sink.json("mac", .string(device.address.description))
        sink.json("name", device.name.map { .string($0) })
        sink.json("rssi", device.rssi.map { .int($0) })
        if let reading, let identity = TheengsIdentity(reading) {
            sink.json("brand", .string(identity.brand))
            sink.json("model", .string(identity.model))
            sink.json("model_id", .string(identity.modelID))
            sink.json("type", .string(identity.type))
        } else {
            sink.json("model", reading.map { .string($0.model ?? $0.format.rawValue) })
        }
        if reading == nil { describeRawData(into: &sink) }
        for (key, value) in reading?.keyedMeasurements ?? [] {
            let json: JSONValue? = switch value {
            case .number(let number): .double(number)
            case .integer(let integer): .int(integer)
            case .flag(let on): .bool(on)
            case .event(let name, _): .string(name)
            case .text(let text): .string(text)
            case .bytes(let bytes): .hex(bytes)
            case .notAvailable: nil
            }
            sink.json(Self.field(key), json)
            // Theengs gives Fahrenheit beside Celsius.
            if key == SensorQuantity.temperature.key, case .number(let celsius) = value {
                sink.json("tempf", .double(((celsius * 1.8 + 32) * 10).rounded() / 10))
            }
        }
    }
}

extension TheengsRecord {
    /// An undecoded device's advertising data as Theengs Gateway publishes it (`publish_all`):
    /// `manufacturerdata` the company identifier (little-endian) then the data, in hex, with
    /// `mfr` the company's name; `servicedata` and `servicedatauuid` (the 16-bit part of the
    /// UUID). Theengs takes one entry of each; here the lowest company identifier and the
    /// lowest service UUID, so that a device's record does not change with dictionary order.
    fileprivate func describeRawData<Sink: RecordSink>(into sink: inout Sink) {
        if let company = device.manufacturerData.keys.min(), let data = device.manufacturerData[company] {
            sink.json("manufacturerdata", .hex([UInt8(company & 0xFF), UInt8(company >> 8)] + data))
            sink.json("mfr", CompanyIdentifiers.name(for: company).map { .string($0) })
        }
        if let uuid = device.serviceData.keys.min(by: { $0.uuidString < $1.uuidString }), let data = device.serviceData[uuid] {
            sink.json("servicedata", .hex(data))
            sink.json("servicedatauuid", .string(String(uuid.uuidString.lowercased().dropFirst(4).prefix(4))))
        }
    }
}

/// How Theengs Decoder names a device bluectl decodes: its `brand`, `model`, `model_id` and
/// `type` (THB: temperature, humidity, battery; ACEL: with acceleration), as theengsdecoder
/// 2.5.0 names the devices of the frames in Tests/SensorReference (theengs_compare.py prints
/// them). Dashboards and automations made for Theengs Gateway select devices by these.
/// Devices Theengs knows only by their name (BTHome's: Shelly, b-parasite, …) or not at all
/// have none: their record keeps `model` alone.
struct TheengsIdentity: Equatable {
    let brand: String
    let model: String
    let modelID: String
    let type: String
}

// (In an extension, so that the memberwise initializer stays.)
extension TheengsIdentity {
    /// Theengs' identity of the device that sent `reading`, when Theengs has one for it.
    init?(_ reading: SensorReading) {
        let thermometer = { (brand: String, model: String, id: String) in
            TheengsIdentity(brand: brand, model: model, modelID: id, type: "THB")
        }
        switch (reading.format, reading.model) {
        case (.atc1441, _): self = thermometer("Xiaomi", "TH Sensor", "LYWSD03MMC/MJWSD05MMC_ATC")
        case (.pvvx, _):
            self = thermometer("Xiaomi", "TH Sensor", reading.encrypted ? "LYWSD03MMC/MJWSD05MMC_PVVX_ENCR" : "LYWSD03MMC/MJWSD05MMC_PVVX")
        case (.ruuvi, _):
            // Data format 5 (RAWv2) carries the transmit power; format 3 (RAWv1) does not.
            let v2 = reading.measurements.contains { $0.quantity == .txPower }
            self = TheengsIdentity(brand: "Ruuvi", model: "RuuviTag", modelID: v2 ? "RuuviTag_RAWv2" : "RuuviTag_RAWv1", type: "ACEL")
        case (.govee, "H5072"?), (.govee, "H5075"?): self = thermometer("Govee", "Thermo-Hygrometer", "H5072/75")
        case (.govee, "H5074"?): self = thermometer("Govee", "Thermo-Hygrometer", "H5074")
        case (.govee, "GV5179"?): self = thermometer("Govee", "Thermo-Hygrometer", "H5179_N")
        case (.govee, let model?) where ["H5100", "H5101", "H5102", "H5104", "H5105", "H5108", "H5174", "H5177"].contains(model):
            self = thermometer("Govee", "Smart Thermo-Hygrometer", "H5100/01/02/04/05/08/74/77")
        case (.inkbird, "IBS-TH"?), (.inkbird, "IBS-TH2"?): self = thermometer("Inkbird", "T(H) Sensor", "IBS-TH1/TH2/P01B/ITH-12S")
        case (.switchbot, "Meter"?), (.switchbot, "Meter Plus"?): self = thermometer("SwitchBot", "Meter (Plus)", "THX1/W230150X")
        case (.switchbot, "Outdoor Meter"?): self = thermometer("SwitchBot", "Outdoor Meter", "W340001X")
        case (.xiaomi, "LYWSDCGQ"?): self = thermometer("Xiaomi", "Mi Jia round", "LYWSDCGQ")
        case (.xiaomi, "LYWSD02"?): self = thermometer("Xiaomi/Mijia", "e-ink Clock", "LYWSD02")
        default: return nil
        }
    }
}
