import Foundation
import Testing

/// libcrypto and libmosquitto are opened when a command first needs them (dlopen), not
/// by the loader at every start: a command that needs one that cannot be loaded says so in
/// one line and exits 69; one that does not need it does not notice.
@Suite("Libraries opened at need", .timeLimit(.minutes(2)))
struct LibraryLoadingTests {
    /// A folder first on LD_LIBRARY_PATH whose libcrypto.so.3 and libmosquitto.so.1 are
    /// not libraries: dlopen finds them first and refuses them.
    private static func brokenLibraries() throws -> String {
        let folder = BusTier.runFile("bluectl-broken-libs")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for name in ["libcrypto.so.3", "libmosquitto.so.1"] {
            try Data("not a library\n".utf8).write(to: URL(fileURLWithPath: folder + "/" + name))
        }
        return folder
    }

    @Test("gateway without libmosquitto; a keys file with a key, advertise --bthome-key and proxy --key-file without libcrypto: exit 69, one line naming the library; scan with an empty keys file runs")
    func unloadable() async throws {
        let broken = try Self.brokenLibraries()
        try await withPrivateBus { bus in
            let keys = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-libs-keys-\(getpid()).json").path
            try Data(#"{"A4:C1:38:44:55:66": "00112233445566778899aabbccddeeff"}"#.utf8).write(to: URL(fileURLWithPath: keys))
            chmod(keys, 0o600)
            defer { unlink(keys) }
            let noKeys = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-libs-nokeys-\(getpid()).json").path
            try Data("{}".utf8).write(to: URL(fileURLWithPath: noKeys))
            chmod(noKeys, 0o600)
            defer { unlink(noKeys) }
            let psk = FileManager.default.temporaryDirectory.appendingPathComponent("bluectl-libs-psk-\(getpid())").path
            try Data((String(repeating: "A", count: 43) + "=\n").utf8).write(to: URL(fileURLWithPath: psk))
            chmod(psk, 0o600)
            defer { unlink(psk) }
            let environment = ["LD_LIBRARY_PATH": broken]
            let cases: [([String], String)] = [
                (["gateway", "--broker", "mqtt://127.0.0.1:1"], "bluectl: cannot load libmosquitto (Eclipse Mosquitto's MQTT client): \(broken)/libmosquitto.so.1: "),
                (["scan", "--timeout", "1", "--keys", keys], "bluectl: cannot load OpenSSL's libcrypto: \(broken)/libcrypto.so.3: "),
                (["proxy", "--key-file", psk, "--no-mdns", "--port", "0"], "bluectl: cannot load OpenSSL's libcrypto: \(broken)/libcrypto.so.3: "),
                (["advertise", "--bthome", "temperature=21.5", "--bthome-key", "00112233445566778899aabbccddeeff", "--duration", "1"],
                 "bluectl: cannot load OpenSSL's libcrypto: \(broken)/libcrypto.so.3: "),
            ]
            for (arguments, message) in cases {
                let result = try await bus.runBluectl(arguments, environment: environment)
                #expect(result.exitCode == 69, "\(result)")
                #expect(result.stderrLines.count == 1 && result.stderr.hasPrefix(message), "\(result)")
            }
            // An empty keys file needs no libcrypto: not opened, not missed.
            let scan = try await bus.runBluectl(["scan", "--timeout", "1", "--keys", noKeys], environment: environment)
            #expect(scan.exitCode == 0, "\(scan)")
        }
    }
}
