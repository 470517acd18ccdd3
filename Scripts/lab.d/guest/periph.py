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
  ...0005  sink     write-without-response
           Takes any value and counts it: half a second after the last
           write, one log line with the bytes, the writes, the time from the
           first to the last and the SHA-256 of them all (the throughput
           bench's write stream, Scripts/bench.d/throughput.py). Not served
           by --att.

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
import os
import sys

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

# The service's logic and its ATT front end live beside this file; -I (isolated)
# leaves the script's folder off sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from periph_service import (BURST_BATCH, BURST_PERIOD_MS, CONTROL_UUID, INDICATE_UUID, LONG_UUID,  # noqa: E402
                            SERVICE_UUID, SINK_UUID, STREAM_UUID, LabError, Long, Sink, Stream, log)
from periph_att import AttServer  # noqa: E402

APP_PATH = '/org/bluectl/lab'
# Typed, and the proxies are not introspected: a call on a proxy whose
# introspection failed (bluetoothd restarting, the adapter not exported yet)
# raises "Unable to guess signature from an empty dict" inside dbus-python's
# reply handler, and neither reply nor error handler is ever called.
NO_OPTIONS = dbus.Dictionary({}, signature='sv')


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
                      LongChrc(bus, path + '/char2', self, long_value), IndicateChrc(bus, path + '/char3', self),
                      SinkChrc(bus, path + '/char4', self, Sink())]

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


class SinkChrc(Chrc):
    uuid = SINK_UUID
    flags = ['write-without-response']

    def __init__(self, bus, path, service, sink):
        Chrc.__init__(self, bus, path, service)
        self.sink = sink

    @dbus.service.method(CHRC_IFACE, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        self.sink.write(bytes(value))


class IndicateChrc(Chrc):
    uuid = INDICATE_UUID
    flags = ['indicate']

    @dbus.service.method(CHRC_IFACE)
    def StartNotify(self):
        log('indicate: StartNotify')

    @dbus.service.method(CHRC_IFACE)
    def StopNotify(self):
        log('indicate: StopNotify')

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
