// End to end: `bluectl read` of the Environmental Sensing characteristics a thermometer
// serves (the stand-in's GATT objects): the decoded value beside the hex, and in --json.

import Testing

@Suite("bluectl read decodes Environmental Sensing characteristics", .timeLimit(.minutes(3)))
struct EnvironmentalSensingReadTests {
    @Test("temperature (text), humidity (JSON) and pressure (decoded) of a service 0x181A")
    func readDecoded() async throws {
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            let ess = try await bus.addGattService("hci0", heartRateAddress, uuid: "181a")
            try await bus.addGattCharacteristic(ess, uuid: "2a6e", flags: ["read", "notify"], value: [0x66, 0x08])
            try await bus.addGattCharacteristic(ess, uuid: "2a6f", flags: ["read", "notify"], value: [0xD9, 0x12])
            try await bus.addGattCharacteristic(ess, uuid: "2a6d", flags: ["read"], value: [0x05, 0x76, 0x0F, 0x00])
            let c = try await bus.runBluectl(["connect", heartRateAddress])
            #expect(c.exitCode == 0, "\(c)")

            let temperature = try await bus.runBluectl(["read", heartRateAddress, "2a6e"])
            #expect(temperature.stdout == "6608 (21.50 °C)\n", "\(temperature)")
            let humidity = try await bus.runBluectl(["read", heartRateAddress, "2a6f", "--json"])
            #expect(humidity.stdout == #"{"device":"\#(heartRateAddress)","characteristic":"00002a6f-0000-1000-8000-00805f9b34fb","value":"d912","decoded":{"humidity_percent":48.25}}"# + "\n",
                    "\(humidity)")
            let pressure = try await bus.runBluectl(["read", heartRateAddress, "2a6d", "--format", "decoded"])
            #expect(pressure.stdout == "1013.253 hPa\n", "\(pressure)")
        }
    }
}
