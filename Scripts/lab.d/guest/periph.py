#!/usr/bin/python3 -Iu
"""The lab's own GATT peripheral. On the first peripheral adapter (hci0) it is a
GATT application registered with bluetoothd, next to BlueZ's
example-gatt-server, and provides only what the example lacks. On the second
peripheral (hci2), which has a static random address, it serves the same
service with its own ATT server (see "Why an ATT server of its own" below).

usage: periph.py [/org/bluez/hci0]
       periph.py --att ADDR [--advertise NAME] [--go FILE] [/org/bluez/hci2]
         --att ADDR      serve the service (plus GAP 1800 with the name, GATT 1801)
                         on an L2CAP ATT socket bound to ADDR as an LE random
                         address (the controller's static random identity)
         --advertise NAME  register an advertisement with bluetoothd on the
                         adapter: NAME and the service's UUID; a second, identical
                         one is re-registered every ADV_PULSE s (env, default 1.5;
                         0: off), as Scripts/lab.d/guest/run-example.py does
         --go FILE       advertise only once FILE exists (the lab creates it when
                         the adapter has its static address and is powered)
       The process outlives bluetoothd: when a new bluetoothd owns org.bluez,
       the application (or the advertisement) is registered with it again,
       and a stream that was running goes on.

Service  b1ec7100-0000-4000-8000-000000000000  "bluectl lab" (primary)
  ...0001  stream   read, notify
           Sequence-numbered notification source. Every value is 20 bytes:
           bytes 0-3 = sequence number (uint32, little-endian), bytes 4-19 =
           (seq + i) & 0xff for i = 4..19 (a checkable pattern). A read
           returns the last value sent (all zero before the first).
  ...0002  control  read, write, write-without-response
           Write uint32 LE N            -> burst of N values, seq 0..N-1, as
                                           fast as bluetoothd takes them
           Write uint32 N + uint32 MS   -> N values, one every MS milliseconds
           Write empty value            -> stop the current burst
           Read -> 10 bytes: uint32 requested, uint32 sent, uint8 running,
                   uint8 notifying (someone enabled notifications)
  ...0003  long     read, write
           A long value: 300 bytes, initially i & 0xff for i = 0..299. Reads
           honour the offset option (ATT Read Blob), writes at an offset
           replace the tail from there (ATT Prepare/Execute Write), so long
           reads/writes work at any MTU (force them with `Scripts/lab run
           --mtu 48`: at BlueZ's default MTU of 517 300 bytes fit one PDU).
           Longest accepted value: 512 bytes.
  ...0004  indicate indicate
           Indicate-only (no read, no notify): what AcquireNotify refuses
           (Tests/Conformance). StartNotify/StopNotify are accepted; nothing
           is ever indicated.

The encrypted characteristic comes from BlueZ's example (12345678-1234-5678-
1234-56789abcdef3, encrypt-read/encrypt-write) with the lab's agent.

Why an ATT server of its own on hci2: bluetoothd 5.66 takes a controller's
identity from the management interface's Read Info, which reports the public
address (btvirt gives every controller one); it binds its ATT listening socket
to that public address, type LE public (src/gatt-database.c), and maps an
accepted socket back to an adapter by its source address (adapter_find).
`btmgmt static-addr` with BR/EDR off makes the kernel use the static random
address as the LE identity (hci_copy_identity_address), so an incoming LE link
on hci2 has that static address as its source, type random: the kernel's
fixed-channel lookup (l2cap_global_fixed_chan: address and type must match)
finds no ATT listener, the central's requests are dropped, and its GATT
client gives up after 30 s (ServicesResolved never true). bluetoothd itself
uses a static address only for an LE-only controller without a public
address (src/adapter.c set_static_addr), which btvirt cannot create. So here
the ATT channel is accepted by this program's socket, bound to the static
address with type random; pairing (SMP, in the kernel) and advertising still
go through bluetoothd. Tests/Lab/README.md, "A peripheral with a static
random address", has the evidence.
"""
import ctypes
import os
import socket
import struct
import sys
import time

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = 'org.bluez'
GATT_MANAGER_IFACE = 'org.bluez.GattManager1'
ADV_MANAGER_IFACE = 'org.bluez.LEAdvertisingManager1'
ADV_IFACE = 'org.bluez.LEAdvertisement1'
OM_IFACE = 'org.freedesktop.DBus.ObjectManager'
PROP_IFACE = 'org.freedesktop.DBus.Properties'
SVC_IFACE = 'org.bluez.GattService1'
CHRC_IFACE = 'org.bluez.GattCharacteristic1'

