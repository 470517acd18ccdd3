// Bad input, table-driven (issue 5): each row is argv (+ how the bus and
// stand-in are set up) → the documented exit code and a one-line message on
// stderr. Whatever the input: exactly one stderr line starting "bluectl: ",
// no crash output, and the process ends by itself (the harness kills it at
// its limit and the row fails — never a timing assertion).

import Foundation
import Testing

private let D = heartRateAddress

private struct BadInput: Sendable, CustomStringConvertible {
    enum Setup: Sendable {
        /// One bus with the heart-rate peripheral, shared by all such rows (rows must not change it).
        case shared
        /// A bus of its own, prepared by the closure.
        case fresh(@Sendable (PrivateBus, HeartRateGatt) async throws -> Void)
        /// A bus without org.bluez on it.
        case noStandIn
        /// A stand-in without adapters.
        case noAdapter
        /// DBUS_SYSTEM_BUS_ADDRESS pointing nowhere.
        case noBus
        /// The bus policy denies this (interface, member).
        case deny(String, String)
    }

    var args: [String]
    var code: Int32
    var message: String
    var setup: Setup = .shared
    /// Runs once bluectl has started (e.g. make the device vanish during a call).
    var during: (@Sendable (PrivateBus, HeartRateGatt) async throws -> Void)?

    var description: String { args.joined(separator: " ") }
}

/// `bluectl connect` (so that the GATT objects are exported before the row changes them).
private func connectFirst(_ bus: PrivateBus) async throws {
    let r = try await bus.runBluectl(["connect", D])
    guard r.exitCode == 0 else { throw BusTierError("connect for the set-up failed: \(r)") }
}

private let longHex = String(repeating: "00", count: 245)
/// A SPEC serve accepts (the lab's heart-rate server).
private let heartRateSpecFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Lab/heart-rate.json").path
private let tooLongWithResponse = String(repeating: "00", count: 513)
/// A passkey file anyone may read (mode 644), written by its row's set-up: refused as a keys
/// file is. One name for every run of a build (`BusTier.runFile`), as `badKeyFile` below.
private let worldReadablePasskeyFile = BusTier.runFile("bluectl-bus-tier-passkey-644")

/// A key file `proxy` must refuse, written by its row's set-up: one name for every run of a
/// build (`BusTier.runFile`: the same bytes each time), so that runs leave one file, not one each.
private let badKeyFile = BusTier.runFile("bluectl-bus-tier-bad-key")

