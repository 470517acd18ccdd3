'''Test-control RPC (org.freedesktop.DBus.Mock on "/"), the peripheral
role: simulated remote centrals and what the server side holds.'''

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import MOCK_IFACE, mockobject


# -- Mock control API for the peripheral role ---------------------------------------

@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}', out_signature='o')
def RemoteConnect(self, device_name, address, options):
    '''RemoteConnect(hci s, central s, options a{sv}) → o

    A remote central connects to the adapter (LE): its Device1 appears
    under the adapter (Connected true) and its path is the "device" option
    of the calls made to applications. options: AddressType s ("public",
    default, or "random"), MTU q (the exchanged ATT MTU, default 517: both
    sides BlueZ), Security s ("low", default: unencrypted; "medium":
    encrypted; "high": encrypted, authenticated; "fips": LE Secure
    Connections), Name s.'''
    st = state._adapter_state(device_name)
    if not common._is_address(address):
        raise common._mock_err('InvalidArgs', f'bad address {address}')
    if not st.obj.props[common.ADAPTER_IFACE]['Powered']:
        raise common._mock_err('NotPowered', f'{device_name} is off')
    address = str(address).upper()
    addr_type = str(options.get('AddressType', 'public'))
    mtu = int(options.get('MTU', 517))
    security = str(options.get('Security', 'low'))
    if addr_type not in ('public', 'random') or not 23 <= mtu <= 517 or security not in peripheral.SECURITY:
        raise common._mock_err('InvalidArgs', 'AddressType public|random, MTU 23…517, '
                        'Security low|medium|high|fips')
    old = st.centrals.get(address)
    if old is not None and old.connected:
        raise common._mock_err('AlreadyConnected', f'{address} is connected to {device_name}')
    central = att_server.RemoteCentral(st, address, addr_type, mtu, peripheral.SECURITY[security])
    if 'Name' in options:
        central.adv.props['Name'] = dbus.String(options['Name'])
    st.centrals[address] = central
    dev = mockobject.objects.get(central.path)
    if not isinstance(dev, device1.DeviceObject):
        dev = adapter1.create_device(central.adv, with_rssi=False)
    central.connected = True
    if not dev.connected:
        device1.connect_device(dev)
    common.log(f'RemoteConnect {address} → {device_name}')
    return dbus.ObjectPath(central.path)


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def RemoteDisconnect(self, device_name, address):
    '''RemoteDisconnect(hci s, central s): the central drops the link. Its
    subscriptions end as bluetoothd ends them for an unbonded device (each
    set CCC is cleared: StopNotify after the last subscriber); requests
    still waiting for an application fail with Mock.Error.NotConnected.'''
    att_server.remote_disconnect(att_server._central(device_name, address))


@dbus.service.method(MOCK_IFACE, in_signature='sssq', out_signature='ay',
                     async_callbacks=('ok', 'err'))
def RemoteRead(self, device_name, address, attribute, offset, ok=None, err=None):
    '''RemoteRead(hci s, central s, attribute s, offset q) → ay

    The central sends one ATT Read Request (offset 0) or Read Blob Request.
    attribute: the object path of an application's characteristic or
    descriptor, or its UUID (first registered match). bluetoothd's ATT
    server checks the permissions first (a characteristic without read
    flags → Att.ReadNotPermitted, encrypt-read on a "low" link →
    Att.InsufficientEncryption, ...) and then calls the application's
    ReadValue({device, offset (if not 0), link "LE", mtu}); the answer is cut
    to MTU − 1 bytes. An application error comes back as the ATT error
    bluetoothd maps it to (dbus_error_to_att_ecode), the application's
    error name and message in the error message. No answer within the
    central's ATT timeout (SetAttTimeout) → Att.Timeout and the central
    disconnects.'''
    try:
        central = att_server._central(device_name, address)
        att_server.remote_read(central, att_server._server_attr(central.st, attribute), int(offset), ok, err)
    except dbus.exceptions.DBusException as e:
        err(e)


@dbus.service.method(MOCK_IFACE, in_signature='sssays', out_signature='',
                     async_callbacks=('ok', 'err'))