BASE = 'b1ec7100-0000-4000-8000-%012x'
SERVICE_UUID = BASE % 0
STREAM_UUID = BASE % 1
CONTROL_UUID = BASE % 2
LONG_UUID = BASE % 3
INDICATE_UUID = BASE % 4

APP_PATH = '/org/bluectl/lab'
# Typed, and the proxies are not introspected: a call on a proxy whose
# introspection failed (bluetoothd restarting, the adapter not exported yet)
# raises "Unable to guess signature from an empty dict" inside dbus-python's
# reply handler, and neither reply nor error handler is ever called.
NO_OPTIONS = dbus.Dictionary({}, signature='sv')
LONG_INITIAL = bytes(i & 0xff for i in range(300))
LONG_MAX = 512
BATCH = 32          # notifications emitted per main-loop turn in a burst
# Over its own ATT server a burst goes out BURST_BATCH values every
# BURST_PERIOD_MS ms (about 800/s, what the lab's bluetoothd delivers from
# hci0): unpaced, python writes 300 values into the socket in 40 ms, btvirt
# (no radio timing) forwards them as fast, and the central's bluetoothd, slower
# than that, loses the ones that overflow its ATT socket's receive buffer.
BURST_BATCH, BURST_PERIOD_MS = 4, 5


def log(*a):
    print('periph:', *a, flush=True)


class LabError(Exception):
    """A refusal of the service's logic, named as bluetoothd's D-Bus errors
    (org.bluez.Error.NAME); the ATT server maps it to an ATT error code."""
    def __init__(self, name):
        Exception.__init__(self, name)
        self.name = name


def stream_value(seq):
    return struct.pack('<I', seq & 0xffffffff) + bytes((seq + i) & 0xff for i in range(4, 20))


# ---------------------------------------------------------------- the service's logic
class Stream:
    """The sequence-numbered notification source and its control, whatever
    carries them: each value goes to every sink (a callable); `notifying` is
    true while anyone subscribed (D-Bus StartNotify, or an ATT client's CCC)."""

    def __init__(self, batch=BATCH, period_ms=0):
        self.batch, self.period_ms = batch, period_ms   # a burst: batch values per main-loop turn or per period
        self.sinks = []
        self.subscribers = set()
        self.last = bytes(20)
        self.requested = self.sent = 0
        self.source = None
        self.interval_ms = 0
        self.t0 = 0.0

    @property
    def notifying(self):
        return bool(self.subscribers)

    def subscribe(self, who):
        self.subscribers.add(who)

    def unsubscribe(self, who):
        self.subscribers.discard(who)

    def emit(self):
        self.last = stream_value(self.sent)
        for sink in list(self.sinks):
            sink(self.last)
        self.sent += 1

    def start(self, count, interval_ms):
        self.stop(quiet=True)
        self.requested, self.sent, self.interval_ms = count, 0, interval_ms
        self.t0 = time.monotonic()
        log('stream: burst of %d values, interval %d ms, notifying=%s' % (count, interval_ms, self.notifying))
        if count == 0:
            return
        if interval_ms:
            self.source = GLib.timeout_add(interval_ms, self.tick)
        elif self.period_ms:
            self.source = GLib.timeout_add(self.period_ms, self.tick)
        else:
            self.source = GLib.idle_add(self.tick)

    def tick(self):
        for _ in range(1 if self.interval_ms else self.batch):
            if self.sent >= self.requested:
                break
            self.emit()
        if self.sent >= self.requested:
            dt = time.monotonic() - self.t0
            log('stream: burst done, %d values in %.3f s (%.0f/s)' % (self.sent, dt, self.sent / dt if dt else 0))
            self.source = None
            return False
        return True

    def stop(self, quiet=False):
        if self.source is not None:
            GLib.source_remove(self.source)
            self.source = None
            if not quiet:
                log('stream: stopped after %d of %d values' % (self.sent, self.requested))

    def read(self, offset):
        return self.last[offset:]

    def control_read(self, offset):
        v = struct.pack('<IIBB', self.requested, self.sent, int(self.source is not None), int(self.notifying))
        return v[offset:]

    def control_write(self, v):
        log('control: write %s' % v.hex())
        if len(v) == 0:
            self.stop()
        elif len(v) == 4:
            self.start(struct.unpack('<I', v)[0], 0)
        elif len(v) == 8:
            self.start(*struct.unpack('<II', v))
        else:
            raise LabError('InvalidValueLength')


