'''Test-control RPC (org.freedesktop.DBus.Mock on "/"), a remote device's
GATT database, notifications, injected errors and hung calls, pairing and
agents, the call log.'''

import struct

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import MOCK_IFACE, mockobject


@dbus.service.method(MOCK_IFACE, in_signature='sssb', out_signature='o')
def AddGattService(self, device_name, address, uuid, primary):
    '''AddGattService(hci s, address s, uuid s, primary b) → o

    Adds a service to the advertiser's GATT database. Objects are exported
    while the device is connected (after Connect, before ServicesResolved).'''
    adv = state._advertiser(device_name, address)
    c = common.canonical_uuid(uuid)
    if c is None:
        raise common._mock_err('InvalidArgs', f'bad UUID {uuid}')
    svc = state.GattServiceDef(adv, adv.alloc_handle(), c, bool(primary))
    adv.services.append(svc)
    _export_if_resolved(adv, svc)
    return dbus.ObjectPath(svc.path)


@dbus.service.method(MOCK_IFACE, in_signature='osasay', out_signature='o')
def AddGattCharacteristic(self, service, uuid, flags, value):
    '''AddGattCharacteristic(service o, uuid s, flags as, value ay) → o

    flags as in BlueZ: read, write, write-without-response, notify,
    indicate, reliable-write, encrypt-read, ...'''
    svc = control_radio._find_def(service)
    if not isinstance(svc, state.GattServiceDef):
        raise common._mock_err('InvalidArgs', f'{service} is not a service')
    c = common.canonical_uuid(uuid)
    if c is None:
        raise common._mock_err('InvalidArgs', f'bad UUID {uuid}')
    chrc = state.GattCharacteristicDef(svc, svc.advertiser.alloc_handle(2), c,
                                 control_radio._gatt_flags(flags), common._bytes(value))
    svc.characteristics.append(chrc)
    _export_if_resolved(svc.advertiser, svc)
    return dbus.ObjectPath(chrc.path)


@dbus.service.method(MOCK_IFACE, in_signature='osasay', out_signature='o')
def AddGattDescriptor(self, characteristic, uuid, flags, value):
    '''AddGattDescriptor(characteristic o, uuid s, flags as, value ay) → o'''
    chrc = control_radio._find_def(characteristic)
    if not isinstance(chrc, state.GattCharacteristicDef):
        raise common._mock_err('InvalidArgs', f'{characteristic} is not a characteristic')
    c = common.canonical_uuid(uuid)
    if c is None:
        raise common._mock_err('InvalidArgs', f'bad UUID {uuid}')
    desc = state.GattDescriptorDef(chrc, chrc.service.advertiser.alloc_handle(), c,
                             control_radio._gatt_flags(flags), common._bytes(value))
    chrc.descriptors.append(desc)
    _export_if_resolved(chrc.service.advertiser, chrc.service)
    return dbus.ObjectPath(desc.path)


def _export_if_resolved(adv, svc):
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, device1.DeviceObject) and dev.props[common.DEVICE_IFACE]['ServicesResolved']:
        gatt_client.export_service(svc)


@dbus.service.method(MOCK_IFACE, in_signature='oay', out_signature='u')
def EmitNotification(self, characteristic, value):
    '''EmitNotification(characteristic o, value ay) → u receivers

    The peripheral notifies: PropertiesChanged(Value) if some client did
    StartNotify, and/or the bytes on an AcquireNotify socket.'''
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, gatt_client.GattCharacteristicObject):
        raise common._mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    return dbus.UInt32(obj.notify(common._bytes(value)))


@dbus.service.method(MOCK_IFACE, in_signature='ouu', out_signature='u')
def EmitNotifications(self, characteristic, first, count):
    '''EmitNotifications(characteristic o, first u, count u) → u values sent

    The peripheral notifies count values as fast as it can, each a uint32 LE
    sequence number first, first+1, … (for loss and order checks).'''
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, gatt_client.GattCharacteristicObject):
        raise common._mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    for seq in range(int(first), int(first) + int(count)):
        obj.notify(struct.pack('<I', seq & 0xffffffff))
    return dbus.UInt32(count)


@dbus.service.method(MOCK_IFACE, in_signature='ou', out_signature='')
def DropSocketNotifications(self, characteristic, count):
    '''DropSocketNotifications(characteristic o, count u): the next count values
    are not written to the AcquireNotify socket — the silent loss bluetoothd
    causes when that socket is full or not yet ready.'''
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, gatt_client.GattCharacteristicObject):
        raise common._mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    obj.socket_drops = int(count)


