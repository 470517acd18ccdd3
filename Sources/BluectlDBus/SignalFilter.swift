/// Which signals a subscription wants: the match rule sent to the bus daemon
/// and the same test applied again to every signal we receive, because the
/// daemon delivers the union of all of a connection's rules.
public struct SignalFilter: Sendable, Hashable {
    /// A well-known name (accepted only from its current owner) or a unique name.
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: ObjectPath?
    public var pathNamespace: ObjectPath?
    /// `arg0` must equal this string (e.g. the interface of PropertiesChanged).
    public var arg0: String?

    public init(
        sender: String? = nil, interface: String? = nil, member: String? = nil,
        path: ObjectPath? = nil, pathNamespace: ObjectPath? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arg0 = arg0
    }

    /// The rule for `AddMatch`. Values are bus names, interface and member
    /// names and object paths, which cannot contain quotes; arg0 is escaped.
    public var matchRule: String {
        var parts = ["type='signal'"]
        if let sender { parts.append("sender='\(sender)'") }
        if let interface { parts.append("interface='\(interface)'") }
        if let member { parts.append("member='\(member)'") }
        if let path { parts.append("path='\(path.rawValue)'") }
        if let pathNamespace, pathNamespace != .root { parts.append("path_namespace='\(pathNamespace.rawValue)'") }
        if let arg0 { parts.append("arg0=" + Self.quote(arg0)) }
        return parts.joined(separator: ",")
    }

    /// Everything but the sender, which the connection checks against the
    /// tracked owner. Inlined into the connection's test of a subscription
    /// (`Subscription.accepts`), which is a call of its own so that the
    /// filter is read in place: called, or inlined into the loop over the
    /// subscriptions, the whole filter was copied (its six strings retained
    /// and released) per test.
    @inline(__always)
    public func matches(_ message: DBusMessage) -> Bool {
        guard message.kind == .signal else { return false }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let pathNamespace {
            guard let messagePath = message.path, messagePath.isDescendant(of: pathNamespace) else { return false }
        }
        if let arg0 {
            guard message.firstArgumentString == arg0 else { return false }
        }
        return true
    }

    /// D-Bus match-rule quoting: apostrophes are written as '\''.
    static func quote(_ value: String) -> String {
        "'" + value.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}
