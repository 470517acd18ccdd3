'''Test-control RPC (org.freedesktop.DBus.Mock on "/"), the radio:
adapters, simulated advertisers, discovery records, advertisement bursts.'''

import re
import struct

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import MOCK_IFACE, mockobject


# parsing of Mock arguments

ADVERTISER_KEYS = {
    'AddressType': 's', 'Name': 's', 'RSSI': 'n', 'TxPower': 'n', 'UUIDs': 'as',
    'ManufacturerData': 'a{qv}', 'ServiceData': 'a{sv}', 'AdvertisingFlags': 'ay',
    'Appearance': 'q', 'Icon': 's', 'Class': 'u',
}


def parse_advertiser_props(props, partial=False):
    '''Mock input a{sv} → Device1-typed property values. Keys: AddressType s
    (public|random), Name s, RSSI n, TxPower n, UUIDs as, ManufacturerData
    a{qv} (each variant ay), ServiceData a{sv} (each variant ay; keys are
    UUIDs), AdvertisingFlags ay, Appearance q, Icon s, Class u. Also
    Connectable b (stand-in only; default true).'''
    out = {}
    connectable = None
    for key, value in props.items():
        key = str(key)
        if key == 'Connectable':
            if not isinstance(value, dbus.Boolean):
                raise common._mock_err('InvalidArgs', 'Connectable must be b')
            connectable = bool(value)
            continue
        sig = ADVERTISER_KEYS.get(key)
        if sig is None:
            raise common._mock_err('InvalidArgs', f'unknown advertiser property {key}')
        if sig == 'a{qv}':
            if not isinstance(value, dbus.Dictionary):
                raise common._mock_err('InvalidArgs', f'{key} must be a{{qv}}')
            md = {}
            for company, data in value.items():
                if not bluez_object._typed(data, 'ay'):
                    raise common._mock_err('InvalidArgs', f'{key} values must be ay')
                md[dbus.UInt16(int(company))] = common._ay(common._bytes(data), variant_level=1)
            out[key] = dbus.Dictionary(md, signature='qv')
        elif sig == 'a{sv}':
            if not isinstance(value, dbus.Dictionary):
                raise common._mock_err('InvalidArgs', f'{key} must be a{{sv}}')
            sd = {}
            for uuid, data in value.items():
                c = common.canonical_uuid(uuid)
                if c is None or not bluez_object._typed(data, 'ay'):
                    raise common._mock_err('InvalidArgs', f'{key}: bad UUID or value')
                sd[dbus.String(c)] = common._ay(common._bytes(data), variant_level=1)
            out[key] = dbus.Dictionary(sd, signature='sv')
        elif sig == 'ay':
            if not bluez_object._typed(value, 'ay'):
                raise common._mock_err('InvalidArgs', f'{key} must be ay')
            out[key] = common._ay(common._bytes(value))
        else:
            if not bluez_object._typed(value, sig):
                raise common._mock_err('InvalidArgs', f'{key} must be {sig}')
            if key == 'UUIDs':
                uuids = []
                for u in value:
                    c = common.canonical_uuid(u)
                    if c is None:
                        raise common._mock_err('InvalidArgs', f'bad UUID {u}')
                    uuids.append(c)
                out[key] = dbus.Array(uuids, signature='s')
            elif key == 'AddressType':
                if str(value) not in ('public', 'random'):
                    raise common._mock_err('InvalidArgs', 'AddressType must be public or random')
                out[key] = dbus.String(value)
            else:
                out[key] = value
    return out, connectable


def _gatt_flags(flags):
    return [str(f) for f in flags]


def _find_def(path):
    path = str(path)
    for st in state.ADAPTERS.values():
        for adv in st.advertisers.values():
            if not path.startswith(adv.path + '/'):
                continue
            for svc in adv.services:
                if svc.path == path:
                    return svc
                for chrc in svc.characteristics:
                    if chrc.path == path:
                        return chrc
                    for desc in chrc.descriptors:
                        if desc.path == path:
                            return desc
    raise common._mock_err('NoSuchAttribute', f'no GATT attribute {path}')


