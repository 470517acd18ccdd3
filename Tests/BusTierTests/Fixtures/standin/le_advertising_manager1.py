'''org.bluez.LEAdvertisingManager1: advertisements registered by clients,
parsed as src/advertising.c does, and heard by the stand-in's other
adapters.'''

import dbus
import dbus.lowlevel
import dbus.service
from gi.repository import GLib
from dbusmock import mockobject


# -- LE advertising (src/advertising.c) --------------------------------------------

ADV_INCLUDES = ('tx-power', 'appearance', 'local-name')   # includes[], all supported here
AD_TYPE_REJECT = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0d, 0x0e,
                  0x0f, 0x10, 0x11, 0x12, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
                  0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x27, 0x28, 0x29, 0x2a,
                  0x2b, 0x3d, 0xff}   # src/shared/ad.c type_reject_list
AD_FLAG_LIMITED, AD_FLAG_GENERAL, AD_FLAG_NO_BREDR = 0x01, 0x02, 0x04


class LocalAdvertisement:
    '''struct btd_adv_client'''

    def __init__(self, st, owner, path, instance, ok, err):
        self.st = st
        self.owner = owner
        self.path = path
        self.instance = instance
        self.reg = (ok, err)
        self.state = 'pending'
        self.props = {}                 # the proxy's properties (GetAll, PropertiesChanged)
        self.parsed = None
        self.to_id = None               # Timeout
        self.disc_to_id = None          # DiscoverableTimeout
        self.match = None
        self.address = None             # what others hear (set when published)
        self.address_type = 'public'
        self.lengths = (0, 0, 0, 0)     # adv data, its maximum, scan response, its maximum

    def watch(self):
        self.match = common._bus().add_signal_receiver(
            self._props_changed, signal_name='PropertiesChanged', dbus_interface=common.PROPS_IFACE,
            bus_name=self.owner, path=self.path, byte_arrays=True)

    def unwatch(self):
        if self.match is not None:
            self.match.remove()
            self.match = None

    def _props_changed(self, interface, changed, invalidated):
        if str(interface) != peripheral.LE_ADV_IFACE:
            return
        for k, v in changed.items():
            self.props[str(k)] = v
        for k in invalidated:
            self.props.pop(str(k), None)
        if self.state == 'registered':
            # properties_changed: the property is parsed again and the
            # advertisement refreshed (kept as it was if it no longer parses)
            parsed, _ = parse_advertisement(self, start_timers=False)
            if parsed is not None and refresh_advertisement(self, parsed) is None:
                self.parsed = parsed
                publish_advertisement(self)

    def clear_timers(self):
        for attr in ('to_id', 'disc_to_id'):
            t = getattr(self, attr)
            if t is not None:
                GLib.source_remove(t)
                setattr(self, attr, None)


def _adv_instances_changed(st):
    '''The getters: ActiveInstances = clients, SupportedInstances = max_ads -
    clients (what is left). values only; signals where bluetoothd emits them.'''
    p = st.obj.props[common.LE_ADV_MANAGER_IFACE]
    p['ActiveInstances'] = dbus.Byte(len(st.ads))
    p['SupportedInstances'] = dbus.Byte(max(st.max_ads - len(st.ads), 0))


def _adv_emit_instances(st):
    p = st.obj.props[common.LE_ADV_MANAGER_IFACE]
    common.emit_props_changed(st.path, common.LE_ADV_MANAGER_IFACE,
                       {'SupportedInstances': p['SupportedInstances'],
                        'ActiveInstances': p['ActiveInstances']})


def adv_register(st, sender, path, ok, err):
    '''register_advertisement + client_create'''
    if any(a.owner == sender and a.path == path for a in st.ads):
        raise common._err(common.ERR + 'AlreadyExists', 'Already Exists')
    if not path.startswith('/'):
        raise common._err(common.ERR + 'Failed', 'Failed to register advertisement')
    instance = next((i for i in range(1, st.max_ads + 1) if i not in st.adv_instances), 0)
    if not instance:
        raise common._err(common.ERR + 'NotPermitted', 'Maximum advertisements reached')
    ad = LocalAdvertisement(st, sender, path, instance, ok, err)
    st.adv_instances.add(instance)
    st.ads.append(ad)
    _adv_instances_changed(st)
    clients._watch_clients()
    ad.watch()
    peripheral._record_call(path, 'GetAll')

    def reply(props):
        ad.props = {str(k): v for k, v in props.items()}
        adv_proxy_added(ad)

    def error(e):
        # get_all_properties_reply: an error still adds the proxy, with no
        # properties: an empty broadcast advertisement gets registered
        common.log(f'GetAll {sender}{path}: {e.get_dbus_name()}')
        adv_proxy_added(ad)

    common._bus().call_async(sender, path, common.PROPS_IFACE, 'GetAll', 's', (peripheral.LE_ADV_IFACE,),
                      reply, error, timeout=peripheral.DBUS_DEFAULT_TIMEOUT, byte_arrays=True)


