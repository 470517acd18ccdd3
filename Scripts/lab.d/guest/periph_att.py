"""The lab service over an ATT server of its own, on an L2CAP ATT socket bound to
the controller's static random address (periph.py --att; periph.py's
docstring says why bluetoothd cannot serve it there)."""
import ctypes
import os
import socket
import struct

from gi.repository import GLib

from periph_service import CONTROL_UUID, INDICATE_UUID, LONG_UUID, SERVICE_UUID, STREAM_UUID, LabError, log

# ---------------------------------------------------------------- as an ATT server of its own
AF_BLUETOOTH, BTPROTO_L2CAP, ATT_CID, BDADDR_LE_RANDOM = 31, 0, 4, 2
SERVER_MTU = 517
# ATT error codes (Core spec Vol 3 Part F 3.4.1.1)
E_INVALID_HANDLE, E_READ_NOT_PERMITTED, E_WRITE_NOT_PERMITTED, E_INVALID_PDU = 0x01, 0x02, 0x03, 0x04
E_REQ_NOT_SUPP, E_INVALID_OFFSET, E_NOT_FOUND, E_INVALID_LEN, E_UNSUPP_GROUP = 0x06, 0x07, 0x0a, 0x0d, 0x10
LAB_ERRORS = {'InvalidOffset': E_INVALID_OFFSET, 'InvalidValueLength': E_INVALID_LEN, 'NotSupported': E_REQ_NOT_SUPP}
PROP_READ, PROP_WWR, PROP_WRITE, PROP_NOTIFY, PROP_INDICATE = 0x02, 0x04, 0x08, 0x10, 0x20
BT_BASE = bytes.fromhex('0000000000001000800000805f9b34fb')


def uuid_le(u):
    """'2800' or a 128-bit UUID string -> its bytes in ATT order (little-endian)"""
    return bytes.fromhex(u)[::-1] if len(u) == 4 else bytes.fromhex(u.replace('-', ''))[::-1]


def uuid128(b):
    return b if len(b) == 16 else (BT_BASE[:2] + b[::-1] + BT_BASE[4:])[::-1]


T_PRIMARY, T_SECONDARY, T_INCLUDE, T_CHRC, T_CCC = (uuid_le(u) for u in ('2800', '2801', '2802', '2803', '2902'))


class AttError(Exception):
    def __init__(self, code, handle):
        Exception.__init__(self, code, handle)
        self.code, self.handle = code, handle


class Attr:
    def __init__(self, handle, typ, read=None, write=None):
        self.handle, self.type, self.read, self.write = handle, typ, read, write
        self.end = handle   # a service's group end


class Database:
    """GAP (name), GATT (service changed) and the lab service, each readable or
    writable attribute a pair of functions (conn, offset) / (conn, offset, value)."""

    def __init__(self, name, stream, long_value):
        self.attrs = []
        self.services = []
        self.ccc_handles = {}
        const = lambda v: (lambda conn, off: v[off:] if off <= len(v) else self.bad_offset())
        self.service('1800')
        self.chrc('2a00', PROP_READ, read=const(name.encode()))
        self.chrc('2a01', PROP_READ, read=const(b'\x00\x00'))
        self.service('1801')
        self.chrc('2a05', PROP_INDICATE, ccc='service-changed')
        self.service(SERVICE_UUID)
        self.stream_handle = self.chrc(STREAM_UUID, PROP_READ | PROP_NOTIFY,
                                       read=lambda conn, off: stream.read(off), ccc='stream')
        self.chrc(CONTROL_UUID, PROP_READ | PROP_WRITE | PROP_WWR, read=lambda conn, off: stream.control_read(off),
                  write=lambda conn, off, v: stream.control_write(v))
        self.chrc(LONG_UUID, PROP_READ | PROP_WRITE, read=lambda conn, off: long_value.read(off),
                  write=lambda conn, off, v: long_value.write(off, v))
        self.chrc(INDICATE_UUID, PROP_INDICATE, ccc='indicate')
        for i, s in enumerate(self.services):
            s.end = self.services[i + 1].handle - 1 if i + 1 < len(self.services) else len(self.attrs)

    @staticmethod
    def bad_offset():
        raise LabError('InvalidOffset')

    def add(self, typ, read=None, write=None):
        a = Attr(len(self.attrs) + 1, typ, read, write)
        self.attrs.append(a)
        return a

    def service(self, uuid):
        v = uuid_le(uuid)
        self.services.append(self.add(T_PRIMARY, read=lambda conn, off: v[off:]))

    def chrc(self, uuid, props, read=None, write=None, ccc=None):
        h = len(self.attrs) + 1
        decl = bytes([props]) + struct.pack('<H', h + 1) + uuid_le(uuid)
        self.add(T_CHRC, read=lambda conn, off: decl[off:])
        self.add(uuid_le(uuid), read, write)
        if ccc:
            c = self.add(T_CCC, read=lambda conn, off, h=h + 2: struct.pack('<H', conn.ccc.get(h, 0))[off:],
                         write=lambda conn, off, v, h=h + 2, what=ccc: conn.write_ccc(h, what, v))
            self.ccc_handles[ccc] = c.handle
        return h + 1

    def get(self, handle):
        if 1 <= handle <= len(self.attrs):
            return self.attrs[handle - 1]
        raise AttError(E_INVALID_HANDLE, handle)

    def range(self, start, end):
        if start == 0 or start > end:
            raise AttError(E_INVALID_HANDLE, start)
        return [a for a in self.attrs if start <= a.handle <= end]


