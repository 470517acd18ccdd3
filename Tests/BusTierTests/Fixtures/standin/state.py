'''The stand-in's state that is not on the bus: adapters, simulated
advertisers and their GATT databases, injected errors, hung calls, the
clients' agents, pairing; and the helpers that add and remove bus objects.'''

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import mockobject


class Advertiser:
    '''A simulated LE peripheral in radio range of one adapter.'''

    def __init__(self, adapter, address, props, connectable):
        self.adapter = adapter          # AdapterState
        self.address = address.upper()
        self.props = props              # Device1 props it advertises
        self.connectable = connectable
        self.services = []              # [GattServiceDef]
        self.next_handle = 0x000a
        self.in_range = True

    @property
    def path(self):
        return common.device_path(self.adapter.name, self.address)

    def alloc_handle(self, n=1):
        h = self.next_handle
        self.next_handle += n
        return h

    # -- filter matching (bluetoothd: is_filter_match) --
    def matches(self, flt):
        if flt is None:
            return True
        transport = flt.get('Transport', 'auto')
        if transport == 'bredr':
            return False
        rssi = self.props.get('RSSI')
        if 'RSSI' in flt:
            if rssi is None or int(rssi) < int(flt['RSSI']):
                return False
        if 'Pathloss' in flt:
            tx = self.props.get('TxPower')
            if rssi is None or tx is None or int(tx) - int(rssi) > int(flt['Pathloss']):
                return False
        uuids = flt.get('UUIDs') or []
        if uuids:
            mine = {common.canonical_uuid(u) for u in self.props.get('UUIDs', [])}
            mine |= {common.canonical_uuid(u) for u in self.props.get('ServiceData', {}).keys()}
            if not mine & {common.canonical_uuid(u) for u in uuids}:
                return False
        pattern = flt.get('Pattern')
        if pattern:
            name = str(self.props.get('Name', ''))
            if not (self.address.startswith(str(pattern).upper()) or
                    (name and name.startswith(str(pattern)))):
                return False
        if flt.get('Discoverable'):
            flags = common._bytes(self.props.get('AdvertisingFlags', []))
            if not flags or not flags[0] & 0x03:
                return False
        return True


class GattDescriptorDef:
    def __init__(self, chrc, handle, uuid, flags, value):
        self.chrc = chrc
        self.handle = handle
        self.uuid = uuid
        self.flags = flags
        self.value = value

    @property
    def path(self):
        return f'{self.chrc.path}/desc{self.handle:04x}'


class GattCharacteristicDef:
    def __init__(self, service, handle, uuid, flags, value):
        self.service = service
        self.handle = handle
        self.uuid = uuid
        self.flags = flags
        self.value = value              # the peripheral's current value
        self.descriptors = []

    @property
    def path(self):
        return f'{self.service.path}/char{self.handle:04x}'


class GattServiceDef:
    def __init__(self, advertiser, handle, uuid, primary):
        self.advertiser = advertiser
        self.handle = handle
        self.uuid = uuid
        self.primary = primary
        self.characteristics = []

    @property
    def path(self):
        return f'{self.advertiser.path}/service{self.handle:04x}'


class AdapterState:
    def __init__(self, name, obj):
        self.name = name
        self.obj = obj
        self.advertisers = {}           # address → Advertiser
        self.sessions = {}              # sender → filter dict (or None)
        self.filters = {}               # sender → filter set with SetDiscoveryFilter
        self.last_filter = dbus.Dictionary({}, signature='sv')
        self.last_filter_sender = ''
        self.filter_calls = 0
        self.enforce_filters = True
        self.stalled = None             # StallScan: None, 'restart' or 'power-cycle'
        self.events = []                # [(event, sender)] for GetDiscoveryLog
        self.advertise_pending = None   # GLib source of _advertise_all_soon
        # peripheral role (bluetoothd's btd_gatt_database and btd_adv_manager)
        self.apps = []                  # [LocalApp]: database->apps, in order
        self.next_handle = 0x0010       # local GATT database (core services below)
        self.centrals = {}              # address → RemoteCentral (simulated centrals)
        self.ads = []                   # [LocalAdvertisement]: manager->clients
        self.max_ads = 5                # manager->max_ads (read adv features)
        self.adv_instances = set()      # manager->instance_bitmap
        self.monitor_apps = []          # [MonitorApp]: AdvertisementMonitorManager1 (-E)

    @property
    def path(self):
        return '/org/bluez/' + self.name

    def session_filters(self):
        return list(self.sessions.values())

    def duplicate_data(self):
        # bluetoothd: DuplicateData defaults to true; merged with OR
        for flt in self.sessions.values():
            if flt is None or flt.get('DuplicateData', True):
                return True
        return False

    def wants(self, adv):
        if self.stalled:
            return False
        if self.sessions and (not self.enforce_filters or any(adv.matches(f) for f in self.sessions.values())):
            return True
        # a passive scan for the advertisement monitors (adv_monitor.c)
        return bool(advertisement_monitor_manager1.matching(self, adv))


