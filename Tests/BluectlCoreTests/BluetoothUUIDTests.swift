import Testing
@testable import BluectlCore

/// The description of the error `BluetoothUUID(text, kind:)` throws, or nil if it parses.
private func failure(_ text: String, kind: BluetoothUUID.Kind? = nil) -> String? {
    do throws(BluetoothParseError) {
        _ = try BluetoothUUID(text, kind: kind)
        return nil
    } catch {
        return error.description
    }
}

private func parse(_ text: String, kind: BluetoothUUID.Kind? = nil) -> String? {
    (try? BluetoothUUID(text, kind: kind))?.uuidString
}

private let heartRate = "0000180d-0000-1000-8000-00805f9b34fb"
private let expected = "expected 4, 8 or 32 hex digits, or a Bluetooth SIG name such as battery_level"

@Suite struct BluetoothUUIDFormsTests {
    @Test(arguments: [
        "180d", "180D", "0x180d", "0x180D", "0X180d", "0000180d", "0x0000180D", "0000180D",
        "0000180d-0000-1000-8000-00805f9b34fb", "0000180D-0000-1000-8000-00805F9B34FB",
        "0000180d00001000800000805f9b34fb", "0000180D00001000800000805F9B34FB",
        " 180d", "180d ", "\t0x180d\n", "\r\n0000180d-0000-1000-8000-00805f9b34fb\r\n",
    ])
    func acceptedHexFormsOfHeartRate(text: String) throws {
        let uuid = try BluetoothUUID(text)
        #expect(uuid.uuidString == heartRate)
        #expect(uuid == BluetoothUUID(uint16: 0x180D))
        #expect(uuid.uint16Value == 0x180D)
        #expect(uuid.shortString == "180d")
    }

    @Test func hexWinsOverKind() throws {
        // A kind only narrows name lookup; hex is hex.
        #expect(try BluetoothUUID("2a19", kind: .service).uuidString == "00002a19-0000-1000-8000-00805f9b34fb")
    }

    @Test func thirtyTwoBitShortForm() throws {
        let uuid = try BluetoothUUID("0001fe2c")
        #expect(uuid.uuidString == "0001fe2c-0000-1000-8000-00805f9b34fb")
        #expect(uuid == BluetoothUUID(uint32: 0x0001_FE2C))
        #expect(uuid.uint32Value == 0x0001_FE2C)
        #expect(uuid.uint16Value == nil)
        #expect(uuid.shortString == "0001fe2c")
        #expect(try BluetoothUUID("0xDEADBEEF").uuidString == "deadbeef-0000-1000-8000-00805f9b34fb")
        // 8 digits that fit 16 bits are the 16-bit UUID.
        #expect(try BluetoothUUID("0000fe2c") == BluetoothUUID(uint16: 0xFE2C))
        #expect(try BluetoothUUID("0000fe2c").shortString == "fe2c")
    }

    @Test func vendor128Bit() throws {
        let uuid = try BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
        #expect(uuid.uuidString == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        #expect(uuid.description == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        #expect(uuid.shortString == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        #expect(uuid.uint16Value == nil)
        #expect(uuid.uint32Value == nil)
        #expect(uuid.name == "Nordic UART Service")
        #expect(uuid.uint128Value == 0x6e400001_b5a3_f393_e0a9_e50e24dcca9e)
        #expect(try BluetoothUUID("6e400001b5a3f393e0a9e50e24dcca9e") == uuid)
    }

    @Test func almostBaseIsNotShort() throws {
        // One bit off the base UUID: no short form.
        let uuid = try BluetoothUUID("0000180d-0000-1000-8000-00805f9b34fa")
        #expect(uuid.uint16Value == nil)
        #expect(uuid.uint32Value == nil)
        #expect(uuid.shortString == "0000180d-0000-1000-8000-00805f9b34fa")
        #expect(uuid.name == nil)
        #expect(uuid != BluetoothUUID(uint16: 0x180D))
    }

    @Test func baseUUIDItself() throws {
        let base = BluetoothUUID(uint16: 0)
        #expect(base.uuidString == "00000000-0000-1000-8000-00805f9b34fb")
        #expect(base.shortString == "0000")
        #expect(base.uint16Value == 0)
        #expect(try BluetoothUUID("00000000-0000-1000-8000-00805F9B34FB") == base)
        #expect(BluetoothUUID(uint32: 0xFFFF_FFFF).uuidString == "ffffffff-0000-1000-8000-00805f9b34fb")
        #expect(BluetoothUUID(uint32: 0xFFFF_FFFF).shortString == "ffffffff")
        #expect(BluetoothUUID(uint128: .max).uuidString == "ffffffff-ffff-ffff-ffff-ffffffffffff")
        #expect(BluetoothUUID(uint128: 0).uuidString == "00000000-0000-0000-0000-000000000000")
    }