@dbus.service.method(MOCK_IFACE, in_signature='oay', out_signature='')
def SetGattValue(self, attribute, value):
    '''SetGattValue(attribute o, value ay): the peripheral's value changes
    silently (seen on the next ReadValue).'''
    control_radio._find_def(attribute).value = common._bytes(value)


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='a(aysa{sv})')
def GetGattWrites(self, attribute):
    '''GetGattWrites(attribute o) → a(value ay, type s, options a{sv}):
    writes the peripheral received (WriteValue and AcquireWrite).'''
    out = []
    for data, options, kind in state.WRITES.get(str(attribute), []):
        opts = {str(k): v for k, v in options.items()}
        out.append(dbus.Struct((common._ay(data), dbus.String(kind),
                                dbus.Dictionary(opts, signature='sv'))))
    return dbus.Array(out, signature='(aysa{sv})')


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='')
def DropConnection(self, device):
    '''DropConnection(device o): the peripheral disconnects (remote side).'''
    dev = mockobject.objects.get(str(device))
    if not isinstance(dev, device1.DeviceObject):
        raise common._mock_err('NoSuchDevice', f'{device} is not a device')
    if dev.connected:
        device1.disconnect_device(dev)


@dbus.service.method(MOCK_IFACE, in_signature='ssss', out_signature='')
def InjectError(self, path, method, error_name, message):
    '''InjectError(path s, method s, error_name s, message s): the next and
    all later calls of method on path fail with that error; an empty
    error_name clears it. E.g. ("/org/bluez/hci0", "StartDiscovery",
    "org.bluez.Error.InProgress", "Operation already in progress").'''
    if error_name:
        state.INJECTED_ERRORS[(str(path), str(method))] = [str(error_name), str(message), None]
    else:
        state.INJECTED_ERRORS.pop((str(path), str(method)), None)


@dbus.service.method(MOCK_IFACE, in_signature='ssssu', out_signature='')
def InjectErrorTimes(self, path, method, error_name, message, count):
    '''InjectErrorTimes(path s, method s, error_name s, message s, count u):
    the next `count` calls of method on path fail with that error, later
    ones behave normally (e.g. Connect failing once with
    "le-connection-abort-by-local").'''
    if int(count) > 0:
        state.INJECTED_ERRORS[(str(path), str(method))] = [str(error_name), str(message), int(count)]


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='as')
def GetCalls(self, path):
    '''GetCalls(path s) → as: the BlueZ API methods called on path, in
    order (failed and unanswered calls included); path "" → "path method"
    for every call.'''
    if not str(path):
        return dbus.Array([f'{p} {m}' for p, m in state.CALLS], signature='s')
    return dbus.Array([m for p, m in state.CALLS if p == str(path)], signature='s')


@dbus.service.method(MOCK_IFACE, in_signature='ssu', out_signature='')
def DelayReply(self, path, method, milliseconds):
    '''DelayReply(path s, method s, milliseconds u): the reply to method on
    path comes that long after the call, as bluetoothd's waits for the
    controller (0: at once again). StopDiscovery of an adapter: the session
    ends at once, the reply later. Disconnect of a device: the link goes down
    (then Connected=false) only with the reply, as 5.66's DISCONNECT_TIMER
    has it. Pair of a device that pairs with Just Works: Paired=true and the
    reply that long after the call (SMP takes its time).'''
    if milliseconds > 0:
        state.REPLY_DELAYS[(str(path), str(method))] = int(milliseconds) / 1000
    else:
        state.REPLY_DELAYS.pop((str(path), str(method)), None)


@dbus.service.method(MOCK_IFACE, in_signature='ssb', out_signature='')
def HangMethod(self, path, method, hang):
    '''HangMethod(path s, method s, hang b): calls of method (ReadValue or
    WriteValue of a characteristic, Connect of a device) on path are never answered while hang is
    true (unless the device disconnects: then they fail "Not connected", as
    in bluetoothd).'''
    key = (str(path), str(method))
    if hang:
        state.HANGING.add(key)
    else:
        state.HANGING.discard(key)


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}as', out_signature='')
def SetProperties(self, path, interface, changed, removed):
    '''SetProperties(path s, interface s, changed a{sv}, removed as): sets
    properties to the values given — any D-Bus type, also one BlueZ's API
    does not allow — and removes those in `removed`; one PropertiesChanged.
    For testing what a client does with malformed objects.'''
    obj = mockobject.objects.get(str(path))
    if not isinstance(obj, bluez_object.BluezObject) or str(interface) not in obj.props:
        raise common._mock_err('NoSuchObject', f'{path} has no {interface}')
    obj.update({str(k): v for k, v in changed.items()}, str(interface),
               [str(k) for k in removed])


