#!/usr/bin/python3 -Iu
"""refctl: a python3-dbus stand-in for bluectl's CLI contract, used only to
prove the lab and the lab tier's checks (Tests/Lab/selftest.py runs
run-checks.py with BLUECTL=refctl.py). It is a test double, not a product:
plain, sequential, no retries beyond the documented ones. Like bluectl, a
command that had to connect (read, write, ...) disconnects again at its end;
`connect` keeps the connection.

usage: refctl.py adapters [--json]
       refctl.py scan [--json] [--adapter hciN] [--service UUID]... [--name S]
                      [--timeout SECS] [--count N] [--duplicates]
       refctl.py connect DEVICE [--adapter hciN] [--timeout SECS] [--pair] [--json]
       refctl.py disconnect|info DEVICE [--adapter hciN] [--json]
       refctl.py discover DEVICE [--adapter hciN] [--json]
       refctl.py read DEVICE CHAR [--adapter hciN] [--json]
       refctl.py write DEVICE CHAR HEX [--adapter hciN] [--with-response|--without-response]
       refctl.py subscribe DEVICE CHAR [--adapter hciN] [--count N] [--timeout SECS] [--json]
       refctl.py help [SUBCOMMAND]
DEVICE: address (or D-Bus path); CHAR: UUID, 16-bit short form or a name
(battery_level, heart_rate_measurement, body_sensor_location,
heart_rate_control_point). Exit: 64 usage, 68 not found, 69 unavailable,
74 disconnected, 77 not permitted, 124 timeout, 130 SIGINT, 143 SIGTERM.
"""
import json
import os
import signal
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BLUEZ = 'org.bluez'
OM = 'org.freedesktop.DBus.ObjectManager'
PROPS = 'org.freedesktop.DBus.Properties'
ADAPTER_IF, DEVICE_IF = 'org.bluez.Adapter1', 'org.bluez.Device1'
SVC_IF, CHR_IF, DSC_IF = 'org.bluez.GattService1', 'org.bluez.GattCharacteristic1', 'org.bluez.GattDescriptor1'
NAMES = {'battery_level': '2a19', 'heart_rate_measurement': '2a37',
         'body_sensor_location': '2a38', 'heart_rate_control_point': '2a39'}
USAGE = {
    'adapters': 'adapters [--json]',
    'scan': 'scan [--json] [--adapter hciN] [--service UUID]... [--name S] [--timeout SECS] [--count N] [--duplicates]',
    'connect': 'connect DEVICE [--adapter hciN] [--timeout SECS] [--pair] [--json]',
    'disconnect': 'disconnect DEVICE [--adapter hciN]',
    'info': 'info DEVICE [--adapter hciN] [--json]',
    'discover': 'discover DEVICE [--adapter hciN] [--json]',
    'read': 'read DEVICE CHAR [--adapter hciN] [--json]',
    'write': 'write DEVICE CHAR HEX [--adapter hciN] [--with-response|--without-response]',
    'subscribe': 'subscribe DEVICE CHAR [--adapter hciN] [--count N] [--timeout SECS] [--json]',
}


class Exit(Exception):
    def __init__(self, code, msg=''):
        Exception.__init__(self, msg)
        self.code, self.msg = code, msg


def uuid128(u):
    u = NAMES.get(u, u).lower()
    if u.startswith('0x'):
        u = u[2:]
    if len(u) == 4:
        return '0000%s-0000-1000-8000-00805f9b34fb' % u
    if len(u) == 8:
        return '%s-0000-1000-8000-00805f9b34fb' % u
    if len(u) == 36:
        return u
    raise Exit(64, 'not a UUID or known name: %s' % u)


def hexbytes(v):
    return bytes(v).hex()


def parse(argv, flags, opts, multi=(), npos=0):
    """tiny option parser: flags (bool), opts (value), multi (repeated value)."""
    res = {f: False for f in flags}
    res.update({o: None for o in opts})
    res.update({m: [] for m in multi})
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in flags:
            res[a] = True
        elif a in opts or a in multi:
            if i + 1 >= len(argv):
                raise Exit(64, 'missing value for %s' % a)
            if a in multi:
                res[a].append(argv[i + 1])
            else:
                res[a] = argv[i + 1]
            i += 1
        elif a.startswith('--'):
            raise Exit(64, 'unknown option %s' % a)
        else:
            pos.append(a)
        i += 1
    if len(pos) != npos:
        raise Exit(64, 'expected %d argument(s), got %d' % (npos, len(pos)))
    return res, pos