    @Test func bytes() throws {
        #expect(BluetoothUUID(bytes: [0x18, 0x0D]) == BluetoothUUID(uint16: 0x180D))
        #expect(BluetoothUUID(bytes: [0x00, 0x01, 0xFE, 0x2C]) == BluetoothUUID(uint32: 0x1FE2C))
        let nus: [UInt8] = [
            0x6E, 0x40, 0x00, 0x01, 0xB5, 0xA3, 0xF3, 0x93, 0xE0, 0xA9, 0xE5, 0x0E, 0x24, 0xDC, 0xCA, 0x9E,
        ]
        let uuid = try #require(BluetoothUUID(bytes: nus))
        #expect(uuid.uuidString == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
        #expect(uuid.bytes == nus)
        #expect(BluetoothUUID(bytes: nus[...]) == uuid)  // any Collection
        #expect(BluetoothUUID(uint16: 0x2A19).bytes == [
            0x00, 0x00, 0x2A, 0x19, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB,
        ])
        for count in [0, 1, 3, 5, 8, 15, 17, 32] {
            #expect(BluetoothUUID(bytes: [UInt8](repeating: 0xAB, count: count)) == nil, "count \(count)")
        }
    }

    @Test func comparableAndHashable() {
        let a = BluetoothUUID(uint16: 0x1800), b = BluetoothUUID(uint16: 0x180D)
        let c = BluetoothUUID(uint128: 0x6e400001_b5a3_f393_e0a9_e50e24dcca9e)
        #expect(a < b)
        #expect(b < c)
        #expect(!(b < a))
        #expect([c, b, a].sorted() == [a, b, c])
        #expect(Set([a, b, BluetoothUUID(uint32: 0x180D), c]).count == 3)
        #expect(a.hashValue == BluetoothUUID(bytes: [0x18, 0x00])!.hashValue)
    }

    @Test func allSixteenBitValuesRoundTrip() throws {
        for v in 0...UInt16.max {
            let uuid = BluetoothUUID(uint16: v)
            #expect(uuid.uint16Value == v)
            let short = uuid.shortString
            guard short.utf8.count == 4,
                  try BluetoothUUID(short) == uuid,
                  try BluetoothUUID(uuid.uuidString) == uuid,
                  BluetoothUUID(bytes: [UInt8(v >> 8), UInt8(v & 0xFF)]) == uuid
            else {
                Issue.record("round trip failed for \(v)")
                return
            }
        }
    }

    @Test func random128BitRoundTrip() throws {
        var rng = SplitMix64(seed: 0xB1E7_00C7)
        for _ in 0..<2000 {
            let uuid = BluetoothUUID(uint128: UInt128(rng.next()) << 64 | UInt128(rng.next()))
            #expect(try BluetoothUUID(uuid.uuidString) == uuid)
            #expect(try BluetoothUUID(uuid.uuidString.uppercased()) == uuid)
            #expect(try BluetoothUUID(uuid.uuidString.filter { $0 != "-" }) == uuid)
            #expect(try BluetoothUUID(uuid.shortString) == uuid)
            #expect(BluetoothUUID(bytes: uuid.bytes) == uuid)
        }
    }
}

