#!/usr/bin/python3 -Iu
"""A plain python3-dbus subscriber, as any other program on the machine would
be: StartNotify on one characteristic of a connected device and print each
Value signal as hex, one per line, until COUNT values or SECS seconds.
Prints "subscribed" on stderr once StartNotify answered.

usage: pysub.py ADAPTER ADDRESS UUID COUNT SECS"""
import sys
import dbus
import dbus.mainloop.glib
from gi.repository import GLib

adapter, address, uuid, count, secs = sys.argv[1], sys.argv[2].upper(), sys.argv[3].lower(), int(sys.argv[4]), float(sys.argv[5])
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SystemBus()
om = dbus.Interface(bus.get_object('org.bluez', '/'), 'org.freedesktop.DBus.ObjectManager')
dev = '/org/bluez/%s/dev_%s' % (adapter, address.replace(':', '_'))
path = next((p for p, ifs in om.GetManagedObjects().items()
             if str(p).startswith(dev + '/') and str(ifs.get('org.bluez.GattCharacteristic1', {}).get('UUID', '')) == uuid), None)
if path is None:
    print('pysub: %s not found under %s' % (uuid, dev), file=sys.stderr)
    sys.exit(68)
loop = GLib.MainLoop()
got = [0]
status = [0]


def changed(iface, props, _invalidated):
    if iface == 'org.bluez.GattCharacteristic1' and 'Value' in props:
        print(bytes(props['Value']).hex())
        got[0] += 1
        if got[0] >= count:
            loop.quit()


def timeout():
    print('pysub: %d of %d values after %.0f s' % (got[0], count, secs), file=sys.stderr)
    status[0] = 124
    loop.quit()


bus.add_signal_receiver(changed, 'PropertiesChanged', 'org.freedesktop.DBus.Properties', 'org.bluez', path)
chrc = dbus.Interface(bus.get_object('org.bluez', path), 'org.bluez.GattCharacteristic1')
chrc.StartNotify()
print('subscribed', file=sys.stderr)
GLib.timeout_add(int(secs * 1000), timeout)
loop.run()
try:
    chrc.StopNotify()
except dbus.DBusException as e:
    print('pysub: StopNotify: %s' % e.get_dbus_name(), file=sys.stderr)
sys.exit(status[0])