def adv_proxy_added(ad):
    '''client_proxy_added → parse_advertisement → refresh → add_adv_callback'''
    if ad not in ad.st.ads or ad.reg is None:
        return
    parsed, error = parse_advertisement(ad, start_timers=True)
    if parsed is not None:
        error = refresh_advertisement(ad, parsed)
        if error and peripheral.SERVER['adv_commands'] == 'extended':
            # add_adv_params_callback fails → add_client_complete
            error = 'Failed to register advertisement'
    if error:
        common.log(f'advertisement {ad.owner}{ad.path} refused: {error}')
        ok, err = ad.reg
        ad.reg = None
        free_advertisement(ad)
        err(common._err(common.ERR + 'Failed', error if error.startswith('Failed') else
                 'Failed to parse advertisement.'))
        return
    ad.parsed = parsed
    ad.state = 'registered'
    _adv_emit_instances(ad.st)
    publish_advertisement(ad)
    ok, _err_cb = ad.reg
    ad.reg = None
    common.log(f'Advertisement registered: {ad.owner}{ad.path} (instance {ad.instance})')
    ok()


def _ay_value(v):
    if isinstance(v, (bytes, dbus.ByteArray)):
        return bytes(v)
    if isinstance(v, dbus.Array) and v.signature == 'y':
        return common._bytes(v)
    return None


