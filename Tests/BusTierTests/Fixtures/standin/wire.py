'''The fast signal path for Mock.EmitAdvertisementBurst: signals written
straight to the bus socket, past dbus-python.'''

import ctypes
import os
import struct


# fast signal path for EmitAdvertisementBurst
#
# dbus-python spends ~25 µs marshalling one PropertiesChanged with variants.
# For bursts we marshal the wire format ourselves from a template (~1 µs),
# hand it to libdbus (dbus_message_demarshal, which validates it) and queue it
# on dbus-python's own connection (borrowed through dbus-python's C API
# capsule), so the signals keep org.bluez's sender and ordering.

class _Wire:
    '''Minimal little-endian D-Bus marshaller (enough for signal templates).'''

    def __init__(self):
        self.buf = bytearray()

    def align(self, n):
        self.buf += b'\0' * (-len(self.buf) % n)

    def y(self, v):
        self.buf += bytes([v])

    def u(self, v):
        self.align(4)
        self.buf += struct.pack('<I', v)

    def n(self, v):
        self.align(2)
        self.buf += struct.pack('<h', v)

    def q(self, v):
        self.align(2)
        self.buf += struct.pack('<H', v)

    def s(self, v):
        b = v.encode()
        self.u(len(b))
        self.buf += b + b'\0'

    def g(self, v):
        b = v.encode()
        self.y(len(b))
        self.buf += b + b'\0'

    def array(self, elem_align, fill):
        self.u(0)
        at = len(self.buf) - 4
        self.align(elem_align)
        start = len(self.buf)
        fill()
        struct.pack_into('<I', self.buf, at, len(self.buf) - start)


def _signal_header(path, iface, member, sig, body_len):
    w = _Wire()
    w.buf += b'l\x04\x00\x01'     # little endian, SIGNAL, no flags, version 1
    w.u(body_len)
    w.u(0)                           # serial, patched per message
    def fields():
        for code, t, v in ((1, 'o', path), (2, 's', iface), (3, 's', member), (8, 'g', sig)):
            w.align(8)
            w.y(code)
            w.g(t)
            (w.g if t == 'g' else w.s)(v)
    w.array(8, fields)
    w.align(8)
    return bytes(w.buf)


def _rssi_md_body(company):
    '''PropertiesChanged body ("org.bluez.Device1", {RSSI: n, ManufacturerData:
    {company: ay(8)}}, []) → (bytes, offset of RSSI, offset of the 8 bytes)'''
    w = _Wire()
    w.s(common.DEVICE_IFACE)
    offs = {}
    def entries():
        w.align(8)
        w.s('RSSI')
        w.g('n')
        w.align(2)
        offs['rssi'] = len(w.buf)
        w.n(0)
        w.align(8)
        w.s('ManufacturerData')
        w.g('a{qv}')
        def md():
            w.align(8)
            w.q(company)
            w.g('ay')
            def data():
                offs['md'] = len(w.buf)
                w.buf += b'\0' * 8
            w.array(1, data)
        w.array(8, md)
    w.array(8, entries)
    w.array(4, lambda: None)
    return bytes(w.buf), offs['rssi'], offs['md']


class _FastEmitter:
    def __init__(self, conn):
        import _dbus_bindings  # pylint: disable=import-outside-toplevel
        lib = ctypes.CDLL('libdbus-1.so.3')
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype = ctypes.c_void_p
        get.argtypes = [ctypes.py_object, ctypes.c_char_p]
        api = ctypes.cast(get(_dbus_bindings._C_API, b'_dbus_bindings._C_API'),
                          ctypes.POINTER(ctypes.c_void_p))
        # api[1] = DBusPyConnection_BorrowDBusConnection(PyObject *) → DBusConnection *
        borrow = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(api[1])
        self.conn = ctypes.c_void_p(borrow(conn))
        self.demarshal = lib.dbus_message_demarshal
        self.demarshal.restype = ctypes.c_void_p
        self.demarshal.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        self.send = lib.dbus_connection_send
        self.send.restype = ctypes.c_uint
        self.send.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.unref = lib.dbus_message_unref
        self.unref.argtypes = [ctypes.c_void_p]
        self.err = ctypes.create_string_buffer(64)     # DBusError
        lib.dbus_error_init(self.err)
        self.serial = 0x40000000     # away from dbus-python's own serials

    def send_raw(self, buf):
        self.serial = self.serial + 1 if self.serial < 0x7fffffff else 0x40000000
        struct.pack_into('<I', buf, 8, self.serial)
        msg = self.demarshal(bytes(buf), len(buf), self.err)
        if not msg:
            raise common._mock_err('Failed', 'stand-in marshalled an invalid message')
        ok = self.send(self.conn, msg, None)
        self.unref(msg)
        if not ok:
            raise common._mock_err('Failed', 'out of memory queueing a signal')


_FAST = None


def _fast_emitter():
    '''The fast path, or None if unavailable (then dbus-python is used).'''
    global _FAST  # pylint: disable=global-statement
    if _FAST is None:
        if os.environ.get('BLUEZ_STANDIN_SLOW_SIGNALS'):
            _FAST = False
        else:
            try:
                _FAST = _FastEmitter(common._bus())
            except Exception as e:  # pylint: disable=broad-except
                common.log(f'fast signal path unavailable ({e}); using dbus-python')
                _FAST = False
    return _FAST or None


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import common  # noqa: E402 pylint: disable=wrong-import-position
