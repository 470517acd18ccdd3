#!/usr/bin/python3 -Iu
"""A python3-dbus GATT central for the lab, as any other program on the machine
would be one: a peer of bluectl serve (bluectl's peripheral role on $SERVER),
used by the checks and by Scripts/bench.d/serve-notify.py.

usage: gattc.py [--adapter hciN] ADDRESS COMMAND [ARGS...]
  connect                    find the device (discovery, LE, when bluetoothd does not know
                             it yet), Device1.Connect, wait for ServicesResolved
  disconnect                 Device1.Disconnect, wait until not Connected
  find UUID                  print the characteristic's object path
  read UUID [--count N] [--offset O]
                             ReadValue N times (default 1), one after the other: one line each
                             {"t","n","value","ms"}, then {"event":"reads",...,"median_ms","p90_ms"}
  write UUID HEX [--request|--command]
                             WriteValue with option "type" (default: none given, bluetoothd
                             chooses); prints {"event":"written",...}
  notify UUID [--count N] [--timeout S] [--quiet] [--check-sequence u32]
                             StartNotify, then one line per Value signal:
                             {"t": receive time (epoch s), "n": count, "value": hex}
                             (--quiet: none), ended by --count, --timeout (exit 124 if short),
                             SIGINT/SIGTERM or the device disconnecting (exit 74); then
                             StopNotify and {"event":"done", received, seconds, rate_per_s,
                             cpu_s, cpu_ms_per_value (this process, over the first to the last
                             value), ru_utime, ru_stime, maxrss_kib, [missing, out_of_order,
                             repeated]}. Prints {"event":"subscribed"} once StartNotify answered.
Options: --service UUID (the characteristic under that service only).
The characteristic is looked for under the device's own path only
(/org/bluez/ADAPTER/dev_XX_.../), never elsewhere in bluetoothd's objects.
UUIDs: 128-bit or 16-bit ("2a37"). Errors: one line on stderr naming BlueZ's
error (org.bluez.Error.*), exit 1; device unknown 68; not found 69."""
import json
import os
import resource
import signal
import statistics
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BLUEZ = 'org.bluez'
OM = 'org.freedesktop.DBus.ObjectManager'
PROPS = 'org.freedesktop.DBus.Properties'
DEV_IF, CHR_IF, SVC_IF, ADP_IF = 'org.bluez.Device1', 'org.bluez.GattCharacteristic1', 'org.bluez.GattService1', 'org.bluez.Adapter1'


def die(msg, code=1):
    print('gattc: ' + msg, file=sys.stderr)
    sys.exit(code)


def full_uuid(u):
    u = u.lower()
    if u.startswith('0x'):
        u = u[2:]
    if len(u) == 4:
        return '0000%s-0000-1000-8000-00805f9b34fb' % u
    if len(u) == 8:
        return '%s-0000-1000-8000-00805f9b34fb' % u
    return u


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(',', ':')) + '\n')


def opt(args, name, default=None, flag=False):
    if name not in args:
        return default
    i = args.index(name)
    if flag:
        del args[i]
        return True
    v = args[i + 1]
    del args[i:i + 2]
    return v


def err_text(e):
    return '%s: %s' % (e.get_dbus_name(), e.get_dbus_message())


