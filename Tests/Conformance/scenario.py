#!/usr/bin/python3 -u
'''One scenario against whatever BlueZ answers on the system bus (the lab's
bluetoothd, or the stand-in on a private bus): prints a JSON record of what a
client can observe, for compare.py.

usage: scenario.py ADAPTER PERIPH_ADDR OUT.json

The peripheral must offer the lab's service (Scripts/lab.d/guest/periph.py):
stream (read, notify), control (write: uint32 N → N stream notifications),
long (read, write; no write-without-response) and indicate (indicate only).
On the stand-in (org.bluez's "/" has org.freedesktop.DBus.Mock) a
notification is triggered with Mock.EmitNotification instead of the control
write; that is harness, not recorded.

Recorded: replies as "ok" or the D-Bus error NAME (never messages), counts of
signals, object presence by characteristic UUID, property values that are
not addresses, paths or payloads. Two bus connections (A and B) act as two
clients.
'''
import json
import struct
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BLUEZ = 'org.bluez'
D1 = 'org.bluez.Device1'
A1 = 'org.bluez.Adapter1'
C1 = 'org.bluez.GattCharacteristic1'
PROPS = 'org.freedesktop.DBus.Properties'
OM = 'org.freedesktop.DBus.ObjectManager'
BASE = 'b1ec7100-0000-4000-8000-%012x'
STREAM, CONTROL, LONG, INDICATE = (BASE % i for i in (1, 2, 3, 4))
SETTLE = 1.5     # seconds to collect the signals that follow an action


