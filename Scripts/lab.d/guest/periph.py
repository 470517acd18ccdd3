#!/usr/bin/python3 -Iu
"""The lab's own GATT peripheral, registered on the peripheral adapter (hci0)
next to BlueZ's example-gatt-server. It provides only what the example lacks.

usage: periph.py [/org/bluez/hci0]

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
"""
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
LONG_INITIAL = bytes(i & 0xff for i in range(300))
LONG_MAX = 512
BATCH = 32          # notifications emitted per main-loop turn in a burst


def log(*a):
    print('periph:', *a, flush=True)


class Error(dbus.exceptions.DBusException):
    def __init__(self, name, msg=''):
        dbus.exceptions.DBusException.__init__(self, msg, name='org.bluez.Error.' + name)


def stream_value(seq):
    return struct.pack('<I', seq & 0xffffffff) + bytes((seq + i) & 0xff for i in range(4, 20))


class Application(dbus.service.Object):
    def __init__(self, bus):
        dbus.service.Object.__init__(self, bus, APP_PATH)
        self.services = [LabService(bus, APP_PATH + '/service0')]

    @dbus.service.method(OM_IFACE, out_signature='a{oa{sa{sv}}}')
    def GetManagedObjects(self):
        out = {}
        for s in self.services:
            out[s.path] = s.props()
            for c in s.chrcs:
                out[c.path] = c.props()
        return out


class LabService(dbus.service.Object):
    def __init__(self, bus, path):
        self.path = dbus.ObjectPath(path)
        dbus.service.Object.__init__(self, bus, path)
        self.stream = StreamChrc(bus, path + '/char0', self)
        self.chrcs = [self.stream, ControlChrc(bus, path + '/char1', self, self.stream),
                      LongChrc(bus, path + '/char2', self), IndicateChrc(bus, path + '/char3', self)]

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


def ay(b):
    return dbus.Array(b, signature='y')


class StreamChrc(Chrc):
    uuid = STREAM_UUID
    flags = ['read', 'notify']

    def __init__(self, bus, path, service):
        Chrc.__init__(self, bus, path, service)
        self.notifying = False
        self.last = bytes(20)
        self.requested = self.sent = 0
        self.source = None
        self.interval_ms = 0
        self.t0 = 0.0

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        return ay(self.last[int(options.get('offset', 0)):])

    @dbus.service.method(CHRC_IFACE)
    def StartNotify(self):
        log('stream: StartNotify')
        self.notifying = True

    @dbus.service.method(CHRC_IFACE)
    def StopNotify(self):
        log('stream: StopNotify')
        self.notifying = False

    def emit(self):
        self.last = stream_value(self.sent)
        self.PropertiesChanged(CHRC_IFACE, {'Value': ay(self.last)}, [])
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
        else:
            self.source = GLib.idle_add(self.tick)

    def tick(self):
        for _ in range(1 if self.interval_ms else BATCH):
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


class ControlChrc(Chrc):
    uuid = CONTROL_UUID
    flags = ['read', 'write', 'write-without-response']

    def __init__(self, bus, path, service, stream):
        Chrc.__init__(self, bus, path, service)
        self.stream = stream

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        s = self.stream
        v = struct.pack('<IIBB', s.requested, s.sent, int(s.source is not None), int(s.notifying))
        return ay(v[int(options.get('offset', 0)):])

    @dbus.service.method(CHRC_IFACE, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        v = bytes(value)
        log('control: write %s' % v.hex())
        if len(v) == 0:
            self.stream.stop()
        elif len(v) == 4:
            self.stream.start(struct.unpack('<I', v)[0], 0)
        elif len(v) == 8:
            self.stream.start(*struct.unpack('<II', v))
        else:
            raise Error('InvalidValueLength')


class LongChrc(Chrc):
    uuid = LONG_UUID
    flags = ['read', 'write']

    def __init__(self, bus, path, service):
        Chrc.__init__(self, bus, path, service)
        self.value = LONG_INITIAL

    @dbus.service.method(CHRC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        off = int(options.get('offset', 0))
        log('long: read offset %d' % off)
        if off > len(self.value):
            raise Error('InvalidOffset')
        return ay(self.value[off:])

    @dbus.service.method(CHRC_IFACE, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        off = int(options.get('offset', 0))
        v = bytes(value)
        log('long: write %d bytes at offset %d' % (len(v), off))
        if off > len(self.value):
            raise Error('InvalidOffset')
        if off + len(v) > LONG_MAX:
            raise Error('InvalidValueLength')
        self.value = self.value[:off] + v


class IndicateChrc(Chrc):
    uuid = INDICATE_UUID
    flags = ['indicate']

    @dbus.service.method(CHRC_IFACE)
    def StartNotify(self):
        log('indicate: StartNotify')

    @dbus.service.method(CHRC_IFACE)
    def StopNotify(self):
        log('indicate: StopNotify')


def main():
    adapter = sys.argv[1] if len(sys.argv) > 1 else '/org/bluez/hci0'
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    app = Application(bus)
    loop = GLib.MainLoop()
    mgr = dbus.Interface(bus.get_object(BLUEZ, adapter), GATT_MANAGER_IFACE)

    def ok():
        log('application registered on %s, service %s' % (adapter, SERVICE_UUID))

    def err(e):
        log('registration FAILED:', e)
        loop.quit()
    mgr.RegisterApplication(APP_PATH, {}, reply_handler=ok, error_handler=err)
    loop.run()
    return 1


if __name__ == '__main__':
    sys.exit(main())