class Central:
    def __init__(self, adapter, address):
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        self.bus = dbus.SystemBus()
        self.om = dbus.Interface(self.bus.get_object(BLUEZ, '/'), OM)
        self.adapter = '/org/bluez/' + adapter
        self.address = address.upper()
        self.dev = '%s/dev_%s' % (self.adapter, self.address.replace(':', '_'))

    def objects(self):
        return self.om.GetManagedObjects()

    def prop(self, path, iface, name, default=None):
        try:
            return self.bus.get_object(BLUEZ, path).Get(iface, name, dbus_interface=PROPS)
        except dbus.DBusException:
            return default

    def wait(self, cond, secs, what):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.1)
        die('timeout after %.0f s: %s' % (secs, what), 124)

    def known(self):
        return DEV_IF in self.objects().get(dbus.ObjectPath(self.dev), {})

    def connect(self, secs=60):
        t0 = time.monotonic()
        if not self.known():
            adp = dbus.Interface(self.bus.get_object(BLUEZ, self.adapter), ADP_IF)
            adp.SetDiscoveryFilter({'Transport': 'le', 'DuplicateData': dbus.Boolean(False)})
            adp.StartDiscovery()
            try:
                self.wait(self.known, secs / 2, '%s not seen while discovering on %s' % (self.address, self.adapter))
            finally:
                try:
                    adp.StopDiscovery()
                except dbus.DBusException:
                    pass
        dev = dbus.Interface(self.bus.get_object(BLUEZ, self.dev), DEV_IF)
        if not self.prop(self.dev, DEV_IF, 'Connected', False):
            try:
                dev.Connect(timeout=secs)
            except dbus.DBusException as e:
                die('connect %s: %s' % (self.address, err_text(e)))
        self.wait(lambda: bool(self.prop(self.dev, DEV_IF, 'ServicesResolved', False)), secs, 'ServicesResolved of ' + self.address)
        emit({'event': 'connected', 'device': self.address, 'path': self.dev, 'seconds': round(time.monotonic() - t0, 3)})

    def disconnect(self):
        if self.known() and self.prop(self.dev, DEV_IF, 'Connected', False):
            dbus.Interface(self.bus.get_object(BLUEZ, self.dev), DEV_IF).Disconnect(timeout=30)
            self.wait(lambda: not self.prop(self.dev, DEV_IF, 'Connected', False), 20, 'disconnect of ' + self.address)
        emit({'event': 'disconnected', 'device': self.address})

    def find(self, uuid, service=None):
        objs = self.objects()
        if DEV_IF not in objs.get(dbus.ObjectPath(self.dev), {}):
            die('%s unknown to bluetoothd on %s' % (self.address, self.adapter), 68)
        found = []
        for path, ifs in objs.items():
            c = ifs.get(CHR_IF)
            if not c or not str(path).startswith(self.dev + '/') or str(c['UUID']).lower() != uuid:
                continue
            if service is not None:
                s = objs.get(c['Service'], {}).get(SVC_IF, {})
                if str(s.get('UUID', '')).lower() != service:
                    continue
            found.append(str(path))
        if not found:
            die('characteristic %s not found under %s (ServicesResolved %s)' % (
                uuid, self.dev, bool(self.prop(self.dev, DEV_IF, 'ServicesResolved', False))), 69)
        if len(found) > 1:
            die('characteristic %s appears %d times under %s: name the service (--service)' % (uuid, len(found), self.dev), 64)
        return found[0]

    def chrc(self, path):
        return dbus.Interface(self.bus.get_object(BLUEZ, path), CHR_IF)


def cmd_read(c, path, args):
    count = int(opt(args, '--count', '1'))
    offset = opt(args, '--offset')
    o = {'offset': dbus.UInt16(int(offset))} if offset is not None else {}
    ch = c.chrc(path)
    ms = []
    for n in range(1, count + 1):
        t0 = time.perf_counter()
        try:
            v = ch.ReadValue(o, timeout=35)
        except dbus.DBusException as e:
            die('read %s: %s' % (path, err_text(e)))
        dt = (time.perf_counter() - t0) * 1000
        ms.append(dt)
        emit({'t': round(time.time(), 6), 'n': n, 'value': bytes(v).hex(), 'ms': round(dt, 3)})
    ru = resource.getrusage(resource.RUSAGE_SELF)
    s = sorted(ms)
    emit({'event': 'reads', 'count': count, 'median_ms': round(statistics.median(s), 3),
          'p90_ms': round(s[min(len(s) - 1, int(0.9 * len(s)))], 3), 'min_ms': round(s[0], 3), 'max_ms': round(s[-1], 3),
          'cpu_s': round(ru.ru_utime + ru.ru_stime, 3)})


def cmd_write(c, path, args):
    kind = 'request' if opt(args, '--request', flag=True) else 'command' if opt(args, '--command', flag=True) else None
    if not args:
        die('write: which value (hex)?', 64)
    value = bytes.fromhex(args[0][2:] if args[0].startswith('0x') else args[0])
    o = {'type': kind} if kind else {}
    try:
        c.chrc(path).WriteValue(dbus.Array(value, signature='y'), o, timeout=35)
    except dbus.DBusException as e:
        die('write %s: %s' % (path, err_text(e)))
    emit({'event': 'written', 't': round(time.time(), 6), 'value': value.hex(), 'type': kind or 'default'})