@dbus.service.method(MOCK_IFACE, in_signature='osu', out_signature='')
def SetPairing(self, device, method, value):
    '''SetPairing(device o, method s, value u): how Device1.Pair on device
    involves the calling client's agent (else the default agent):
    RequestConfirmation / DisplayPasskey (passkey value), RequestPasskey
    (the agent must answer value), RequestPinCode (must answer str(value)),
    DisplayPinCode (pin str(value)), RequestAuthorization; "" → just works,
    no agent call. An agent error fails Pair (Rejected →
    AuthenticationRejected, Canceled → AuthenticationCanceled, else
    AuthenticationFailed), as does a wrong answer.'''
    method = str(method)
    if method and method not in agent_manager1.AGENT_METHODS:
        raise common._mock_err('InvalidArgs', f'unknown agent method {method}')
    if method:
        state.PAIRING[str(device)] = (method, int(value))
    else:
        state.PAIRING.pop(str(device), None)


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(sss)')
def GetAgentLog(self):
    '''GetAgentLog() → a(method s, device s, outcome s): agent calls made by
    Pair; outcome "ok", "ok:<answer>" or "error:<name>: <message>".'''
    return dbus.Array([dbus.Struct((dbus.String(m), dbus.String(d), dbus.String(o)))
                       for m, d, o in state.AGENT_LOG], signature='(sss)')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssss)')
def GetPairLog(self):
    '''GetPairLog() → a(device s, caller s, agent owner s, io capability s):
    one entry per Device1.Pair that got past its checks, with the IO
    capability bluetoothd would send to the kernel (src/device.c pair_device:
    the caller's agent, else the default agent; none → NoInputNoOutput;
    agent owner "" when there is no agent).'''
    return dbus.Array([dbus.Struct(tuple(dbus.String(x) for x in e)) for e in state.PAIR_LOG],
                      signature='(ssss)')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def SetGattCache(self, mode):
    '''SetGattCache(mode s): main.conf [GATT] Cache: "always" (bluetoothd's
    default: GATT objects and StartNotify sessions survive a disconnection),
    "yes" (only for paired devices) or "no" (objects removed on
    disconnection). src/device.c gatt_cache_is_enabled.'''
    if str(mode) not in ('always', 'yes', 'no'):
        raise common._mock_err('InvalidArgs', f'bad cache mode {mode}')
    state.GATT_CACHE[0] = str(mode)


def _chrc_obj(characteristic):
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, gatt_client.GattCharacteristicObject):
        raise common._mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    return obj


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='u')
def GetValueSignalCount(self, characteristic):
    '''GetValueSignalCount(characteristic o) → u: PropertiesChanged(Value)
    signals the characteristic has emitted (notifications × registered
    StartNotify sessions, plus one per successful ReadValue).'''
    return dbus.UInt32(state.VALUE_SIGNALS.get(str(characteristic), 0))


@dbus.service.method(MOCK_IFACE, in_signature='os', out_signature='')
def StartNotifyAs(self, characteristic, client):
    '''StartNotifyAs(characteristic o, client s): another client (any name,
    e.g. ":other.1"; it never leaves the bus) calls StartNotify: its session
    adds one Value signal per notification. Errors as StartNotify's.'''
    _chrc_obj(characteristic).start_notify(str(client))


@dbus.service.method(MOCK_IFACE, in_signature='os', out_signature='')
def StopNotifyAs(self, characteristic, client):
    '''StopNotifyAs(characteristic o, client s): that client calls StopNotify.'''
    _chrc_obj(characteristic).stop_notify(str(client))


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='ay')
def ReadValueAs(self, characteristic):
    '''ReadValueAs(characteristic o) → ay: another client reads the value
    (one PropertiesChanged(Value) follows, as for any read).'''
    return _chrc_obj(characteristic).read_now({})


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='a(sb)')
def GetNotifyClients(self, characteristic):
    '''GetNotifyClients(characteristic o) → a(client s, registered b):
    StartNotify sessions in order; registered false while the device is
    disconnected (kept, to be registered again on reconnection).'''
    return dbus.Array([dbus.Struct((dbus.String(c), dbus.Boolean(r)))
                       for c, r in _chrc_obj(characteristic).notify_clients.items()],
                      signature='(sb)')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ss)')
def GetAgents(self):
    '''GetAgents() → a(agent path s, capability s): registered agents.'''
    return dbus.Array([dbus.Struct((dbus.String(p), dbus.String(c))) for p, c in state.AGENTS.values()],
                      signature='(ss)')


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import agent_manager1, bluez_object, common, control_radio, device1, gatt_client, state  # noqa: E402 pylint: disable=wrong-import-position