@Suite struct BluetoothUUIDNameTests {
    @Test(arguments: [
        ("battery_level", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("battery_level", .characteristic, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("BATTERY_LEVEL", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("org.bluetooth.characteristic.battery_level", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("Org.Bluetooth.Characteristic.Battery_Level", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("Battery Level", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("battery level", .characteristic, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("  battery_level\n", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("heart_rate", nil, "0000180d-0000-1000-8000-00805f9b34fb"),
        ("heart_rate", .service, "0000180d-0000-1000-8000-00805f9b34fb"),
        ("Heart Rate", nil, "0000180d-0000-1000-8000-00805f9b34fb"),
        ("heart_rate_measurement", nil, "00002a37-0000-1000-8000-00805f9b34fb"),
        ("battery_service", nil, "0000180f-0000-1000-8000-00805f9b34fb"),
        ("Battery Service", .service, "0000180f-0000-1000-8000-00805f9b34fb"),
        ("client_characteristic_configuration", nil, "00002902-0000-1000-8000-00805f9b34fb"),
        ("client_characteristic_configuration", .descriptor, "00002902-0000-1000-8000-00805f9b34fb"),
        ("gatt.client_characteristic_configuration", nil, "00002902-0000-1000-8000-00805f9b34fb"),
        ("org.bluetooth.descriptor.gatt.client_characteristic_configuration", nil,
         "00002902-0000-1000-8000-00805f9b34fb"),
        ("Client Characteristic Configuration", nil, "00002902-0000-1000-8000-00805f9b34fb"),
        ("device_name", nil, "00002a00-0000-1000-8000-00805f9b34fb"),  // SIG gap.device_name beats thingy.device_name
        ("thingy.device_name", nil, "ef680101-9b35-4933-9b10-52ffa9740042"),
        ("generic_access", nil, "00001800-0000-1000-8000-00805f9b34fb"),
        // Identifier given with a leading space in the data (trimmed by the generator).
        ("org.bluetooth.service.mesh_proxy", nil, "00001828-0000-1000-8000-00805f9b34fb"),
        // Identifier with capitals in the data.
        ("magnetic_flux_density_2d", nil, "00002aa0-0000-1000-8000-00805f9b34fb"),
        ("org.bluetooth.characteristic.Magnetic_flux_density_2D", nil, "00002aa0-0000-1000-8000-00805f9b34fb"),
        // SIG entries come before vendor ones.
        ("temperature", nil, "00002a6e-0000-1000-8000-00805f9b34fb"),
        ("temperature", .characteristic, "00002a6e-0000-1000-8000-00805f9b34fb"),
        ("thingy.temperature", nil, "ef680201-9b35-4933-9b10-52ffa9740042"),
        ("microbit.service.temperature", nil, "e95d6100-251d-470a-a062-fa1922dfa9a8"),
        // A whole short name beats the tail of an alias (iod.record_access_control_point).
        ("record_access_control_point", nil, "00002a52-0000-1000-8000-00805f9b34fb"),
        ("iod.record_access_control_point", nil, "00002b27-0000-1000-8000-00805f9b34fb"),
        ("idd_status", nil, "00002b21-0000-1000-8000-00805f9b34fb"),
        ("iod.status", nil, "00002b21-0000-1000-8000-00805f9b34fb"),
        ("IDD Status", nil, "00002b21-0000-1000-8000-00805f9b34fb"),
        ("count.16", nil, "00002aea-0000-1000-8000-00805f9b34fb"),
        ("current_time", .service, "00001805-0000-1000-8000-00805f9b34fb"),
        ("current_time", .characteristic, "00002a2b-0000-1000-8000-00805f9b34fb"),
        ("Current Time Service", nil, "00001805-0000-1000-8000-00805f9b34fb"),
        ("device_time", .service, "00001847-0000-1000-8000-00805f9b34fb"),
        ("ble.smp", .service, "8d53dc1d-1db7-4cd3-868b-8a527460aa84"),
        ("io.runtime.mcumgr.ble.smp", .characteristic, "da2e7828-fbce-4e01-ae9e-261174997c48"),
        ("SMP Characteristic", nil, "da2e7828-fbce-4e01-ae9e-261174997c48"),
        ("characteristic.battery_level", nil, "00002a19-0000-1000-8000-00805f9b34fb"),
        ("thingy.sensorhub.battery", nil, "fa3cf070-d0c7-4668-96c4-86125c8ac5df"),
        // Listed as both a service and a characteristic, with one UUID: not ambiguous.
        ("dfu.buttonless_experimental", nil, "8e400001-f315-4f60-9fb8-838830daea50"),
        ("uart", nil, "6e400001-b5a3-f393-e0a9-e50e24dcca9e"),
        ("Nordic UART Service", nil, "6e400001-b5a3-f393-e0a9-e50e24dcca9e"),
        ("LEGO® Wireless Protocol v3 Hub Service", nil, "00001623-1212-efde-1623-785feabcd123"),
        ("lego® wireless protocol v3 hub service", nil, "00001623-1212-efde-1623-785feabcd123"),
        ("com.philips-hue.service.light_control", nil, "932c32bd-0000-47a2-835a-a8d455b859dd"),
        ("characteristic.7dfc6001", nil, "7dfc6001-7d1c-4951-86aa-8d9728f8d66c"),
        // 8 hex digits are hex, even though com.apple.characteristic.7DFC6001 ends that way.
        ("7DFC6001", nil, "7dfc6001-0000-1000-8000-00805f9b34fb"),
    ] as [(String, BluetoothUUID.Kind?, String)])
    func nameLookup(text: String, kind: BluetoothUUID.Kind?, uuid: String) throws {
        #expect(try BluetoothUUID(text, kind: kind).uuidString == uuid)
    }

    @Test func namesOfKnownUUIDs() throws {
        let battery = BluetoothUUID(uint16: 0x2A19)
        #expect(battery.name == "Battery Level")
        #expect(battery.shortName == "battery_level")
        #expect(battery.identifier == "org.bluetooth.characteristic.battery_level")
        #expect(battery.name(as: .characteristic) == "Battery Level")
        #expect(battery.name(as: .service) == nil)
        #expect(battery.name(as: .descriptor) == nil)
        #expect(battery.kinds == [.characteristic])

        let hr = BluetoothUUID(uint16: 0x180D)
        #expect(hr.name == "Heart Rate")
        #expect(hr.shortName == "heart_rate")
        #expect(hr.shortName(as: .service) == "heart_rate")
        #expect(hr.shortName(as: .characteristic) == nil)

        let cccd = BluetoothUUID(uint16: 0x2902)
        #expect(cccd.name == "Client Characteristic Configuration")
        #expect(cccd.shortName == "client_characteristic_configuration")
        #expect(cccd.identifier == "org.bluetooth.descriptor.gatt.client_characteristic_configuration")

        // Listed twice (idd_status and iod.status): the primary entry is shown.
        let idd = BluetoothUUID(uint16: 0x2B21)
        #expect(idd.name == "IDD Status")
        #expect(idd.shortName == "idd_status")

        // Shared short names get a longer, unambiguous one.
        #expect(BluetoothUUID(uint16: 0x2AEA).shortName == "count.16")
        #expect(BluetoothUUID(uint16: 0x2B7A).shortName == "audio_input.status")
        #expect(BluetoothUUID(uint16: 0x2A6D).shortName == "pressure")
        let thingyPressure = try BluetoothUUID("EF680202-9B35-4933-9B10-52FFA9740042")
        #expect(thingyPressure.shortName == "thingy.pressure")
        #expect(thingyPressure.name == "Thingy Pressure")

        // Same UUID under two kinds.
        let buttonless = try BluetoothUUID("8e400001-f315-4f60-9fb8-838830daea50")
        #expect(buttonless.kinds == [.service, .characteristic])
        #expect(buttonless.name == buttonless.name(as: .service))
        #expect(buttonless.name(as: .service) != nil)
        #expect(buttonless.name(as: .characteristic) != nil)

        // Apple's identifier names a different UUID in the data; the name follows the UUID.
        let apple = try BluetoothUUID("7DFC8003-7D1C-4951-86AA-8D9728F8D66C")
        #expect(apple.name == "Apple Reserved Characteristic")
        #expect(apple.identifier == "com.apple.characteristic.7DFC7003")

        // Unknown UUIDs have no names.
        let unknown = BluetoothUUID(uint16: 0xFFF0)
        #expect(unknown.name == nil)
        #expect(unknown.shortName == nil)
        #expect(unknown.identifier == nil)
        #expect(unknown.kinds == [])
        #expect(BluetoothUUID(uint128: 0x12345678_1234_1234_1234_123456789abc).name == nil)
    }

    /// Every entry can be found again by its UUID, its short name, its identifier and
    /// (when unique) its human name; names shown come from primary entries.
    @Test func everyTableEntryRoundTrips() throws {
        var checked = 0
        for entry in AssignedNumbers.uuids {
            let uuid = BluetoothUUID(uint128: entry.uuid)
            #expect(try BluetoothUUID(uuid.uuidString) == uuid)
            #expect(try BluetoothUUID(uuid.shortString) == uuid)
            #expect(try BluetoothUUID(entry.shortName, kind: entry.kind) == uuid, "\(entry.identifier)")
            #expect(try BluetoothUUID(entry.identifier, kind: entry.kind) == uuid, "\(entry.identifier)")
            #expect(try BluetoothUUID(entry.identifier.uppercased(), kind: entry.kind) == uuid)
            #expect(uuid.name(as: entry.kind) != nil)
            if entry.primary {
                #expect(uuid.name(as: entry.kind) == entry.name)
                #expect(uuid.shortName(as: entry.kind) == entry.shortName)
            }
            checked += 1
        }
        #expect(checked == 817)
    }

    @Test func humanNamesResolveWhenUnique() throws {
        var byName: [String: Set<UInt128>] = [:]
        for e in AssignedNumbers.uuids { byName[e.name.lowercased(), default: []].insert(e.uuid) }
        var unique = 0
        for e in AssignedNumbers.uuids where byName[e.name.lowercased()]!.count == 1 && e.sig {
            #expect(try BluetoothUUID(e.name, kind: e.kind).uint128Value == e.uuid, "\(e.name)")
            unique += 1
        }
        #expect(unique > 500)
    }
}

@Suite struct BluetoothUUIDTableTests {
    @Test func uuidTableIsComplete() {
        #expect(AssignedNumbers.uuids.count == AssignedNumbers.uuidCount)
        #expect(AssignedNumbers.uuidCount == 817)
        #expect(AssignedNumbers.uuidKeys.count == AssignedNumbers.uuids.count)
        let kinds = Dictionary(grouping: AssignedNumbers.uuids, by: \.kind).mapValues(\.count)
        #expect(kinds[.service] == 125)
        #expect(kinds[.characteristic] == 674)
        #expect(kinds[.descriptor] == 18)
        #expect(AssignedNumbers.uuids.filter(\.sig).count == 558)
    }

    /// The tables are searched where they lie: the keys must be the rows'
    /// UUIDs and codes, row for row, and the offsets must find each row.
    @Test func keysAndOffsetsMatchTheRows() throws {
        let rows = AssignedNumbers.uuidTable.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(rows.count == AssignedNumbers.uuidCount)
        #expect(AssignedNumbers.uuidRowStarts.count == AssignedNumbers.uuidCount + 1)
        #expect(AssignedNumbers.uuidKindStarts == [0, 125, 799, 817])
        var offset = 0
        for (i, row) in rows.enumerated() {
            #expect(Int(AssignedNumbers.uuidRowStarts[i]) == offset, "row \(i)")
            offset += row.utf8.count + 1
            let uuid = try BluetoothUUID(String(row.split(separator: "|")[0].split(separator: " ")[3]))
            #expect(uuid.uint128Value == AssignedNumbers.uuidKeys[i], "row \(i)")
        }
        #expect(Int(AssignedNumbers.uuidRowStarts[rows.count]) == offset)
        let names = AssignedNumbers.companyNames.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(names.count == AssignedNumbers.companyCount)
        #expect(AssignedNumbers.companyNameStarts.count == AssignedNumbers.companyCount + 1)
        offset = 0
        for (i, name) in names.enumerated() {
            #expect(Int(AssignedNumbers.companyNameStarts[i]) == offset, "company \(i)")
            offset += name.utf8.count + 1
            #expect(CompanyIdentifiers.name(for: AssignedNumbers.companyCodes[i]) == String(name))
        }
    }

    @Test func uuidTableIsSortedWithOnePrimaryFirst() {
        let rows = AssignedNumbers.uuids
        #expect(rows.first?.primary == true)
        for (a, b) in zip(rows, rows.dropFirst()) {
            let ka = (a.kind.rank, a.uuid), kb = (b.kind.rank, b.uuid)
            #expect(ka <= kb, "\(a.identifier) before \(b.identifier)")
            // A new (kind, uuid) starts with its primary entry; repeats are aliases.
            #expect(b.primary == (ka != kb), "\(b.identifier)")
        }
        #expect(rows.filter { !$0.primary }.count == 12)
    }

    @Test func tablesHaveNoStrayWhitespace() {
        for e in AssignedNumbers.uuids {
            #expect(!e.identifier.contains(" "))
            #expect(!e.shortName.isEmpty && !e.shortName.contains(" "))
            #expect(e.name.first?.isWhitespace == false && e.name.last?.isWhitespace == false)
        }
    }

    @Test func companyShortNames() {
        #expect(CompanyIdentifiers.shortName(for: 0x004C) == "Apple")
        #expect(CompanyIdentifiers.shortName(for: 0x0000) == "Ericsson")
        #expect(CompanyIdentifiers.shortName(for: 0x0006) == "Microsoft")
        #expect(CompanyIdentifiers.shortName(for: 0x0059) == "Nordic Semiconductor")
        #expect(CompanyIdentifiers.shortName(for: 0x0118) == "Radius Networks")
        #expect(CompanyIdentifiers.shortName(for: 0x0CB9) == "seca")  // seca GmbH & Co. KG
        #expect(CompanyIdentifiers.shortName(for: 0x0A21) == "Apollogic")  // Apollogic Sp. z o.o.
        #expect(CompanyIdentifiers.shortName(for: 0x0380) == "LLC \"MEGA-F service\"")  // a leading legal form stays
        #expect(CompanyIdentifiers.shortName(for: 0xFFFF) == "SIG reserved default ID")
        #expect(CompanyIdentifiers.shortName(for: 0x0F4E) == "Ningbo Dooya Mechanic…", "cut at a word, no dangling &")
        #expect(CompanyIdentifiers.shortName(for: 0x0917) == "ASR Microelectronics(ShenZhen)…", "a long word is cut inside")
        #expect(CompanyIdentifiers.shortName(for: 0xFFFE) == nil)
        for code in AssignedNumbers.companies.codes {
            let short = CompanyIdentifiers.shortName(for: code) ?? ""
            #expect(!short.isEmpty && short.count <= CompanyIdentifiers.maxShortLength + 1, "\(code): \(short)")
            #expect(short.first?.isWhitespace == false && short.last?.isWhitespace == false, "\(code): \(short)")
        }
    }

    @Test func companies() {
        #expect(CompanyIdentifiers.name(for: 0x004C) == "Apple, Inc.")
        #expect(CompanyIdentifiers.name(for: 0x0000) == "Ericsson AB")
        #expect(CompanyIdentifiers.name(for: 0x0006) == "Microsoft")
        #expect(CompanyIdentifiers.name(for: 0x0059) == "Nordic Semiconductor ASA")
        #expect(CompanyIdentifiers.name(for: 0xFFFF)
                == "Bluetooth SIG Specification Reserved Default Vendor ID for Remote Devices Without Device ID Service Record.")
        #expect(CompanyIdentifiers.name(for: 0x0380) == "LLC \"MEGA-F service\"")  // quotes survive generation
        #expect(CompanyIdentifiers.name(for: 0x0225) == "Nestlé Nespresso S.A.")  // and non-ASCII
        #expect(CompanyIdentifiers.name(for: 102) == nil)  // a gap in the assignments
        #expect(CompanyIdentifiers.name(for: 0xFFFE) == nil)
        let (codes, names) = AssignedNumbers.companies
        #expect(codes.count == 3918)
        #expect(codes.count == AssignedNumbers.companyCount)
        #expect(names.count == codes.count)
        #expect(zip(codes, codes.dropFirst()).allSatisfy { $0 < $1 })
        #expect(names.allSatisfy { !$0.isEmpty })
    }
}

@Suite struct UUIDParseErrorTests {
    @Test(arguments: [
        ("", nil, "invalid UUID \"\": empty; \(expected)"),
        ("   ", nil, "invalid UUID \"   \": empty; \(expected)"),
        ("\n", nil, "invalid UUID \"\\n\": empty; \(expected)"),
        ("12x4", nil, "invalid UUID \"12x4\": \(expected)"),
        ("180", nil, "invalid UUID \"180\": got 3 hex digits; \(expected)"),
        ("1", nil, "invalid UUID \"1\": got 1 hex digit; \(expected)"),
        ("180d0", nil, "invalid UUID \"180d0\": got 5 hex digits; \(expected)"),
        ("0000180d00001000800000805f9b34f", nil, "invalid UUID \"0000180d00001000800000805f9b34f\": got 31 hex digits; \(expected)"),
        ("0000180d00001000800000805f9b34fbb", nil, "invalid UUID \"0000180d00001000800000805f9b34fbb\": got 33 hex digits; \(expected)"),
        ("0x", nil, "invalid UUID \"0x\": expected 4 or 8 hex digits after 0x"),
        ("0x18d", nil, "invalid UUID \"0x18d\": expected 4 or 8 hex digits after 0x"),
        ("0x180g", nil, "invalid UUID \"0x180g\": expected 4 or 8 hex digits after 0x"),
        ("0x0000180d00001000800000805f9b34fb", nil,
         "invalid UUID \"0x0000180d00001000800000805f9b34fb\": expected 4 or 8 hex digits after 0x"),
        ("0000180d-0000-1000-8000-00805f9b34f", nil,
         "invalid UUID \"0000180d-0000-1000-8000-00805f9b34f\": expected 8-4-4-4-12 hex digits, as in 0000180d-0000-1000-8000-00805f9b34fb"),
        ("0000180d-0000-1000-8000-00805f9b34fg", nil,
         "invalid UUID \"0000180d-0000-1000-8000-00805f9b34fg\": expected 8-4-4-4-12 hex digits, as in 0000180d-0000-1000-8000-00805f9b34fb"),
        ("{0000180d-0000-1000-8000-00805f9b34fb}", nil,
         "invalid UUID \"{0000180d-0000-1000-8000-00805f9b34fb}\": expected 8-4-4-4-12 hex digits, as in 0000180d-0000-1000-8000-00805f9b34fb"),
        ("0000180d0000-1000-8000-00805f9b34fb-", nil,
         "invalid UUID \"0000180d0000-1000-8000-00805f9b34fb-\": expected 8-4-4-4-12 hex digits, as in 0000180d-0000-1000-8000-00805f9b34fb"),
        ("-", nil, "invalid UUID \"-\": expected 8-4-4-4-12 hex digits, as in 0000180d-0000-1000-8000-00805f9b34fb"),
        ("1234 5678", nil, "invalid UUID \"1234 5678\": \(expected)"),
        ("battery_levle", nil, "invalid UUID \"battery_levle\": \(expected)"),
        ("nope", .service,
         "invalid UUID \"nope\": expected 4, 8 or 32 hex digits, or a Bluetooth SIG service name such as heart_rate"),
        ("nope", .descriptor,
         "invalid UUID \"nope\": expected 4, 8 or 32 hex digits, or a Bluetooth SIG descriptor name such as client_characteristic_configuration"),
        ("battery", nil,
         "invalid UUID \"battery\": unknown name; did you mean battery_level, battery_service, battery_information, battery_level_state?"),
        ("heart_rate", .characteristic,
         "invalid UUID \"heart_rate\": not a characteristic name; it names service org.bluetooth.service.heart_rate (180d)"),
        ("battery_level", .descriptor,
         "invalid UUID \"battery_level\": not a descriptor name; it names characteristic org.bluetooth.characteristic.battery_level (2a19)"),
        ("current_time", nil,
         "invalid UUID \"current_time\": ambiguous name, matches service org.bluetooth.service.current_time (1805) and characteristic org.bluetooth.characteristic.current_time (2a2b); use the full identifier or the UUID"),
        ("Device Time", nil,
         "invalid UUID \"Device Time\": ambiguous name, matches service org.bluetooth.service.device_time (1847) and characteristic org.bluetooth.characteristic.device_time (2b90); use the full identifier or the UUID"),
        ("current_time", .descriptor,
         "invalid UUID \"current_time\": not a descriptor name; it names service org.bluetooth.service.current_time (1805) and characteristic org.bluetooth.characteristic.current_time (2a2b)"),
        ("status", nil,
         "invalid UUID \"status\": ambiguous name, matches characteristic org.bluetooth.characteristic.iod.status (2b21) and characteristic org.bluetooth.characteristic.audio_input.status (2b7a); use the full identifier or the UUID"),
        ("16", .characteristic,
         "invalid UUID \"16\": ambiguous name, matches characteristic org.bluetooth.characteristic.count.16 (2aea), characteristic org.bluetooth.characteristic.fixed_string.16 (2af5) and characteristic org.bluetooth.characteristic.time.second.16 (2b16); use the full identifier or the UUID"),
        ("ble.smp", nil,
         "invalid UUID \"ble.smp\": ambiguous name, matches service io.runtime.mcumgr.ble.smp (8d53dc1d-1db7-4cd3-868b-8a527460aa84) and characteristic io.runtime.mcumgr.ble.smp (da2e7828-fbce-4e01-ae9e-261174997c48); use the full identifier or the UUID"),
        ("temperature", .service,
         "invalid UUID \"temperature\": ambiguous name, matches service com.adafruit.service.temperature (adaf0100-c332-42a8-93bd-25e905756cb8) and service org.microbit.service.temperature (e95d6100-251d-470a-a062-fa1922dfa9a8); use the full identifier or the UUID"),
        ("Apple Reserved Characteristic", nil,
         "invalid UUID \"Apple Reserved Characteristic\": ambiguous name, matches characteristic com.apple.characteristic.7DFC6001 (7dfc6001-7d1c-4951-86aa-8d9728f8d66c), characteristic com.apple.characteristic.7DFC6002 (7dfc6002-7d1c-4951-86aa-8d9728f8d66c), characteristic com.apple.characteristic.7DFC6003 (7dfc6003-7d1c-4951-86aa-8d9728f8d66c), characteristic com.apple.characteristic.7DFC6004 (7dfc6004-7d1c-4951-86aa-8d9728f8d66c), characteristic com.apple.characteristic.7DFC6005 (7dfc6005-7d1c-4951-86aa-8d9728f8d66c), characteristic com.apple.characteristic.7DFC6101 (7dfc6101-7d1c-4951-86aa-8d9728f8d66c) and 32 more; use the full identifier or the UUID"),
        ("\u{1}180d", nil, "invalid UUID \"\\u{1}180d\": contains control characters; \(expected)"),
        ("180d\0", nil, "invalid UUID \"180d\\0\": contains control characters; \(expected)"),
        ("a\tb", nil, "invalid UUID \"a\\tb\": contains control characters; \(expected)"),
        ("heart\u{7F}rate", nil, "invalid UUID \"heart\\u{7F}rate\": contains control characters; \(expected)"),
        ("x\u{85}y", nil, "invalid UUID \"x\\u{85}y\": contains control characters; \(expected)"),
        ("\u{1B}[31mred", nil, "invalid UUID \"\\u{1B}[31mred\": contains control characters; \(expected)"),
        ("battery_level\u{202E}", nil, "invalid UUID \"battery_level\\u{202E}\": \(expected)"),
        ("a\"b\\c", nil, "invalid UUID \"a\\\"b\\\\c\": \(expected)"),
        ("電池", nil, "invalid UUID \"電池\": \(expected)"),
        ("🔋", .characteristic,
         "invalid UUID \"🔋\": expected 4, 8 or 32 hex digits, or a Bluetooth SIG characteristic name such as battery_level"),
        ("org.bluetooth.characteristic.battery_levelx", nil,
         "invalid UUID \"org.bluetooth.characteristic.battery_levelx\": \(expected)"),
        (".battery_level", nil,
         "invalid UUID \".battery_level\": unknown name; did you mean battery_level, battery_level_state, battery_level_status?"),
        // Vendor local names are not cut shorter: this is not thingy.sensorhub.battery.
        ("sensorhub.battery", nil, "invalid UUID \"sensorhub.battery\": unknown name; did you mean thingy.sensorhub.battery?"),
        ("smp", nil, "invalid UUID \"smp\": unknown name; did you mean ble.smp?"),
        ("\u{301}x", nil, "invalid UUID \"\\u{301}x\": \(expected)"),
        ("x\u{D4E}", nil, "invalid UUID \"x\\u{D4E}\": \(expected)"),  // would join the closing quote
        ("x\u{301}", nil, "invalid UUID \"x\u{301}\": \(expected)"),  // a mark after a letter is fine
    ] as [(String, BluetoothUUID.Kind?, String)])
    func rejected(text: String, kind: BluetoothUUID.Kind?, message: String) {
        #expect(failure(text, kind: kind) == message)
    }

    @Test func errorCarriesInputAndReason() {
        #expect(throws: BluetoothParseError(.uuid, input: "0x18d", reason: "expected 4 or 8 hex digits after 0x")) {
            try BluetoothUUID("0x18d")
        }
        let error = BluetoothParseError(.uuid, input: "12x4", reason: expected)
        #expect(error.description == "invalid UUID \"12x4\": \(expected)")
    }

    @Test func longInputIsTruncatedInTheMessage() {
        let huge = String(repeating: "a", count: 100_000)
        #expect(failure(huge) == "invalid UUID \"\(String(repeating: "a", count: 64))…\": too long (100000 bytes); \(expected)")
        let justOver = String(repeating: "b", count: 257)
        #expect(failure(justOver) == "invalid UUID \"\(String(repeating: "b", count: 64))…\": too long (257 bytes); \(expected)")
        // Under the limit: looked up, then echoed truncated.
        let long = String(repeating: "c", count: 200)
        #expect(failure(long) == "invalid UUID \"\(String(repeating: "c", count: 64))…\": got 200 hex digits; \(expected)")
        let longName = String(repeating: "z", count: 100)
        #expect(failure(longName) == "invalid UUID \"\(String(repeating: "z", count: 64))…\": \(expected)")
        // Exactly 64 scalars: not truncated.
        let sixtyFour = String(repeating: "z", count: 64)
        #expect(failure(sixtyFour) == "invalid UUID \"\(sixtyFour)\": \(expected)")
        // One huge grapheme cluster (a base letter and many combining marks) is cut by scalars.
        let zalgo = "e" + String(repeating: "\u{301}", count: 120)
        let message = failure(zalgo)
        #expect(message?.unicodeScalars.count ?? 0 < 200)
        #expect(message?.hasSuffix("…\": \(expected)") == true)
        // A long run of control characters is escaped and truncated too.
        let controls = String(repeating: "\u{7}", count: 100)
        #expect(failure(controls) == "invalid UUID \"\(String(repeating: "\\u{7}", count: 64))…\": contains control characters; \(expected)")
    }

    @Test func whitespaceTooLongStillRejected() {
        // The length limit applies before trimming, so padding cannot smuggle in work.
        let padded = String(repeating: " ", count: 300) + "180d"
        #expect(failure(padded)?.hasSuffix("too long (304 bytes); \(expected)") == true)
    }

    /// Random byte soup and random Unicode never trap, and every failure is one line.
    @Test func fuzz() {
        var rng = SplitMix64(seed: 42)
        let alphabet = Array("0123456789abcdefABCDEFxX-_. {}\u{0}\n\t\u{7F}\u{85}\u{202E}é電🔋\u{301}\"\\")
        for round in 0..<2000 {
            let length = Int(rng.next() % 48)
            var text = ""
            if round % 2 == 0 {
                for _ in 0..<length { text.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
            } else {
                var bytes: [UInt8] = []
                for _ in 0..<length { bytes.append(UInt8(truncatingIfNeeded: rng.next())) }
                text = String(decoding: bytes, as: UTF8.self)  // invalid UTF-8 is repaired, as from argv
            }
            for kind in [nil, BluetoothUUID.Kind.service] {
                do throws(BluetoothParseError) {
                    let uuid = try BluetoothUUID(text, kind: kind)
                    #expect((try? BluetoothUUID(uuid.uuidString)) == uuid)
                } catch {
                    let message = error.description
                    // The quotes stand alone: nothing in the echo combines with them.
                    #expect(message.hasPrefix("invalid UUID \""))
                    #expect(message.contains("\": "))
                    #expect(!message.contains("\n") && !message.contains("\r") && !message.contains("\u{0}"))
                    #expect(message.unicodeScalars.allSatisfy { $0.properties.generalCategory != .control })
                    #expect(error.input == text)
                }
            }
        }
    }

    /// 14 MB of words that, under the length limit, would go through name lookup: the limit
    /// decides before anything is examined (the reason is the length, nothing else), so the
    /// work cannot grow with the input. The same words cut to the limit are looked up.
    @Test func hugeInputIsRejectedByItsLengthAlone() throws {
        let huge = String(repeating: "battery_level ", count: 1_000_000)
        let error = try #require(throws: BluetoothParseError.self) { try BluetoothUUID(huge) }
        #expect(error == BluetoothParseError(.uuid, input: huge, reason: "too long (14000000 bytes); \(expected)"))
        #expect(error.description.hasPrefix("invalid UUID \"battery_level battery_level "))
        #expect(error.description.unicodeScalars.count < 300, "the echo is cut, not 14 MB long")
        let atLimit = try #require(String(huge.utf8.prefix(BluetoothUUID.maxInputLength)))
        #expect(atLimit.utf8.count == 256)
        #expect(failure(atLimit) == BluetoothParseError(.uuid, input: atLimit, reason: expected).description)
        #expect(failure(atLimit + "x")?.hasSuffix("too long (257 bytes); \(expected)") == true)
    }
}

/// A small deterministic generator, so failures reproduce (the sensor decoders' random-data test uses it too).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