private let rows: [BadInput] = [
    // malformed UUIDs and selectors (64)
    // one style for the argument parser's lines too, and a did-you-mean for a mistyped subcommand or option
    BadInput(args: ["help", "scna"], code: 64, message: "bluectl: unknown subcommand \"scna\"; did you mean \"scan\"?"),
    BadInput(args: ["scna"], code: 64, message: "bluectl: unknown subcommand \"scna\"; did you mean \"scan\"?"),
    BadInput(args: ["reed", D, "2a19"], code: 64, message: "bluectl: unknown subcommand \"reed\"; did you mean \"read\"?"),
    BadInput(args: ["scan", "--timout", "3"], code: 64, message: "bluectl: unknown option \"--timout\"; did you mean \"--timeout\"?"),
    BadInput(args: ["--versoin"], code: 64, message: "bluectl: unknown option \"--versoin\"; did you mean \"--version\"?"),
    // the bad option is named, not the argument the parser missed because of it
    BadInput(args: ["read", "-x"], code: 64, message: "bluectl: unknown option \"-x\""),
    BadInput(args: ["read", D], code: 64, message: "bluectl: missing expected argument CHARACTERISTIC"),
    BadInput(args: ["adapter", "--power", "maybe"], code: 64, message: "bluectl: invalid --power \"maybe\": expected on or off"),
    BadInput(args: ["serve", "/nonexistent.json"], code: 64, message: "bluectl: cannot read SPEC /nonexistent.json: No such file or directory"),
    // info and disconnect neither connect nor pair: they do not offer what only that needs
    BadInput(args: ["info", D, "--retries", "3"], code: 64, message: "bluectl: unknown option \"--retries\""),
    BadInput(args: ["info", D, "--agent", "none"], code: 64, message: "bluectl: unknown option \"--agent\""),
    // unpair/remove never scan and devices only reads: no --power-on (disconnect, info, trust, block take it: they may scan)
    BadInput(args: ["unpair", D, "--power-on"], code: 64, message: "bluectl: unknown option \"--power-on\""),
    BadInput(args: ["remove", D, "--power-on"], code: 64, message: "bluectl: unknown option \"--power-on\""),
    BadInput(args: ["devices", "--power-on"], code: 64, message: "bluectl: unknown option \"--power-on\""),
    BadInput(args: ["read", D, "12x4"], code: 64, message: "invalid UUID \"12x4\""),
    BadInput(args: ["read", D, ""], code: 64, message: "invalid UUID \"\": empty"),
    BadInput(args: ["read", D, "0000180d-0000-1000-8000-00805f9b34fbXX"], code: 64, message: "8-4-4-4-12"),
    BadInput(args: ["read", D, "not_a_sig_name"], code: 64, message: "\"not_a_sig_name\""),
    BadInput(args: ["read", D, "handle:0"], code: 64, message: "invalid handle \"handle:0\""),
    BadInput(args: ["read", D, "handle:70000"], code: 64, message: "invalid handle \"handle:70000\""),
    BadInput(args: ["read", D, "/not//path"], code: 64, message: "invalid object path \"/not//path\""),
    BadInput(args: ["read", D, "2a38", "--service", "zz"], code: 64, message: "invalid --service"),
    BadInput(args: ["read", D, "2a37", "--descriptor", "12345"], code: 64, message: "got 5 hex digits"),
    BadInput(args: ["subscribe", D, "2a37", "2a3z"], code: 64, message: "\"2a3z\""),
    // malformed devices (64)
    BadInput(args: ["read", "", "2a38"], code: 64, message: "invalid DEVICE \"\": empty"),
    BadInput(args: ["connect", "AA:BB:CC:DD:EE"], code: 64, message: "invalid DEVICE \"AA:BB:CC:DD:EE\": not a Bluetooth address"),
    BadInput(args: ["info", "GG:BB:CC:DD:EE:FF"], code: 64, message: "invalid DEVICE \"GG:BB:CC:DD:EE:FF\""),
    BadInput(args: ["read", "/org/bluez//hci0", "2a38"], code: 64, message: "not a valid D-Bus object path"),
    BadInput(args: ["read", "AA:BB", "2a19"], code: 64, message: "invalid DEVICE \"AA:BB\": not a Bluetooth address"),
    BadInput(args: ["pair", "AA:BB:CC:DD:EE:F"], code: 64, message: "invalid DEVICE \"AA:BB:CC:DD:EE:F\": not a Bluetooth address"),
    BadInput(args: ["trust", "Sensor\u{1B}[2J"], code: 64, message: "holds control characters, so not a name BlueZ could report"),
    BadInput(args: ["unpair", "Sensor\n2"], code: 64, message: "holds control characters"),
    BadInput(args: ["read", "Sensor\u{FFFD}", "2a38"], code: 64, message: "not valid UTF-8"),
    BadInput(args: ["block", String(repeating: "n", count: 249)], code: 64, message: "249 bytes, longer than a device name can be (248)"),
    // numbers (64)
    BadInput(args: ["read", D, "2a38", "--offset", "-1"], code: 64, message: "invalid --offset \"-1\""),
    BadInput(args: ["read", D, "2a38", "--offset", "70000"], code: 64, message: "invalid --offset \"70000\""),
    BadInput(args: ["read", D, "2a38", "--timeout", "-1"], code: 64, message: "invalid --timeout \"-1\""),
    BadInput(args: ["read", D, "2a38", "--timeout", "nan"], code: 64, message: "invalid --timeout \"nan\""),
    BadInput(args: ["read", D, "2a38", "--timeout", "inf"], code: 64, message: "invalid --timeout \"inf\""),
    BadInput(args: ["read", D, "2a38", "--timeout", "1e12"], code: 64, message: "invalid --timeout \"1e12\""),
    BadInput(args: ["connect", D, "--timeout", "0"], code: 64, message: "invalid --timeout \"0\""),
    BadInput(args: ["write", D, "2a39", "01", "--timeout", "abc"], code: 64, message: "invalid --timeout \"abc\""),
    BadInput(args: ["connect", D, "--retries", "-1"], code: 64, message: "invalid --retries \"-1\""),
    BadInput(args: ["connect", D, "--retries", "99"], code: 64, message: "invalid --retries \"99\""),
    BadInput(args: ["subscribe", D, "2a37", "--count", "0"], code: 64, message: "invalid --count \"0\""),
    BadInput(args: ["subscribe", D, "2a37", "--count", "abc"], code: 64, message: "bluectl: invalid --count \"abc\"\n"),
    BadInput(args: ["subscribe", D, "2a37", "--duration", "nan"], code: 64, message: "invalid --duration \"nan\""),
    BadInput(args: ["subscribe", D, "2a37", "--duration", "-3"], code: 64, message: "invalid --duration \"-3\""),
    BadInput(args: ["subscribe", D, "2a37", "--count", "-5"], code: 64, message: "invalid --count \"-5\""),
    BadInput(args: ["subscribe", D, "2a37", "--queue", "0"], code: 64, message: "invalid --queue \"0\""),
    BadInput(args: ["subscribe", D, "2a37", "--queue", "-1"], code: 64, message: "invalid --queue \"-1\""),
    BadInput(args: ["subscribe", D, "2a37", "--check-sequence", "u64"], code: 64, message: "bluectl: invalid --check-sequence \"u64\""),
    BadInput(args: ["subscribe", D, "2a37", "--notify-via", "socket"], code: 64,
             message: "bluectl: invalid --notify-via \"socket\": expected notify or acquire\n"),
    BadInput(args: ["subscribe", D, "2a37", "--restore-id", "../x"], code: 64, message: "invalid restore id \"../x\""),
    BadInput(args: ["subscribe", D, "2a37", "--restore-id", ""], code: 64, message: "invalid restore id \"\""),
    BadInput(args: ["subscribe"], code: 64, message: "give DEVICE and CHARACTERISTIC"),
    BadInput(args: ["subscribe", D], code: 64, message: "give at least one CHARACTERISTIC"),
    BadInput(args: ["scan", "--rssi", "1000"], code: 64, message: "invalid --rssi \"1000\""),
    // a negative number is a value refused by name, not a missing one
    BadInput(args: ["scan", "--count", "-1"], code: 64, message: "bluectl: invalid --count \"-1\": expected 1 or more\n"),
    BadInput(args: ["serve", "/nonexistent.json", "--request-deadline", "-1"], code: 64,
             message: "bluectl: invalid --request-deadline \"-1\": expected a positive number of seconds\n"),
    BadInput(args: ["advertise", "--appearance", "-1"], code: 64, message: "bluectl: invalid --appearance \"-1\": expected 0 to 65535"),
    // l2cap: the mode, its arguments, the PSM (64); an unknown device (68)
    BadInput(args: ["l2cap"], code: 64, message: "bluectl: missing expected argument"),
    BadInput(args: ["l2cap", "send", D, "128"], code: 64, message: "bluectl: invalid MODE \"send\": expected connect or listen\n"),
    BadInput(args: ["l2cap", "connect", D], code: 64, message: "bluectl: l2cap connect takes DEVICE PSM (got 1 argument)\n"),
    BadInput(args: ["l2cap", "listen", "128", "129"], code: 64, message: "bluectl: l2cap listen takes at most one PSM (got 2 arguments)\n"),
    BadInput(args: ["l2cap", "connect", D, "0"], code: 64, message: "bluectl: invalid PSM \"0\": 0 is not a PSM\n"),
    BadInput(args: ["l2cap", "connect", D, "0x1001"], code: 64, message: "bluectl: invalid PSM \"0x1001\": LE PSMs go up to 0x00FF (255)"),
    BadInput(args: ["l2cap", "listen", "-5"], code: 64, message: "bluectl: unknown option \"-5\""),
    BadInput(args: ["l2cap", "listen", "12a"], code: 64, message: "bluectl: invalid PSM \"12a\": expected a decimal number or 0x followed by hex digits\n"),
    BadInput(args: ["l2cap", "connect", D, "128", "--keep"], code: 64, message: "bluectl: --keep is for l2cap listen\n"),
    BadInput(args: ["l2cap", "listen", "--security", "max"], code: 64, message: "bluectl: invalid --security \"max\": expected low, medium or high\n"),
    BadInput(args: ["l2cap", "listen", "--linger", "-1"], code: 64, message: "bluectl: invalid --linger \"-1\": expected a positive number of seconds\n"),
    BadInput(args: ["l2cap", "connect", "AA:BB:CC:DD:EE", "128"], code: 64, message: "invalid DEVICE \"AA:BB:CC:DD:EE\": not a Bluetooth address"),
    BadInput(args: ["l2cap", "connect", "11:22:33:44:55:66", "128", "--timeout", "2"], code: 68, message: "device 11:22:33:44:55:66"),
    // other options (64)
    BadInput(args: ["read", D, "2a38", "--adapter", "foo"], code: 64, message: "invalid adapter name \"foo\""),
    BadInput(args: ["read", D, "2a38", "--adapter", "hci"], code: 64, message: "invalid adapter name \"hci\""),
    BadInput(args: ["read", D, "2a38", "--agent", "bogus"], code: 64,
             message: "bluectl: invalid --agent \"bogus\": expected no-input-no-output, keyboard-display or none\n"),
    // pairing secrets: never echoed back, where they came from named (64); a file others may read (78)
    BadInput(args: ["connect", D, "--pair", "--passkey", "12345"], code: 64,
             message: "bluectl: invalid passkey (--passkey): expected the device's 6-digit passkey, 000000 to 999999\n"),
    BadInput(args: ["pair", D, "--passkey", "12345a"], code: 64, message: "invalid passkey (--passkey): expected the device's 6-digit passkey"),
    BadInput(args: ["pair", D, "--passkey", "1234567"], code: 64, message: "invalid passkey (--passkey)"),
    BadInput(args: ["pair", D, "--pin", ""], code: 64, message: "invalid PIN code (--pin): expected 1 to 16 bytes, no control characters"),
    BadInput(args: ["pair", D, "--pin", "12345678901234567"], code: 64, message: "invalid PIN code (--pin): expected 1 to 16 bytes"),
    BadInput(args: ["pair", D, "--passkey", "@/nonexistent/passkey"], code: 64,
             message: "bluectl: cannot read the --passkey file /nonexistent/passkey: No such file or directory\n"),
    BadInput(args: ["pair", D, "--passkey", "@" + worldReadablePasskeyFile], code: 78,
             message: "may be read by others than its owner (mode 644): not used; chmod 600",
             setup: .fresh { _, _ in
                 guard FileManager.default.createFile(atPath: worldReadablePasskeyFile, contents: Data("123456\n".utf8),
                                                      attributes: [.posixPermissions: 0o644]) else {
                     throw BusTierError("cannot write \(worldReadablePasskeyFile)")
                 }
             }),
    BadInput(args: ["pair", D, "--agent", "none", "--passkey", "123456"], code: 64,
             message: "bluectl: --passkey and --pin need an agent to answer with them; --agent none was given\n"),
    BadInput(args: ["info", D, "--passkey", "123456"], code: 64, message: "bluectl: unknown option \"--passkey\""),
    BadInput(args: ["read", D, "2a38", "--format", "xml"], code: 64, message: "bluectl: invalid --format \"xml\": expected hex, utf8, raw, json or decoded\n"),
    // gateway: the broker's URL and the gateway's id (64); an unreachable broker is not an error (GatewayTests)
    BadInput(args: ["gateway", "--broker", "http://localhost"], code: 64,
             message: "bluectl: invalid --broker \"http://localhost\": expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost:99999"], code: 64,
             message: "bluectl: invalid --broker \"mqtt://localhost:99999\": port \"99999\" is not 1 to 65535\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://user:secret@localhost"], code: 64,
             message: "a user or password in the URL is not taken (it would show in ps)"),
    BadInput(args: ["gateway", "--broker", "mqtt://::1"], code: 64, message: "an IPv6 address goes in brackets: mqtt://[::1]:1883"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--id", "a/b"], code: 64, message: "bluectl: invalid --id \"a/b\""),
    BadInput(args: ["gateway"], code: 64, message: "bluectl: missing expected argument \"--broker <URL>\""),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--max-buffered", "0"], code: 64,
             message: "bluectl: invalid --max-buffered \"0\": expected 1 to 1000000\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--layout", "openmqttgateway"], code: 64,
             message: "bluectl: invalid --layout \"openmqttgateway\": expected bluectl or theengs\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--scan-watchdog", "-1"], code: 64,
             message: "bluectl: invalid --scan-watchdog \"-1.0\": expected 0 (off) or 1 to 86400 seconds\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--scan", "sideways"], code: 64,
             message: "bluectl: invalid --scan \"sideways\": expected auto, active or passive\n"),
    // TLS and credentials (64): certificates only for mqtts://, a certificate with its key, files that can be read
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--ca", "/etc/hostname"], code: 64,
             message: "bluectl: --ca needs a TLS broker: --broker mqtts://HOST[:PORT]\n"),
    BadInput(args: ["gateway", "--broker", "mqtts://localhost", "--cert", "/etc/hostname"], code: 64,
             message: "bluectl: --cert and --key go together\n"),
    BadInput(args: ["gateway", "--broker", "mqtts://localhost", "--ca", "/nonexistent/ca.pem"], code: 64,
             message: "bluectl: cannot read --ca /nonexistent/ca.pem: No such file or directory\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--username", "u", "--password-file", "/nonexistent/pw"], code: 64,
             message: "bluectl: cannot read the --password-file /nonexistent/pw: No such file or directory\n"),
    // its config: unreadable (64, as serve's SPEC), invalid (65, naming the file, shortened when long, and the JSON path; the
    // GATT work's parts too)
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--config", "/nonexistent/gateway.json"], code: 64,
             message: "bluectl: cannot read --config /nonexistent/gateway.json: No such file or directory\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--config", BusTier.fixture("gateway/bad-address.json")], code: 65,
             message: ": advertisements.addresses[1]: \"A4:C1:38\" is not a Bluetooth address (AA:BB:CC:DD:EE:FF)\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--config", BusTier.fixture("gateway/gatt-twice.json")], code: 65,
             message: ": devices.00:AA:01:00:00:00.writable[1]: 2a39 (Heart Rate Control Point) is listed twice\n"),
    BadInput(args: ["gateway", "--broker", "mqtt://localhost", "--config", BusTier.fixture("gateway/gatt-every.json")], code: 65,
             message: ": devices.00:AA:01:00:00:00.read[0].every: expected a positive number of seconds\n"),
    // values (64)
    BadInput(args: ["write", D, "2a39", "0x010"], code: 64, message: "odd number of hex digits"),
    BadInput(args: ["write", D, "2a39", "zz"], code: 64, message: "\"z\" at position 1 is not a hex digit"),
    BadInput(args: ["write", D, "2a39", ""], code: 64, message: "empty value"),
    BadInput(args: ["write", D, "2a39", "0x"], code: 64, message: "no hex digits after \"0x\""),
    BadInput(args: ["write", D, "2a39", "01::02"], code: 64, message: "invalid VALUE"),
    BadInput(args: ["write", D, "2a39"], code: 64, message: "give exactly one value"),
    BadInput(args: ["write", D, "2a39", "0102", "--utf8", "x"], code: 64, message: "give exactly one value"),
    BadInput(args: ["write", D, "2a39", "01", "--with-response", "--without-response"], code: 64, message: "exclude each other"),
    BadInput(args: ["write", D, "2a39", "--file", "/nonexistent/value.bin"], code: 64,
             message: "cannot read --file \"/nonexistent/value.bin\": No such file or directory"),
    BadInput(args: ["write", D, "2a39", "--file", "/"], code: 64, message: "cannot read --file \"/\": Is a directory"),
    // values that do not fit (65)
    BadInput(args: ["write", D, HeartRateGatt.customUUID, longHex, "--without-response"], code: 65, message: "write limit of 244 bytes"),
    BadInput(args: ["write", D, HeartRateGatt.customUUID, tooLongWithResponse], code: 65, message: "write limit of 512 bytes"),
    // not found (68)
    BadInput(args: ["read", D, "2a99"], code: 68, message: "characteristic 2a99 (Database Change Increment) not found; the device has: 2a37"),
    // handles in hex, as discover shows them and as they may be typed
    BadInput(args: ["read", D, "handle:0x99"], code: 68,
             message: "characteristic handle 0x0099 not found; the device has: 2a37 (Heart Rate Measurement) handle 0x000b"),
    BadInput(args: ["read", D, "2a37", "--descriptor", "2901"], code: 68, message: "descriptor 2901"),
    BadInput(args: ["read", "11:22:33:44:55:66", "2a38", "--timeout", "2"], code: 68, message: "device 11:22:33:44:55:66"),
    BadInput(args: ["info", "/org/bluez/hci0/dev_11_22_33_44_55_66"], code: 68, message: "no such device object"),
    // unavailable (69)
    BadInput(args: ["read", D, "2a38", "--adapter", "hci7"], code: 69, message: "adapter hci7 not found"),
    BadInput(args: ["read", D, "2a38"], code: 69, message: "no Bluetooth adapter found", setup: .noAdapter),
    BadInput(args: ["connect", D], code: 69, message: "bluetoothd is not running", setup: .noStandIn),
    BadInput(args: ["read", D, "2a38"], code: 69, message: "unix:path=/nonexistent/bus", setup: .noBus),
    BadInput(args: ["adapters"], code: 69,
             message: "at unix:path=/nonexistent/bus (DBUS_SYSTEM_BUS_ADDRESS): Failed to connect to socket /nonexistent/bus: No such file or directory",
             setup: .noBus),
    // a command that must scan says what to do about an adapter that is off
    BadInput(args: ["scan", "--timeout", "2"], code: 69, message: "bluectl: adapter hci0 is powered off (try --power-on)\n",
             setup: .fresh { bus, _ in try await bus.setPowered("hci0", false) }),
    BadInput(args: ["info", "11:22:33:44:55:66", "--timeout", "3"], code: 69, message: "Resource Not Ready (org.bluez.Error.NotReady); is the adapter powered? (try --power-on)",
             setup: .fresh { bus, _ in try await bus.setPowered("hci0", false) }),
    // StartDiscovery refused with NotReady: the adapter is not ready (69), not a BlueZ failure (1)
    BadInput(args: ["scan", "--timeout", "2"], code: 69, message: "start discovery on hci0 failed: Resource Not Ready (org.bluez.Error.NotReady)",
             setup: .fresh { bus, _ in try await bus.injectError("/org/bluez/hci0", "StartDiscovery", "org.bluez.Error.NotReady", "Resource Not Ready") }),
    // no GattManager1 / LEAdvertisingManager1: the peripheral role is unavailable (69), not refused (77)
    BadInput(args: ["serve", heartRateSpecFile], code: 69, message: "cannot serve GATT (bluetoothd exports no GattManager1 for it)",
             setup: .fresh { bus, _ in try await bus.dropAdapterInterface("hci0", "org.bluez.GattManager1") }),
    BadInput(args: ["advertise", "--name", "x"], code: 69, message: "cannot advertise (bluetoothd exports no LEAdvertisingManager1 for it)",
             setup: .fresh { bus, _ in try await bus.dropAdapterInterface("hci0", "org.bluez.LEAdvertisingManager1") }),
    BadInput(args: ["read", D, "2a38"], code: 69, message: "adapter hci0 is powered off",
             setup: .fresh { bus, _ in try await bus.setPowered("hci0", false) }),
    // not permitted (77)
    BadInput(args: ["read", D, "2a38"], code: 77, message: "access denied by the bus policy",
             setup: .deny("org.bluez.GattCharacteristic1", "ReadValue")),
    // and what to do about it
    BadInput(args: ["scan", "--timeout", "2"], code: 77, message: "typically root and the bluetooth group",
             setup: .deny("org.bluez.Adapter1", "StartDiscovery")),
    BadInput(args: ["scan", "--timeout", "2"], code: 77, message: "add yourself with `sudo usermod -aG bluetooth $USER` and log in again, or run as root",
             setup: .deny("org.bluez.Adapter1", "StartDiscovery")),
    BadInput(args: ["write", D, "2a39", "01"], code: 77, message: "Write refused",
             setup: .fresh { bus, g in try await bus.injectError(g.control, "WriteValue", "org.bluez.Error.NotPermitted", "Write refused") }),
    // what bluetoothd shows is malformed
    BadInput(args: ["read", D, "2a38"], code: 68, message: "characteristic 2a38 (Body Sensor Location) not found",
             setup: .fresh { bus, g in
                 try await connectFirst(bus)
                 try await bus.setProperties(g.location, "org.bluez.GattCharacteristic1", [("UUID", .uint32(0x2a38))])
             }),
    BadInput(args: ["read", D, "2a38"], code: 68, message: "not found",
             setup: .fresh { bus, g in
                 try await connectFirst(bus)
                 try await bus.setProperties(g.location, "org.bluez.GattCharacteristic1", [], removed: ["UUID"])
             }),
    // (Flags of the wrong type count as unknown flags: BlueZ is asked and refuses)
    BadInput(args: ["write", D, "2a38", "01"], code: 77, message: "Write not permitted (org.bluez.Error.NotPermitted)",
             setup: .fresh { bus, g in
                 try await connectFirst(bus)
                 try await bus.setProperties(g.location, "org.bluez.GattCharacteristic1", [("Flags", .string("read"))])
             }),
    BadInput(args: ["read", D, "2a38"], code: 69, message: "adapter hci0 is powered off",
             setup: .fresh { bus, _ in try await bus.setProperties("/org/bluez/hci0", "org.bluez.Adapter1", [("Powered", .string("yes"))]) }),
    // a device vanishing during a read; a call that is never answered
    BadInput(args: ["read", D, "2a38", "--timeout", "20"], code: 74, message: "disappeared during read 2a38",
             setup: .fresh { bus, g in try await bus.hang(g.location, "ReadValue") },
             during: { bus, g in
                 _ = try await bus.eventually(timeout: .seconds(15)) { try await bus.callCount(g.location, "ReadValue") > 0 }
                 try await bus.removeAdvertiser("hci0", heartRateAddress)
             }),
    BadInput(args: ["read", D, "2a38", "--timeout", "3"], code: 124, message: "timed out",
             setup: .fresh { bus, g in try await bus.hang(g.location, "ReadValue") }),
    BadInput(args: ["write", D, HeartRateGatt.customUUID, "01", "--timeout", "3"], code: 124, message: "timed out",
             setup: .fresh { bus, g in try await bus.hang(g.custom, "WriteValue") }),
    BadInput(args: ["connect", D, "--retries", "0"], code: 75, message: "in progress",
             setup: .fresh { bus, g in try await bus.injectError(g.device, "Connect", "org.bluez.Error.InProgress", "busy") }),
    // `bluectl proxy` (docs/proxy.md)
    BadInput(args: ["proxy", "--port", "70000", "--no-mdns"], code: 64, message: "bluectl: invalid --port \"70000\": expected 0 to 65535"),
    BadInput(args: ["proxy", "--port", "abc", "--no-mdns"], code: 64, message: "bluectl: invalid --port \"abc\""),
    BadInput(args: ["proxy", "--connect-timeout", "-1", "--no-mdns"], code: 64,
             message: "bluectl: invalid --connect-timeout \"-1\": expected 2 to 600 seconds"),
    BadInput(args: ["proxy", "--connect-timeout", "1", "--no-mdns"], code: 64,
             message: "bluectl: invalid --connect-timeout \"1\": expected 2 to 600 seconds"),
    BadInput(args: ["proxy", "--connect-timeout", "soon", "--no-mdns"], code: 64,
             message: "bluectl: invalid --connect-timeout \"soon\": expected 2 to 600 seconds"),
    BadInput(args: ["proxy", "--name", String(repeating: "n", count: 32), "--no-mdns"], code: 64,
             message: "expected 1 to 31 bytes, no control characters"),
    BadInput(args: ["proxy", "--key-file", "/nonexistent/key", "--no-mdns"], code: 64,
             message: "bluectl: cannot read the key file /nonexistent/key: No such file or directory"),
    BadInput(args: ["proxy", "--key-file", BusTier.fixture("bus.conf"), "--no-mdns"], code: 78,
             message: "may be read by others than its owner"),
    BadInput(args: ["proxy", "--key-file", badKeyFile, "--no-mdns"], code: 78,
             message: "expected a base64 key of 32 bytes on one line",
             setup: .fresh { _, _ in
                 // Its owner's alone, but not a key (24 bytes of base64).
                 guard FileManager.default.createFile(atPath: badKeyFile, contents: Data("AAECAwQFBgcICQoLDA0ODxAREhMUFRYX\n".utf8),
                                                      attributes: [.posixPermissions: 0o600]) else {
                     throw BusTierError("cannot write \(badKeyFile)")
                 }
             }),
    BadInput(args: ["proxy", "--adapter", "hci7", "--no-mdns"], code: 69, message: "bluectl: adapter hci7 not found"),
]

