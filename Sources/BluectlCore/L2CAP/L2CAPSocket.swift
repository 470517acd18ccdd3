internal import CBluectlShim
#if canImport(Glibc)
import Glibc
#endif

/// The system calls of an LE L2CAP connection-oriented socket
/// (AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP: one read or write is one
/// SDU), non-blocking, with the kernel's ABI from the C shim's
/// `bluectl_l2cap.h`. No state of its own but the descriptor; each call
/// returns 0 or an errno. docs/l2cap.md says what the kernel does with them.
struct L2CAPSocket: Sendable {
    let fd: Int32

    /// A new socket, non-blocking and closed on exec; or the errno.
    static func make() -> Result<L2CAPSocket, L2CAPErrno> {
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = socket(AF_BLUETOOTH, type, Int32(BLUECTL_BTPROTO_L2CAP))
        return fd >= 0 ? .success(L2CAPSocket(fd: fd)) : .failure(L2CAPErrno(errno))
    }

    /// The kernel's sockaddr_l2 for an LE address (`psm` 0: none).
    static func address(_ address: BluetoothAddress, type: AddressType, psm: UInt16) -> bluectl_sockaddr_l2 {
        var sa = bluectl_sockaddr_l2()
        sa.l2_family = sa_family_t(AF_BLUETOOTH)
        sa.l2_psm = psm.littleEndian
        let v = address.uint64Value
        // bdaddr_t is little-endian: its first byte is the address's last.
        sa.l2_bdaddr.b = (UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v >> 16),
                          UInt8(truncatingIfNeeded: v >> 24), UInt8(truncatingIfNeeded: v >> 32), UInt8(truncatingIfNeeded: v >> 40))
        sa.l2_bdaddr_type = UInt8(type == .random ? BLUECTL_BDADDR_LE_RANDOM : BLUECTL_BDADDR_LE_PUBLIC)
        return sa
    }

    /// The address in a sockaddr_l2 and its type.
    static func peer(of sa: bluectl_sockaddr_l2) -> (BluetoothAddress, AddressType)? {
        let b = sa.l2_bdaddr.b
        let bytes = [b.5, b.4, b.3, b.2, b.1, b.0]
        guard let address = BluetoothAddress(bytes: bytes) else { return nil }
        return (address, sa.l2_bdaddr_type == UInt8(BLUECTL_BDADDR_LE_RANDOM) ? .random : .public)
    }

    private func call(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32, _ sa: bluectl_sockaddr_l2) -> Int32 {
        var sa = sa
        let result = withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<bluectl_sockaddr_l2>.size)) }
        }
        return result == 0 ? 0 : errno
    }

    /// Binds to the adapter's LE identity (`psm` 0 on a listener: the
    /// kernel assigns a free dynamic one). The source address picks the
    /// adapter, and its LE type makes the socket an LE one (BT_SNDMTU and
    /// BT_RCVMTU refuse a BR/EDR socket).
    func bind(_ address: BluetoothAddress, type: AddressType, psm: UInt16 = 0) -> Int32 {
        call({ Glibc.bind(fd, $0, $1) }, Self.address(address, type: type, psm: psm))
    }

    /// Starts connecting; EINPROGRESS while under way (the socket turns
    /// writable, or fails, when done).
    func connect(_ address: BluetoothAddress, type: AddressType, psm: UInt16) -> Int32 {
        call({ Glibc.connect(fd, $0, $1) }, Self.address(address, type: type, psm: psm))
    }

    /// Listens; `backlog` connections wait to be accepted.
    func listen(backlog: Int32 = 4) -> Int32 {
        Glibc.listen(fd, backlog) == 0 ? 0 : errno
    }

    /// Accepts a waiting connection (made non-blocking and closed on exec), with the peer's address; or the errno (EAGAIN: none waits).
    func accept() -> Result<(L2CAPSocket, BluetoothAddress, AddressType), L2CAPErrno> {
        var sa = bluectl_sockaddr_l2()
        var length = socklen_t(MemoryLayout<bluectl_sockaddr_l2>.size)
        let child = withUnsafeMutablePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(fd, $0, &length) }
        }
        guard child >= 0 else { return .failure(L2CAPErrno(errno)) }
        // (accept4, which sets both at once, is a GNU extension Glibc's Swift module hides.)
        _ = fcntl(child, F_SETFL, fcntl(child, F_GETFL) | O_NONBLOCK)
        _ = fcntl(child, F_SETFD, FD_CLOEXEC)
        guard let (address, type) = Self.peer(of: sa) else {
            _ = Glibc.close(child)
            return .failure(L2CAPErrno(EPROTO))
        }
        return .success((L2CAPSocket(fd: child), address, type))
    }

    /// The PSM the socket is bound to (the kernel's choice after binding PSM 0).
    var localPSM: UInt16? {
        var sa = bluectl_sockaddr_l2()
        var length = socklen_t(MemoryLayout<bluectl_sockaddr_l2>.size)
        let result = withUnsafeMutablePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return result == 0 ? UInt16(littleEndian: sa.l2_psm) : nil
    }

    /// BT_SECURITY: the level the channel asks for (set before connect or listen).
    func setSecurity(_ security: L2CAPSecurity) -> Int32 {
        var value = bluectl_bt_security(level: security.level, key_size: 0)
        let result = setsockopt(fd, Int32(BLUECTL_SOL_BLUETOOTH), Int32(BLUECTL_BT_SECURITY), &value,
                                socklen_t(MemoryLayout<bluectl_bt_security>.size))
        return result == 0 ? 0 : errno
    }

    /// Asks for a receive buffer of `bytes` (SO_RCVBUFFORCE where the
    /// process may, else SO_RCVBUF, which the kernel caps at
    /// net.core.rmem_max); returns the size the kernel set. Why it matters:
    /// Linux gives an LE channel's credits from the room it counts in this
    /// buffer, but charges each SDU its buffers' whole size, so a reader
    /// that falls behind can see an SDU not fit; Linux 6.1 (Debian 12's
    /// 6.1.0-56) then parks it and queues the next ones ahead of it, and the
    /// reader gets them out of order (docs/l2cap.md, "Out of order"). More
    /// room makes that much rarer; the engine also drains the socket into
    /// its own inbox as SDUs come.
    @discardableResult
    func enlargeReceiveBuffer(to bytes: Int32 = 8 << 20) -> Int {
        var value = bytes
        let size = socklen_t(MemoryLayout<Int32>.size)
        if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &value, size) != 0 {
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, size)
        }
        var granted: Int32 = 0
        var length = size
        return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &length) == 0 ? Int(granted) : 0
    }

    /// BT_RCVMTU: the largest SDU this side takes (set before connect or listen: the kernel refuses it once connected).
    func setReceiveMTU(_ mtu: UInt16) -> Int32 {
        var value = mtu
        let result = setsockopt(fd, Int32(BLUECTL_SOL_BLUETOOTH), Int32(BLUECTL_BT_RCVMTU), &value, socklen_t(MemoryLayout<UInt16>.size))
        return result == 0 ? 0 : errno
    }

    private func option16(_ name: Int32) -> Int? {
        var value: UInt16 = 0
        var length = socklen_t(MemoryLayout<UInt16>.size)
        return getsockopt(fd, Int32(BLUECTL_SOL_BLUETOOTH), name, &value, &length) == 0 ? Int(value) : nil
    }

    /// BT_SNDMTU: the largest SDU the peer takes (connected only).
    var sendMTU: Int? { option16(Int32(BLUECTL_BT_SNDMTU)) }
    /// BT_RCVMTU: the largest SDU this side takes.
    var receiveMTU: Int? { option16(Int32(BLUECTL_BT_RCVMTU)) }

    /// BT_SECURITY read back: on a connected channel the link's level and its key's size.
    var security: (level: L2CAPSecurity, keySize: Int)? {
        var value = bluectl_bt_security()
        var length = socklen_t(MemoryLayout<bluectl_bt_security>.size)
        guard getsockopt(fd, Int32(BLUECTL_SOL_BLUETOOTH), Int32(BLUECTL_BT_SECURITY), &value, &length) == 0 else { return nil }
        return (L2CAPSecurity(level: value.level), Int(value.key_size))
    }

    /// SO_ERROR: why a connect failed (0: it did not).
    var pendingError: Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 ? value : errno
    }

    /// Bytes written and not yet handed to the controller: the socket's
    /// send buffer (SO_SNDBUF) less what TIOCOUTQ says is free; the
    /// kernel counts an SDU until the controller's driver has taken its
    /// last fragment (LE credits the peer has not given hold it back).
    var unsentBytes: Int? {
        var size: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &length) == 0 else { return nil }
        var free: Int32 = 0
        guard ioctl(fd, UInt(TIOCOUTQ), &free) == 0 else { return nil }
        return max(0, Int(size) - Int(free))
    }

    /// Sends one SDU; the bytes sent, or the errno (EAGAIN: no room now).
    func send(_ bytes: UnsafeRawBufferPointer) -> Result<Int, L2CAPErrno> {
        let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        return n >= 0 ? .success(n) : .failure(L2CAPErrno(errno))
    }

    /// Receives one SDU into `buffer`; its length (0: the channel's end), or the errno (EAGAIN: none now).
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, L2CAPErrno> {
        let n = recv(fd, buffer.baseAddress, buffer.count, 0)
        return n >= 0 ? .success(n) : .failure(L2CAPErrno(errno))
    }

    /// Closes the descriptor (the kernel disconnects the channel).
    func close() {
        _ = Glibc.close(fd)
    }
}