def att_read(db, conn, a, offset):
    if a.read is None:
        raise AttError(E_READ_NOT_PERMITTED, a.handle)
    try:
        return bytes(a.read(conn, offset))
    except LabError as e:
        raise AttError(LAB_ERRORS.get(e.name, 0x0e), a.handle)


def att_write(db, conn, a, offset, value):
    if a.write is None:
        raise AttError(E_WRITE_NOT_PERMITTED, a.handle)
    try:
        a.write(conn, offset, value)
    except LabError as e:
        raise AttError(LAB_ERRORS.get(e.name, 0x0e), a.handle)


class AttConn:
    def __init__(self, server, sock, peer):
        self.server, self.sock, self.peer = server, sock, peer
        self.db = server.db
        self.mtu = 23
        self.ccc = {}
        self.prepared = []
        self.closed = False
        sock.settimeout(10)   # a send that cannot go out for 10 s ends the connection
        self.watch = GLib.io_add_watch(sock.fileno(), GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR, self.on_io)
        log('att: connection from %s' % peer)

    def on_io(self, fd, cond):
        try:
            pdu = self.sock.recv(1024)
        except OSError as e:
            self.close('recv: %s' % e)
            return False
        if not pdu:
            self.close('closed')
            return False
        self.handle(pdu)
        return not self.closed

    def close(self, why):
        if self.closed:
            return
        self.closed = True
        log('att: %s disconnected (%s)' % (self.peer, why))
        self.server.conns.discard(self)
        self.server.stream.unsubscribe(self)
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, pdu):
        if self.closed:
            return
        try:
            self.sock.send(pdu)
        except OSError as e:
            self.close('send: %s' % e)

    def notify(self, handle, value):
        if self.ccc.get(handle + 1, 0) & 1:
            self.send(b'\x1b' + struct.pack('<H', handle) + value[:self.mtu - 3])

    def write_ccc(self, h, what, v):
        if len(v) != 2:
            raise LabError('InvalidValueLength')
        bits = struct.unpack('<H', v)[0]
        self.ccc[h] = bits
        log('att: %s writes the %s CCC: %04x' % (self.peer, what, bits))
        if what == 'stream':
            (self.server.stream.subscribe if bits & 1 else self.server.stream.unsubscribe)(self)

    def handle(self, pdu):
        op = pdu[0]
        fn = getattr(self, 'op_%02x' % op, None)
        if fn is None:
            if not op & 0x40:   # a request (not a command): answer it
                self.send(struct.pack('<BBHB', 0x01, op, 0, E_REQ_NOT_SUPP))
            return
        try:
            rsp = fn(pdu)
        except AttError as e:
            rsp = None if op & 0x40 else struct.pack('<BBHB', 0x01, op, e.handle, e.code)
        except (struct.error, IndexError):
            rsp = None if op & 0x40 else struct.pack('<BBHB', 0x01, op, 0, E_INVALID_PDU)
        if rsp is not None:
            self.send(rsp)

    def op_02(self, pdu):   # Exchange MTU
        client = struct.unpack_from('<H', pdu, 1)[0]
        self.mtu = max(23, min(client, SERVER_MTU))
        return struct.pack('<BH', 0x03, SERVER_MTU)

    def op_04(self, pdu):   # Find Information
        start, end = struct.unpack_from('<HH', pdu, 1)
        out, fmt = b'', None
        for a in self.db.range(start, end):
            f = 1 if len(a.type) == 2 else 2
            if fmt is None:
                fmt = f
            if f != fmt or len(out) + 2 + len(a.type) > self.mtu - 2:
                break
            out += struct.pack('<H', a.handle) + a.type
        if not out:
            raise AttError(E_NOT_FOUND, start)
        return bytes([0x05, fmt]) + out

    def op_06(self, pdu):   # Find By Type Value
        start, end, typ = struct.unpack_from('<HHH', pdu, 1)
        value = pdu[7:]
        out = b''
        for a in self.db.range(start, end):
            if a.type == struct.pack('<H', typ) and a.read and bytes(a.read(self, 0)) == value:
                if len(out) + 4 > self.mtu - 1:
                    break
                out += struct.pack('<HH', a.handle, a.end)
        if not out:
            raise AttError(E_NOT_FOUND, start)
        return b'\x07' + out

    def op_08(self, pdu):   # Read By Type
        start, end = struct.unpack_from('<HH', pdu, 1)
        want = uuid128(pdu[5:])
        out, size = b'', None
        for a in self.db.range(start, end):
            if uuid128(a.type) != want:
                continue
            if size is not None and a.read is None:
                break
            v = att_read(self.db, self, a, 0)[:min(self.mtu - 4, 253)]
            if size is None:
                size = len(v)
            if len(v) != size or len(out) + 2 + size > self.mtu - 2:
                break
            out += struct.pack('<H', a.handle) + v
        if not out:
            raise AttError(E_NOT_FOUND, start)
        return bytes([0x09, size + 2]) + out

    def op_0a(self, pdu):   # Read
        a = self.db.get(struct.unpack_from('<H', pdu, 1)[0])
        return b'\x0b' + att_read(self.db, self, a, 0)[:self.mtu - 1]

    def op_0c(self, pdu):   # Read Blob
        handle, offset = struct.unpack_from('<HH', pdu, 1)
        return b'\x0d' + att_read(self.db, self, self.db.get(handle), offset)[:self.mtu - 1]

    def op_10(self, pdu):   # Read By Group Type
        start, end = struct.unpack_from('<HH', pdu, 1)
        want = uuid128(pdu[5:])
        if want not in (uuid128(T_PRIMARY), uuid128(T_SECONDARY)):
            raise AttError(E_UNSUPP_GROUP, start)
        out, size = b'', None
        for a in self.db.range(start, end):
            if uuid128(a.type) != want:
                continue
            v = bytes(a.read(self, 0))
            if size is None:
                size = len(v)
            if len(v) != size or len(out) + 4 + size > self.mtu - 2:
                break
            out += struct.pack('<HH', a.handle, a.end) + v
        if not out:
            raise AttError(E_NOT_FOUND, start)
        return bytes([0x11, size + 4]) + out

    def op_12(self, pdu):   # Write Request
        a = self.db.get(struct.unpack_from('<H', pdu, 1)[0])
        att_write(self.db, self, a, 0, pdu[3:])
        return b'\x13'

    def op_52(self, pdu):   # Write Command
        self.op_12(pdu)

    def op_16(self, pdu):   # Prepare Write
        handle, offset = struct.unpack_from('<HH', pdu, 1)
        a = self.db.get(handle)
        if a.write is None:
            raise AttError(E_WRITE_NOT_PERMITTED, handle)
        self.prepared.append((a, offset, pdu[5:]))
        return b'\x17' + pdu[1:]

    def op_18(self, pdu):   # Execute Write
        queue, self.prepared = self.prepared, []
        if pdu[1] == 1:
            for a, offset, value in queue:
                att_write(self.db, self, a, offset, value)
        return b'\x19'

    def op_1e(self, pdu):   # Handle Value Confirmation (nothing is ever indicated)
        return None


