/// Where the broker is: `mqtt://HOST[:PORT]` (plain, port 1883) or
/// `mqtts://HOST[:PORT]` (TLS, port 8883). HOST is a name, an IPv4 address or an
/// IPv6 address in brackets. Nothing else is taken: no user or password (they
/// would be visible in `ps`), no path.
public struct BrokerAddress: Sendable, Equatable, CustomStringConvertible {
    /// The host name or address (an IPv6 address without its brackets).
    public let host: String
    /// The TCP port.
    public let port: Int
    /// Whether the connection is TLS (`mqtts://`).
    public let tls: Bool

    /// Parses `text`; the error says what is wrong in one line.
    public init(_ text: String) throws(BrokerAddressError) {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("mqtt://") {
            tls = false
            rest = text.dropFirst(7)
        } else if lower.hasPrefix("mqtts://") {
            tls = true
            rest = text.dropFirst(8)
        } else {
            throw BrokerAddressError("expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
        }
        var authority = rest
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        if authority.contains("@") {
            throw BrokerAddressError("a user or password in the URL is not taken (it would show in ps): use --username and --password-file")
        }
        if authority.contains("/") || authority.contains("?") || authority.contains("#") {
            throw BrokerAddressError("expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT], with no path")
        }
        let hostPart: Substring
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw BrokerAddressError("an IPv6 address needs its closing \"]\"") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw BrokerAddressError("expected \":PORT\" after the IPv6 address") }
                portPart = after.dropFirst()
            }
            guard !hostPart.isEmpty, hostPart.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw BrokerAddressError("\"\(hostPart)\" is not an IPv6 address")
            }
        } else {
            let pieces = authority.split(separator: ":", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { throw BrokerAddressError("an IPv6 address goes in brackets: mqtt://[::1]:1883") }
            hostPart = pieces[0]
            portPart = pieces.count == 2 ? pieces[1] : nil
            guard !hostPart.isEmpty, hostPart.utf8.count <= 253,
                  hostPart.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." || $0 == "-" || $0 == "_" }) else {
                throw BrokerAddressError(hostPart.isEmpty ? "no host" : "\"\(hostPart)\" is not a host name or address")
            }
        }
        host = String(hostPart)
        if let portPart {
            guard let port = Int(portPart), (1...65535).contains(port) else {
                throw BrokerAddressError("port \"\(portPart)\" is not 1 to 65535")
            }
            self.port = port
        } else {
            port = tls ? 8883 : 1883
        }
    }

    /// The URI `MQTTSession` takes (and names its message log by): `tcp://HOST:PORT` or `ssl://HOST:PORT`.
    public var sessionURI: String { "\(tls ? "ssl" : "tcp")://\(hostInURI):\(port)" }

    /// `mqtt://HOST:PORT` or `mqtts://HOST:PORT`, the port always said.
    public var description: String { "\(tls ? "mqtts" : "mqtt")://\(hostInURI):\(port)" }

    private var hostInURI: String { host.contains(":") ? "[\(host)]" : host }
}

/// Why a `--broker` URL is refused.
public struct BrokerAddressError: Error, Sendable, CustomStringConvertible {
    /// The reason, one line.
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The topics a gateway publishes on (docs/gateway.md). Layout `bluectl`:
/// `bluectl/<id>/status` (retained `online` / `offline`), `bluectl/<id>/devices/<MAC>`
/// (a device's latest record, retained) and `bluectl/<id>/events` (the gateway's
/// events). Layout `theengs`, Theengs Gateway's: `home/<id>/LWT` and
/// `home/<id>/BTtoMQTT/<MAC without colons>`; events stay on `bluectl/<id>/events`.
public struct GatewayTopics: Sendable, Equatable {
    /// Whose topic names and payload fields a gateway uses.
    public enum Layout: String, Sendable, CaseIterable {
        /// bluectl's: the state is `scan --json`'s record.
        case bluectl
        /// Theengs Gateway's topics and field names, so its dashboards keep working.
        case theengs
    }

    /// The gateway's id: one topic level.
    public let gateway: String
    /// The layout.
    public let layout: Layout

    /// The topics of gateway `gateway` in `layout`.
    public init(gateway: String, layout: Layout = .bluectl) {
        self.gateway = gateway
        self.layout = layout
    }

    /// Birth `online` and last will `offline`, retained.
    public var status: String {
        switch layout {
        case .bluectl: "bluectl/\(gateway)/status"
        case .theengs: "home/\(gateway)/LWT"
        }
    }

    /// The gateway's events (JSON).
    public var events: String { "bluectl/\(gateway)/events" }

    /// A device's state shared by every gateway (`--home-assistant`, bluectl's layout):
    /// `bluectl/sensors/<MAC>`, the state topic of its Home Assistant configs. No gateway's topic
    /// is at this level: theirs are `bluectl/<id>/status`, `events` and `devices/…`.
    public static func sharedDevice(_ address: String) -> String { "bluectl/sensors/\(address)" }

    /// A device's state topics of every gateway in Theengs' layout, `+/+/BTtoMQTT/<MAC without
    /// colons>`: the state topic of Theengs Gateway's Home Assistant configs, which any gateway
    /// in its layout (a Theengs Gateway, or bluectl with `--layout theengs`) feeds.
    public static func anyTheengsDevice(_ address: String) -> String { "+/+/BTtoMQTT/\(address.filter { $0 != ":" })" }

    /// The filter of every shared device topic, `bluectl/sensors/+`.
    public static let sharedDevices = "bluectl/sensors/+"

    /// The filter of every gateway's status in bluectl's layout, `bluectl/+/status`.
    public static let statuses = "bluectl/+/status"

    /// The gateway whose status `topic` is (`bluectl/<id>/status`), nil for any other topic.
    public static func statusGateway(_ topic: String) -> String? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 3, levels[0] == "bluectl", levels[2] == "status", !levels[1].isEmpty else { return nil }
        return String(levels[1])
    }

    /// Whether `topic` is a shared device topic (`bluectl/sensors/<MAC>`).
    public static func isSharedDevice(_ topic: String) -> Bool {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        return levels.count == 3 && levels[0] == "bluectl" && levels[1] == "sensors" && !levels[2].isEmpty
    }

    /// A device's state topic.
    public func device(_ address: String) -> String {
        switch layout {
        case .bluectl: "bluectl/\(gateway)/devices/\(address)"
        case .theengs: "home/\(gateway)/BTtoMQTT/\(address.filter { $0 != ":" })"
        }
    }

    /// A characteristic's values: `bluectl/<id>/devices/<MAC>/gatt/<UUID>` (in both layouts:
    /// Theengs Gateway has no GATT topics to follow).
    public func gatt(_ address: String, _ characteristic: String) -> String {
        "bluectl/\(gateway)/devices/\(address)/gatt/\(characteristic)"
    }

    /// The filter of every command topic, `bluectl/<id>/devices/+/gatt/+/write`.
    public var gattCommands: String { "bluectl/\(gateway)/devices/+/gatt/+/write" }

    /// The device and characteristic levels of a command topic (as sent: not yet checked),
    /// nil when `topic` is not one of this gateway's command topics.
    public func command(_ topic: String) -> (device: String, characteristic: String)? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 7, levels[0] == "bluectl", levels[1] == gateway, levels[2] == "devices",
              levels[4] == "gatt", levels[6] == "write" else { return nil }
        return (String(levels[3]), String(levels[5]))
    }

    /// Where a command's outcome goes: its topic with `result` for `write`.
    public func result(_ device: String, _ characteristic: String) -> String {
        gatt(device, characteristic) + "/result"
    }
}
