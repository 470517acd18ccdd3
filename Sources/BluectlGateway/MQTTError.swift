import CPaho

/// A failure Paho reported: its return code and what was being done.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    /// Paho's return code (`MQTTASYNC_*`).
    public let code: Int32
    /// What failed, and Paho's reason.
    public let description: String

    /// `what`, then Paho's text for `code`.
    init(code: Int32, _ what: String) {
        self.code = code
        description = "\(what): \(Self.describe(code))"
    }

    /// Paho's library could not be loaded: the loader's words.
    init(unavailable what: String) {
        code = MQTTASYNC_FAILURE
        description = "cannot load Eclipse Paho C's MQTT client: \(what)"
    }

    /// The message log failed (`MessageLog`): `what` says how.
    init(persistence what: String) {
        code = MQTTCLIENT_PERSISTENCE_ERROR
        description = what
    }

    static func describe(_ code: Int32) -> String {
        PahoLibrary.shared?.MQTTAsync_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}
