import CMosquitto

/// A failure of the MQTT session: libmosquitto's return code and what was being done.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    /// libmosquitto's return code (`MOSQ_ERR_*`).
    public let code: Int32
    /// What failed, and libmosquitto's reason.
    public let description: String

    /// `what`, then libmosquitto's text for `code`.
    init(code: Int32, _ what: String) {
        self.code = code
        description = "\(what): \(Self.describe(code))"
    }

    /// libmosquitto could not be loaded: the loader's words.
    init(unavailable what: String) {
        code = Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue)
        description = "cannot load libmosquitto (Eclipse Mosquitto's MQTT client): \(what)"
    }

    /// The message log failed (`MessageLog`): `what` says how.
    init(persistence what: String) {
        code = Int32(MOSQ_ERR_ERRNO.rawValue)
        description = what
    }

    static func describe(_ code: Int32) -> String {
        MosquittoLibrary.shared?.mosquitto_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}
