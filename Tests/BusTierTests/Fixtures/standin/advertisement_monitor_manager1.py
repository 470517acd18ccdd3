'''org.bluez.AdvertisementMonitorManager1, as bluetoothd 5.66 exports it only
when started with --experimental (-E; src/adv_monitor.c, doc/
advertisement-monitor-api.txt; docs/advertisement-monitor.md): the stand-in
exports it on each adapter when its parameters say "experimental": true.

RegisterMonitor(o app): org.bluez.Error.InvalidArguments for a path not
starting with "/", AlreadyExists for the same owner and path; else
bluetoothd reads the application's ObjectManager.GetManagedObjects first
and replies after (the lab: a client that blocks in RegisterMonitor gets
NoReply, as its objects cannot be read meanwhile). Each AdvertisementMonitor1 object of Type "or_patterns"
with valid Patterns (a(yyay): at least one, each 1 to 31 bytes ending
within 31) and RSSI
fields (thresholds -127..20, low <= high, timeouts 1..300, all or none) is
activated (Activate()); others are released (Release(): the lab's
bluetoothd logs "released due to invalid content"). A pattern is (start
position, AD type, content), in that order. A monitor of more than 7
patterns ABORTS the stand-in (exit 134), as bluetoothd 5.66: it sizes its
Add Adv Patterns Monitor command in a byte (1 + 34 a pattern, 8 + 34 with
RSSI), writes the patterns past the short buffer it got and dies of the
corrupted heap ("malloc(): invalid size (unsorted)" in the lab). While an
activated monitor exists the adapter scans passively (Discovering stays
false): advertisers whose advertisement matches one of a monitor's patterns
are heard (their Device1 object is created and updated, as in a discovery)
and the monitor gets DeviceFound(device): without RSSI thresholds at each
matching advertisement and never DeviceLost (5.66's adv_monitor_filter_rssi:
"report the DeviceFound() event without tracking"; the lab's log has it once
per advertisement); with them once per device, and DeviceLost when the
device goes (RemoveAdvertiser). UnregisterMonitor(o app): DoesNotExist
when unknown; the application goes without Release(). An application goes
too when its owner leaves the bus.'''

import os

import dbus
from gi.repository import GLib

from . import common

MANAGER_IFACE = 'org.bluez.AdvertisementMonitorManager1'
MONITOR_IFACE = 'org.bluez.AdvertisementMonitor1'
OBJECT_MANAGER_IFACE = 'org.freedesktop.DBus.ObjectManager'
MAX_PATTERNS = 7            # more: bluetoothd 5.66 corrupts its heap and aborts (above)
EXPERIMENTAL = [False]      # set by load() from the parameters


RSSI_KEYS = ('RSSIHighThreshold', 'RSSILowThreshold', 'RSSIHighTimeout', 'RSSILowTimeout')


class Monitor:
    def __init__(self, app, path, patterns, tracks=False):
        self.app = app
        self.path = path
        self.patterns = patterns        # [(ad_type, offset, bytes)]
        self.tracks = tracks            # RSSI thresholds given: devices tracked (found once, lost)
        self.found = set()              # device paths DeviceFound was sent for, when tracked


class MonitorApp:
    def __init__(self, st, owner, path):
        self.st = st
        self.owner = owner
        self.path = path
        self.monitors = []


def manager_props():
    return dbus.Dictionary({
        'SupportedMonitorTypes': dbus.Array(['or_patterns'], signature='s'),
        'SupportedFeatures': dbus.Array([], signature='s'),
    }, signature='sv')


def register(st, sender, path, ok, err):
    if not path.startswith('/'):
        raise common._bluez_invalid()
    if any(a.owner == sender and a.path == path for a in st.monitor_apps):
        raise common._err(common.ERR + 'AlreadyExists', 'Already Exists')
    app = MonitorApp(st, sender, path)
    st.monitor_apps.append(app)

    def reply(objects):
        ok()
        if app not in st.monitor_apps:
            return
        for opath, ifaces in sorted(objects.items()):
            props = ifaces.get(MONITOR_IFACE)
            if props is None:
                continue
            patterns = parse_monitor(props)
            if patterns is not None and len(patterns) > MAX_PATTERNS:
                # merged_pattern_send_add_pattern: uint8_t cp_len overflows, memcpy past malloc0(cp_len)
                common.log(f'monitor {sender}{opath}: {len(patterns)} patterns: malloc(): invalid size (unsorted)')
                os._exit(134)
            if patterns is None:
                # monitor_proxy_added_cb: "released due to invalid content"
                common.log(f'monitor {sender}{opath}: invalid, released')
                _call(Monitor(app, str(opath), []), 'Release')
                continue
            monitor = Monitor(app, str(opath), patterns, any(k in props for k in RSSI_KEYS))
            app.monitors.append(monitor)
            _call(monitor, 'Activate')
        _hear_all(st)

    def error(e):
        common.log(f'GetManagedObjects {sender}{path}: {e.get_dbus_name()}')
        ok()

    common._bus().call_async(sender, path, OBJECT_MANAGER_IFACE, 'GetManagedObjects', '', (),
                             reply, error, timeout=25.0, byte_arrays=True)


