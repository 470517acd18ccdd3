import BluectlCore
import BluectlDBus
import Testing
@testable import BluectlCLI

@Suite("Live scan view: the table and the screen, with no terminal")
struct LiveScanViewTests {
    static func device(_ address: String, name: String? = nil, rssi: Int16? = nil, uuids: [String] = []) -> DeviceInfo {
        var p: [String: DBusValue] = ["Address": .string(address), "UUIDs": .stringArray(uuids)]
        if let name { p["Name"] = .string(name) }
        if let rssi { p["RSSI"] = .int16(rssi) }
        return DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_"))!,
                          properties: PropertyMap(p))
    }

    @Test("strongest first, no RSSI last, ties by address; a device not heard for ageOut seconds leaves")
    func orderAndAgeing() {
        var table = LiveScanTable(ageOut: 10)
        table.update(Self.device("AA:00:00:00:00:03"), at: 0)
        table.update(Self.device("AA:00:00:00:00:02", rssi: -70), at: 0)
        table.update(Self.device("AA:00:00:00:00:01", rssi: -70), at: 1)
        table.update(Self.device("AA:00:00:00:00:04", rssi: -40), at: 2)
        #expect(table.visible(at: 5).map(\.address) == ["AA:00:00:00:00:04", "AA:00:00:00:00:01", "AA:00:00:00:00:02", "AA:00:00:00:00:03"])
        table.update(Self.device("AA:00:00:00:00:02", rssi: -30), at: 9)
        #expect(table.visible(at: 10.5).map(\.address) == ["AA:00:00:00:00:02", "AA:00:00:00:00:04", "AA:00:00:00:00:01"],
                "the update moves 02 up; 03 (last heard at 0) aged out")
        table.prune(at: 12.5)
        #expect(table.rows.keys.sorted() == ["AA:00:00:00:00:02"])
    }

    @Test("the screen: header, titles, rows with bar and age, cut to the width; what does not fit is counted")
    func screenLines() {
        var table = LiveScanTable(ageOut: 30)
        table.update(Self.device("AA:00:00:00:00:01", name: "Thermo", rssi: -60, uuids: ["0000180d-0000-1000-8000-00805f9b34fb"]), at: 0)
        table.update(Self.device("AA:00:00:00:00:02", name: "\u{1B}[2Jx", rssi: -95), at: 3)
        let lines = LiveScanScreen.lines(table, now: 5, elapsed: 65, adapter: "hci0", width: 200, height: 24)
        #expect(lines == [
            "bluectl scan on hci0: 2 devices, 1:05 (Ctrl-C to stop)",
            "ADDRESS            RSSI     SIGNAL SEEN  NAME                      SUMMARY",
            "AA:00:00:00:00:01  -60 dBm  ████·  5s    Thermo                    180d (Heart Rate)",
            "AA:00:00:00:00:02  -95 dBm  █····  2s    \(TextSafety.terminalSafe("\u{1B}[2Jx"))",
        ])
        #expect(!lines.joined().contains("\u{1B}"), "no raw escape from a device name")
        let narrow = LiveScanScreen.lines(table, now: 5, elapsed: 5, adapter: "hci0", width: 30, height: 4)
        #expect(narrow.allSatisfy { $0.count <= 30 } && narrow[0].hasSuffix("…"), "\(narrow)")
        #expect(narrow.count == 3 && narrow[2] == "… and 2 more (a taller termin…", "one line of room: only the count: \(narrow)")
    }

    @Test("the signal bar: a cell per 10 dB above -100 dBm, rounded up: -100 and weaker none, -60 four, -51 and stronger all")
    func bar() {
        #expect([nil, -127, -100, -91, -90, -75, -51, -50, -20].map { LiveScanScreen.bar($0) } ==
                ["·····", "·····", "·····", "█····", "█····", "███··", "█████", "█████", "█████"])
    }
}