@dbus.service.method(MOCK_IFACE, in_signature='sssb', out_signature='o')
def AddAdapter(self, device_name, address, name, powered):
    '''AddAdapter(hci s, address s, name s, powered b) → o

    Adds /org/bluez/<hci> with Adapter1 (Name and Alias = name).'''
    device_name = str(device_name)
    if not re.fullmatch(r'hci[0-9]+', device_name):
        raise common._mock_err('InvalidArgs', 'adapter name must be hciN')
    if not common._is_address(address):
        raise common._mock_err('InvalidArgs', f'bad address {address}')
    if device_name in state.ADAPTERS:
        raise common._mock_err('AdapterExists', f'{device_name} exists')
    props = {
        'Address': dbus.String(str(address).upper()),
        'AddressType': dbus.String('public'),
        'Name': dbus.String(name),
        'Alias': dbus.String(name),
        'Class': dbus.UInt32(0x7c010c),
        'Powered': dbus.Boolean(bool(powered)),
        'PowerState': dbus.String('on' if powered else 'off'),
        'Discoverable': dbus.Boolean(False),
        'DiscoverableTimeout': dbus.UInt32(180),
        'Pairable': dbus.Boolean(True),
        'PairableTimeout': dbus.UInt32(0),
        'Discovering': dbus.Boolean(False),
        'UUIDs': dbus.Array(['00001800-0000-1000-8000-00805f9b34fb',
                             '00001801-0000-1000-8000-00805f9b34fb',
                             '0000180a-0000-1000-8000-00805f9b34fb',
                             '0000110e-0000-1000-8000-00805f9b34fb',
                             '0000110c-0000-1000-8000-00805f9b34fb'], signature='s'),
        'Modalias': dbus.String('usb:v1D6Bp0246d0542'),    # BlueZ 5.66's Device ID
        'Roles': dbus.Array(['central', 'peripheral'], signature='s'),
    }
    obj = adapter1.AdapterObject(device_name, props)
    state.ADAPTERS[device_name] = state.AdapterState(device_name, obj)
    state._add_object(obj)
    common.emit_interfaces_added(obj.path, obj.props)
    return dbus.ObjectPath(obj.path)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def RemoveAdapter(self, device_name):
    '''RemoveAdapter(hci s): the controller goes away (devices first).'''
    st = state._adapter_state(device_name)
    le_advertising_manager1.server_adapter_removed(st)
    for path in gatt_client._children(st.path):
        gatt_client._unexport(path)
    gatt_client._unexport(st.path)
    del state.ADAPTERS[st.name]