class Long:
    def __init__(self):
        self.value = LONG_INITIAL

    def read(self, off):
        log('long: read offset %d' % off)
        if off > len(self.value):
            raise LabError('InvalidOffset')
        return self.value[off:]

    def write(self, off, v):
        log('long: write %d bytes at offset %d' % (len(v), off))
        if off > len(self.value):
            raise LabError('InvalidOffset')
        if off + len(v) > LONG_MAX:
            raise LabError('InvalidValueLength')
        self.value = self.value[:off] + v


# ---------------------------------------------------------------- as a GATT application of bluetoothd
class Error(dbus.exceptions.DBusException):
    def __init__(self, name, msg=''):
        dbus.exceptions.DBusException.__init__(self, msg, name='org.bluez.Error.' + name)


def ay(b):
    return dbus.Array(b, signature='y')


class Application(dbus.service.Object):
    def __init__(self, bus, stream, long_value):
        dbus.service.Object.__init__(self, bus, APP_PATH)
        self.services = [LabService(bus, APP_PATH + '/service0', stream, long_value)]

    @dbus.service.method(OM_IFACE, out_signature='a{oa{sa{sv}}}')
    def GetManagedObjects(self):
        out = {}
        for s in self.services:
            out[s.path] = s.props()
            for c in s.chrcs:
                out[c.path] = c.props()
        return out


class LabService(dbus.service.Object):
    def __init__(self, bus, path, stream, long_value):
        self.path = dbus.ObjectPath(path)
        dbus.service.Object.__init__(self, bus, path)
        self.chrcs = [StreamChrc(bus, path + '/char0', self, stream), ControlChrc(bus, path + '/char1', self, stream),
                      LongChrc(bus, path + '/char2', self, long_value), IndicateChrc(bus, path + '/char3', self)]

    def props(self):
        return {SVC_IFACE: {'UUID': SERVICE_UUID, 'Primary': True,
                            'Characteristics': dbus.Array([c.path for c in self.chrcs], 'o')}}

    @dbus.service.method(PROP_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, iface):
        return self.props()[SVC_IFACE]


