import BluectlCore

/// The advertisement bytes an ESPHome proxy forwards (`BluetoothLERawAdvertisement.data`:
/// the AD structures as received over the air), rebuilt from what BlueZ reports.
///
/// BlueZ hands a client parsed fields (`Device1`: Name, UUIDs, ServiceData,
/// ManufacturerData, TxPower, AdvertisingFlags, Appearance), not the received
/// PDU, so the structures are written again from those fields, in this order:
/// Flags (0x01), Complete Local Name (0x09), service UUIDs (0x03 / 0x05 / 0x07,
/// complete lists, by size), service data (0x16 / 0x20 / 0x21), manufacturer
/// data (0xFF, one per company), TX power (0x0A), Appearance (0x19).
///
/// What is lost: the order of the structures as sent; which of them came in
/// the scan response; a shortened name (0x08) is sent as complete; structures
/// BlueZ does not parse (URIs, LE role, intervals, …); BlueZ's values are its
/// merged view of the device (a field seen once stays until it changes, and
/// after a connection `UUIDs` holds the resolved GATT services too); an entry
/// too long for one structure (over 255 bytes) is left out. The rebuilt data
/// may be longer than the 62 bytes of a legacy advertisement plus scan
/// response; the client parses structures, not a fixed size.
package enum RawAdvertisement {
    /// The AD structures for `device` (see the type's comment).
    package static func data(for device: DeviceInfo) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        if let flags = device.advertisingFlags, !flags.isEmpty { append(0x01, flags, to: &out) }
        if let name = device.name, !name.isEmpty { append(0x09, Array(name.utf8), to: &out) }
        var uuids16: [UInt8] = [], uuids32: [UInt8] = [], uuids128: [UInt8] = []
        for uuid in device.serviceUUIDs {
            if let short = uuid.uint16Value { uuids16 += littleEndian(UInt32(short), bytes: 2) }
            else if let short = uuid.uint32Value { uuids32 += littleEndian(short, bytes: 4) }
            else { uuids128 += uuid.bytes.reversed() }
        }
        if !uuids16.isEmpty { append(0x03, uuids16, to: &out) }
        if !uuids32.isEmpty { append(0x05, uuids32, to: &out) }
        if !uuids128.isEmpty { append(0x07, uuids128, to: &out) }
        for (uuid, data) in device.serviceData.sorted(by: { $0.key < $1.key }) {
            if let short = uuid.uint16Value { append(0x16, littleEndian(UInt32(short), bytes: 2) + data, to: &out) }
            else if let short = uuid.uint32Value { append(0x20, littleEndian(short, bytes: 4) + data, to: &out) }
            else { append(0x21, uuid.bytes.reversed() + data, to: &out) }
        }
        for (company, data) in device.manufacturerData.sorted(by: { $0.key < $1.key }) {
            append(0xFF, littleEndian(UInt32(company), bytes: 2) + data, to: &out)
        }
        if let tx = device.txPower, let byte = Int8(exactly: tx) { append(0x0A, [UInt8(bitPattern: byte)], to: &out) }
        if let appearance = device.appearance, let value = UInt16(exactly: appearance) {
            append(0x19, littleEndian(UInt32(value), bytes: 2), to: &out)
        }
        return out
    }

    /// ESPHome's address type: 0 public, 1 random (the ESP-IDF's `esp_ble_addr_type_t`);
    /// BlueZ not saying counts as public.
    package static func addressType(_ type: AddressType?) -> UInt32 {
        type == .random ? 1 : 0
    }

    /// One AD structure (length, type, data); one whose data does not fit a length byte is left out.
    private static func append(_ type: UInt8, _ data: [UInt8], to out: inout [UInt8]) {
        guard data.count <= 254 else { return }
        out.append(UInt8(data.count + 1))
        out.append(type)
        out.append(contentsOf: data)
    }

    private static func littleEndian(_ value: UInt32, bytes: Int) -> [UInt8] {
        (0..<bytes).map { UInt8(truncatingIfNeeded: value >> (8 * UInt32($0))) }
    }
}
