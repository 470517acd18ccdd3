import BluectlCore
import BluectlDBus
import Foundation
import Testing
@testable import BluectlCLI

@Suite("docs/output.md's field tables are generated from the records")
struct OutputReferenceTests {
    static let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/output.md")

    @Test("every scan field has a meaning, no note names a field that is gone, every field has a type")
    func descriptions() {
        #expect(OutputReference.problems() == [])
    }

    /// Scripts/gen-output-docs runs this with BLUECTL_WRITE_OUTPUT_DOCS=1: then it writes the tables.
    @Test("docs/output.md holds the tables the records generate (Scripts/gen-output-docs writes them)")
    func docsMatchRecords() throws {
        let text = try String(contentsOf: Self.docs, encoding: .utf8)
        let (updated, missing) = OutputReference.updated(text)
        #expect(missing == [], "docs/output.md lacks the markers of these generated tables")
        if ProcessInfo.processInfo.environment["BLUECTL_WRITE_OUTPUT_DOCS"] == "1" {
            try updated.write(to: Self.docs, atomically: true, encoding: .utf8)
            return
        }
        #expect(updated == text, "docs/output.md differs from what the records generate: run Scripts/gen-output-docs")
    }

    @Test("the tables list what the JSON forms print: unpair's adapter whether BlueZ knew the device or not, scan's restored fields")
    func knownDrifts() {
        let unpair = OutputReference.deviceCommands.first { $0.label.hasPrefix("`unpair") }
        #expect(unpair?.records.count == 2)
        for record in unpair?.records ?? [] { #expect(record.json().contains("\"adapter\":\"hci0\""), "\(record.json())") }
        let restored = OutputReference.events.first { $0.intro == "`scan --restore-id`" }?.fieldList() ?? ""
        for key in ["restore_id", "saved", "was_running", "filter", "used"] { #expect(restored.contains("`\(key)`"), "\(key)") }
    }

    @Test("info and devices say a device without service UUIDs the same way: no service_uuids")
    func emptyServiceUUIDs() {
        let bare = DeviceInfo(path: ObjectPath("/org/bluez/hci0/dev_AA_BB_CC_DD_EE_01")!,
                              properties: PropertyMap(["Address": .string("AA:BB:CC:DD:EE:01"), "UUIDs": .stringArray([])]))
        let info = InfoRecord(device: DeviceRecord(device: bare, adapter: "hci0"), state: .disconnected, mtu: nil, services: []).json()
        let known = KnownDeviceRecord(device: bare, adapter: "hci0").json()
        #expect(!info.contains("service_uuids") && !known.contains("service_uuids"), "info: \(info)\ndevices: \(known)")
    }
}