def RemoteWrite(self, device_name, address, attribute, value, kind, ok=None, err=None):
    '''RemoteWrite(hci s, central s, attribute s, value ay, type s)

    The central sends an ATT Write Request (type "request") or Write
    Command ("command"; no response: its failures are silent and the call
    returns at once). Permissions are checked first (Att.WriteNotPermitted
    ...), then the application's WriteValue(value, {device, link "LE",
    mtu}) is called — bluetoothd 5.66 passes no "type" option. For a
    characteristic with the write-without-response flag bluetoothd sends
    every WriteValue without expecting a reply and the request succeeds at
    once, whatever the application answers. Errors as RemoteRead's.'''
    try:
        if str(kind) not in ('request', 'command'):
            raise common._mock_err('InvalidArgs', 'type must be "request" or "command"')
        central = att_server._central(device_name, address)
        data = common._bytes(value)
        if len(data) > central.mtu - 3:
            raise common._mock_err('InvalidArgs', f'{len(data)} bytes do not fit one ATT PDU '
                            f'(MTU {central.mtu} − 3); long writes are not modelled')
        att_server.remote_write(central, att_server._server_attr(central.st, attribute), data, str(kind), ok, err)
    except dbus.exceptions.DBusException as e:
        err(e)


@dbus.service.method(MOCK_IFACE, in_signature='ssss', out_signature='')
def RemoteSubscribe(self, device_name, address, characteristic, mode):
    '''RemoteSubscribe(hci s, central s, characteristic s, mode s)

    The central writes the characteristic's CCC: "notify" (0x0001) or
    "indicate" (0x0002). As gatt_ccc_write_cb/ccc_write_cb: the same value
    again does nothing; a mode the characteristic lacks →
    Att.CccImproperlyConfigured; every enabling write calls the
    application's StartNotify (no reply awaited, errors ignored) — for each
    subscribing central, and again on a switch between notify and indicate.
    Values received from then on: RemoteNotifications.'''
    central = att_server._central(device_name, address)
    if str(mode) not in ('notify', 'indicate'):
        raise common._mock_err('InvalidArgs', 'mode must be "notify" or "indicate"')
    att_server.remote_ccc_write(central, att_server._server_attr(central.st, characteristic),
                     1 if str(mode) == 'notify' else 2)


@dbus.service.method(MOCK_IFACE, in_signature='sss', out_signature='')
def RemoteUnsubscribe(self, device_name, address, characteristic):
    '''RemoteUnsubscribe(hci s, central s, characteristic s): the central
    writes 0 to the CCC; StopNotify (no reply awaited) when the last
    enabled subscription ends.'''
    central = att_server._central(device_name, address)
    att_server.remote_ccc_write(central, att_server._server_attr(central.st, characteristic), 0)


@dbus.service.method(MOCK_IFACE, in_signature='sss', out_signature='aay')
def RemoteNotifications(self, device_name, address, characteristic):
    '''RemoteNotifications(hci s, central s, characteristic s) → aay: the
    notifications/indications the central received since it last
    subscribed, in order (each PropertiesChanged(Value) the application
    emitted, cut to MTU − 3). Indications are confirmed at once: bluetoothd
    then calls the application's Confirm().'''
    st = state._adapter_state(device_name)
    central = st.centrals.get(str(address).upper())
    if central is None:
        raise common._mock_err('NoSuchCentral', f'no central {address} on {device_name}')
    chrc = att_server._server_attr(st, characteristic)
    return dbus.Array([common._ay(v) for v in central.received.get(chrc, [])], signature='ay')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssss)')
def RegisteredApplications(self):
    '''RegisteredApplications() → a(hci s, owner s, path s, state s): GATT
    applications bluetoothd holds, state "pending" (RegisterApplication
    not answered yet) or "registered".'''
    return dbus.Array([dbus.Struct((dbus.String(st.name), dbus.String(a.owner),
                                    dbus.String(a.path), dbus.String(a.state)))
                       for st in state.ADAPTERS.values() for a in st.apps], signature='(ssss)')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssss)')
def RegisteredAdvertisements(self):
    '''RegisteredAdvertisements() → a(hci s, owner s, path s, state s):
    advertisements bluetoothd holds (each holds an instance), state
    "pending" or "registered".'''
    return dbus.Array([dbus.Struct((dbus.String(st.name), dbus.String(a.owner),
                                    dbus.String(a.path), dbus.String(a.state)))
                       for st in state.ADAPTERS.values() for a in st.ads], signature='(ssss)')


@dbus.service.method(MOCK_IFACE, in_signature='so', out_signature='a{sv}')
def AdvertisementInfo(self, device_name, path):
    '''AdvertisementInfo(hci s, path o) → a{sv} of a registered
    advertisement (any owner): Type s, Instance y, Address s, AddressType s
    (what other adapters hear), AdvDataLength y and MaxAdvDataLength y
    (bluetoothd's AD and its limit), ScanResponseLength y, Includes as,
    Advertised a{sv} (the Device1 properties a scanner gets).'''
    st = state._adapter_state(device_name)
    ad = next((a for a in st.ads if a.path == str(path) and a.parsed is not None), None)
    if ad is None:
        raise common._mock_err('NoSuchAdvertisement', f'{path} is not registered on {device_name}')
    return dbus.Dictionary({
        'Type': dbus.String(ad.parsed['type']), 'Instance': dbus.Byte(ad.instance),
        'Address': dbus.String(ad.address or ''), 'AddressType': dbus.String(ad.address_type),
        'AdvDataLength': dbus.Byte(ad.lengths[0]), 'MaxAdvDataLength': dbus.Byte(ad.lengths[1]),
        'ScanResponseLength': dbus.Byte(ad.lengths[2]),
        'Includes': dbus.Array(ad.parsed['includes'], signature='s'),
        'Advertised': dbus.Dictionary(le_advertising_manager1._advertised_props(ad), signature='sv'),
    }, signature='sv')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='a(qsss)')