class Chrc(dbus.service.Object):
    uuid = None
    flags = []

    def __init__(self, bus, path, service):
        self.path = dbus.ObjectPath(path)
        self.service = service
        dbus.service.Object.__init__(self, bus, path)

    def props(self):
        return {CHRC_IFACE: {'Service': self.service.path, 'UUID': self.uuid,
                             'Flags': dbus.Array(self.flags, 's'),
                             'Descriptors': dbus.Array([], 'o')}}

    @dbus.service.method(PROP_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, iface):
        return self.props()[CHRC_IFACE]

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        raise Error('NotSupported')

    @dbus.service.method(CHRC_IFACE, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        raise Error('NotSupported')

    @dbus.service.method(CHRC_IFACE)
    def StartNotify(self):
        raise Error('NotSupported')

    @dbus.service.method(CHRC_IFACE)
    def StopNotify(self):
        raise Error('NotSupported')

    @dbus.service.signal(PROP_IFACE, signature='sa{sv}as')
    def PropertiesChanged(self, iface, changed, invalidated):
        pass


def dbus_call(f, *a):
    try:
        return f(*a)
    except LabError as e:
        raise Error(e.name)


class StreamChrc(Chrc):
    uuid = STREAM_UUID
    flags = ['read', 'notify']

    def __init__(self, bus, path, service, stream):
        Chrc.__init__(self, bus, path, service)
        self.stream = stream
        stream.sinks.append(lambda v: self.PropertiesChanged(CHRC_IFACE, {'Value': ay(v)}, []))

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        return ay(self.stream.read(int(options.get('offset', 0))))

    @dbus.service.method(CHRC_IFACE)
    def StartNotify(self):
        log('stream: StartNotify')
        self.stream.subscribe('dbus')

    @dbus.service.method(CHRC_IFACE)
    def StopNotify(self):
        log('stream: StopNotify')
        self.stream.unsubscribe('dbus')


class ControlChrc(Chrc):
    uuid = CONTROL_UUID
    flags = ['read', 'write', 'write-without-response']

    def __init__(self, bus, path, service, stream):
        Chrc.__init__(self, bus, path, service)
        self.stream = stream

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        return ay(self.stream.control_read(int(options.get('offset', 0))))

    @dbus.service.method(CHRC_IFACE, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        dbus_call(self.stream.control_write, bytes(value))


class LongChrc(Chrc):
    uuid = LONG_UUID
    flags = ['read', 'write']

    def __init__(self, bus, path, service, long_value):
        Chrc.__init__(self, bus, path, service)
        self.long = long_value

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        return ay(dbus_call(self.long.read, int(options.get('offset', 0))))

    @dbus.service.method(CHRC_IFACE, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        dbus_call(self.long.write, int(options.get('offset', 0)), bytes(value))


class IndicateChrc(Chrc):
    uuid = INDICATE_UUID
    flags = ['indicate']

    @dbus.service.method(CHRC_IFACE)
    def StartNotify(self):
        log('indicate: StartNotify')

    @dbus.service.method(CHRC_IFACE)
    def StopNotify(self):
        log('indicate: StopNotify')


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


# ---------------------------------------------------------------- advertising through bluetoothd
class Advertisement(dbus.service.Object):
    def __init__(self, bus, path, name):
        self.path = dbus.ObjectPath(path)
        self.name = name
        dbus.service.Object.__init__(self, bus, path)

    @dbus.service.method(PROP_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, iface):
        return {'Type': 'peripheral', 'LocalName': dbus.String(self.name),
                'ServiceUUIDs': dbus.Array([SERVICE_UUID], signature='s')}

    @dbus.service.method(ADV_IFACE)
    def Release(self):
        log('advertisement %s released' % self.path)


class Advertiser:
    """One advertisement, registered once per bluetoothd; and, every PULSE s,
    an identical one registered again: btvirt's controllers report
    advertising only when a set is enabled. Two pulse advertisements take
    turns, the next registered before the last is unregistered, one step at a
    time (run-example.py says why)."""

    def __init__(self, bus, adapter, name, pulse):
        self.bus, self.adapter, self.name, self.pulse = bus, adapter, name, pulse
        self.main_ad = Advertisement(bus, APP_PATH + '/adv0', name)
        self.pulse_ads = [Advertisement(bus, APP_PATH + '/adv1', name), Advertisement(bus, APP_PATH + '/adv2', name)]
        self.timer = None
        self.cur = None
        self.busy = False

    def start(self):
        mgr = dbus.Interface(self.bus.get_object(BLUEZ, self.adapter, introspect=False), ADV_MANAGER_IFACE)
        self.cur, self.busy = None, False
        mgr.RegisterAdvertisement(self.main_ad.path, NO_OPTIONS, reply_handler=lambda: log(
            'advertisement registered on %s: %s, %s' % (self.adapter, self.name, SERVICE_UUID)),
            error_handler=lambda e: log('advertisement registration FAILED:', e))
        if self.pulse > 0 and self.timer is None:
            self.timer = GLib.timeout_add(int(self.pulse * 1000), self.again, mgr)

    def stop(self):
        if self.timer is not None:
            GLib.source_remove(self.timer)
            self.timer = None

    def again(self, mgr):
        if self.busy:
            return True
        old = self.cur
        new = self.pulse_ads[1] if old is self.pulse_ads[0] else self.pulse_ads[0]

        def done(*_):
            self.busy = False

        def unregister_failed(e):
            if 'DoesNotExist' not in str(e):
                log('advertisement pulse:', e)
            done()

        def registered():
            self.cur = new
            if old is None:
                done()
            else:
                mgr.UnregisterAdvertisement(old.path, reply_handler=done, error_handler=unregister_failed)

        def failed(e):
            if 'AlreadyExists' in str(e):
                registered()
            else:
                log('advertisement pulse:', e)
                done()
        self.busy = True
        mgr.RegisterAdvertisement(new.path, NO_OPTIONS, reply_handler=registered, error_handler=failed)
        return True


def main(argv):
    att_addr = name = go = None
    adapter = '/org/bluez/hci0'
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == '--att':
            att_addr = args.pop(0)
        elif a == '--advertise':
            name = args.pop(0)
        elif a == '--go':
            go = args.pop(0)
        else:
            adapter = a
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    loop = GLib.MainLoop()
    stream, long_value = (Stream(BURST_BATCH, BURST_PERIOD_MS) if att_addr else Stream()), Long()
    app = None
    if att_addr:
        AttServer(att_addr, name or 'lab peripheral', stream, long_value)
    else:
        app = Application(bus, stream, long_value)
    adv = Advertiser(bus, adapter, name, float(os.environ.get('ADV_PULSE', '1.5'))) if name else None

    # This process outlives bluetoothd: when bluetoothd dies (the lab's
    # supervisor restarts it), the registrations are made again with the new
    # one, and the stream goes on (its numbers keep counting). A D-Bus
    # subscription ends with the bluetoothd that held it; an ATT client's
    # ends with its connection.
    state = {'owner': None}

    def register_app(owner):
        if state['owner'] != owner:
            return False   # bluetoothd went away (or changed) meanwhile
        mgr = dbus.Interface(bus.get_object(BLUEZ, adapter, introspect=False), GATT_MANAGER_IFACE)

        def ok():
            log('application registered on %s, service %s' % (adapter, SERVICE_UUID))

        def err(e):
            log('registration FAILED (tried again in 0.5 s):', e)
            GLib.timeout_add(500, register_app, owner)
        mgr.RegisterApplication(dbus.ObjectPath(APP_PATH), NO_OPTIONS, reply_handler=ok, error_handler=err)
        return False

    def register_adv(owner):
        if state['owner'] != owner:
            return False
        if go and not os.path.exists(go):
            return True   # polled every 0.1 s
        adv.start()
        return False

    def on_owner(owner):
        owner = str(owner)
        if owner == state['owner']:
            return
        if state['owner']:
            log('bluetoothd left the bus%s' % (': registering again with the new one' if owner else ''))
            stream.unsubscribe('dbus')
            if adv is not None:
                adv.stop()
        state['owner'] = owner
        if owner:
            # bluetoothd takes its bus name before it exports the adapters:
            # a registration that fails is tried again
            if app is not None:
                register_app(owner)
            if adv is not None and register_adv(owner):
                GLib.timeout_add(100, register_adv, owner)
    bus.watch_name_owner(BLUEZ, on_owner)
    loop.run()
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