def number(s, what, kind=float):
    try:
        v = kind(s)
        if v < 0:
            raise ValueError
        return v
    except (TypeError, ValueError):
        raise Exit(64, '%s: not a number: %r' % (what, s))


def dbus_exit(e):
    n = e.get_dbus_name() or ''
    if n.endswith(('NotPermitted', 'NotAuthorized', 'AuthenticationFailed')):
        return Exit(77, '%s: %s' % (n, e.get_dbus_message()))
    if n.endswith(('DoesNotExist', 'UnknownObject')):
        return Exit(68, '%s: %s' % (n, e.get_dbus_message()))
    if n.endswith(('NotReady', 'ServiceUnknown', 'NoReply')):
        return Exit(69, '%s: %s' % (n, e.get_dbus_message()))
    if n.endswith('NotConnected'):
        return Exit(74, '%s: %s' % (n, e.get_dbus_message()))
    return Exit(1, '%s: %s' % (n, e.get_dbus_message()))


class Ctl:
    def __init__(self):
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        try:
            self.bus = dbus.SystemBus()
            self.om = dbus.Interface(self.bus.get_object(BLUEZ, '/'), OM)
            self.om.GetManagedObjects()
        except dbus.exceptions.DBusException as e:
            raise Exit(69, 'bluetoothd not available: %s' % e.get_dbus_message())
        self.ctx = GLib.MainContext.default()
        self.stop = None
        self.made = None        # path of a connection this process made
        for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            GLib.unix_signal_add(GLib.PRIORITY_HIGH, sig, self.on_signal, code)

    def on_signal(self, code):
        self.stop = code
        return True

    def objects(self):
        return self.om.GetManagedObjects()

    def iterate(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.stop:
                raise Exit(self.stop)
            self.ctx.iteration(False) or time.sleep(0.01)

    def wait(self, pred, timeout, what):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.stop:
                raise Exit(self.stop, 'device disconnected' if self.stop == 74 else '')
            while self.ctx.pending():
                self.ctx.iteration(False)
            r = pred()
            if r:
                return r
            self.ctx.iteration(False) or time.sleep(0.02)
        raise Exit(124, 'timeout waiting for %s' % what)

    def props(self, path):
        return dbus.Interface(self.bus.get_object(BLUEZ, path), PROPS)

    def adapter_path(self, name):
        if name:
            p = '/org/bluez/' + name
            if p not in self.objects() or ADAPTER_IF not in self.objects()[p]:
                raise Exit(69, 'no adapter %s' % name)
            return p
        env = os.environ.get('CENTRAL')
        if env:
            return '/org/bluez/' + env
        ads = sorted(p for p, i in self.objects().items() if ADAPTER_IF in i)
        if not ads:
            raise Exit(69, 'no Bluetooth adapter')
        return ads[0]

    # -- device lookup: known to bluetoothd, else a short scan
    def find_device(self, dev, adapter=None, scan_secs=12):
        def lookup():
            for p, i in self.objects().items():
                d = i.get(DEVICE_IF)
                if d and (str(p) == dev or str(d['Address']).upper() == dev.upper()) \
                        and (adapter is None or str(d['Adapter']) == adapter):
                    return str(p)
        p = lookup()
        if p:
            return p
        ap = adapter or self.adapter_path(None)
        ad = dbus.Interface(self.bus.get_object(BLUEZ, ap), ADAPTER_IF)
        ad.SetDiscoveryFilter({'Transport': 'le'})
        try:
            ad.StartDiscovery()
        except dbus.exceptions.DBusException as e:
            raise dbus_exit(e)
        try:
            return self.wait(lookup, scan_secs, 'device')
        except Exit as e:
            if e.code == 124:
                raise Exit(68, 'device %s not found' % dev)
            raise
        finally:
            try:
                ad.StopDiscovery()
            except dbus.exceptions.DBusException:
                pass

    def connected_device(self, dev, timeout=40, adapter=None):
        p = self.find_device(dev, self.adapter_path(adapter) if adapter else None)
        pr = self.props(p)
        if not pr.Get(DEVICE_IF, 'Connected'):
            self.made = p
            d = dbus.Interface(self.bus.get_object(BLUEZ, p), DEVICE_IF)
            for attempt in range(3):
                try:
                    d.Connect(timeout=timeout)
                    break
                except dbus.exceptions.DBusException as e:
                    if attempt == 2 or self.stop:
                        raise dbus_exit(e)
                    print('connect attempt %d: %s' % (attempt + 1, e.get_dbus_name()), file=sys.stderr)
                    self.iterate(1)
        self.wait(lambda: pr.Get(DEVICE_IF, 'ServicesResolved'), timeout, 'services resolved')
        return p

    def char_path(self, dev_path, uuid):
        for p, i in self.objects().items():
            c = i.get(CHR_IF)
            if c and str(p).startswith(dev_path + '/') and str(c['UUID']) == uuid:
                return str(p)
        raise Exit(68, 'characteristic %s not found' % uuid)


def emit(obj, as_json, plain):
    print(json.dumps(obj) if as_json else plain, flush=True)


def addr_of(ctl, p):
    return str(ctl.props(p).Get(DEVICE_IF, 'Address'))


def cmd_adapters(ctl, argv):
    o, _ = parse(argv, ['--json'], [])
    for p, i in sorted(ctl.objects().items()):
        a = i.get(ADAPTER_IF)
        if not a:
            continue
        rec = {'adapter': str(p).rsplit('/', 1)[1], 'address': str(a['Address']), 'name': str(a['Name']),
               'alias': str(a['Alias']), 'powered': bool(a['Powered']), 'discovering': bool(a['Discovering']),
               'state': 'poweredOn' if a['Powered'] else 'poweredOff'}
        emit(rec, o['--json'], '%(adapter)s %(address)s %(alias)s powered=%(powered)s' % rec)


def device_record(path, d, adapter):
    r = {'event': 'discovered', 'adapter': adapter, 'address': str(d['Address']),
         'address_type': str(d.get('AddressType', 'public'))}
    if 'Name' in d:
        r['name'] = str(d['Name'])
    if 'Alias' in d:
        r['alias'] = str(d['Alias'])
    if 'RSSI' in d:
        r['rssi'] = int(d['RSSI'])
    if 'TxPower' in d:
        r['tx_power'] = int(d['TxPower'])
    if d.get('UUIDs'):
        r['service_uuids'] = [str(u) for u in d['UUIDs']]
    if d.get('ManufacturerData'):
        r['manufacturer_data'] = {'0x%04x' % int(k): hexbytes(v) for k, v in d['ManufacturerData'].items()}
    if d.get('ServiceData'):
        r['service_data'] = {str(k): hexbytes(v) for k, v in d['ServiceData'].items()}
    if 'AdvertisingFlags' in d:
        r['flags'] = hexbytes(d['AdvertisingFlags'])
    r['path'] = path
    return r


def cmd_scan(ctl, argv):
    o, _ = parse(argv, ['--json', '--duplicates'], ['--adapter', '--name', '--timeout', '--count'], ['--service'])
    timeout = number(o['--timeout'], '--timeout') if o['--timeout'] is not None else 10.0
    count = number(o['--count'], '--count', int) if o['--count'] is not None else None
    services = [uuid128(s) for s in o['--service']]
    ap = ctl.adapter_path(o['--adapter'])
    adapter = ap.rsplit('/', 1)[1]
    ad = dbus.Interface(ctl.bus.get_object(BLUEZ, ap), ADAPTER_IF)
    seen, n = set(), [0]
    state = {}

    def consider(path):
        if not path.startswith(ap + '/dev_') or path.count('/') != 4:
            return
        try:
            d = ctl.props(path).GetAll(DEVICE_IF)
        except dbus.exceptions.DBusException:
            return
        if 'RSSI' not in d:
            return
        if services and not set(services) & {str(u) for u in d.get('UUIDs', [])}:
            return
        if o['--name'] and o['--name'].lower() not in str(d.get('Name', '')).lower():
            return
        if not o['--duplicates'] and path in seen:
            return
        seen.add(path)
        if count is not None and n[0] >= count:
            return
        r = device_record(path, d, adapter)
        n[0] += 1
        emit(r, o['--json'], '%s %s %s rssi=%s name=%s' % (adapter, r['address'], r['address_type'],
                                                         r.get('rssi'), r.get('name', '')))

    def on_added(path, ifaces):
        if DEVICE_IF in ifaces:
            consider(str(path))

    def on_props(iface, changed, invalidated, path=None):
        if iface == DEVICE_IF and ({'RSSI', 'ManufacturerData', 'ServiceData', 'Name'} & set(changed)):
            consider(str(path))
    ctl.bus.add_signal_receiver(on_added, dbus_interface=OM, signal_name='InterfacesAdded', bus_name=BLUEZ)
    ctl.bus.add_signal_receiver(on_props, dbus_interface=PROPS, signal_name='PropertiesChanged',
                                bus_name=BLUEZ, path_keyword='path')
    # DuplicateData=true even without --duplicates (deduplicated here): for a
    # device bluetoothd already knows, an unchanged advertisement produces no
    # signal at all otherwise, and a second scan would not see it.
    f = {'Transport': 'le', 'DuplicateData': dbus.Boolean(True)}
    if services:
        f['UUIDs'] = dbus.Array(services, 's')
    try:
        ad.SetDiscoveryFilter(f)
        ad.StartDiscovery()
    except dbus.exceptions.DBusException as e:
        raise dbus_exit(e)
    state['on'] = True
    try:
        ctl.wait(lambda: count is not None and n[0] >= count, timeout, 'scan')
    except Exit as e:
        if e.code != 124:
            raise
    finally:
        try:
            ad.StopDiscovery()
        except dbus.exceptions.DBusException:
            pass


def cmd_connect(ctl, argv):
    o, pos = parse(argv, ['--json', '--pair'], ['--timeout', '--adapter'], npos=1)
    p = ctl.connected_device(pos[0], number(o['--timeout'], '--timeout') if o['--timeout'] else 40, o['--adapter'])
    ctl.made = None     # connect keeps its connection
    pr = ctl.props(p)
    if o['--pair'] and not pr.Get(DEVICE_IF, 'Paired'):
        try:   # the lab's default agent answers; refctl registers none of its own
            dbus.Interface(ctl.bus.get_object(BLUEZ, p), DEVICE_IF).Pair(timeout=40)
        except dbus.exceptions.DBusException as e:
            if not (e.get_dbus_name() or '').endswith('AlreadyExists'):
                raise dbus_exit(e)
    r = {'device': addr_of(ctl, p), 'connected': bool(pr.Get(DEVICE_IF, 'Connected')),
         'paired': bool(pr.Get(DEVICE_IF, 'Paired'))}
    emit(r, o['--json'], 'connected %s%s' % (r['device'], ' (paired)' if r['paired'] else ''))


def cmd_disconnect(ctl, argv):
    o, pos = parse(argv, [], ['--adapter'], npos=1)
    p = ctl.find_device(pos[0], ctl.adapter_path(o['--adapter']) if o['--adapter'] else None, scan_secs=0)
    try:
        dbus.Interface(ctl.bus.get_object(BLUEZ, p), DEVICE_IF).Disconnect()
    except dbus.exceptions.DBusException as e:
        raise dbus_exit(e)
    pr = ctl.props(p)
    ctl.wait(lambda: not pr.Get(DEVICE_IF, 'Connected'), 15, 'disconnected')
    print('disconnected %s' % addr_of(ctl, p))


def cmd_info(ctl, argv):
    o, pos = parse(argv, ['--json'], ['--adapter'], npos=1)
    p = ctl.find_device(pos[0], ctl.adapter_path(o['--adapter']) if o['--adapter'] else None)
    d = ctl.props(p).GetAll(DEVICE_IF)
    r = {'address': str(d['Address']), 'address_type': str(d.get('AddressType', '')), 'name': str(d.get('Name', '')),
         'connected': bool(d['Connected']), 'paired': bool(d['Paired']),
         'services_resolved': bool(d['ServicesResolved']), 'path': p}
    emit(r, o['--json'], '\n'.join('%s: %s' % kv for kv in r.items()))


def cmd_discover(ctl, argv):
    o, pos = parse(argv, ['--json'], ['--adapter'], npos=1)
    p = ctl.connected_device(pos[0], adapter=o['--adapter'])
    objs = ctl.objects()
    uuid_of = {}
    for path in sorted(x for x in objs if str(x).startswith(p + '/')):
        i = objs[path]
        if SVC_IF in i:
            s = i[SVC_IF]
            uuid_of[str(path)] = str(s['UUID'])
            emit({'type': 'service', 'uuid': str(s['UUID']), 'primary': bool(s['Primary'])}, o['--json'],
                 'service %s' % s['UUID'])
        elif CHR_IF in i:
            c = i[CHR_IF]
            uuid_of[str(path)] = str(c['UUID'])
            emit({'type': 'characteristic', 'uuid': str(c['UUID']), 'service': uuid_of.get(str(c['Service'])),
                  'flags': [str(f) for f in c['Flags']]}, o['--json'],
                 '  characteristic %s [%s]' % (c['UUID'], ','.join(map(str, c['Flags']))))
        elif DSC_IF in i:
            d = i[DSC_IF]
            emit({'type': 'descriptor', 'uuid': str(d['UUID']), 'characteristic': uuid_of.get(str(d['Characteristic']))},
                 o['--json'], '    descriptor %s' % d['UUID'])


def cmd_read(ctl, argv):
    o, pos = parse(argv, ['--json'], ['--adapter'], npos=2)
    uuid = uuid128(pos[1])
    p = ctl.connected_device(pos[0], adapter=o['--adapter'])
    c = ctl.char_path(p, uuid)
    try:
        v = dbus.Interface(ctl.bus.get_object(BLUEZ, c), CHR_IF).ReadValue({}, timeout=40)
    except dbus.exceptions.DBusException as e:
        raise dbus_exit(e)
    emit({'device': addr_of(ctl, p), 'characteristic': uuid, 'value': hexbytes(v)}, o['--json'],
         '%s: %s' % (uuid, hexbytes(v)))


def cmd_write(ctl, argv):
    o, pos = parse(argv, ['--with-response', '--without-response'], ['--adapter'], npos=3)
    uuid = uuid128(pos[1])
    h = pos[2][2:] if pos[2].lower().startswith('0x') else pos[2]
    try:
        data = bytes.fromhex(h)
    except ValueError:
        raise Exit(64, 'not hex: %s' % pos[2])
    p = ctl.connected_device(pos[0], adapter=o['--adapter'])
    c = ctl.char_path(p, uuid)
    opts = {'type': 'command' if o['--without-response'] else 'request'}
    try:
        dbus.Interface(ctl.bus.get_object(BLUEZ, c), CHR_IF).WriteValue(dbus.Array(data, 'y'), opts, timeout=40)
    except dbus.exceptions.DBusException as e:
        raise dbus_exit(e)


def cmd_subscribe(ctl, argv):
    o, pos = parse(argv, ['--json'], ['--count', '--timeout', '--adapter'], npos=2)
    count = number(o['--count'], '--count', int) if o['--count'] else None
    timeout = number(o['--timeout'], '--timeout') if o['--timeout'] else None
    uuid = uuid128(pos[1])
    p = ctl.connected_device(pos[0], adapter=o['--adapter'])
    c = ctl.char_path(p, uuid)
    addr = addr_of(ctl, p)
    n = [0]

    def on_props(iface, changed, invalidated, path=None):
        if iface == CHR_IF and str(path) == c and 'Value' in changed:
            if count is None or n[0] < count:
                n[0] += 1
                emit({'device': addr, 'characteristic': uuid, 'value': hexbytes(changed['Value'])}, o['--json'],
                     '%s: %s' % (uuid, hexbytes(changed['Value'])))

    def on_dev(iface, changed, invalidated, path=None):
        if iface == DEVICE_IF and str(path) == p and 'Connected' in changed and not changed['Connected']:
            ctl.stop = 74
    ctl.bus.add_signal_receiver(on_props, dbus_interface=PROPS, signal_name='PropertiesChanged',
                                bus_name=BLUEZ, path_keyword='path')
    ctl.bus.add_signal_receiver(on_dev, dbus_interface=PROPS, signal_name='PropertiesChanged',
                                bus_name=BLUEZ, path_keyword='path')
    ch = dbus.Interface(ctl.bus.get_object(BLUEZ, c), CHR_IF)
    try:
        ch.StartNotify()
    except dbus.exceptions.DBusException as e:
        raise dbus_exit(e)
    try:
        ctl.wait(lambda: count is not None and n[0] >= count, timeout if timeout else 1e9, 'notifications')
    except Exit as e:
        if not (e.code == 124 and count is None):
            raise
    finally:
        try:
            ch.StopNotify()
        except dbus.exceptions.DBusException:
            pass


def main(argv):
    if not argv or argv[0] in ('-h', '--help'):
        print(__doc__)
        return 0 if argv else 64
    sub, rest = argv[0], argv[1:]
    if sub == 'help':
        if not rest:
            print(__doc__)
            return 0
        if rest[0] not in USAGE:
            print('refctl: unknown subcommand %s' % rest[0], file=sys.stderr)
            return 64
        print('usage: refctl.py %s' % USAGE[rest[0]])
        return 0
    fn = globals().get('cmd_' + sub)
    if sub not in USAGE or not fn:
        print('refctl: unknown subcommand %s' % sub, file=sys.stderr)
        return 64
    ctl = None
    try:
        ctl = Ctl()
        try:
            fn(ctl, rest)
        finally:
            if ctl.made:    # like bluectl: a command that connected disconnects again
                try:
                    dbus.Interface(ctl.bus.get_object(BLUEZ, ctl.made), DEVICE_IF).Disconnect()
                except dbus.exceptions.DBusException:
                    pass
    except Exit as e:
        if e.msg:
            print('refctl: %s' % e.msg, file=sys.stderr)
        return e.code
    except dbus.exceptions.DBusException as e:
        x = dbus_exit(e)
        print('refctl: %s' % x.msg, file=sys.stderr)
        return x.code
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