def LocalDatabase(self, device_name):
    '''LocalDatabase(hci s) → a(handle q, kind s, uuid s, path s): the
    adapter's GATT database as applications built it (kind service,
    characteristic (value handle), ccc, cep, descriptor; bluetoothd's own
    CCC/CEP have the characteristic's path).'''
    st = state._adapter_state(device_name)
    rows = []
    for app in st.apps:
        if app.state != 'registered':
            continue
        for svc in app.services:
            if not svc.active:
                continue
            u = gatt_manager1._parse_gatt_uuid(app.objects.get(svc.path, {}).get(common.GATT_SERVICE_IFACE, {}))
            rows.append((svc.handle, 'service', u[1] if u else '', svc.path))
            for c in svc.chrcs:
                rows.append((c.handle, 'characteristic', c.uuid, c.path))
                if c.ccc_handle:
                    rows.append((c.ccc_handle, 'ccc', common.canonical_uuid('2902'), c.path))
                if c.cep_handle:
                    rows.append((c.cep_handle, 'cep', common.canonical_uuid('2900'), c.path))
                for d in c.descs:
                    rows.append((d.handle, 'descriptor', d.uuid, d.path))
    rows.sort()
    return dbus.Array([dbus.Struct((dbus.UInt16(h), dbus.String(k), dbus.String(u), dbus.String(p)))
                       for h, k, u, p in rows], signature='(qsss)')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssa{sv})')
def ServerCalls(self):
    '''ServerCalls() → a(path s, method s, options a{sv}): the calls the
    stand-in, as bluetoothd, made to applications and advertisements, in
    order: GetManagedObjects, GetAll, "Set Handle", ReadValue, WriteValue
    (with their options), StartNotify, StopNotify, Confirm, Release.'''
    return dbus.Array([dbus.Struct((dbus.String(p), dbus.String(m),
                                    dbus.Dictionary(o, signature='sv')))
                       for p, m, o in peripheral.SERVER_CALLS], signature='(ssa{sv})')


@dbus.service.method(MOCK_IFACE, in_signature='d', out_signature='')
def SetAttTimeout(self, seconds):
    '''SetAttTimeout(seconds d): the remote centrals' ATT transaction
    timeout (30 s, as BlueZ's shared/att.c). bluetoothd itself waits 300 s
    for an application (gdbus METHOD_CALL_TIMEOUT).'''
    peripheral.SERVER['att_timeout'] = max(float(seconds), 0.001)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def SetAdvertisingCommands(self, mode):
    '''SetAdvertisingCommands(mode s): "extended" (default: kernels with
    MGMT Add Extended Advertising, as Debian 12's: a too-long advertisement
    fails "Failed to register advertisement") or "legacy" ("Failed to parse
    advertisement.", and appearance counted against the 31 bytes).'''
    if str(mode) not in ('extended', 'legacy'):
        raise common._mock_err('InvalidArgs', 'mode must be extended or legacy')
    peripheral.SERVER['adv_commands'] = str(mode)


@dbus.service.method(MOCK_IFACE, in_signature='sy', out_signature='')
def SetMaxAdvertisements(self, device_name, count):
    '''SetMaxAdvertisements(hci s, count y): the controller's advertising
    instances (manager->max_ads; 5 by default).'''
    st = state._adapter_state(device_name)
    st.max_ads = int(count)
    le_advertising_manager1._adv_instances_changed(st)
    le_advertising_manager1._adv_emit_instances(st)


@dbus.service.method(MOCK_IFACE, in_signature='d', out_signature='')
def SetTemporaryTimeout(self, seconds):
    '''SetTemporaryTimeout(seconds d): how long a discovered device of a
    stand-in advertisement that stopped stays (main.conf TemporaryTimeout, 30).'''
    peripheral.SERVER['temporary_timeout'] = max(float(seconds), 0.0)


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import adapter1, att_server, common, device1, gatt_manager1, le_advertising_manager1, peripheral, state  # noqa: E402 pylint: disable=wrong-import-position