def cmd_notify(c, path, args):
    count = int(opt(args, '--count', '0'))
    secs = float(opt(args, '--timeout', '0'))
    quiet = opt(args, '--quiet', flag=True)
    seqcheck = opt(args, '--check-sequence')
    loop = GLib.MainLoop()
    st = {'n': 0, 'first': None, 'last': None, 'ru0': None, 'rc': 0, 'prev': None,
          'missing': 0, 'ooo': 0, 'rep': 0, 'seen': set()}
    out = sys.stdout

    def value(v):
        now = time.time()
        if st['first'] is None:
            st['first'] = now
            st['ru0'] = resource.getrusage(resource.RUSAGE_SELF)
        st['last'] = now
        st['n'] += 1
        b = bytes(v)
        if seqcheck:
            s = int.from_bytes(b[:4], 'little')
            if s in st['seen']:
                st['rep'] += 1
            else:
                if st['prev'] is not None and s < st['prev']:
                    st['ooo'] += 1
                elif st['prev'] is not None and s > st['prev'] + 1:
                    st['missing'] += s - st['prev'] - 1
                st['seen'].add(s)
                st['prev'] = max(s, st['prev'] if st['prev'] is not None else s)
        if not quiet:
            out.write('{"t":%.6f,"n":%d,"value":"%s"}\n' % (now, st['n'], b.hex()))
        if count and st['n'] >= count:
            loop.quit()

    def changed(iface, props, _inv, path=None):
        if iface == CHR_IF and 'Value' in props:
            value(props['Value'])
        elif iface == DEV_IF and props.get('Connected') is not None and not props['Connected']:
            print('gattc: %s disconnected' % c.address, file=sys.stderr)
            st['rc'] = 74
            loop.quit()

    def stop(rc):
        st['rc'] = rc
        loop.quit()
        return False

    c.bus.add_signal_receiver(changed, 'PropertiesChanged', PROPS, BLUEZ, path)
    c.bus.add_signal_receiver(changed, 'PropertiesChanged', PROPS, BLUEZ, c.dev)
    ch = c.chrc(path)
    try:
        ch.StartNotify(timeout=35)
    except dbus.DBusException as e:
        die('StartNotify %s: %s' % (path, err_text(e)))
    emit({'event': 'subscribed', 't': round(time.time(), 6), 'path': path})
    out.flush()
    GLib.unix_signal_add(GLib.PRIORITY_HIGH, signal.SIGINT, stop, 130)
    GLib.unix_signal_add(GLib.PRIORITY_HIGH, signal.SIGTERM, stop, 143)
    if secs:
        GLib.timeout_add(int(secs * 1000), stop, 124)
    loop.run()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    try:
        ch.StopNotify(timeout=10)
    except dbus.DBusException as e:
        print('gattc: StopNotify: %s' % err_text(e), file=sys.stderr)
    span = (st['last'] - st['first']) if st['n'] > 1 else None
    cpu = (ru1.ru_utime + ru1.ru_stime - st['ru0'].ru_utime - st['ru0'].ru_stime) if st['ru0'] else 0.0
    done = {'event': 'done', 'received': st['n'], 'seconds': round(span, 4) if span else None,
            'rate_per_s': round((st['n'] - 1) / span, 1) if span else None,
            'cpu_s': round(cpu, 4), 'cpu_ms_per_value': round(cpu * 1000 / st['n'], 4) if st['n'] else None,
            'ru_utime': round(ru1.ru_utime, 3), 'ru_stime': round(ru1.ru_stime, 3), 'maxrss_kib': ru1.ru_maxrss}
    if seqcheck:
        done.update({'missing': st['missing'], 'out_of_order': st['ooo'], 'repeated': st['rep']})
    if st['rc'] == 124 and count and st['n'] < count:
        print('gattc: %d of %d values after %.0f s' % (st['n'], count, secs), file=sys.stderr)
    elif st['rc'] == 124:
        st['rc'] = 0  # --timeout without --count: the normal end
    emit(done)
    out.flush()
    return st['rc']


def main(argv):
    args = list(argv)
    adapter = opt(args, '--adapter', os.environ.get('CENTRAL', 'hci1'))
    service = opt(args, '--service')
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    address, cmd, rest = args[0], args[1], args[2:]
    c = Central(adapter, address)
    if cmd == 'connect':
        c.connect(float(opt(rest, '--timeout', '60')))
        return 0
    if cmd == 'disconnect':
        c.disconnect()
        return 0
    if not rest:
        die('%s: which characteristic?' % cmd, 64)
    path = c.find(full_uuid(rest[0]), full_uuid(service) if service else None)
    if cmd == 'find':
        print(path)
        return 0
    if cmd == 'read':
        cmd_read(c, path, rest[1:])
        return 0
    if cmd == 'write':
        cmd_write(c, path, rest[1:])
        return 0
    if cmd == 'notify':
        return cmd_notify(c, path, rest[1:])
    die('unknown command %s' % cmd, 64)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
