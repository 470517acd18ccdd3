#!/usr/bin/python3
"""Which advertisement monitors bluetoothd takes (run in the lab, bluetoothd -E):
for each size N given (optionally N+rssi), an application with one or_patterns
monitor of N distinct manufacturer-data patterns is registered on the central;
says whether bluetoothd activated it, released it, or died (its pid changed:
the supervisor restarts it), then unregisters it. docs/advertisement-monitor.md.

usage (guest): monitor-probe.py SIZE[+rssi]...   e.g. 1 7 7+rssi 8 8+rssi 16"""
import os
import subprocess
import sys
import time

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

CENTRAL = os.environ.get('CENTRAL', 'hci1')
ADAPTER = '/org/bluez/' + CENTRAL
MANAGER = 'org.bluez.AdvertisementMonitorManager1'
MONITOR = 'org.bluez.AdvertisementMonitor1'


class Monitor(dbus.service.Object):
    def __init__(self, bus, path, props, outcome):
        super().__init__(bus, path)
        self.props = props
        self.outcome = outcome

    @dbus.service.method(MONITOR)
    def Activate(self):
        self.outcome.append('activated')

    @dbus.service.method(MONITOR)
    def Release(self):
        self.outcome.append('released')

    @dbus.service.method(MONITOR, in_signature='o')
    def DeviceFound(self, device):
        pass

    @dbus.service.method(MONITOR, in_signature='o')
    def DeviceLost(self, device):
        pass

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface):
        return self.props


class App(dbus.service.Object):
    def __init__(self, bus, path, monitor):
        super().__init__(bus, path)
        self.monitor = monitor

    @dbus.service.method('org.freedesktop.DBus.ObjectManager', out_signature='a{oa{sa{sv}}}')
    def GetManagedObjects(self):
        return {dbus.ObjectPath(self.monitor.__dbus_object_path__): {MONITOR: self.monitor.props}}


def pid():
    out = subprocess.run(['pidof', 'bluetoothd'], capture_output=True, text=True).stdout.split()
    return out[0] if out else None


def wait_manager(bus, limit=90):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            om = dbus.Interface(bus.get_object('org.bluez', '/'), 'org.freedesktop.DBus.ObjectManager')
            if MANAGER in om.GetManagedObjects().get(dbus.ObjectPath(ADAPTER), {}):
                return True
        except dbus.DBusException:
            pass
        time.sleep(1)
    return False


def run(bus, loop, number, spec):
    size, _, rssi = spec.partition('+')
    size = int(size)
    patterns = dbus.Array([dbus.Struct((dbus.Byte(0), dbus.Byte(0xff), dbus.Array([dbus.Byte(i & 0xff), dbus.Byte(0xee)], signature='y')),
                                       signature=None) for i in range(1, size + 1)], signature='(yyay)')
    props = {'Type': dbus.String('or_patterns'), 'Patterns': patterns}
    if rssi:
        props.update({'RSSIHighThreshold': dbus.Int16(-60), 'RSSIHighTimeout': dbus.UInt16(1),
                      'RSSILowThreshold': dbus.Int16(-90), 'RSSILowTimeout': dbus.UInt16(5)})
    outcome = []
    root = '/probe/app%d' % number
    monitor = Monitor(bus, root + '/monitor0', props, outcome)
    app = App(bus, root, monitor)
    before = pid()
    manager = dbus.Interface(bus.get_object('org.bluez', ADAPTER), MANAGER)
    manager.RegisterMonitor(dbus.ObjectPath(root), reply_handler=lambda: outcome.append('registered'),
                            error_handler=lambda e: outcome.append('register failed: %s' % e.get_dbus_name()), timeout=20)
    end = time.monotonic() + 15
    ctx = loop.get_context()
    while time.monotonic() < end and not any(o in ('activated', 'released') for o in outcome) and pid() == before:
        ctx.iteration(False)
        time.sleep(0.05)
    time.sleep(1)
    while ctx.pending():
        ctx.iteration(False)
    after = pid()
    died = after != before
    if not died:
        try:
            manager.UnregisterMonitor(dbus.ObjectPath(root))
            outcome.append('unregistered')
        except dbus.DBusException as e:
            outcome.append('unregister: %s' % e.get_dbus_name())
    print('monitor of %s: %s%s' % (spec, ', '.join(outcome) or 'nothing',
                                   '; bluetoothd DIED (pid %s -> %s)' % (before, after) if died else ''), flush=True)
    monitor.remove_from_connection()
    app.remove_from_connection()
    if died and not wait_manager(bus):
        print('bluetoothd did not come back with %s' % MANAGER, flush=True)
        sys.exit(1)
    return not died


def main():
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    loop = GLib.MainLoop()
    if not wait_manager(bus, 30):
        print('%s has no %s (bluetoothd -E?)' % (CENTRAL, MANAGER))
        sys.exit(2)
    for number, spec in enumerate(sys.argv[1:]):
        run(bus, loop, number, spec)


if __name__ == '__main__':
    main()
