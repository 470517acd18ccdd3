// The keys of encrypted sensors: `scan --keys FILE`, or a default keys file.

import BluectlCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A keys file (docs/sensors.md#keys) is a JSON object of device addresses and their 16-byte
/// keys in hex: `{"A4:C1:38:44:55:66": "231d39c1d7cc1ab1aee224cd096db932"}` (BTHome's
/// encryption keys, Xiaomi's bindkeys). A file that others than its owner may read or
/// write is refused, as ssh refuses such a private key: the keys let anyone read the
/// sensors and forge their frames.
enum SensorKeysFile {
    /// The default files in the order they are looked for; the first that exists is read:
    /// `$XDG_CONFIG_HOME/bluectl/keys.json` (`~/.config/bluectl/keys.json` when unset), then
    /// `/etc/bluectl/keys.json`.
    static func defaultPaths(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        let config: String
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            config = xdg
        } else {
            config = (environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/root") + "/.config"
        }
        return [config + "/bluectl/keys.json", "/etc/bluectl/keys.json"]
    }

    /// The keys of `path` (`--keys`; it must exist), else of the first default file that
    /// exists, else none. A default file that exists but this user cannot read is passed
    /// by with a line to `warn` (a system-wide file may be root's alone).
    static func load(_ path: String?, defaults: [String] = defaultPaths(),
                     warn: (String) -> Void) throws(CLIFailure) -> SensorKeys {
        if let path { return try read(path) }
        for candidate in defaults where access(candidate, F_OK) == 0 {
            guard access(candidate, R_OK) == 0 else {
                warn("cannot read the keys file \(candidate) (\(String(cString: strerror(errno)))): encrypted sensors are not decrypted")
                continue
            }
            return try read(candidate)
        }
        return SensorKeys()
    }

    /// The keys of one file; exit 78 (`ExitStatus.config`) when others may read it or it is
    /// malformed, 64 when it cannot be opened.
    static func read(_ path: String) throws(CLIFailure) -> SensorKeys {
        let keys = try parse(PrivateFile.read(path, what: "the keys file"), path: TextSafety.escapedForMessage(path, limit: 1024))
        // Keys that cannot be used would leave every encrypted frame undecrypted, silently.
        if !keys.keys.isEmpty, let reason = LibCrypto.unavailableReason {
            throw CLIFailure(.unavailable, "\(reason) (the keys file \(TextSafety.escapedForMessage(path, limit: 1024)) needs it)")
        }
        return keys
    }

    /// The keys a file's bytes hold; exit 78 naming the path and the entry when they are not
    /// a JSON object of addresses and 32 hex digits.
    static func parse(_ bytes: [UInt8], path: String) throws(CLIFailure) -> SensorKeys {
        let root: Any
        do {
            root = try JSONInput.parse(bytes)
        } catch {
            throw CLIFailure(.config, "the keys file \(path) is not valid JSON" + (JSONInput.problem(error).map { " (\($0))" } ?? ""))
        }
        guard let object = root as? [String: Any] else {
            throw CLIFailure(.config, "the keys file \(path) is not a JSON object of addresses and keys ({\"A4:C1:38:44:55:66\": \"<32 hex digits>\"})")
        }
        var entries: [String: String] = [:]
        for (address, value) in object.sorted(by: { $0.key < $1.key }) {
            guard let hex = value as? String else {
                throw CLIFailure(.config, "the keys file \(path): \"\(TextSafety.escapedForMessage(address))\": the key is not a string of 32 hex digits")
            }
            entries[address] = hex
        }
        do {
            return try SensorKeys(hex: entries)
        } catch {
            throw CLIFailure(.config, "the keys file \(path): \(TextSafety.terminalSafe(error.description))")
        }
    }
}