def unregister(st, sender, path):
    app = next((a for a in st.monitor_apps if a.owner == sender and a.path == path), None)
    if app is None:
        raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')
    st.monitor_apps.remove(app)


def client_gone(name):
    for st in state.ADAPTERS.values():
        st.monitor_apps = [a for a in st.monitor_apps if a.owner != name]


def parse_monitor(props):
    '''monitor_new's checks: the patterns, or None when bluetoothd ignores the monitor.'''
    if str(props.get('Type', '')) != 'or_patterns':
        return None
    rssi = [k for k in RSSI_KEYS if k in props]
    if rssi:
        try:
            high, low = int(props['RSSIHighThreshold']), int(props['RSSILowThreshold'])
            high_t, low_t = int(props['RSSIHighTimeout']), int(props['RSSILowTimeout'])
        except KeyError:
            return None
        if not (-127 <= low <= high <= 20 and 1 <= high_t <= 300 and 1 <= low_t <= 300):
            return None
    patterns = []
    for entry in props.get('Patterns', []):
        if len(entry) != 3:
            return None
        offset, ad_type, value = int(entry[0]), int(entry[1]), bytes(entry[2])   # start position first
        if not value or offset + len(value) > 31:
            return None
        patterns.append((ad_type, offset, value))
    return patterns if patterns else None


def ad_structures(adv):
    '''The advertiser's AD structures as (type, data) from its Device1 props.'''
    p = adv.props
    out = []
    if 'AdvertisingFlags' in p:
        out.append((0x01, bytes(common._bytes(p['AdvertisingFlags']))))
    short = [common.canonical_uuid(u) for u in p.get('UUIDs', [])]
    sixteen = [int(u[4:8], 16) for u in short if u.startswith('0000') and u.endswith(common.BASE_UUID_SUFFIX)]
    if sixteen:
        out.append((0x03, b''.join(u.to_bytes(2, 'little') for u in sixteen)))
    for uuid, data in p.get('ServiceData', {}).items():
        u = common.canonical_uuid(uuid)
        if u.endswith(common.BASE_UUID_SUFFIX) and u.startswith('0000'):
            out.append((0x16, int(u[4:8], 16).to_bytes(2, 'little') + bytes(common._bytes(data))))
        elif u.endswith(common.BASE_UUID_SUFFIX):
            out.append((0x20, int(u[:8], 16).to_bytes(4, 'little') + bytes(common._bytes(data))))
        else:
            out.append((0x21, bytes.fromhex(u.replace('-', ''))[::-1] + bytes(common._bytes(data))))
    for company, data in p.get('ManufacturerData', {}).items():
        out.append((0xff, int(company).to_bytes(2, 'little') + bytes(common._bytes(data))))
    if 'Name' in p:
        out.append((0x09, str(p['Name']).encode()))
    return out


def _matches(monitor, structures):
    return any(t == ad_type and data[offset:offset + len(value)] == value
               for ad_type, offset, value in monitor.patterns for t, data in structures)


def matching(st, adv):
    '''The activated monitors on st whose patterns adv's advertisement matches.'''
    if not st.monitor_apps or not adv.in_range:
        return []
    structures = ad_structures(adv)
    return [m for a in st.monitor_apps for m in a.monitors if _matches(m, structures)]


def heard(adv):
    '''After adapter1.discover made or updated adv's device: DeviceFound to the monitors it now matches.'''
    for monitor in matching(adv.adapter, adv):
        if not monitor.tracks or adv.path not in monitor.found:
            if monitor.tracks:
                monitor.found.add(adv.path)
            _call(monitor, 'DeviceFound', 'o', (dbus.ObjectPath(adv.path),))


def device_gone(st, path):
    for app in st.monitor_apps:
        for monitor in app.monitors:
            if path in monitor.found:
                monitor.found.discard(path)
                _call(monitor, 'DeviceLost', 'o', (dbus.ObjectPath(path),))


def _hear_all(st):
    '''A new monitor: the advertisers in range are heard as with a radio, 10 ms later.'''
    def run():
        for adv in list(st.advertisers.values()):
            adapter1.discover(adv)
        return False
    GLib.timeout_add(10, run)


def _call(monitor, method, signature='', args=()):
    common.log(f'{method} {monitor.app.owner}{monitor.path} {args}')
    common._bus().call_async(monitor.app.owner, monitor.path, MONITOR_IFACE, method, signature, args,
                             lambda *a: None, lambda e: None, timeout=25.0)


from . import adapter1, state  # noqa: E402 pylint: disable=wrong-import-position