// A guard against a hang, sized for the slowest run: its some 70 bluectl
// processes run one after another, 133 s in the fast tier, 218-231 s under
// ASan and 353-546 s under TSan in CI on 2 cores (2026-11-29). Five minutes
// was below that, and fired in one run (at 457 s) but not in another (546 s
// passed), most likely as swift-testing's timer found a free pool thread.
@Suite("bad input, table-driven, end to end", .timeLimit(.minutes(15)))
struct BadInputTableTests {
    @Test("every bad input: its exit code, one line on stderr naming the problem, no crash, no hang")
    func table() async throws {
        #expect(rows.count >= 40)
        // rows that only read: one bus for all of them
        try await withPrivateBus { bus in
            _ = try await HeartRateGatt.install(bus)
            for row in rows { if case .shared = row.setup { try await check(row, bus) } }
        }
        for row in rows {
            switch row.setup {
            case .shared: continue
            case .fresh(let prepare):
                try await withPrivateBus { bus in
                    let g = try await HeartRateGatt.install(bus)
                    try await prepare(bus, g)
                    try await check(row, bus, g)
                }
            case .noStandIn:
                try await withPrivateBus(standIn: false) { bus in try await check(row, bus) }
            case .noAdapter:
                try await withPrivateBus(adapters: []) { bus in try await check(row, bus) }
            case .deny(let interface, let member):
                try await withPrivateBus(deny: [(interface, member)]) { bus in
                    _ = try await HeartRateGatt.install(bus)
                    try await check(row, bus)
                }
            case .noBus:
                let r = try await BusTier.runBluectl(row.args, environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/bus"],
                                                     timeout: .seconds(30))
                expect(row, r)
            }
        }
    }

    private func check(_ row: BadInput, _ bus: PrivateBus, _ g: HeartRateGatt = HeartRateGatt()) async throws {
        let child = try bus.startBluectl(row.args)
        if let during = row.during { try await during(bus, g) }
        expect(row, await child.wait(timeout: .seconds(30)))
    }

    private func expect(_ row: BadInput, _ r: ProcessResult) {
        #expect(!r.timedOut, "\(row): hung, killed by the harness: \(r)")
        #expect(r.termination == .exited(row.code), "\(row): \(r)")
        #expect(r.stderrLines.count == 1, "\(row): \(r)")
        #expect(r.stderr.hasPrefix("bluectl: "), "\(row): \(r)")
        #expect(r.stderr.contains(row.message), "\(row): expected \(row.message.debugDescription) in \(r)")
        #expect(!r.stderr.contains("Fatal error") && !r.stderr.contains("Stack dump"), "\(row): \(r)")
    }
}
