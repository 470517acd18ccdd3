'''org.bluez.Adapter1 (with the GattManager1 and LEAdvertisingManager1
methods bluetoothd puts on the adapter object) and discovery: sessions and
filters per client, advertisers reported as Device1 objects, power.'''

import dbus
import dbus.lowlevel
import dbus.service
from gi.repository import GLib
from dbusmock import mockobject

from . import bluez_object, common


def _reply_later(path, method, ok):
    '''Sends the (empty) reply now, or DelayReply's seconds later.'''
    delay = state.REPLY_DELAYS.get((str(path), method))
    if not delay:
        ok()
        return
    common.log(f'{method} {path}: replying in {delay} s (DelayReply)')
    GLib.timeout_add(int(delay * 1000), lambda: ok() and False)


class AdapterObject(bluez_object.BluezObject):
    WRITABLE = {common.ADAPTER_IFACE: {'Alias': 's', 'Powered': 'b', 'Discoverable': 'b',
                                'Pairable': 'b', 'DiscoverableTimeout': 'u',
                                'PairableTimeout': 'u'}}

    def __init__(self, name, props):
        super().__init__('/org/bluez/' + name, common.ADAPTER_IFACE, props)
        self.name = name
        self.props[common.GATT_MANAGER_IFACE] = dbus.Dictionary({}, signature='sv')
        if advertisement_monitor_manager1.EXPERIMENTAL[0]:
            self.props[advertisement_monitor_manager1.MANAGER_IFACE] = advertisement_monitor_manager1.manager_props()
        self.props[common.LE_ADV_MANAGER_IFACE] = dbus.Dictionary({
            'ActiveInstances': dbus.Byte(0),
            'SupportedInstances': dbus.Byte(5),
            'SupportedIncludes': dbus.Array(['tx-power', 'appearance', 'local-name'],
                                            signature='s'),
        }, signature='sv')

    @property
    def state(self):
        return state.ADAPTERS[self.name]

    def set_property(self, interface, name, value):
        if interface == common.ADAPTER_IFACE and name == 'Powered':
            set_powered(self.state, bool(value))
        elif interface == common.ADAPTER_IFACE and name == 'Alias' and not str(value):
            # bluetoothd: empty alias resets it to the system name
            self.update({'Alias': dbus.String(self.props[common.ADAPTER_IFACE]['Name'])})
        else:
            self.update({name: value}, interface)

    @dbus.service.method(common.ADAPTER_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StartDiscovery(self, sender=None):
        st = self.state
        common.log(f'StartDiscovery {self.name} from {sender}')
        state._check_injected(self.path, 'StartDiscovery')
        if not self.props[common.ADAPTER_IFACE]['Powered']:
            raise common._err(common.ERR + 'NotReady', 'Resource Not Ready')
        if sender in st.sessions:
            raise common._err(common.ERR + 'InProgress', 'Operation already in progress')
        if not st.sessions and st.stalled == 'restart':
            st.stalled = None        # the controller's scan starts anew
        st.sessions[sender] = st.filters.get(sender)
        st.events.append(('StartDiscovery', sender))
        clients._watch_clients()
        if not self.props[common.ADAPTER_IFACE]['Discovering']:
            self.update({'Discovering': dbus.Boolean(True)})
        # devices are found after the reply, as with a real radio
        _advertise_all_soon(st)

    @dbus.service.method(common.ADAPTER_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def StopDiscovery(self, sender=None, ok=None, err=None):
        st = self.state
        common.log(f'StopDiscovery {self.name} from {sender}')
        try:
            state._check_injected(self.path, 'StopDiscovery')
            if not self.props[common.ADAPTER_IFACE]['Powered']:
                raise common._err(common.ERR + 'NotReady', 'Resource Not Ready')
            if sender not in st.sessions:
                raise common._err(common.ERR + 'Failed', 'No discovery started')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        del st.sessions[sender]
        st.events.append(('StopDiscovery', sender))
        if not st.sessions:
            end_discovery(st)
        # src/adapter.c stop_discovery: the client's session ends at once, the
        # reply waits for the controller (mgmt Stop Discovery's completion)
        _reply_later(self.path, 'StopDiscovery', ok)

    @dbus.service.method(common.ADAPTER_IFACE, in_signature='a{sv}', out_signature='',
                         sender_keyword='sender')
    def SetDiscoveryFilter(self, properties, sender=None):
        st = self.state
        common.log(f'SetDiscoveryFilter {self.name} from {sender}: {dict(properties)}')
        state._check_injected(self.path, 'SetDiscoveryFilter')
        flt = parse_discovery_filter(properties)
        st.last_filter = dbus.Dictionary(properties, signature='sv')
        st.last_filter_sender = sender
        st.filter_calls += 1
        st.events.append(('SetDiscoveryFilter', sender))
        if flt:
            st.filters[sender] = flt
        else:
            st.filters.pop(sender, None)
        clients._watch_clients()
        if sender in st.sessions:
            st.sessions[sender] = st.filters.get(sender)
            _advertise_all_soon(st)

    @dbus.service.method(common.ADAPTER_IFACE, in_signature='', out_signature='as')
    def GetDiscoveryFilters(self):
        return dbus.Array(common.DISCOVERY_FILTER_KEYS, signature='s')

    @dbus.service.method(common.ADAPTER_IFACE, in_signature='o', out_signature='')
    def RemoveDevice(self, device):
        common.log(f'RemoveDevice {device}')
        state._check_injected(self.path, 'RemoveDevice')
        device = str(device)
        obj = mockobject.objects.get(device)
        if not isinstance(obj, device1.DeviceObject) or obj.adapter_name != self.name:
            raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')
        device1.remove_device(obj)

    @dbus.service.method(common.ADAPTER_IFACE, in_signature='a{sv}', out_signature='o')
    def ConnectDevice(self, properties):
        common.log(f'ConnectDevice {self.name} {dict(properties)}')
        state._check_injected(self.path, 'ConnectDevice')
        if not self.props[common.ADAPTER_IFACE]['Powered']:
            raise common._err(common.ERR + 'NotReady', 'Resource Not Ready')
        address = properties.get('Address')
        if not isinstance(address, dbus.String) or not common._is_address(address):
            raise common._bluez_invalid()
        addr_type = properties.get('AddressType', dbus.String('public'))
        if not isinstance(addr_type, dbus.String) or addr_type not in ('public', 'random'):
            raise common._bluez_invalid()
        for k in properties:
            if k not in ('Address', 'AddressType'):
                raise common._bluez_invalid()
        path = common.device_path(self.name, address)
        if path in mockobject.objects:
            raise common._err(common.ERR + 'AlreadyExists', 'Already Exists')
        adv = self.state.advertisers.get(str(address).upper())
        if adv is None:
            adv = state.Advertiser(self.state, str(address),
                             {'AddressType': dbus.String(addr_type)}, False)
            adv.in_range = False
        if not adv.connectable or not adv.in_range:
            raise common._err(common.ERR + 'Failed', 'le-connection-abort-by-local')
        dev = create_device(adv, with_rssi=False)
        device1.connect_device(dev)
        return dbus.ObjectPath(path)


    # -- peripheral role (src/gatt-database.c, src/advertising.c): the work is
    # done by the server-side functions further down

    @dbus.service.method(common.GATT_MANAGER_IFACE, in_signature='oa{sv}', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def RegisterApplication(self, application, options, sender=None, ok=None, err=None):
        common.log(f'RegisterApplication {self.name} {application} from {sender}')
        try:
            state._check_injected(self.path, 'RegisterApplication')
            gatt_manager1.gatt_register_app(self.state, sender, str(application), ok, err)
        except dbus.exceptions.DBusException as e:
            err(e)

    @dbus.service.method(common.GATT_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterApplication(self, application, sender=None):
        common.log(f'UnregisterApplication {self.name} {application} from {sender}')
        state._check_injected(self.path, 'UnregisterApplication')
        gatt_manager1.gatt_unregister_app(self.state, sender, str(application))

    @dbus.service.method('org.bluez.AdvertisementMonitorManager1', in_signature='o', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def RegisterMonitor(self, application, sender=None, ok=None, err=None):
        common.log(f'RegisterMonitor {self.name} {application} from {sender}')
        try:
            if advertisement_monitor_manager1.MANAGER_IFACE not in self.props:
                raise common._err('org.freedesktop.DBus.Error.UnknownMethod', 'no AdvertisementMonitorManager1 without -E')
            state._check_injected(self.path, 'RegisterMonitor')
            advertisement_monitor_manager1.register(self.state, sender, str(application), ok, err)
        except dbus.exceptions.DBusException as e:
            err(e)

    @dbus.service.method('org.bluez.AdvertisementMonitorManager1', in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterMonitor(self, application, sender=None):
        common.log(f'UnregisterMonitor {self.name} {application} from {sender}')
        if advertisement_monitor_manager1.MANAGER_IFACE not in self.props:
            raise common._err('org.freedesktop.DBus.Error.UnknownMethod', 'no AdvertisementMonitorManager1 without -E')
        state._check_injected(self.path, 'UnregisterMonitor')
        advertisement_monitor_manager1.unregister(self.state, sender, str(application))

    @dbus.service.method(common.LE_ADV_MANAGER_IFACE, in_signature='oa{sv}', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def RegisterAdvertisement(self, advertisement, options, sender=None, ok=None, err=None):
        common.log(f'RegisterAdvertisement {self.name} {advertisement} from {sender}')
        try:
            state._check_injected(self.path, 'RegisterAdvertisement')
            le_advertising_manager1.adv_register(self.state, sender, str(advertisement), ok, err)
        except dbus.exceptions.DBusException as e:
            err(e)

    @dbus.service.method(common.LE_ADV_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterAdvertisement(self, advertisement, sender=None):
        common.log(f'UnregisterAdvertisement {self.name} {advertisement} from {sender}')
        state._check_injected(self.path, 'UnregisterAdvertisement')
        le_advertising_manager1.adv_unregister(self.state, sender, str(advertisement))


def default_alias(address):
    return str(address).upper().replace(':', '-')


def parse_discovery_filter(properties):
    '''bluetoothd's parse_discovery_filter_dict: unknown keys or wrong types
    → org.bluez.Error.InvalidArguments. Returns a plain dict.'''
    out = {}
    types = {'UUIDs': 'as', 'RSSI': 'n', 'Pathloss': 'q', 'Transport': 's',
             'DuplicateData': 'b', 'Discoverable': 'b', 'Pattern': 's'}
    for key, value in properties.items():
        key = str(key)
        if key not in types:
            raise common._bluez_invalid()
        if not bluez_object._typed(value, types[key]):
            raise common._bluez_invalid()
        if key == 'UUIDs':
            uuids = []
            for u in value:
                c = common.canonical_uuid(u)
                if c is None:
                    raise common._bluez_invalid()
                uuids.append(c)
            out[key] = uuids
        elif key == 'Transport':
            if str(value) not in ('auto', 'bredr', 'le'):
                raise common._bluez_invalid()
            out[key] = str(value)
        elif key in ('RSSI', 'Pathloss'):
            v = int(value)
            if key == 'RSSI' and not -127 <= v <= 20:
                raise common._bluez_invalid()
            if key == 'Pathloss' and v > 137:
                raise common._bluez_invalid()
            out[key] = v
        elif key in ('DuplicateData', 'Discoverable'):
            out[key] = bool(value)
        else:
            out[key] = str(value)
    if 'RSSI' in out and 'Pathloss' in out:
        raise common._bluez_invalid()
    return out


def device_props(adv, with_rssi=True):
    p = adv.props
    props = {
        'Address': dbus.String(adv.address),
        'AddressType': dbus.String(p.get('AddressType', 'public')),
        'Alias': dbus.String(p.get('Name', default_alias(adv.address))),
        'Paired': dbus.Boolean(False),
        'Bonded': dbus.Boolean(False),
        'Trusted': dbus.Boolean(False),
        'Blocked': dbus.Boolean(False),
        'LegacyPairing': dbus.Boolean(False),
        'Connected': dbus.Boolean(False),
        'UUIDs': dbus.Array([common.canonical_uuid(u) for u in p.get('UUIDs', [])], signature='s'),
        'Adapter': dbus.ObjectPath(adv.adapter.path),
        'ServicesResolved': dbus.Boolean(False),
    }
    for key in ('Name', 'Appearance', 'Icon', 'Class', 'ManufacturerData',
                'ServiceData', 'AdvertisingFlags'):
        if key in p:
            props[key] = p[key]
    if with_rssi:
        for key in ('RSSI', 'TxPower'):
            if key in p:
                props[key] = p[key]
    return props


def create_device(adv, with_rssi=True, announce=True):
    obj = device1.DeviceObject(adv, device_props(adv, with_rssi))
    state._add_object(obj)
    if announce:
        common.emit_interfaces_added(obj.path, obj.props)
    return obj


def discover(adv):
    '''The adapter received an advertisement from adv.'''
    st = adv.adapter
    if not adv.in_range or not st.wants(adv):
        return
    obj = mockobject.objects.get(adv.path)
    if obj is None:
        create_device(adv)
        advertisement_monitor_manager1.heard(adv)
        return
    current = obj.props[common.DEVICE_IFACE]
    fresh = device_props(adv)
    dup = st.duplicate_data()
    changed = {}
    for key in ('Name', 'RSSI', 'TxPower', 'UUIDs', 'ManufacturerData', 'ServiceData',
                'AdvertisingFlags', 'Appearance', 'Icon', 'Class', 'AddressType'):
        if key not in fresh:
            continue
        same = key in current and _same(current[key], fresh[key])
        if not same or (dup and key in ('ManufacturerData', 'ServiceData')):
            changed[key] = fresh[key]
    if 'Name' in changed and not obj.user_alias:
        changed['Alias'] = fresh['Name']      # bluetoothd: Alias follows Name
    obj.update(changed)
    advertisement_monitor_manager1.heard(adv)


def _same(a, b):
    return _plain(a) == _plain(b)


def _plain(v):
    if isinstance(v, (dbus.Dictionary, dict)):
        return {_plain(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (dbus.Array, list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (dbus.ByteArray, bytes)):
        return [int(x) for x in v]
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, str):
        return str(v)
    return v


def _advertise_all_soon(st):
    '''Devices are found after the reply, as with a real radio: 10 ms later.'''
    if st.advertise_pending is None:
        st.advertise_pending = GLib.timeout_add(10, _advertise_all, st)


def _advertise_all(st):
    st.advertise_pending = None
    for adv in list(st.advertisers.values()):
        discover(adv)
    return False


def _advertise_pending_now(st):
    '''What _advertise_all_soon still owes, done now: a burst that comes
    before it must not have its devices advertised again afterwards (that
    was up to 10,000 extra changes in a bench run on a loaded machine).'''
    if st.advertise_pending is not None:
        GLib.source_remove(st.advertise_pending)
        _advertise_all(st)


def end_discovery(st):
    '''Last discovery session ended: Discovering goes false at once; the
    clean-up of found devices (bluetoothd: discovery_cleanup) follows when
    the stand-in is idle, after the reply.'''
    obj = st.obj
    if obj.props[common.ADAPTER_IFACE]['Discovering']:
        obj.update({'Discovering': dbus.Boolean(False)})
    GLib.idle_add(_discovery_cleanup, st)


def _discovery_cleanup(st):
    '''RSSI/TxPower of found devices are invalidated; temporary devices that
    are not connectable are removed.'''
    if st.sessions or state.ADAPTERS.get(st.name) is not st:
        return False     # a new discovery began meanwhile, or the adapter went
    prefix = st.path + '/dev_'
    for path in [p for p in list(mockobject.objects) if p.startswith(prefix) and '/' not in p[len(prefix):]]:
        dev = mockobject.objects.get(path)
        if not isinstance(dev, device1.DeviceObject):
            continue
        p = dev.props[common.DEVICE_IFACE]
        if not dev.connected and not p['Paired'] and not p['Trusted'] and \
                not dev.advertiser.connectable:
            device1.remove_device(dev)
        else:
            dev.update({}, invalidated=['RSSI', 'TxPower'])
    return False


def set_powered(st, on):
    obj = st.obj
    props = obj.props[common.ADAPTER_IFACE]
    if bool(props['Powered']) == on:
        return
    if not on:
        st.stalled = None            # the controller is reset
        for sender in st.sessions:
            st.events.append(('PoweredOff', sender))
        st.sessions.clear()
        end_discovery(st)
        for path in [p for p in list(mockobject.objects) if p.startswith(st.path + '/dev_')]:
            dev = mockobject.objects.get(path)
            if isinstance(dev, device1.DeviceObject) and dev.connected:
                device1.disconnect_device(dev)
    obj.update({'Powered': dbus.Boolean(on), 'PowerState': dbus.String('on' if on else 'off')})
    if not on and props['Discoverable']:
        obj.update({'Discoverable': dbus.Boolean(False)})


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import advertisement_monitor_manager1, clients, device1, gatt_manager1, le_advertising_manager1, state  # noqa: E402 pylint: disable=wrong-import-position