class AttServer:
    def __init__(self, addr, name, stream, long_value):
        self.stream = stream
        self.db = Database(name, stream, long_value)
        self.conns = set()
        stream.sinks.append(self.notify)
        self.sock = socket.socket(AF_BLUETOOTH, socket.SOCK_SEQPACKET, BTPROTO_L2CAP)
        # struct sockaddr_l2: family, psm, bdaddr (reversed), cid, bdaddr_type
        # (python's own L2CAP address has no cid and no address type: bind through libc)
        sa = struct.pack('<HH6sHBx', AF_BLUETOOTH, 0, bytes.fromhex(addr.replace(':', ''))[::-1], ATT_CID, BDADDR_LE_RANDOM)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.bind(self.sock.fileno(), ctypes.c_char_p(sa), len(sa)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, 'bind %s (LE random, ATT): %s' % (addr, os.strerror(e)))
        self.sock.listen(5)
        GLib.io_add_watch(self.sock.fileno(), GLib.IO_IN, self.on_accept)
        log('ATT server listening on %s (LE random), service %s, %d attributes' % (addr, SERVICE_UUID, len(self.db.attrs)))

    def on_accept(self, fd, cond):
        try:
            sock, peer = self.sock.accept()
        except OSError as e:
            log('att: accept: %s' % e)
            return True
        self.conns.add(AttConn(self, sock, peer[0] if isinstance(peer, tuple) else peer))
        return True

    def notify(self, value):
        for c in list(self.conns):
            c.notify(self.db.stream_handle, value)