def parse_advertisement(ad, start_timers):
    '''parse_advertisement with the parsers in bluetoothd's order →
    (parsed dict, None) or (None, "Failed to parse advertisement.")'''
    fail = (None, 'Failed to parse advertisement.')
    p = ad.props
    out = {'type': 'broadcast', 'uuids': [], 'solicit': [], 'manufacturer': {},
           'service_data': {}, 'includes': [], 'name': None, 'appearance': None,
           'timeout': 0, 'data': {}, 'flags': None, 'discoverable_to': None}
    adapter_discoverable = bool(ad.st.obj.props[common.ADAPTER_IFACE]['Discoverable'])

    def set_flags(flags):
        if not flags:
            out['flags'] = None
            return
        # adapters of the stand-in do BR/EDR: NO_BREDR only when the adapter
        # is not discoverable but the instance is
        if flags & (AD_FLAG_GENERAL | AD_FLAG_LIMITED) and not adapter_discoverable:
            flags |= AD_FLAG_NO_BREDR
        out['flags'] = flags

    def uuid_list(v):
        if not isinstance(v, dbus.Array):
            return None
        res = []
        for x in v:
            if not isinstance(x, dbus.String):
                break
            u = peripheral.bt_uuid(x)
            if u is None:
                return None
            res.append(u)
        return res

    if 'Type' in p:
        if not isinstance(p['Type'], dbus.String) or str(p['Type']) not in ('broadcast', 'peripheral'):
            return fail
        out['type'] = str(p['Type'])
    for key, slot in (('ServiceUUIDs', 'uuids'), ('SolicitUUIDs', 'solicit')):
        if key in p:
            lst = uuid_list(p[key])
            if lst is None:
                return fail
            out[slot] = lst
    if 'ManufacturerData' in p:
        v = p['ManufacturerData']
        if not isinstance(v, dbus.Dictionary):
            return fail
        for k, data in v.items():
            data = _ay_value(data)
            if not isinstance(k, int) or data is None or len(data) > 31 - 2 - 2:
                return fail
            out['manufacturer'][int(k) & 0xffff] = data
    if 'ServiceData' in p:
        v = p['ServiceData']
        if not isinstance(v, dbus.Dictionary):
            return fail
        for k, data in v.items():
            u = peripheral.bt_uuid(k)
            data = _ay_value(data)
            if u is None or data is None or len(data) > 31 - 2 - u[0] // 8:
                return fail
            out['service_data'][u] = data
    if 'Includes' in p:
        v = p['Includes']
        if not isinstance(v, dbus.Array):
            return fail
        for x in v:
            if not isinstance(x, dbus.String):
                break
            if str(x) in ADV_INCLUDES and str(x) not in out['includes']:
                out['includes'].append(str(x))      # unknown ones are skipped
    if 'LocalName' in p:
        if not isinstance(p['LocalName'], dbus.String) or 'local-name' in out['includes']:
            return fail         # "Local name already included"
        out['name'] = str(p['LocalName']) or None
    if 'Appearance' in p:
        if not isinstance(p['Appearance'], dbus.UInt16) or 'appearance' in out['includes']:
            return fail         # "Appearance already included"
        out['appearance'] = int(p['Appearance'])
    if 'Duration' in p and not isinstance(p['Duration'], dbus.UInt16):
        return fail
    if 'Timeout' in p:
        if not isinstance(p['Timeout'], dbus.UInt16):
            return fail
        out['timeout'] = int(p['Timeout'])
    if 'Data' in p:
        v = p['Data']
        if not isinstance(v, dbus.Dictionary):
            return fail
        for k, data in v.items():
            data = _ay_value(data)
            if not isinstance(k, int) or data is None or len(data) > 29 or int(k) in AD_TYPE_REJECT:
                return fail
            out['data'][int(k)] = data
    if 'Discoverable' in p:
        if not isinstance(p['Discoverable'], dbus.Boolean):
            return fail
        set_flags(AD_FLAG_GENERAL if p['Discoverable'] else 0)
    if 'DiscoverableTimeout' in p:
        if not isinstance(p['DiscoverableTimeout'], dbus.UInt16):
            return fail
        out['discoverable_to'] = int(p['DiscoverableTimeout'])
    if 'SecondaryChannel' in p:
        return fail     # 1M/2M/Coded: not in the stand-in controller's supported flags
    # MinInterval, MaxInterval, TxPower: only with bluetoothd --experimental
    if out['flags'] is not None:
        if out['type'] == 'broadcast':
            common.log('Broadcast cannot set flags')
            return fail
        if out['discoverable_to'] is not None:
            set_flags(AD_FLAG_LIMITED)
    else:
        out['discoverable_to'] = None       # ignored if not discoverable
    if out['timeout'] and out['discoverable_to'] is not None and \
            out['timeout'] < out['discoverable_to']:
        common.log('DiscoverableTimeout > Timeout')
        return fail
    if start_timers:
        ad.clear_timers()
        if out['timeout'] > 0:
            ad.to_id = GLib.timeout_add(out['timeout'] * 1000, _adv_timeout, ad)
        if out['discoverable_to'] is not None:
            ad.disc_to_id = GLib.timeout_add(out['discoverable_to'] * 1000,
                                             _adv_discoverable_timeout, ad)
    return out, None


def _adv_flags(ad, parsed):
    '''get_adv_flags → set of MGMT flags by name'''
    flags = set()
    if parsed['type'] == 'peripheral':
        flags.add('connectable')
        if ad.st.obj.props[common.ADAPTER_IFACE]['Discoverable'] and parsed['flags'] is None:
            flags.add('discov')
    flags.update(parsed['includes'])
    return flags