@dbus.service.method(MOCK_IFACE, in_signature='sb', out_signature='')
def SetAdapterPowered(self, device_name, powered):
    '''SetAdapterPowered(hci s, powered b): as if rfkill/another tool did it.
    Powering off ends all discovery sessions and connections.'''
    adapter1.set_powered(state._adapter_state(device_name), bool(powered))


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def DropAdapterInterface(self, device_name, interface):
    '''DropAdapterInterface(hci s, interface s): the adapter no longer exports
    GattManager1 or LEAdvertisingManager1, as a bluetoothd without that role
    (a controller without LE, a build without it) does not.'''
    st = state._adapter_state(device_name)
    if interface not in (common.GATT_MANAGER_IFACE, common.LE_ADV_MANAGER_IFACE) or interface not in st.obj.props:
        raise common._mock_err('InvalidArgs', f'{device_name} has no {interface} to drop')
    del st.obj.props[interface]
    common.emit_interfaces_removed(st.obj.path, [interface])


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}', out_signature='o')
def AddAdvertiser(self, device_name, address, properties):
    '''AddAdvertiser(hci s, address s, properties a{sv}) → o (future device path)

    See parse_advertiser_props for keys; also InRange b (default true):
    false, and the peripheral does not advertise until UpdateAdvertiser. If a
    discovery is running on the adapter, the device is discovered at once.'''
    st = state._adapter_state(device_name)
    if not common._is_address(address):
        raise common._mock_err('InvalidArgs', f'bad address {address}')
    if str(address).upper() in st.advertisers:
        raise common._mock_err('AdvertiserExists', f'{address} exists on {device_name}')
    properties = dict(properties)
    in_range = properties.pop('InRange', dbus.Boolean(True))
    if not isinstance(in_range, dbus.Boolean):
        raise common._mock_err('InvalidArgs', 'InRange must be b')
    props, connectable = parse_advertiser_props(properties)
    adv = state.Advertiser(st, str(address), props, True if connectable is None else connectable)
    adv.in_range = bool(in_range)
    st.advertisers[adv.address] = adv
    if st.sessions or st.monitor_apps:
        adapter1.discover(adv)
    return dbus.ObjectPath(adv.path)


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}as', out_signature='')
def UpdateAdvertiser(self, device_name, address, properties, removed):
    '''UpdateAdvertiser(hci s, address s, changed a{sv}, removed as)

    The peripheral advertises again with changed data (keys removed from its
    advertisement in `removed`). While discovering, the device's changes are
    signalled (PropertiesChanged of what differs; ManufacturerData/
    ServiceData every time while DuplicateData is on).'''
    adv = state._advertiser(device_name, address)
    props, connectable = parse_advertiser_props(properties)
    adv.props.update(props)
    for key in removed:
        adv.props.pop(str(key), None)
    if connectable is not None:
        adv.connectable = connectable
    adv.in_range = True
    adapter1.discover(adv)


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def RemoveAdvertiser(self, device_name, address):
    '''RemoveAdvertiser(hci s, address s): the peripheral leaves; its Device1
    object (if any) is removed (InterfacesRemoved), as by RemoveDevice.'''
    st = state._adapter_state(device_name)
    adv = state._advertiser(device_name, address)
    dev = mockobject.objects.get(adv.path)
    advertisement_monitor_manager1.device_gone(st, adv.path)
    if isinstance(dev, device1.DeviceObject):
        device1.remove_device(dev)
    del st.advertisers[adv.address]


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='as')
def GetMonitors(self, device_name):
    '''GetMonitors(hci s) → as: "<owner> <app path> <activated monitors>" per registered
    AdvertisementMonitorManager1 application, in registration order.'''
    return dbus.Array(['%s %s %d' % (a.owner, a.path, len(a.monitors))
                       for a in state._adapter_state(device_name).monitor_apps], signature='s')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='a{sv}')
def GetLastDiscoveryFilter(self, device_name):
    '''GetLastDiscoveryFilter(hci s) → a{sv}: the dict of the last accepted
    SetDiscoveryFilter call on the adapter (by any client), as sent.'''
    return state._adapter_state(device_name).last_filter


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='u')
def GetDiscoveryFilterCallCount(self, device_name):
    '''GetDiscoveryFilterCallCount(hci s) → u: accepted SetDiscoveryFilter calls.'''
    return dbus.UInt32(state._adapter_state(device_name).filter_calls)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='as')
def GetDiscoverySessions(self, device_name):
    '''GetDiscoverySessions(hci s) → as: unique names of clients with a
    running discovery session on the adapter.'''
    return dbus.Array(sorted(state._adapter_state(device_name).sessions), signature='s')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='a(ss)')
def GetDiscoveryLog(self, device_name):
    '''GetDiscoveryLog(hci s) → a(event s, client s): successful
    SetDiscoveryFilter/StartDiscovery/StopDiscovery calls in order, plus
    "ClientLeft" (a client with a session left the bus) and "PoweredOff"
    (a session ended by power-off), each with the client's unique name.'''
    return dbus.Array([dbus.Struct((dbus.String(e), dbus.String(c)))
                       for e, c in state._adapter_state(device_name).events], signature='(ss)')


@dbus.service.method(MOCK_IFACE, in_signature='sb', out_signature='')
def SetFilterEnforcement(self, device_name, enforce):
    '''SetFilterEnforcement(hci s, enforce b): false reports every advertiser
    whatever the filters (as when another client scans unfiltered).'''
    st = state._adapter_state(device_name)
    st.enforce_filters = bool(enforce)
    if st.sessions:
        adapter1._advertise_all_soon(st)


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def StallScan(self, device_name, until):
    '''StallScan(hci s, until s): the controller's scan stops behind
    bluetoothd's back (theengs/gateway #264, bluez #1126): Discovering stays
    true and no advertisement is reported any more, until the discovery is
    started again from none (until = "restart") or the adapter is powered
    off and on (until = "power-cycle": a restart does not help).'''
    st = state._adapter_state(device_name)
    if str(until) not in ('restart', 'power-cycle'):
        raise common._mock_err('InvalidArgs', 'until must be restart or power-cycle')
    st.stalled = str(until)