def main():
    adapter, addr, out_path = sys.argv[1], sys.argv[2].upper(), sys.argv[3]
    adapter_path = adapter if adapter.startswith('/') else '/org/bluez/' + adapter
    dev = adapter_path + '/dev_' + addr.replace(':', '_')
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    a = dbus.bus.BusConnection(dbus.bus.BUS_SYSTEM)
    b = dbus.bus.BusConnection(dbus.bus.BUS_SYSTEM)
    ctx = GLib.MainContext.default()
    rec = {}
    log = []

    def pump(seconds, until=None):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if until is not None and until():
                return True
            ctx.iteration(False) or time.sleep(0.01)
        return until() if until is not None else True

    def call(conn, path, iface, method, *args, sig=None, timeout=30):
        try:
            r = conn.call_blocking(BLUEZ, path, iface, method, sig, list(args), timeout=timeout)
            return ('ok', r)
        except dbus.exceptions.DBusException as e:
            return (e.get_dbus_name(), None)

    def reply(conn, path, iface, method, *args, sig=None, timeout=30):
        r = call(conn, path, iface, method, *args, sig=sig, timeout=timeout)[0]
        log.append(f'{method} {path}: {r}')
        return r

    def get(path, iface, name):
        r = call(a, path, PROPS, 'Get', iface, name, sig='ss')
        return r[1] if r[0] == 'ok' else r[0]

    # signals, per connection
    seen = {'A': [], 'B': []}

    def watch(conn, tag):
        def on_pc(iface, changed, invalidated, path=None, sender=None):
            seen[tag].append(('PC', str(path), str(iface), sorted(str(k) for k in changed),
                              {str(k): v for k, v in changed.items()}))
        conn.add_signal_receiver(on_pc, 'PropertiesChanged', PROPS, BLUEZ, None, path_keyword='path')

        def on_added(path, ifaces):
            seen[tag].append(('IA', str(path), sorted(str(i) for i in ifaces)))

        def on_removed(path, ifaces):
            seen[tag].append(('IR', str(path), sorted(str(i) for i in ifaces)))
        conn.add_signal_receiver(on_added, 'InterfacesAdded', OM, BLUEZ, '/')
        conn.add_signal_receiver(on_removed, 'InterfacesRemoved', OM, BLUEZ, '/')
    watch(a, 'A')
    watch(b, 'B')

    def mark():
        return {t: len(v) for t, v in seen.items()}

    def since(m, tag='A'):
        return seen[tag][m[tag]:]

    def value_signals(m, path, tag):
        return sum(1 for s in since(m, tag) if s[0] == 'PC' and s[1] == path and 'Value' in s[3])

    def objects():
        return call(a, '/', OM, 'GetManagedObjects')[1] or {}

    svc_paths = set()      # the lab service's object path(s), once seen

    def lab_objects():
        '''objects of the lab service (the peripheral has others, e.g.
        BlueZ's example services, that the stand-in does not mirror)'''
        objs = objects()
        for path, p in objs.items():
            if str(path).startswith(dev + '/') and \
                    str(p.get('org.bluez.GattService1', {}).get('UUID', '')) == BASE % 0:
                svc_paths.add(str(path))
        mine = {str(path): p for path, p in objs.items()
                if any(str(path) == s or str(path).startswith(s + '/') for s in svc_paths)}
        for path, p in mine.items():
            for iface, props in p.items():
                if iface.startswith('org.bluez.Gatt'):
                    labels[path] = iface.split('.')[-1] + ' ' + str(props.get('UUID', '?'))
                    if iface == 'org.bluez.GattDescriptor1':
                        chrc = mine.get(str(props.get('Characteristic', '')), {}).get(C1, {})
                        labels[path] += ' of ' + str(chrc.get('UUID', '?'))
        return mine

    def changes(m, kind):
        '''InterfacesAdded/Removed (kind IA/IR) of the device and the lab
        service's objects since mark m: sorted "what: interfaces"'''
        def shown(path, ifaces):
            # the device: only Device1 (bluetoothd's profiles add others,
            # e.g. Battery1 for the lab peripheral's Battery Service, which
            # the stand-in does not model)
            keep = [i for i in ifaces if not i.startswith('org.freedesktop') and
                    (path != dev or i == D1)]
            return f"{labels.get(path, '?')}: {','.join(keep)}" if keep else None
        return sorted(x for x in (shown(s[1], s[2]) for s in since(m) if s[0] == kind and ours(s[1]))
                      if x is not None)

    labels = {dev: 'device'}     # object path → what it is, by UUID

    def ours(path):
        return path == dev or any(path == s or path.startswith(s + '/') for s in svc_paths)

    def chrcs():
        '''characteristic UUID → path, in the lab service'''
        return {str(p[C1]['UUID']): path for path, p in lab_objects().items() if C1 in p}

    def gatt_presence():
        objs = lab_objects()
        kinds = {}
        for path, p in objs.items():
            for iface in p:
                if iface.startswith('org.bluez.Gatt'):
                    uuid = str(p[iface].get('UUID', '?'))
                    if iface == 'org.bluez.GattDescriptor1':   # "desc UUID of chrc UUID"
                        chrc = objs.get(str(p[iface].get('Characteristic', '')), {}).get(C1, {})
                        uuid += ' of ' + str(chrc.get('UUID', '?'))
                    kinds.setdefault(iface.split('.')[-1], []).append(uuid)
        return {k: sorted(v) for k, v in sorted(kinds.items())}

    mock = 'org.freedesktop.DBus.Mock' in str(call(a, '/', 'org.freedesktop.DBus.Introspectable',
                                                    'Introspect')[1] or '')

    def trigger(paths):
        if mock:
            a.call_blocking(BLUEZ, '/', 'org.freedesktop.DBus.Mock', 'EmitNotification', 'oay',
                            [dbus.ObjectPath(paths[STREAM]), dbus.ByteArray(b'\x01' * 20)])
        else:
            a.call_blocking(BLUEZ, paths[CONTROL], C1, 'WriteValue', 'aya{sv}',
                            [dbus.ByteArray(struct.pack('<I', 1)), {'type': 'request'}])

    def wait_resolved(seconds=30):
        return pump(seconds, lambda: flag(get(dev, D1, 'ServicesResolved')) is True)

    # ---- discover
    rec['powered'] = bool(get(adapter_path, A1, 'Powered'))
    m = mark()
    rec['start_discovery'] = reply(a, adapter_path, A1, 'StartDiscovery')
    found = pump(60, lambda: dev in objects())
    rec['discovered'] = found
    rec['stop_discovery'] = reply(a, adapter_path, A1, 'StopDiscovery')
    if not found:
        return finish(rec, log, out_path)

    # ---- connect
    m = mark()
    rec['connect'] = reply(a, dev, D1, 'Connect', timeout=60)
    rec['services_resolved'] = wait_resolved()
    pump(SETTLE)
    paths = chrcs()
    rec['gatt_after_connect'] = gatt_presence()
    if not all(u in paths for u in (STREAM, CONTROL, LONG, INDICATE)):
        rec['missing_characteristics'] = sorted(u for u in (STREAM, CONTROL, LONG, INDICATE) if u not in paths)
        return finish(rec, log, out_path)
    st = paths[STREAM]
    rec['stream_props'] = sorted(str(k) for k in objects()[dbus.ObjectPath(st)][C1].keys()
                                 if k != 'Value')
    rec['indicate_props'] = sorted(str(k) for k in objects()[dbus.ObjectPath(paths[INDICATE])][C1].keys()
                                   if k != 'Value')

    # ---- two StartNotify clients, Value signals per notification
    rec['start_notify_a'] = reply(a, st, C1, 'StartNotify')
    rec['start_notify_b'] = reply(b, st, C1, 'StartNotify')
    pump(SETTLE)
    rec['notifying'] = bool(get(st, C1, 'Notifying'))
    per = []
    for _ in range(3):
        m = mark()
        trigger(paths)
        pump(SETTLE)
        per.append([value_signals(m, st, 'A'), value_signals(m, st, 'B')])
    rec['value_signals_per_notification_seen_by_a_b'] = per

    # ---- a read while notifying
    m = mark()
    rec['read_while_notifying'] = reply(a, st, C1, 'ReadValue', {}, sig='a{sv}')
    pump(SETTLE)
    rec['value_signals_after_read'] = value_signals(m, st, 'A')
    m = mark()
    rec['read_again'] = reply(b, st, C1, 'ReadValue', {}, sig='a{sv}')
    pump(SETTLE)
    rec['value_signals_after_second_read_same_value'] = value_signals(m, st, 'A')

    # ---- repeated StartNotify, write command, AcquireNotify, Connect again
    rec['start_notify_a_again'] = reply(a, st, C1, 'StartNotify')
    rec['write_command_without_wwr'] = reply(a, paths[LONG], C1, 'WriteValue', dbus.ByteArray(b'\x07'),
                                             {'type': 'command'}, sig='aya{sv}')
    rec['write_no_type_on_indicate'] = reply(a, paths[INDICATE], C1, 'WriteValue', dbus.ByteArray(b'\x07'),
                                             {}, sig='aya{sv}')
    rec['acquire_notify_indicate_only'] = reply(a, paths[INDICATE], C1, 'AcquireNotify', {}, sig='a{sv}')
    rec['acquire_notify_while_started'] = reply(a, st, C1, 'AcquireNotify', {}, sig='a{sv}')
    rec['stop_notify_not_started'] = reply(a, paths[INDICATE], C1, 'StopNotify')
    rec['connect_when_connected'] = reply(a, dev, D1, 'Connect', timeout=60)

    # ---- disconnect
    m = mark()
    rec['disconnect'] = reply(a, dev, D1, 'Disconnect')
    pump(10, lambda: flag(get(dev, D1, 'Connected')) is False)
    pump(SETTLE)
    rec['after_disconnect'] = {
        'connected': bool(get(dev, D1, 'Connected')),
        'services_resolved': bool(get(dev, D1, 'ServicesResolved')),
        'gatt': gatt_presence(),
        'interfaces_removed': changes(m, 'IR'),
        'services_resolved_signals': [bool(s[4]['ServicesResolved']) for s in since(m)
                                      if s[0] == 'PC' and s[1] == dev and 'ServicesResolved' in s[3]],
        'notifying_signals': sum(1 for s in since(m) if s[0] == 'PC' and s[1] == st and 'Notifying' in s[3]),
    }
    if st in chrcs().values():
        d = rec['after_disconnect']
        d['notifying'] = get(st, C1, 'Notifying')
        d['notifying'] = bool(d['notifying']) if isinstance(d['notifying'], dbus.Boolean) else d['notifying']
        d['mtu_present'] = 'MTU' in objects()[dbus.ObjectPath(st)][C1]
        d['read'] = reply(a, st, C1, 'ReadValue', {}, sig='a{sv}')
        d['start_notify_a_again'] = reply(a, st, C1, 'StartNotify')
        d['acquire_notify'] = reply(a, st, C1, 'AcquireNotify', {}, sig='a{sv}')

    # ---- reconnect
    m = mark()
    rec['reconnect'] = reply(a, dev, D1, 'Connect', timeout=60)
    rec['reconnect_services_resolved'] = wait_resolved()
    pump(SETTLE)
    paths = chrcs()
    st = paths.get(STREAM, st)
    r = {'interfaces_added': changes(m, 'IA'),
         'notifying_signals': sum(1 for s in since(m) if s[0] == 'PC' and s[1] == st and 'Notifying' in s[3])}
    if STREAM in paths:
        r['notifying'] = bool(get(st, C1, 'Notifying'))
        r['mtu_present'] = 'MTU' in objects()[dbus.ObjectPath(st)][C1]
        r['mtu_signals'] = sum(1 for s in since(m) if s[0] == 'PC' and s[1] == st and 'MTU' in s[3])
        m2 = mark()
        trigger(paths)
        pump(SETTLE)
        r['value_signals_per_notification_seen_by_a_b'] = [value_signals(m2, st, 'A'), value_signals(m2, st, 'B')]
        r['start_notify_a_again'] = reply(a, st, C1, 'StartNotify')
    rec['after_reconnect'] = r

    # ---- clean up: sessions, link, device
    rec['stop_notify_a'] = reply(a, st, C1, 'StopNotify')
    rec['notifying_after_one_stop'] = bool(get(st, C1, 'Notifying'))
    rec['stop_notify_b'] = reply(b, st, C1, 'StopNotify')
    pump(SETTLE)
    rec['notifying_after_both_stop'] = bool(get(st, C1, 'Notifying'))
    rec['final_disconnect'] = reply(a, dev, D1, 'Disconnect')
    pump(10, lambda: flag(get(dev, D1, 'Connected')) is False)
    m = mark()
    rec['remove_device'] = reply(a, adapter_path, A1, 'RemoveDevice', dbus.ObjectPath(dev), sig='o')
    pump(SETTLE)
    rec['after_remove'] = {'device_present': dev in objects(), 'gatt': gatt_presence(),
                           'interfaces_removed': changes(m, 'IR')}
    return finish(rec, log, out_path)


def flag(v):
    '''a D-Bus boolean as bool; anything else (an error name) unchanged'''
    return bool(v) if isinstance(v, dbus.Boolean) else v


def finish(rec, log, out_path):
    text = json.dumps(rec, indent=1, sort_keys=True)
    with open(out_path, 'w') as f:
        f.write(text + '\n')
    print(text)
    print('\n'.join(log), file=sys.stderr)
    return 0 if rec.get('discovered') and 'missing_characteristics' not in rec else 1


if __name__ == '__main__':
    sys.exit(main())