def _uuid_list_length(uuids):
    '''src/shared/ad.c uuid_list_length'''
    sizes = {u[0] for u in uuids}
    return sum(u[0] // 8 for u in uuids) + 2 * len(sizes)


def adv_data_length(parsed, flags):
    '''bt_ad_generate's calculate_length (+ generate_adv_data's appearance)'''
    n = _uuid_list_length(parsed['uuids']) + _uuid_list_length(parsed['solicit'])
    n += sum(2 + 2 + len(d) for d in parsed['manufacturer'].values())
    n += sum(2 + u[0] // 8 + len(d) for u, d in parsed['service_data'].items())
    if 'appearance' in flags or parsed['appearance'] is not None:
        n += 4
    n += sum(2 + len(d) for d in parsed['data'].values())
    if parsed['flags'] is not None:
        n += 3
    return n


def refresh_advertisement(ad, parsed):
    '''refresh_extended_adv/add_adv_params_callback (the kernel's
    tlv_data_max_len: 31 − 3 for kernel-managed flags − 3 for tx-power;
    scan response 31 − 4 for appearance) or refresh_legacy_adv
    (calc_max_adv_len: 31 − 3 tx-power − 3 flags − 4 appearance). → error or None'''
    flags = _adv_flags(ad, parsed)
    length = adv_data_length(parsed, flags)
    if length > 31:
        return 'Advertising data too long or couldn\'t be generated.'
    managed = 'discov' in flags
    scan = min(2 + len(parsed['name'].encode()), 31) if parsed['name'] else 0
    if peripheral.SERVER['adv_commands'] == 'extended':
        max_adv = 31 - (3 if managed else 0) - (3 if 'tx-power' in flags else 0)
        max_scan = 31 - (4 if 'appearance' in flags else 0)
    else:
        max_adv = 31 - (3 if 'tx-power' in flags else 0) - (3 if managed else 0) - \
            (4 if 'appearance' in flags else 0)
        max_scan = 31
    ad.lengths = (length, max_adv, scan, max_scan)
    if length > max_adv:
        return 'Advertising data too long or couldn\'t be generated.'
    if scan > max_scan:
        return 'Scan data couldn\'t be generated.'
    return None


def _adv_timeout(ad):
    '''client_timeout: Release() and removal'''
    ad.to_id = None
    common.log(f'advertisement {ad.owner}{ad.path}: Timeout, released')
    peripheral._record_call(ad.path, 'Release')
    peripheral._no_reply_call(ad.owner, ad.path, peripheral.LE_ADV_IFACE, 'Release')
    client_remove(ad)
    return False


def _adv_discoverable_timeout(ad):
    '''client_discoverable_timeout: the Flags AD goes, the rest stays'''
    ad.disc_to_id = None
    if ad.parsed is not None:
        ad.parsed['flags'] = None
        publish_advertisement(ad)
    return False


def free_advertisement(ad):
    '''client_free (a pending registration gets "Failed to complete registration")'''
    ad.clear_timers()
    ad.unwatch()
    if ad in ad.st.ads:
        ad.st.ads.remove(ad)
    ad.st.adv_instances.discard(ad.instance)
    _adv_instances_changed(ad.st)
    if ad.reg is not None:
        _ok, err = ad.reg
        ad.reg = None
        err(common._err(common.ERR + 'Failed', 'Failed to complete registration'))
    unpublish_advertisement(ad)
    ad.state = 'removed'


def client_remove(ad):
    '''client_remove: unregistered, owner gone, or Timeout'''
    free_advertisement(ad)
    _adv_emit_instances(ad.st)


def adv_unregister(st, sender, path):
    '''unregister_advertisement (no Release)'''
    ad = next((a for a in st.ads if a.owner == sender and a.path == path), None)
    if ad is None:
        raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')
    client_remove(ad)


def _advertised_props(ad):
    '''What a scanning adapter's Device1 shows for this advertisement (AD
    and, with bluetoothd's active scan, the scan response).'''
    p = ad.parsed
    flags = _adv_flags(ad, p)
    props = {'AddressType': dbus.String(ad.address_type), 'RSSI': dbus.Int16(peripheral.ADV_RSSI)}
    name = p['name']
    if name:
        # serialize_name: a name that does not fit is shortened (to 29 bytes)
        name = name.encode()[:29].decode('utf-8', 'ignore')
    elif 'local-name' in flags:
        # the kernel's eir_append_local_name: complete if ≤ 10 bytes, else shortened
        name = str(ad.st.obj.props[common.ADAPTER_IFACE]['Alias']).encode()[:10].decode('utf-8', 'ignore')
    if name:
        props['Name'] = dbus.String(name)
    if p['uuids']:
        props['UUIDs'] = dbus.Array([u[1] for u in p['uuids']], signature='s')
    if p['manufacturer']:
        props['ManufacturerData'] = dbus.Dictionary(
            {dbus.UInt16(k): common._ay(v, variant_level=1) for k, v in p['manufacturer'].items()},
            signature='qv')
    if p['service_data']:
        props['ServiceData'] = dbus.Dictionary(
            {dbus.String(u[1]): common._ay(v, variant_level=1) for u, v in p['service_data'].items()},
            signature='sv')
    if 'appearance' in flags or p['appearance'] is not None:
        props['Appearance'] = dbus.UInt16(p['appearance'] or 0)
    if 'tx-power' in flags:
        props['TxPower'] = dbus.Int16(peripheral.ADV_TX_POWER)
    ad_flags = p['flags']
    if ad_flags is None and 'discov' in flags:
        ad_flags = AD_FLAG_GENERAL          # the kernel adds Flags for MGMT_ADV_FLAG_DISCOV
    if ad_flags is not None:
        props['AdvertisingFlags'] = common._ay(bytes([ad_flags]))
    return props


def publish_advertisement(ad):
    '''The other adapters of the stand-in hear it: a connectable
    ("peripheral") one from the adapter's public address, a broadcast one
    from a non-resolvable private address (the kernel's choice for
    non-connectable advertising without privacy).'''
    connectable = ad.parsed['type'] == 'peripheral'
    if ad.address is None:
        if connectable:
            ad.address = str(ad.st.obj.props[common.ADAPTER_IFACE]['Address']).upper()
            ad.address_type = 'public'
        else:
            import random  # pylint: disable=import-outside-toplevel
            b = [random.randrange(256) for _ in range(6)]
            b[0] &= 0x3f        # non-resolvable private: top two bits 00
            ad.address = ':'.join('%02X' % x for x in b)
            ad.address_type = 'random'
    props = _advertised_props(ad)
    for other in state.ADAPTERS.values():
        if other is ad.st:
            continue
        adv = other.advertisers.get(ad.address)
        if adv is None:
            adv = state.Advertiser(other, ad.address, props, connectable)
            other.advertisers[adv.address] = adv
        else:
            for key in control_radio.ADVERTISER_KEYS:
                if key not in props:
                    adv.props.pop(key, None)
            adv.props.update(props)
            adv.connectable = connectable
        adv.in_range = True
        adv.local_ad = ad
        if other.sessions:
            adapter1.discover(adv)


def unpublish_advertisement(ad):
    '''Its advertising stops: no more reports; a discovered Device1 that is
    not connected, paired or trusted goes after TemporaryTimeout.'''
    if ad.address is None:
        return
    for other in state.ADAPTERS.values():
        adv = other.advertisers.get(ad.address)
        if adv is None or getattr(adv, 'local_ad', None) is not ad:
            continue
        adv.in_range = False
        adv.local_ad = None
        GLib.timeout_add(int(peripheral.SERVER['temporary_timeout'] * 1000), _temporary_expired, adv)


def _temporary_expired(adv):
    if adv.in_range or state.ADAPTERS.get(adv.adapter.name) is not adv.adapter:
        return False
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, device1.DeviceObject):
        p = dev.props[common.DEVICE_IFACE]
        if dev.connected or p['Paired'] or p['Trusted']:
            return False
        device1.remove_device(dev)
    if adv.adapter.advertisers.get(adv.address) is adv:
        del adv.adapter.advertisers[adv.address]
    return False


def server_client_gone(name):
    '''The owner left the bus: its applications (client_disconnect_cb) and
    its registered advertisements (client_disconnect_cb, set once the
    registration completed) go.'''
    for st in state.ADAPTERS.values():
        for app in [a for a in st.apps if a.owner == name]:
            common.log(f'client {name} left the bus: application {app.path} removed')
            gatt_manager1.remove_app(app)
        for ad in [a for a in st.ads if a.owner == name and a.state == 'registered']:
            common.log(f'client {name} left the bus: advertisement {ad.path} removed')
            client_remove(ad)


def server_adapter_removed(st):
    '''btd_adv_manager_destroy (client_destroy: Release, then free) and
    btd_gatt_database_destroy (applications freed without a call).'''
    for ad in list(st.ads):
        peripheral._record_call(ad.path, 'Release')
        peripheral._no_reply_call(ad.owner, ad.path, peripheral.LE_ADV_IFACE, 'Release')
        free_advertisement(ad)
    for app in list(st.apps):
        if app.reg is not None:
            app.reg = None
        gatt_manager1.remove_app(app)
    for c in st.centrals.values():
        c.connected = False


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import adapter1, clients, common, control_radio, device1, gatt_manager1, peripheral, state  # noqa: E402 pylint: disable=wrong-import-position