ROOT = None            # the root DBusMockObject
ADAPTERS = {}          # name → AdapterState
WRITES = {}            # attribute path → [(value bytes, options dict)]
INJECTED_ERRORS = {}   # (path, method) → [error name, message, remaining calls or None]
CALLS = []             # [(path, method)] of BlueZ API calls, in order (GetCalls)
HANGING = set()        # (path, method) whose calls are never answered (HangMethod)
HUNG_CALLS = []        # [(path, method, ok, err)] calls left unanswered
REPLY_DELAYS = {}      # (path, method) → seconds its reply comes after the work is done (DelayReply)
AGENTS = {}            # client unique name → (agent path, capability)
DEFAULT_AGENT = []     # [(client, path)]: bluetoothd's default_agents queue, head first
PAIRING = {}           # device path → (agent method, expected value) (SetPairing)
AGENT_LOG = []         # [(method, device, outcome)] of agent calls made by Pair
PAIR_LOG = []          # [(device, caller, agent owner, io capability)] per Pair (GetPairLog)
VALUE_SIGNALS = {}     # characteristic path → PropertiesChanged(Value) emitted (GetValueSignalCount)
GATT_CACHE = ['always']  # main.conf [GATT] Cache: always (default) | yes | no (SetGattCache)


def _device_connected(adv):
    dev = mockobject.objects.get(adv.path)
    return isinstance(dev, device1.DeviceObject) and dev.connected


def _adapter_state(name):
    try:
        return ADAPTERS[str(name)]
    except KeyError:
        raise common._mock_err('NoSuchAdapter', f'Adapter {name} does not exist') from None


def _advertiser(adapter, address):
    st = _adapter_state(adapter)
    try:
        return st.advertisers[str(address).upper()]
    except KeyError:
        raise common._mock_err('NoSuchAdvertiser', f'No advertiser {address} on {adapter}') from None


def _check_injected(path, method):
    '''Records the call (GetCalls) and raises an injected error, if any.'''
    key = (str(path), method)
    CALLS.append(key)
    e = INJECTED_ERRORS.get(key)
    if e:
        if e[2] is not None:
            e[2] -= 1
            if e[2] <= 0:
                del INJECTED_ERRORS[key]
        raise common._err(e[0], e[1])


def _hangs(path, method, ok, err):
    '''True (and the call is parked, never answered) if HangMethod asked so.'''
    if (str(path), method) in HANGING:
        common.log(f'{method} {path}: not answering (HangMethod)')
        CALLS.append((str(path), method))
        HUNG_CALLS.append((str(path), method, ok, err))
        return True
    return False


def _answer(ok, err, body):
    '''Runs body() and replies through async callbacks.'''
    try:
        result = body()
    except dbus.exceptions.DBusException as e:
        err(e)
        return
    if result is None:
        ok()
    else:
        ok(result)


def _add_object(obj):
    obj.logfile = ROOT.logfile
    obj.is_logfile_owner = False
    obj.object_manager = ROOT
    mockobject.objects[obj.path] = obj


def _remove_object(path):
    obj = mockobject.objects.pop(path, None)
    if obj is not None:
        obj.remove_from_connection()
    return obj


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import advertisement_monitor_manager1, common, device1  # noqa: E402 pylint: disable=wrong-import-position