/// An errno from an L2CAP socket call.
struct L2CAPErrno: Error, Equatable, Sendable {
    let code: Int32
    init(_ code: Int32) { self.code = code }

    var wouldBlock: Bool { code == EAGAIN || code == EWOULDBLOCK }
    /// strerror's text.
    var text: String { String(cString: strerror(code)) }

    /// The failure as a `BluetoothError` kind; `what` names the operation
    /// ("open an L2CAP channel to PSM 0x0080 of AA:…"). While connecting,
    /// EACCES is the link's pairing failing (the kernel drops the link with
    /// "authentication failure"); on a bound socket it is a SIG-assigned PSM
    /// without CAP_NET_BIND_SERVICE.
    func bluetoothError(_ what: String, binding: Bool = false) -> BluetoothError {
        let why = "\(what): \(text)"
        switch code {
        case ECONNREFUSED:
            return .channelRefused("\(what): refused by the device (nothing listens on that PSM, or it wants more security or has no resources)")
        case EACCES, EPERM:
            if binding { return .notPermitted(name: "EACCES", message: "\(what): PSMs below 0x0080 are SIG-assigned; binding one needs CAP_NET_BIND_SERVICE") }
            return .securityFailed("\(what): the link's security could not be raised (pairing failed or was refused)")
        case ETIMEDOUT:
            return .timeout(why)
        case ECONNRESET, ECONNABORTED, ENOTCONN, EPIPE, ENOLINK, EHOSTDOWN, EHOSTUNREACH, ENETDOWN, ENODEV:
            return .disconnected(why)
        case ENOMEM, ENOBUFS, EMFILE, ENFILE, EBUSY:
            return .noResources(why)
        case EADDRINUSE:
            return .noResources("\(what): the PSM is in use by another socket")
        case EINVAL where binding:
            return .noResources("\(what): no free dynamic PSM, or the adapter's address is not an LE identity here")
        default:
            return .unexpected(why)
        }
    }
}
