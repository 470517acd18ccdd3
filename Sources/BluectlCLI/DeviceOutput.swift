import BluectlCore

/// How devices and their advertisement data are printed (JSON field names
/// are documented in README.md and stable).
enum DeviceOutput {
    static func json(_ device: DeviceInfo, adapter: String, event: String? = nil) -> JSONLine {
        var line = JSONLine(capacity: 320)
        if let event { line.add("event", event) }
        line.add("adapter", adapter)
        line.add("address", device.address)
        if let type = device.addressType { line.add("address_type", type) }
        if let name = device.name { line.add("name", name) }
        if let alias = device.alias { line.add("alias", alias) }
        if let rssi = device.rssi { line.add("rssi", rssi) }
        if let txPower = device.txPower { line.add("tx_power", txPower) }
        if !device.serviceUUIDs.isEmpty { line.add("service_uuids", strings: device.serviceUUIDs.map(\.uuidString)) }
        if !device.manufacturerData.isEmpty {
            var data = JSONLine()
            for (company, bytes) in device.manufacturerData.sorted(by: { $0.key < $1.key }) {
                data.add(companyKey(company), ByteFormats.hex(bytes))
            }
            line.add("manufacturer_data", object: data)
        }
        if !device.serviceData.isEmpty {
            var data = JSONLine()
            for (uuid, bytes) in device.serviceData.sorted(by: { $0.key < $1.key }) {
                data.add(uuid.uuidString, ByteFormats.hex(bytes))
            }
            line.add("service_data", object: data)
        }
        if let flags = device.advertisingFlags { line.add("flags", ByteFormats.hex(flags)) }
        if let appearance = device.appearance { line.add("appearance", appearance) }
        let beacons = BeaconDecoding.beacons(in: device)
        if !beacons.isEmpty {
            // One member per format (the first of a kind when a device repeats one).
            var object = JSONLine()
            var kinds = Set<String>()
            for beacon in beacons where kinds.insert(beacon.kind).inserted {
                var fields = JSONLine()
                for field in beacon.fields { fields.add(field.name, field.value) }
                object.add(beacon.kind, object: fields)
            }
            line.add("beacon", object: object)
        }
        line.add("connected", device.connected)
        line.add("paired", device.paired)
        line.add("path", device.path.rawValue)
        return line
    }

    /// "0xffff": manufacturer-data keys are 16-bit company identifiers.
    static func companyKey(_ company: UInt16) -> String {
        let hex = String(company, radix: 16)
        return "0x" + String(repeating: "0", count: 4 - hex.count) + hex
    }

    /// "0x004c (Apple)": the identifier and, when assigned, the company's short name.
    static func companyLabel(_ company: UInt16) -> String {
        let name = CompanyIdentifiers.shortName(for: company).map { " (\(TextSafety.terminalSafe($0)))" } ?? ""
        return companyKey(company) + name
    }

    /// One readable line for a terminal; device-supplied text is escaped. A manufacturer- or
    /// service-data entry that holds a beacon is shown decoded (`Beacon.summary`), others as hex.
    static func text(_ device: DeviceInfo, event: String? = nil) -> String {
        var parts: [String] = []
        if let event { parts.append(event == "discovered" ? "NEW" : "CHG") }
        parts.append(device.address.description)
        parts.append(device.addressType?.rawValue ?? "-")
        parts.append(device.rssi.map { "\($0) dBm" } ?? "- dBm")
        parts.append(device.displayName.map { "\"\(TextSafety.terminalSafe($0))\"" } ?? "(no name)")
        if let txPower = device.txPower { parts.append("tx \(txPower) dBm") }
        if !device.serviceUUIDs.isEmpty {
            parts.append("services " + device.serviceUUIDs.map { uuidLabel($0) }.joined(separator: ","))
        }
        for (company, bytes) in device.manufacturerData.sorted(by: { $0.key < $1.key }) {
            if let beacon = BeaconDecoding.beacon(company: company, data: bytes) {
                parts.append(beacon.summary)
                continue
            }
            parts.append("mfr \(companyLabel(company))=\(ByteFormats.hex(bytes))")
        }
        for (uuid, bytes) in device.serviceData.sorted(by: { $0.key < $1.key }) {
            parts.append(BeaconDecoding.beacon(service: uuid, data: bytes)?.summary ?? "data \(uuid.shortString)=\(ByteFormats.hex(bytes))")
        }
        if device.connected { parts.append("connected") }
        return parts.joined(separator: "  ")
    }

    /// "180d (Heart Rate)" or the full UUID.
    static func uuidLabel(_ uuid: BluetoothUUID) -> String {
        if let name = uuid.name { return "\(uuid.shortString) (\(name))" }
        return uuid.shortString
    }
}
