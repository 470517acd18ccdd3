#!/usr/bin/python3
# -*- coding: utf-8 -*-
'''Self-test of bluez_standin.py's peripheral role (GattManager1,
LEAdvertisingManager1 and the Mock.Remote* centrals), with a GATT
application and advertisements exported by dbus-python as BlueZ's
test/example-gatt-server and test/example-advertisement do.

    /usr/bin/python3 standin_server_selftest.py
        starts its own dbus-daemon (bus.conf next to this file) and stand-in
    /usr/bin/python3 standin_server_selftest.py --address ADDRESS
        uses a bus where the stand-in already runs (as PrivateBus.swift
        starts it); adds hci0/hci1 through Mock.AddAdapter when missing

Prints one line per check and "OK n checks" at the end; exit status 0 only
if every check passed. Checks what bluetoothd 5.66 does (see the stand-in's
docstrings for the source functions), so it fails when the stand-in drifts.
'''

import os
import subprocess
import sys
import tempfile
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

HERE = os.path.dirname(os.path.abspath(__file__))
MOCK = 'org.freedesktop.DBus.Mock'
ERR = 'org.bluez.Error.'
ATT = 'org.freedesktop.DBus.Mock.Error.Att.'
PROPS = 'org.freedesktop.DBus.Properties'
OM = 'org.freedesktop.DBus.ObjectManager'
SVC_I, CHRC_I, DESC_I = 'org.bluez.GattService1', 'org.bluez.GattCharacteristic1', 'org.bluez.GattDescriptor1'
ADV_I = 'org.bluez.LEAdvertisement1'
HCI0_ADDR, HCI1_ADDR = '00:AA:01:00:00:01', '00:AA:01:00:00:02'
CENTRAL_A, CENTRAL_B = '11:22:33:44:55:01', '11:22:33:44:55:02'
NOOPT = dbus.Dictionary({}, signature='sv')

CHECKS = [0]
FAILED = []


def check(cond, what):
    CHECKS[0] += 1
    print(('ok   ' if cond else 'FAIL ') + what, flush=True)
    if not cond:
        FAILED.append(what)


def expect_error(fn, name, what, message=None):
    try:
        fn()
    except dbus.exceptions.DBusException as e:
        good = e.get_dbus_name() == name and (message is None or message in (e.get_dbus_message() or ''))
        check(good, f'{what}: {e.get_dbus_name()}: {e.get_dbus_message()}')
        return e
    check(False, f'{what}: succeeded, expected {name}')
    return None


def pump(seconds):
    '''Runs the main loop for a while (the exported objects answer meanwhile).'''
    end = time.monotonic() + seconds
    ctx = GLib.MainContext.default()
    while time.monotonic() < end:
        if not ctx.iteration(False):
            time.sleep(0.005)