@dbus.service.method(MOCK_IFACE, in_signature='suu', out_signature='uu')
def EmitAdvertisementBurst(self, device_name, n_devices, n_updates):
    '''EmitAdvertisementBurst(hci s, n_devices u, n_updates u) → (added u, updates u)

    Throughput load: n_devices synthetic advertisers (random static addresses
    C0:00:00:XX:XX:XX, names "burst-NNNNN", RSSI -60, ManufacturerData
    {0xffff: index as 4 bytes}, flags 06), discovered at once (InterfacesAdded
    for those not yet on the bus), then n_updates PropertiesChanged
    round-robin over them, each with a new RSSI (-40 - i % 50) and
    ManufacturerData {0xffff: index(4 bytes) + i(4 bytes)}. Filters are not
    applied. The adapter must be discovering. Signals are queued in order
    before the reply.'''
    st = state._adapter_state(device_name)
    if not st.sessions:
        raise common._mock_err('NotDiscovering', f'{device_name} is not discovering')
    adapter1._advertise_pending_now(st)
    n_devices = int(n_devices)
    n_updates = int(n_updates)
    if n_devices == 0 and n_updates > 0:
        raise common._mock_err('InvalidArgs', 'updates need devices')
    bus = common._bus()
    advs = []
    added = 0
    for i in range(n_devices):
        address = 'C0:00:00:%02X:%02X:%02X' % ((i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
        adv = st.advertisers.get(address)
        if adv is None:
            adv = state.Advertiser(st, address, {
                'AddressType': dbus.String('random'),
                'Name': dbus.String('burst-%05d' % i),
                'RSSI': dbus.Int16(-60),
                'ManufacturerData': dbus.Dictionary(
                    {dbus.UInt16(0xffff): common._ay(struct.pack('>I', i), variant_level=1)},
                    signature='qv'),
                'AdvertisingFlags': common._ay(b'\x06'),
            }, False)
            st.advertisers[address] = adv
        advs.append(adv)
        if adv.path not in mockobject.objects:
            adapter1.create_device(adv)
            added += 1
    common.log(f'EmitAdvertisementBurst {device_name}: {added} devices added')
    fast = wire._fast_emitter()
    body, rssi_off, md_off = wire._rssi_md_body(0xffff)
    headers = {}
    for i in range(n_updates):
        d = i % n_devices
        adv = advs[d]
        rssi = -40 - i % 50
        payload = struct.pack('>II', d, i)
        dp = mockobject.objects[adv.path].props[common.DEVICE_IFACE]
        if fast is not None:
            h = headers.get(d)
            if h is None:
                h = headers[d] = wire._signal_header(adv.path, common.PROPS_IFACE, 'PropertiesChanged',
                                                'sa{sv}as', len(body))
            buf = bytearray(h + body)
            struct.pack_into('<h', buf, len(h) + rssi_off, rssi)
            buf[len(h) + md_off:len(h) + md_off + 8] = payload
            fast.send_raw(buf)
        if fast is None or i + n_devices >= n_updates:
            # (fast path: device state is only written for the last round)
            v_rssi = dbus.Int16(rssi)
            md = dbus.Dictionary({dbus.UInt16(0xffff): dbus.ByteArray(payload, variant_level=1)},
                                 signature='qv')
            adv.props['RSSI'] = v_rssi
            adv.props['ManufacturerData'] = md
            dp['RSSI'] = v_rssi
            dp['ManufacturerData'] = md
            if fast is None:
                msg = dbus.lowlevel.SignalMessage(adv.path, common.PROPS_IFACE, 'PropertiesChanged')
                msg.append(common.DEVICE_IFACE, {'RSSI': v_rssi, 'ManufacturerData': md}, [],
                           signature='sa{sv}as')
                bus.send_message(msg)
    common.log(f'EmitAdvertisementBurst {device_name}: {added} added, {n_updates} updates')
    return (dbus.UInt32(added), dbus.UInt32(n_updates))


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='s')
def StandInVersion(self):
    '''StandInVersion() → s: identifies this template (readiness probe).'''
    return 'bluez_standin 1'


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import adapter1, advertisement_monitor_manager1, bluez_object, common, device1, gatt_client, le_advertising_manager1, state, wire  # noqa: E402 pylint: disable=wrong-import-position
