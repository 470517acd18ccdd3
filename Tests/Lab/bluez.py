#!/usr/bin/python3 -Iu
"""Independent look at bluetoothd's state for lab checks (python3-dbus): the
checks assert on bluectl's output AND on what BlueZ says really happened.

usage: bluez.py device ADDR                 Device1 of ADDR on $CENTRAL as JSON ({} if none)
       bluez.py wait ADDR PROP true|false SECS   until Device1.PROP has that value
       bluez.py wait-notifying ADDR UUID SECS    until that characteristic is Notifying
       bluez.py wait-adapter PROP true|false SECS  until $CENTRAL's Adapter1.PROP has that value
       bluez.py remove ADDR                 Adapter1.RemoveDevice (forget the device)
       bluez.py adapter [hciN]              Adapter1 properties as JSON
       bluez.py bus-name PID                the unique bus name(s) of process PID on the system bus
       bluez.py services UUID               every GattService1 of that UUID, all adapters (JSON list of paths)
       bluez.py remove-with-service UUID [EXCEPT_ADDR]   RemoveDevice of $CENTRAL's devices that
                                            expose that service (but EXCEPT_ADDR); prints their addresses
Exit 0 on success, 1 on timeout/absence."""
import json
import os
import sys
import time

import dbus

BLUEZ = 'org.bluez'
bus = dbus.SystemBus()
om = dbus.Interface(bus.get_object(BLUEZ, '/'), 'org.freedesktop.DBus.ObjectManager')
ADAPTER = '/org/bluez/' + os.environ.get('CENTRAL', 'hci1')


def plain(v):
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.Byte, dbus.Int16, dbus.UInt16, dbus.Int32, dbus.UInt32, dbus.Int64, dbus.UInt64)):
        return int(v)
    if isinstance(v, dbus.Array) and getattr(v, 'signature', None) == 'y':
        return bytes(v).hex()
    if isinstance(v, (dbus.Array, list)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Dictionary, dict)):
        return {str(k): plain(x) for k, x in v.items()}
    return str(v)


def device(addr):
    for path, ifs in om.GetManagedObjects().items():
        d = ifs.get('org.bluez.Device1')
        if d and str(d['Adapter']) == ADAPTER and str(d['Address']).upper() == addr.upper():
            return str(path), d
    return None, None


def main(argv):
    cmd = argv[0]
    if cmd == 'device':
        path, d = device(argv[1])
        out = {k: plain(v) for k, v in d.items()} if d else {}
        if path:
            out['path'] = path
        print(json.dumps(out))
        return 0
    if cmd == 'adapter':
        path = '/org/bluez/' + (argv[1] if len(argv) > 1 else os.environ.get('CENTRAL', 'hci1'))
        props = dbus.Interface(bus.get_object(BLUEZ, path), 'org.freedesktop.DBus.Properties')
        print(json.dumps({k: plain(v) for k, v in props.GetAll('org.bluez.Adapter1').items()}))
        return 0
    if cmd == 'wait':
        addr, prop, want, secs = argv[1], argv[2], argv[3] == 'true', float(argv[4])
        end = time.monotonic() + secs
        while time.monotonic() < end:
            _, d = device(addr)
            if d is not None and bool(d.get(prop, False)) == want:
                return 0
            time.sleep(0.2)
        print('timeout: %s %s != %s after %ss' % (addr, prop, argv[3], argv[4]), file=sys.stderr)
        return 1
    if cmd == 'wait-adapter':
        prop, want, secs = argv[1], argv[2] == 'true', float(argv[3])
        props = dbus.Interface(bus.get_object(BLUEZ, ADAPTER), 'org.freedesktop.DBus.Properties')
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if bool(props.Get('org.bluez.Adapter1', prop)) == want:
                return 0
            time.sleep(0.2)
        print('timeout: %s %s != %s after %ss' % (ADAPTER, prop, argv[2], argv[3]), file=sys.stderr)
        return 1
    if cmd == 'wait-notifying':
        addr, uuid, secs = argv[1], argv[2].lower(), float(argv[3])
        end = time.monotonic() + secs
        while time.monotonic() < end:
            path, _ = device(addr)
            if path:
                for p, ifs in om.GetManagedObjects().items():
                    c = ifs.get('org.bluez.GattCharacteristic1')
                    if c and str(p).startswith(path + '/') and str(c['UUID']) == uuid and c.get('Notifying'):
                        return 0
            time.sleep(0.1)
        print('timeout: %s not notifying after %ss' % (uuid, argv[3]), file=sys.stderr)
        return 1
    if cmd == 'bus-name':
        d = dbus.Interface(bus.get_object('org.freedesktop.DBus', '/org/freedesktop/DBus'), 'org.freedesktop.DBus')
        names = []
        for n in d.ListNames():
            if n.startswith(':'):
                try:
                    if int(d.GetConnectionUnixProcessID(n)) == int(argv[1]):
                        names.append(str(n))
                except dbus.DBusException:
                    pass
        print(' '.join(names))
        return 0 if names else 1
    if cmd in ('services', 'remove-with-service'):
        uuid = argv[1].lower()
        if len(uuid) == 4:
            uuid = '0000%s-0000-1000-8000-00805f9b34fb' % uuid
        objs = om.GetManagedObjects()
        paths = sorted(str(p) for p, ifs in objs.items()
                       if str(ifs.get('org.bluez.GattService1', {}).get('UUID', '')).lower() == uuid)
        if cmd == 'services':
            print(json.dumps(paths))
            return 0
        keep = argv[2].upper() if len(argv) > 2 else None
        gone = []
        for p, ifs in objs.items():
            d = ifs.get('org.bluez.Device1')
            if not d or str(d['Adapter']) != ADAPTER or str(d['Address']).upper() == keep:
                continue
            if any(x.startswith(str(p) + '/') for x in paths):
                dbus.Interface(bus.get_object(BLUEZ, ADAPTER), 'org.bluez.Adapter1').RemoveDevice(p)
                gone.append(str(d['Address']))
        print(' '.join(gone))
        return 0
    if cmd == 'remove':
        path, _ = device(argv[1])
        if path:
            dbus.Interface(bus.get_object(BLUEZ, ADAPTER), 'org.bluez.Adapter1').RemoveDevice(path)
        return 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