def wait_for(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        pump(0.02)
    return cond()


class Sync:
    '''Calls through an interface proxy without blocking the main loop: one
    thread serves the exported objects and makes the calls (no deadlock
    when the stand-in calls back while a call is in flight).'''

    def __init__(self, obj, iface):
        self._i = dbus.Interface(obj, iface)

    def __getattr__(self, name):
        method = getattr(self._i, name)

        def call(*args):
            box = {}
            method(*args, reply_handler=lambda *r: box.setdefault('r', r),
                   error_handler=lambda e: box.setdefault('e', e), timeout=60)
            ctx = GLib.MainContext.default()
            while not box:
                ctx.iteration(True)
            if 'e' in box:
                raise box['e']
            r = box['r']
            return r[0] if len(r) == 1 else (None if not r else r)
        return call


# -- the exported side (example-gatt-server style) ------------------------------

class Obj(dbus.service.Object):
    def __init__(self, conn, path, iface, props):
        super().__init__(conn, path)
        self.path, self.iface, self.props = path, iface, props
        self.calls = []             # [(method, args)]
        self.read_error = None      # (name, message) to fail ReadValue with
        self.write_error = None
        self.hang = False

    @dbus.service.method(PROPS, in_signature='s', out_signature='a{sv}')
    def GetAll(self, iface):
        if iface != self.iface:
            raise dbus.exceptions.DBusException('no', name='org.freedesktop.DBus.Error.InvalidArgs')
        return self.props

    @dbus.service.method(PROPS, in_signature='ssv')
    def Set(self, iface, name, value):
        self.calls.append(('Set', (str(name), value)))
        self.props[str(name)] = value

    def changed(self, props):
        self.props.update(props)
        self.PropertiesChanged(self.iface, props, [])

    @dbus.service.signal(PROPS, signature='sa{sv}as')
    def PropertiesChanged(self, iface, changed, invalidated):
        pass


class Attr(Obj):
    '''A characteristic or descriptor (ReadValue/WriteValue in ChrcObj/DescObj).'''

    def _read(self, options, ok, err):
        self.calls.append(('ReadValue', dict(options)))
        if self.hang:
            return
        if self.read_error:
            err(dbus.exceptions.DBusException(self.read_error[1], name=self.read_error[0]))
            return
        off = int(options.get('offset', 0))
        ok(dbus.Array(bytes(self.props.get('Value', b''))[off:], signature='y'))

    def _write(self, value, options):
        self.calls.append(('WriteValue', (bytes(value), dict(options))))
        if self.write_error:
            raise dbus.exceptions.DBusException(self.write_error[1], name=self.write_error[0])
        self.props['Value'] = dbus.Array(bytes(value), signature='y')

    def count(self, method):
        return sum(1 for m, _ in self.calls if m == method)


class ChrcObj(Attr):
    @dbus.service.method(CHRC_I, in_signature='a{sv}', out_signature='ay',
                         async_callbacks=('ok', 'err'))
    def ReadValue(self, options, ok=None, err=None):
        self._read(options, ok, err)

    @dbus.service.method(CHRC_I, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        self._write(value, options)

    @dbus.service.method(CHRC_I)
    def StartNotify(self):
        self.calls.append(('StartNotify', None))

    @dbus.service.method(CHRC_I)
    def StopNotify(self):
        self.calls.append(('StopNotify', None))

    @dbus.service.method(CHRC_I)
    def Confirm(self):
        self.calls.append(('Confirm', None))


class DescObj(Attr):
    @dbus.service.method(DESC_I, in_signature='a{sv}', out_signature='ay',
                         async_callbacks=('ok', 'err'))
    def ReadValue(self, options, ok=None, err=None):
        self._read(options, ok, err)

    @dbus.service.method(DESC_I, in_signature='aya{sv}')
    def WriteValue(self, value, options):
        self._write(value, options)


class App(dbus.service.Object):
    '''An application root with ObjectManager, as example-gatt-server.'''

    def __init__(self, conn, root):
        super().__init__(conn, root)
        self.conn, self.root, self.objects = conn, root, []

    def service(self, n, uuid, primary=True, extra=None):
        props = {'UUID': uuid, 'Primary': dbus.Boolean(primary),
                 'Includes': dbus.Array([], signature='o')}
        props.update(extra or {})
        o = Obj(self.conn, f'{self.root}/service{n}', SVC_I, props)
        self.objects.append(o)
        return o

    def chrc(self, svc, n, uuid, flags, value=b'', extra=None):
        props = {'UUID': uuid, 'Service': dbus.ObjectPath(svc.path),
                 'Flags': dbus.Array(flags, signature='s'),
                 'Value': dbus.Array(value, signature='y')}
        props.update(extra or {})
        o = ChrcObj(self.conn, f'{svc.path}/char{n}', CHRC_I, props)
        self.objects.append(o)
        return o

    def desc(self, chrc, n, uuid, flags, value=b''):
        o = DescObj(self.conn, f'{chrc.path}/desc{n}', DESC_I,
                 {'UUID': uuid, 'Characteristic': dbus.ObjectPath(chrc.path),
                  'Flags': dbus.Array(flags, signature='s'), 'Value': dbus.Array(value, signature='y')})
        self.objects.append(o)
        return o

    @dbus.service.method(OM, out_signature='a{oa{sa{sv}}}')
    def GetManagedObjects(self):
        return {o.path: {o.iface: o.props} for o in self.objects}


class Advertisement(Obj):
    def __init__(self, conn, path, props):
        super().__init__(conn, path, ADV_I, props)
        self.released = 0

    @dbus.service.method(ADV_I)
    def Release(self):
        self.released += 1


# -- set-up --------------------------------------------------------------------------

def start_private_bus():
    tmp = tempfile.mkdtemp(prefix='standin-selftest-')
    address = f'unix:path={tmp}/system_bus_socket'
    daemon = subprocess.Popen(['dbus-daemon', '--config-file', os.path.join(HERE, 'bus.conf'),
                               '--address', address, '--nofork', '--print-address'],
                              stdout=subprocess.PIPE)
    daemon.stdout.readline()
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address)
    standin = subprocess.Popen([sys.executable, '-m', 'dbusmock', '--system', '--template',
                                os.path.join(HERE, 'bluez_standin.py'), '--logfile',
                                f'{tmp}/standin.log'], env=env)
    return address, [standin, daemon], tmp


def main():
    procs = []
    if '--address' in sys.argv:
        address = sys.argv[sys.argv.index('--address') + 1]
    else:
        address, procs, tmp = start_private_bus()
        print(f'# private bus {address} (stand-in log {tmp}/standin.log)')
    try:
        return run(address)
    finally:
        for p in procs:
            p.terminate()
            p.wait()


def run(address):
    loop_mainloop = dbus.mainloop.glib.DBusGMainLoop()
    drv = dbus.bus.BusConnection(address, mainloop=loop_mainloop)
    app_conn = dbus.bus.BusConnection(address, mainloop=loop_mainloop)

    def mock():
        return Sync(drv.get_object('org.bluez', '/'), MOCK)

    for _ in range(200):
        try:
            mock().StandInVersion()
            break
        except dbus.exceptions.DBusException:
            pump(0.05)
    m = mock()
    for hci, addr in (('hci0', HCI0_ADDR), ('hci1', HCI1_ADDR)):
        try:
            m.AddAdapter(hci, addr, hci, True)
        except dbus.exceptions.DBusException as e:
            if not e.get_dbus_name().endswith('AdapterExists'):
                raise
    hci0 = drv.get_object('org.bluez', '/org/bluez/hci0')
    hci0_address = str(Sync(hci0, PROPS).Get('org.bluez.Adapter1', 'Address'))

    def as_app(conn):
        '''RegisterApplication etc. from the application's own connection
        (sender = its unique name), without blocking its main loop.'''
        proxy = conn.get_object('org.bluez', '/org/bluez/hci0')
        return Sync(proxy, 'org.bluez.GattManager1'), Sync(proxy, 'org.bluez.LEAdvertisingManager1')

    app_gm, app_am = as_app(app_conn)

    # ---- GattManager1 ----
    app = App(app_conn, '/org/example/app')
    hr = app.service(0, '0000180d-0000-1000-8000-00805f9b34fb')
    hrm = app.chrc(hr, 0, '2a37', ['notify'], b'\x00\x40')
    loc = app.chrc(hr, 1, '2a38', ['read'], b'\x01\x02\x03\x04')
    cp = app.chrc(hr, 2, '2a39', ['write'])
    wwr = app.chrc(hr, 3, '12345678-1234-5678-1234-56789abcdef1', ['write-without-response', 'write'])
    ind = app.chrc(hr, 4, '12345678-1234-5678-1234-56789abcdef2', ['indicate'])
    enc = app.chrc(hr, 5, '12345678-1234-5678-1234-56789abcdef3', ['encrypt-read'], b'\x42')
    ud = app.desc(loc, 0, '2901', ['read', 'write'], b'loc')
    app_gm.RegisterApplication(app.root, NOOPT)
    check(True, 'RegisterApplication of a valid application answers')
    regs = [tuple(map(str, r)) for r in m.RegisteredApplications()]
    check(('hci0', app_conn.get_unique_name(), app.root, 'registered') in regs,
          f'RegisteredApplications lists it as registered: {regs}')
    calls = [(str(p), str(meth)) for p, meth, _ in m.ServerCalls()]
    check((app.root, 'GetManagedObjects') in calls, 'bluetoothd called GetManagedObjects on the root')
    db = [(int(h), str(k), str(u), str(p)) for h, k, u, p in m.LocalDatabase('hci0')]
    kinds = [k for _, k, _, p in db if p.startswith(app.root)]
    check(kinds == ['service', 'characteristic', 'ccc', 'characteristic', 'descriptor',
                    'characteristic', 'characteristic', 'characteristic', 'ccc', 'characteristic'],
          f'local database: service, chrcs with CCCs for notify/indicate, descriptor after its chrc: {kinds}')
    expect_error(lambda: app_gm.RegisterApplication(app.root, NOOPT), ERR + 'AlreadyExists',
                 'the same application again')

    def bad_app(root, build, message, what):
        conn = dbus.bus.BusConnection(address, mainloop=loop_mainloop)
        a = App(conn, root)
        build(a)
        g, _ = as_app(conn)
        expect_error(lambda: g.RegisterApplication(root, NOOPT), ERR + 'Failed', what, message)
        regs = [str(r[2]) for r in m.RegisteredApplications()]
        check(root not in regs, f'{what}: nothing left registered')
        conn.close()

    bad_app('/bad/flag', lambda a: a.chrc(a.service(0, '180f'), 0, '2a19', ['read', 'sparkle']),
            'No valid service object found', 'an unknown characteristic flag')
    bad_app('/bad/noflags', lambda a: a.chrc(a.service(0, '180f'), 0, '2a19', []),
            'No valid service object found', 'an empty Flags array')
    def orphan(a):
        a.service(0, '180f')
        a.objects.append(ChrcObj(a.conn, '/bad/orphan/x/char0', CHRC_I, {
            'UUID': '2a19', 'Service': dbus.ObjectPath('/elsewhere'),
            'Flags': dbus.Array(['read'], signature='s')}))
    bad_app('/bad/orphan', orphan, 'No valid service object found',
            'a characteristic whose Service is not registered')
    bad_app('/bad/descflag', lambda a: a.desc(a.chrc(a.service(0, '180f'), 0, '2a19', ['read']),
                                              0, '2901', ['notify']),
            'No valid service object found', 'a descriptor flag only characteristics have')
    bad_app('/bad/noprimary', lambda a: a.service(0, '180f').props.pop('Primary'),
            'Failed to create entry in database', 'a service without Primary')
    bad_app('/bad/gap', lambda a: a.service(0, '1800'),
            'Failed to create entry in database', 'a GAP service (bluetoothd owns it)')
    bad_app('/bad/uuid', lambda a: a.chrc(a.service(0, '180f'), 0, 'not-a-uuid', ['read']),
            'Failed to create entry in database', 'a characteristic with a bad UUID')
    bad_app('/bad/empty', lambda a: None, 'No object received', 'an application with no objects')
    bad_app('/bad/noom/child', lambda a: None, 'No object received',
            'a path with no ObjectManager (GetManagedObjects fails)')
    expect_error(lambda: app_gm.UnregisterApplication('/never/registered'), ERR + 'DoesNotExist',
                 'UnregisterApplication of an unknown application')

    # an application whose owner leaves the bus is dropped
    gone = dbus.bus.BusConnection(address, mainloop=loop_mainloop)
    ga = App(gone, '/org/example/leaving')
    ga.chrc(ga.service(0, '180f'), 0, '2a19', ['read'], b'\x64')
    as_app(gone)[0].RegisterApplication(ga.root, NOOPT)
    check(any(str(r[2]) == ga.root for r in m.RegisteredApplications()), 'second application registered')
    gone.close()
    check(wait_for(lambda: not any(str(r[2]) == ga.root for r in m.RegisteredApplications())),
          'its owner left the bus: the application is gone')

    # ---- a remote central ----
    dev_a = str(m.RemoteConnect('hci0', CENTRAL_A, NOOPT))
    check(dev_a == '/org/bluez/hci0/dev_11_22_33_44_55_01', f'RemoteConnect → {dev_a}')
    connected = Sync(drv.get_object('org.bluez', dev_a), PROPS).Get('org.bluez.Device1', 'Connected')
    check(bool(connected), 'the central\'s Device1 is Connected')
    v = bytes(m.RemoteRead('hci0', CENTRAL_A, loc.path, 0))
    check(v == b'\x01\x02\x03\x04', f'RemoteRead of a readable characteristic → {v.hex()}')
    opts = loc.calls[-1][1]
    check(set(opts) == {'device', 'link', 'mtu'} and str(opts['device']) == dev_a and
          str(opts['link']) == 'LE' and int(opts['mtu']) == 517,
          f'ReadValue options device/link/mtu, no offset at 0: {dict(opts)}')
    v = bytes(m.RemoteRead('hci0', CENTRAL_A, '2a38', 2))
    check(v == b'\x03\x04' and int(loc.calls[-1][1]['offset']) == 2,
          'RemoteRead by UUID with offset 2 passes "offset" and returns the tail')
    n = cp.count('ReadValue')
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, cp.path, 0), ATT + 'ReadNotPermitted',
                 'read of a write-only characteristic')
    check(cp.count('ReadValue') == n, 'the application was not asked (ATT server refused first)')
    m.RemoteRead('hci0', CENTRAL_A, hrm.path, 0)
    check(hrm.count('ReadValue') == 1,
          'a notify-only characteristic (no permissions at all) is read from the application (5.66)')
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, enc.path, 0), ATT + 'InsufficientEncryption',
                 'encrypt-read on an unencrypted link')
    loc.read_error = (ERR + 'NotPermitted', 'no')
    e = expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, loc.path, 0), ATT + 'ReadNotPermitted',
                     'the application answers NotPermitted to a read')
    check(e is not None and ERR + 'NotPermitted' in e.get_dbus_message(),
          'the application\'s error name is in the message')
    loc.read_error = (ERR + 'Failed', '0x85')
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, loc.path, 0), ATT + 'Application85',
                 'Failed "0x85" → application error 0x85')
    loc.read_error = (ERR + 'InvalidOffset', '')
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, loc.path, 0), ATT + 'InvalidOffset',
                 'InvalidOffset → ATT Invalid Offset')
    loc.read_error = ('com.example.Whatever', 'x')
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, loc.path, 0), ATT + 'Unlikely',
                 'an unknown error name → Unlikely Error')
    loc.read_error = None

    m.RemoteWrite('hci0', CENTRAL_A, cp.path, b'\x01', 'request')
    w = cp.calls[-1]
    check(w[0] == 'WriteValue' and w[1][0] == b'\x01' and set(w[1][1]) == {'device', 'link', 'mtu'},
          f'write request → WriteValue, options without "type" (5.66): {dict(w[1][1])}')
    cp.write_error = (ERR + 'NotPermitted', 'no')
    expect_error(lambda: m.RemoteWrite('hci0', CENTRAL_A, cp.path, b'\x02', 'request'),
                 ATT + 'WriteNotPermitted', 'the application refuses a write request')
    cp.write_error = (ERR + 'InvalidValueLength', '')
    expect_error(lambda: m.RemoteWrite('hci0', CENTRAL_A, cp.path, b'\x02', 'request'),
                 ATT + 'InvalidAttributeValueLength', 'InvalidValueLength → ATT 0x0d')
    m.RemoteWrite('hci0', CENTRAL_A, cp.path, b'\x03', 'command')
    check(wait_for(lambda: cp.calls[-1][0] == 'WriteValue' and cp.calls[-1][1][0] == b'\x03'),
          'a write command to a write characteristic reaches the application (ATT permission only)')
    cp.write_error = None
    n = len(loc.calls)
    m.RemoteWrite('hci0', CENTRAL_A, loc.path, b'\x09', 'command')
    expect_error(lambda: m.RemoteWrite('hci0', CENTRAL_A, loc.path, b'\x09', 'request'),
                 ATT + 'WriteNotPermitted', 'write request to a read-only characteristic')
    pump(0.1)
    check(len(loc.calls) == n, 'a write (command or request) to read-only is not passed on')
    wwr.write_error = (ERR + 'Failed', 'nope')
    m.RemoteWrite('hci0', CENTRAL_A, wwr.path, b'\x07', 'request')
    check(wait_for(lambda: wwr.count('WriteValue') == 1),
          'write-without-response flag: a failing WriteValue still succeeds for the central (no reply awaited)')
    v = bytes(m.RemoteRead('hci0', CENTRAL_A, ud.path, 0))
    check(v == b'loc', 'descriptor ReadValue')
    m.RemoteWrite('hci0', CENTRAL_A, ud.path, b'new', 'request')
    check(ud.calls[-1][0] == 'WriteValue' and ud.calls[-1][1][0] == b'new', 'descriptor WriteValue')

    # notifications, two centrals
    m.RemoteConnect('hci0', CENTRAL_B, {'Security': 'medium', 'MTU': dbus.UInt16(23)})
    check(bytes(m.RemoteRead('hci0', CENTRAL_B, enc.path, 0)) == b'\x42', 'encrypt-read on an encrypted link')
    m.RemoteSubscribe('hci0', CENTRAL_A, hrm.path, 'notify')
    m.RemoteSubscribe('hci0', CENTRAL_A, hrm.path, 'notify')
    m.RemoteSubscribe('hci0', CENTRAL_B, hrm.path, 'notify')
    check(wait_for(lambda: hrm.count('StartNotify') == 2),
          f'StartNotify once per subscribing central, not for a repeated CCC value ({hrm.count("StartNotify")})')
    expect_error(lambda: m.RemoteSubscribe('hci0', CENTRAL_A, hrm.path, 'indicate'),
                 ATT + 'CccImproperlyConfigured', 'indicate on a notify-only characteristic')
    for i in range(20):
        hrm.changed({'Value': dbus.Array(bytes([i]) * 25, signature='y')})
    check(wait_for(lambda: len(m.RemoteNotifications('hci0', CENTRAL_B, hrm.path)) == 20),
          'all 20 values arrive')
    got_a = [bytes(v) for v in m.RemoteNotifications('hci0', CENTRAL_A, hrm.path)]
    got_b = [bytes(v) for v in m.RemoteNotifications('hci0', CENTRAL_B, hrm.path)]
    check(got_a == [bytes([i]) * 25 for i in range(20)], 'central A got every value in order')
    check(got_b == [bytes([i]) * 20 for i in range(20)], 'central B (MTU 23) got them cut to MTU − 3')
    m.RemoteUnsubscribe('hci0', CENTRAL_A, hrm.path)
    pump(0.1)
    check(hrm.count('StopNotify') == 0, 'no StopNotify while a central is still subscribed')
    m.RemoteUnsubscribe('hci0', CENTRAL_B, hrm.path)
    check(wait_for(lambda: hrm.count('StopNotify') == 1), 'StopNotify after the last subscriber')
    m.RemoteSubscribe('hci0', CENTRAL_A, ind.path, 'indicate')
    ind.changed({'Value': dbus.Array(b'\x05', signature='y')})
    check(wait_for(lambda: ind.count('Confirm') == 1), 'an indication is confirmed: Confirm() called')
    # disconnection ends the subscription (StopNotify: last one)
    m.RemoteDisconnect('hci0', CENTRAL_A)
    check(wait_for(lambda: ind.count('StopNotify') == 1), 'disconnection clears the CCC: StopNotify')
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_A, loc.path, 0),
                 'org.freedesktop.DBus.Mock.Error.NotConnected', 'a disconnected central cannot read')

    # deadline: an application that never answers
    m.SetAttTimeout(1.0)
    loc.hang = True
    t0 = time.monotonic()
    expect_error(lambda: m.RemoteRead('hci0', CENTRAL_B, loc.path, 0), ATT + 'Timeout',
                 'a hung ReadValue fails at the central\'s ATT timeout')
    check(0.8 < time.monotonic() - t0 < 5, f'… after {time.monotonic() - t0:.1f} s')
    check(not Sync(drv.get_object('org.bluez', '/org/bluez/hci0/dev_11_22_33_44_55_02'), PROPS).Get(
        'org.bluez.Device1', 'Connected'), 'the central dropped the link after the timeout')
    loc.hang = False
    m.SetAttTimeout(30.0)

    app_gm.UnregisterApplication(app.root)
    check(not list(m.RegisteredApplications()), 'nothing registered after UnregisterApplication')

    # ---- LEAdvertisingManager1 ----
    def instances():
        p = Sync(hci0, PROPS).GetAll('org.bluez.LEAdvertisingManager1')
        return int(p['ActiveInstances']), int(p['SupportedInstances'])

    signals = []
    drv.add_signal_receiver(lambda i, c, inv: signals.append(dict(c)), 'PropertiesChanged', PROPS,
                            'org.bluez', '/org/bluez/hci0')
    check(instances() == (0, 5), f'no advertisement: Active 0, Supported 5 ({instances()})')
    hci1 = drv.get_object('org.bluez', '/org/bluez/hci1')
    Sync(hci1, 'org.bluez.Adapter1').StartDiscovery()
    ad = Advertisement(app_conn, '/org/example/adv0', {
        'Type': 'peripheral', 'LocalName': 'selftest',
        'ServiceUUIDs': dbus.Array(['180d'], signature='s'),
        'ManufacturerData': dbus.Dictionary({dbus.UInt16(0xffff): dbus.Array(b'\x01\x02', signature='y')},
                                            signature='qv'),
        'ServiceData': dbus.Dictionary({'9999': dbus.Array(b'\x03', signature='y')}, signature='sv'),
        'Appearance': dbus.UInt16(0x0341), 'Includes': dbus.Array(['tx-power', 'rsvp'], signature='s'),
    })
    app_am.RegisterAdvertisement(ad.path, NOOPT)
    check(True, 'RegisterAdvertisement of a peripheral advertisement (an unknown include is ignored)')
    check(instances() == (1, 4), f'Active 1, Supported 4 (what is left) ({instances()})')
    check(wait_for(lambda: any('ActiveInstances' in s for s in signals)),
          'ActiveInstances/SupportedInstances signalled')
    seen = '/org/bluez/hci1/dev_' + hci0_address.replace(':', '_')

    def seen_props():
        objs = Sync(drv.get_object('org.bluez', '/'), OM).GetManagedObjects()
        return objs.get(seen, {}).get('org.bluez.Device1')
    check(wait_for(lambda: seen_props() is not None), 'hci1\'s discovery finds hci0\'s advertisement')
    p = seen_props() or {}
    check(str(p.get('Name')) == 'selftest' and
          [str(u) for u in p.get('UUIDs', [])] == ['0000180d-0000-1000-8000-00805f9b34fb'] and
          bytes(p.get('ManufacturerData', {}).get(0xffff, b'')) == b'\x01\x02' and
          bytes(p.get('ServiceData', {}).get('00009999-0000-1000-8000-00805f9b34fb', b'')) == b'\x03' and
          int(p.get('Appearance', 0)) == 0x0341 and 'TxPower' in p,
          f'every field is carried: {dict(p)}')
    expect_error(lambda: app_am.RegisterAdvertisement(ad.path, NOOPT), ERR + 'AlreadyExists',
                 'the same advertisement again')

    def bad_ad(path, props, message, what):
        a = Advertisement(app_conn, path, props)
        before = instances()
        expect_error(lambda: app_am.RegisterAdvertisement(path, NOOPT), ERR + 'Failed', what, message)
        check(instances() == before and not any(str(r[2]) == path for r in m.RegisteredAdvertisements()),
              f'{what}: nothing held')
        a.remove_from_connection()

    long_uuids = dbus.Array(['12345678-1234-5678-1234-56789abcde%02x' % i for i in range(2)], signature='s')
    bad_ad('/org/example/long', {'Type': 'peripheral', 'ServiceUUIDs': long_uuids},
           'Failed to register advertisement', 'two 128-bit UUIDs (34 bytes > 31)')
    bad_ad('/org/example/long2', {'Type': 'peripheral', 'ManufacturerData': dbus.Dictionary(
        {dbus.UInt16(1): dbus.Array(b'x' * 25, signature='y')}, signature='qv'),
        'Includes': dbus.Array(['tx-power'], signature='s')},
        'Failed to register advertisement', '29 bytes of data with tx-power included (the kernel keeps 3): > 28')
    bad_ad('/org/example/type', {'Type': 'beacon'}, 'Failed to parse advertisement.', 'an unknown Type')
    bad_ad('/org/example/bcast', {'Type': 'broadcast', 'Discoverable': dbus.Boolean(True)},
           'Failed to parse advertisement.', 'a discoverable broadcast')
    bad_ad('/org/example/name', {'Type': 'peripheral', 'LocalName': 'x',
                                 'Includes': dbus.Array(['local-name'], signature='s')},
           'Failed to parse advertisement.', 'LocalName with Includes local-name')
    m.SetAdvertisingCommands('legacy')
    bad_ad('/org/example/legacy', {'Type': 'peripheral', 'ServiceUUIDs': long_uuids},
           'Failed to parse advertisement.', 'too long with legacy advertising commands')
    m.SetAdvertisingCommands('extended')

    m.SetMaxAdvertisements('hci0', 2)
    ad1 = Advertisement(app_conn, '/org/example/adv1', {'Type': 'broadcast', 'Timeout': dbus.UInt16(1)})
    app_am.RegisterAdvertisement(ad1.path, NOOPT)
    check(instances() == (2, 0), f'two of two instances used ({instances()})')
    ad2 = Advertisement(app_conn, '/org/example/adv2', {'Type': 'broadcast'})
    expect_error(lambda: app_am.RegisterAdvertisement(ad2.path, NOOPT), ERR + 'NotPermitted',
                 'a third advertisement', 'Maximum advertisements reached')
    info = m.AdvertisementInfo('hci0', ad1.path)
    check(str(info['AddressType']) == 'random' and int(str(info['Address'])[:2], 16) < 0x40,
          f'a broadcast advertisement comes from a non-resolvable private address ({info["Address"]})')
    check(wait_for(lambda: ad1.released == 1, 4), 'Timeout 1: Release() called')
    check(wait_for(lambda: not any(str(r[2]) == ad1.path for r in m.RegisteredAdvertisements())),
          '… and the advertisement is gone')
    m.SetMaxAdvertisements('hci0', 5)
    expect_error(lambda: app_am.UnregisterAdvertisement('/never'), ERR + 'DoesNotExist',
                 'UnregisterAdvertisement of an unknown advertisement')
    app_am.UnregisterAdvertisement(ad.path)
    check(instances() == (0, 5) and ad.released == 0,
          f'UnregisterAdvertisement: instances back ({instances()}), no Release()')
    leaving = dbus.bus.BusConnection(address, mainloop=loop_mainloop)
    Advertisement(leaving, '/org/example/adv3', {'Type': 'peripheral'})
    as_app(leaving)[1].RegisterAdvertisement('/org/example/adv3', NOOPT)
    check(instances() == (1, 4), 'an advertisement of a client that will leave')
    leaving.close()
    check(wait_for(lambda: instances() == (0, 5) and not list(m.RegisteredAdvertisements())),
          'its owner left the bus: the advertisement is gone')
    Sync(hci1, 'org.bluez.Adapter1').StopDiscovery()
    print(('OK' if not FAILED else f'FAILED {len(FAILED)} of') + f' {CHECKS[0]} checks')
    return 0 if not FAILED else 1


if __name__ == '__main__':
    sys.exit(main())
