# -*- coding: utf-8 -*-
'''BlueZ (bluetoothd) stand-in for bluectl's bus tier tests.

A python-dbusmock template. Run it on a private bus with

    DBUS_SYSTEM_BUS_ADDRESS=unix:path=... /usr/bin/python3 -m dbusmock \\
        --system --template /path/to/bluez_standin.py

(dbusmock accepts a template given as a path ending in ".py").

It owns org.bluez and keeps BlueZ's object layout:

    /                                        org.freedesktop.DBus.ObjectManager
    /org/bluez                               AgentManager1, ProfileManager1
    /org/bluez/hci0                          Adapter1 (+ GattManager1, LEAdvertisingManager1)
    /org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF    Device1
    .../dev_XX/service000a                   GattService1
    .../dev_XX/service000a/char000b          GattCharacteristic1
    .../dev_XX/service000a/char000b/desc000d GattDescriptor1

Properties carry BlueZ's D-Bus types; optional ones (Name, RSSI, TxPower,
ManufacturerData, ...) are absent when unknown, as in BlueZ.

Simulated radio: tests register *advertisers* per adapter (Mock.AddAdvertiser).
An advertiser is invisible until some client runs a discovery session on its
adapter; then it is "discovered": a Device1 object appears (InterfacesAdded),
and later advertisement changes (Mock.UpdateAdvertiser) arrive as
PropertiesChanged. When the last discovery session ends, Discovering goes
false, RSSI/TxPower are invalidated and non-connectable devices are removed,
as bluetoothd does.

Discovery is tracked per bus client, as in bluetoothd: each client has its own
session and filter; a client's session and filter end when it leaves the bus
(NameOwnerChanged). A device is reported if it matches the filter of any
client with a session (a client without a filter matches everything), so a
client must re-check what it receives.

GATT follows bluetoothd 5.66 (src/gatt-client.c, src/device.c), checked
against the real one by Tests/Conformance: with the default [GATT]
Cache=always a disconnected device keeps its GATT objects and its clients'
StartNotify sessions (registered again on reconnection; Mock.SetGattCache
changes the mode); each notification is one PropertiesChanged(Value) per
registered StartNotify session, and every successful ReadValue emits one.

Control API: methods on the org.freedesktop.DBus.Mock interface of the root
object "/" (dbusmock's convention for template convenience methods); see
the functions below decorated with MOCK_IFACE.

Unlike dbusmock's bluez5 template (whose /org/bluez set-up this reuses), the
BlueZ objects here are Python subclasses of DBusMockObject with real methods,
so that methods see the calling client (sender_keyword) and so that the
root object does not grow Adapter1/Device1 methods. dbusmock's Reset() is not
supported (module state is not rebuilt).
'''

import ctypes
import os
import re
import socket
import struct

import dbus
import dbus.lowlevel
import dbus.service
from gi.repository import GLib

from dbusmock import MOCK_IFACE, OBJECT_MANAGER_IFACE, mockobject
import dbusmock.templates.bluez5 as bluez5

BUS_NAME = 'org.bluez'
MAIN_OBJ = '/'
SYSTEM_BUS = True
IS_OBJECT_MANAGER = True

ADAPTER_IFACE = 'org.bluez.Adapter1'
DEVICE_IFACE = 'org.bluez.Device1'
GATT_SERVICE_IFACE = 'org.bluez.GattService1'
GATT_CHRC_IFACE = 'org.bluez.GattCharacteristic1'
GATT_DESC_IFACE = 'org.bluez.GattDescriptor1'
GATT_MANAGER_IFACE = 'org.bluez.GattManager1'
AGENT_MANAGER_IFACE = 'org.bluez.AgentManager1'
LE_ADV_MANAGER_IFACE = 'org.bluez.LEAdvertisingManager1'
PROPS_IFACE = dbus.PROPERTIES_IFACE
INTROSPECT_IFACE = dbus.INTROSPECTABLE_IFACE

ERR = 'org.bluez.Error.'
MOCK_ERR = 'org.freedesktop.DBus.Mock.Error.'

BASE_UUID_SUFFIX = '-0000-1000-8000-00805f9b34fb'
DISCOVERY_FILTER_KEYS = ['UUIDs', 'RSSI', 'Pathloss', 'Transport',
                         'DuplicateData', 'Discoverable', 'Pattern']
DEFAULT_MTU = 247


# ---------------------------------------------------------------------------
# helpers

def _err(name, message):
    return dbus.exceptions.DBusException(message, name=name)


def _mock_err(name, message):
    return dbus.exceptions.DBusException(message, name=MOCK_ERR + name)


def _bluez_invalid(message='Invalid arguments in method call'):
    return _err(ERR + 'InvalidArguments', message)


def canonical_uuid(text):
    '''16/32/128-bit UUID string → lowercase 128-bit form, or None.'''
    t = str(text).strip().lower()
    if t.startswith('0x'):
        t = t[2:]
    if re.fullmatch(r'[0-9a-f]{4}', t):
        return '0000' + t + BASE_UUID_SUFFIX
    if re.fullmatch(r'[0-9a-f]{8}', t):
        return t + BASE_UUID_SUFFIX
    if re.fullmatch(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', t):
        return t
    return None


def _is_address(text):
    return re.fullmatch(r'[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}', str(text)) is not None


def device_path(adapter_name, address):
    return f'/org/bluez/{adapter_name}/dev_' + str(address).upper().replace(':', '_')


def _bytes(value):
    '''D-Bus ay (list of dbus.Byte, ByteArray, bytes) → Python bytes.'''
    return bytes(bytearray(int(b) for b in value))


def _ay(data, variant_level=0):
    return dbus.Array([dbus.Byte(b) for b in data], signature='y', variant_level=variant_level)


def _hexlist(data):
    return data.hex()


def _std_ifaces():
    return {INTROSPECT_IFACE: dbus.Dictionary({}, signature='sv'),
            PROPS_IFACE: dbus.Dictionary({}, signature='sv')}


def _bus():
    return ROOT.bus_name.get_bus()


def emit(path, interface, member, signature, args):
    '''Broadcast a signal from our connection (cheap path, no logging).'''
    msg = dbus.lowlevel.SignalMessage(path, interface, member)
    msg.append(*args, signature=signature)
    _bus().send_message(msg)


def emit_props_changed(path, interface, changed, invalidated=()):
    emit(path, PROPS_IFACE, 'PropertiesChanged', 'sa{sv}as', [
        interface, dbus.Dictionary(changed, signature='sv'),
        dbus.Array(list(invalidated), signature='s')])


def emit_interfaces_added(path, props):
    emit('/', OBJECT_MANAGER_IFACE, 'InterfacesAdded', 'oa{sa{sv}}',
         [dbus.ObjectPath(path), dbus.Dictionary(props, signature='sa{sv}')])


def emit_interfaces_removed(path, interfaces):
    emit('/', OBJECT_MANAGER_IFACE, 'InterfacesRemoved', 'oas',
         [dbus.ObjectPath(path), dbus.Array(interfaces, signature='s')])


def log(msg):
    ROOT.log(msg)


# ---------------------------------------------------------------------------
# fast signal path for EmitAdvertisementBurst
#
# dbus-python spends ~25 µs marshalling one PropertiesChanged with variants.
# For bursts we marshal the wire format ourselves from a template (~1 µs),
# hand it to libdbus (dbus_message_demarshal, which validates it) and queue it
# on dbus-python's own connection (borrowed through dbus-python's C API
# capsule), so the signals keep org.bluez's sender and ordering.

class _Wire:
    '''Minimal little-endian D-Bus marshaller (enough for signal templates).'''

    def __init__(self):
        self.buf = bytearray()

    def align(self, n):
        self.buf += b'\0' * (-len(self.buf) % n)

    def y(self, v):
        self.buf += bytes([v])

    def u(self, v):
        self.align(4)
        self.buf += struct.pack('<I', v)

    def n(self, v):
        self.align(2)
        self.buf += struct.pack('<h', v)

    def q(self, v):
        self.align(2)
        self.buf += struct.pack('<H', v)

    def s(self, v):
        b = v.encode()
        self.u(len(b))
        self.buf += b + b'\0'

    def g(self, v):
        b = v.encode()
        self.y(len(b))
        self.buf += b + b'\0'

    def array(self, elem_align, fill):
        self.u(0)
        at = len(self.buf) - 4
        self.align(elem_align)
        start = len(self.buf)
        fill()
        struct.pack_into('<I', self.buf, at, len(self.buf) - start)


def _signal_header(path, iface, member, sig, body_len):
    w = _Wire()
    w.buf += b'l\x04\x00\x01'     # little endian, SIGNAL, no flags, version 1
    w.u(body_len)
    w.u(0)                           # serial, patched per message
    def fields():
        for code, t, v in ((1, 'o', path), (2, 's', iface), (3, 's', member), (8, 'g', sig)):
            w.align(8)
            w.y(code)
            w.g(t)
            (w.g if t == 'g' else w.s)(v)
    w.array(8, fields)
    w.align(8)
    return bytes(w.buf)


def _rssi_md_body(company):
    '''PropertiesChanged body ("org.bluez.Device1", {RSSI: n, ManufacturerData:
    {company: ay(8)}}, []) → (bytes, offset of RSSI, offset of the 8 bytes)'''
    w = _Wire()
    w.s(DEVICE_IFACE)
    offs = {}
    def entries():
        w.align(8)
        w.s('RSSI')
        w.g('n')
        w.align(2)
        offs['rssi'] = len(w.buf)
        w.n(0)
        w.align(8)
        w.s('ManufacturerData')
        w.g('a{qv}')
        def md():
            w.align(8)
            w.q(company)
            w.g('ay')
            def data():
                offs['md'] = len(w.buf)
                w.buf += b'\0' * 8
            w.array(1, data)
        w.array(8, md)
    w.array(8, entries)
    w.array(4, lambda: None)
    return bytes(w.buf), offs['rssi'], offs['md']


class _FastEmitter:
    def __init__(self, conn):
        import _dbus_bindings  # pylint: disable=import-outside-toplevel
        lib = ctypes.CDLL('libdbus-1.so.3')
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype = ctypes.c_void_p
        get.argtypes = [ctypes.py_object, ctypes.c_char_p]
        api = ctypes.cast(get(_dbus_bindings._C_API, b'_dbus_bindings._C_API'),
                          ctypes.POINTER(ctypes.c_void_p))
        # api[1] = DBusPyConnection_BorrowDBusConnection(PyObject *) → DBusConnection *
        borrow = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(api[1])
        self.conn = ctypes.c_void_p(borrow(conn))
        self.demarshal = lib.dbus_message_demarshal
        self.demarshal.restype = ctypes.c_void_p
        self.demarshal.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        self.send = lib.dbus_connection_send
        self.send.restype = ctypes.c_uint
        self.send.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.unref = lib.dbus_message_unref
        self.unref.argtypes = [ctypes.c_void_p]
        self.err = ctypes.create_string_buffer(64)     # DBusError
        lib.dbus_error_init(self.err)
        self.serial = 0x40000000     # away from dbus-python's own serials

    def send_raw(self, buf):
        self.serial = self.serial + 1 if self.serial < 0x7fffffff else 0x40000000
        struct.pack_into('<I', buf, 8, self.serial)
        msg = self.demarshal(bytes(buf), len(buf), self.err)
        if not msg:
            raise _mock_err('Failed', 'stand-in marshalled an invalid message')
        ok = self.send(self.conn, msg, None)
        self.unref(msg)
        if not ok:
            raise _mock_err('Failed', 'out of memory queueing a signal')


_FAST = None


def _fast_emitter():
    '''The fast path, or None if unavailable (then dbus-python is used).'''
    global _FAST  # pylint: disable=global-statement
    if _FAST is None:
        if os.environ.get('BLUEZ_STANDIN_SLOW_SIGNALS'):
            _FAST = False
        else:
            try:
                _FAST = _FastEmitter(_bus())
            except Exception as e:  # pylint: disable=broad-except
                log(f'fast signal path unavailable ({e}); using dbus-python')
                _FAST = False
    return _FAST or None


# ---------------------------------------------------------------------------
# stand-in state (not on the bus)

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
        return device_path(self.adapter.name, self.address)

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
            mine = {canonical_uuid(u) for u in self.props.get('UUIDs', [])}
            mine |= {canonical_uuid(u) for u in self.props.get('ServiceData', {}).keys()}
            if not mine & {canonical_uuid(u) for u in uuids}:
                return False
        pattern = flt.get('Pattern')
        if pattern:
            name = str(self.props.get('Name', ''))
            if not (self.address.startswith(str(pattern).upper()) or
                    (name and name.startswith(str(pattern)))):
                return False
        if flt.get('Discoverable'):
            flags = _bytes(self.props.get('AdvertisingFlags', []))
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
        self.events = []                # [(event, sender)] for GetDiscoveryLog

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
        if not self.sessions:
            return False
        if not self.enforce_filters:
            return True
        return any(adv.matches(f) for f in self.sessions.values())


ROOT = None            # the root DBusMockObject
ADAPTERS = {}          # name → AdapterState
WRITES = {}            # attribute path → [(value bytes, options dict)]
INJECTED_ERRORS = {}   # (path, method) → [error name, message, remaining calls or None]
CALLS = []             # [(path, method)] of BlueZ API calls, in order (GetCalls)
HANGING = set()        # (path, method) whose calls are never answered (HangMethod)
HUNG_CALLS = []        # [(path, method, ok, err)] calls left unanswered
AGENTS = {}            # client unique name → (agent path, capability)
DEFAULT_AGENT = []     # [(client, path)]: bluetoothd's default_agents queue, head first
PAIRING = {}           # device path → (agent method, expected value) (SetPairing)
AGENT_LOG = []         # [(method, device, outcome)] of agent calls made by Pair
PAIR_LOG = []          # [(device, caller, agent owner, io capability)] per Pair (GetPairLog)
VALUE_SIGNALS = {}     # characteristic path → PropertiesChanged(Value) emitted (GetValueSignalCount)
GATT_CACHE = ['always']  # main.conf [GATT] Cache: always (default) | yes | no (SetGattCache)
_WATCHING = False


def _device_connected(adv):
    dev = mockobject.objects.get(adv.path)
    return isinstance(dev, DeviceObject) and dev.connected


def _adapter_state(name):
    try:
        return ADAPTERS[str(name)]
    except KeyError:
        raise _mock_err('NoSuchAdapter', f'Adapter {name} does not exist') from None


def _advertiser(adapter, address):
    st = _adapter_state(adapter)
    try:
        return st.advertisers[str(address).upper()]
    except KeyError:
        raise _mock_err('NoSuchAdvertiser', f'No advertiser {address} on {adapter}') from None


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
        raise _err(e[0], e[1])


def _hangs(path, method, ok, err):
    '''True (and the call is parked, never answered) if HangMethod asked so.'''
    if (str(path), method) in HANGING:
        log(f'{method} {path}: not answering (HangMethod)')
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


# ---------------------------------------------------------------------------
# bus objects

class BluezObject(mockobject.DBusMockObject):
    '''Properties behave as in bluetoothd (errors, read-only checks).'''

    WRITABLE = {}      # interface → {name: signature}

    def __init__(self, path, interface, props):
        super().__init__(ROOT.bus_name, path, interface, props)
        self.props.update(_std_ifaces())

    @dbus.service.method(PROPS_IFACE, in_signature='ss', out_signature='v')
    def Get(self, interface_name, property_name):
        iface = self.props.get(str(interface_name))
        if iface is None:
            raise _err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such interface '{interface_name}'")
        if property_name not in iface:
            raise _err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such property '{property_name}'")
        return iface[property_name]

    @dbus.service.method(PROPS_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface_name, *_, **__):
        CALLS.append((str(self.path), 'GetAll'))  # recorded (GetCalls), never failed by InjectError
        iface = self.props.get(str(interface_name))
        if iface is None:
            raise _err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such interface '{interface_name}'")
        return dbus.Dictionary(iface, signature='sv')

    @dbus.service.method(PROPS_IFACE, in_signature='ssv', out_signature='')
    def Set(self, interface_name, property_name, value, *_, **__):
        iface = self.props.get(str(interface_name))
        if iface is None:
            raise _err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such interface '{interface_name}'")
        if property_name not in iface:
            raise _err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such property '{property_name}'")
        sig = self.WRITABLE.get(str(interface_name), {}).get(str(property_name))
        if sig is None:
            raise _err('org.freedesktop.DBus.Error.PropertyReadOnly',
                       f"Property '{property_name}' is not writable")
        if not _typed(value, sig):
            raise _bluez_invalid()
        self.set_property(str(interface_name), str(property_name), value)

    def set_property(self, interface, name, value):
        self.update({name: value}, interface)

    def update(self, changed, interface=None, invalidated=()):
        '''Change/remove properties and emit one PropertiesChanged.'''
        interface = interface or self.interface
        props = self.props[interface]
        out = {}
        for k, v in changed.items():
            props[k] = v
            out[k] = v
        inv = []
        for k in invalidated:
            if k in props:
                del props[k]
                inv.append(k)
        if out or inv:
            emit_props_changed(self.path, interface, out, inv)


def _typed(value, signature):
    '''Validate that a D-Bus value (from a{sv}) has the given signature.'''
    if signature == 'b':
        return isinstance(value, dbus.Boolean)
    if signature == 's':
        return isinstance(value, dbus.String)
    if signature == 'n':
        return isinstance(value, dbus.Int16)
    if signature == 'q':
        return isinstance(value, dbus.UInt16)
    if signature == 'u':
        return isinstance(value, dbus.UInt32)
    if signature == 'o':
        return isinstance(value, dbus.ObjectPath)
    if signature == 'as':
        return isinstance(value, dbus.Array) and value.signature == 's'
    if signature == 'ay':
        return isinstance(value, (dbus.ByteArray, bytes)) or \
            (isinstance(value, dbus.Array) and value.signature == 'y')
    raise ValueError(signature)


class AdapterObject(BluezObject):
    WRITABLE = {ADAPTER_IFACE: {'Alias': 's', 'Powered': 'b', 'Discoverable': 'b',
                                'Pairable': 'b', 'DiscoverableTimeout': 'u',
                                'PairableTimeout': 'u'}}

    def __init__(self, name, props):
        super().__init__('/org/bluez/' + name, ADAPTER_IFACE, props)
        self.name = name
        self.props[GATT_MANAGER_IFACE] = dbus.Dictionary({}, signature='sv')
        self.props[LE_ADV_MANAGER_IFACE] = dbus.Dictionary({
            'ActiveInstances': dbus.Byte(0),
            'SupportedInstances': dbus.Byte(5),
            'SupportedIncludes': dbus.Array(['tx-power', 'appearance', 'local-name'],
                                            signature='s'),
        }, signature='sv')

    @property
    def state(self):
        return ADAPTERS[self.name]

    def set_property(self, interface, name, value):
        if interface == ADAPTER_IFACE and name == 'Powered':
            set_powered(self.state, bool(value))
        elif interface == ADAPTER_IFACE and name == 'Alias' and not str(value):
            # bluetoothd: empty alias resets it to the system name
            self.update({'Alias': dbus.String(self.props[ADAPTER_IFACE]['Name'])})
        else:
            self.update({name: value}, interface)

    @dbus.service.method(ADAPTER_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StartDiscovery(self, sender=None):
        st = self.state
        log(f'StartDiscovery {self.name} from {sender}')
        _check_injected(self.path, 'StartDiscovery')
        if not self.props[ADAPTER_IFACE]['Powered']:
            raise _err(ERR + 'NotReady', 'Resource Not Ready')
        if sender in st.sessions:
            raise _err(ERR + 'InProgress', 'Operation already in progress')
        st.sessions[sender] = st.filters.get(sender)
        st.events.append(('StartDiscovery', sender))
        _watch_clients()
        if not self.props[ADAPTER_IFACE]['Discovering']:
            self.update({'Discovering': dbus.Boolean(True)})
        # devices are found after the reply, as with a real radio
        GLib.timeout_add(10, _advertise_all, st)

    @dbus.service.method(ADAPTER_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StopDiscovery(self, sender=None):
        st = self.state
        log(f'StopDiscovery {self.name} from {sender}')
        _check_injected(self.path, 'StopDiscovery')
        if not self.props[ADAPTER_IFACE]['Powered']:
            raise _err(ERR + 'NotReady', 'Resource Not Ready')
        if sender not in st.sessions:
            raise _err(ERR + 'Failed', 'No discovery started')
        del st.sessions[sender]
        st.events.append(('StopDiscovery', sender))
        if not st.sessions:
            end_discovery(st)

    @dbus.service.method(ADAPTER_IFACE, in_signature='a{sv}', out_signature='',
                         sender_keyword='sender')
    def SetDiscoveryFilter(self, properties, sender=None):
        st = self.state
        log(f'SetDiscoveryFilter {self.name} from {sender}: {dict(properties)}')
        _check_injected(self.path, 'SetDiscoveryFilter')
        flt = parse_discovery_filter(properties)
        st.last_filter = dbus.Dictionary(properties, signature='sv')
        st.last_filter_sender = sender
        st.filter_calls += 1
        st.events.append(('SetDiscoveryFilter', sender))
        if flt:
            st.filters[sender] = flt
        else:
            st.filters.pop(sender, None)
        _watch_clients()
        if sender in st.sessions:
            st.sessions[sender] = st.filters.get(sender)
            GLib.timeout_add(10, _advertise_all, st)

    @dbus.service.method(ADAPTER_IFACE, in_signature='', out_signature='as')
    def GetDiscoveryFilters(self):
        return dbus.Array(DISCOVERY_FILTER_KEYS, signature='s')

    @dbus.service.method(ADAPTER_IFACE, in_signature='o', out_signature='')
    def RemoveDevice(self, device):
        log(f'RemoveDevice {device}')
        _check_injected(self.path, 'RemoveDevice')
        device = str(device)
        obj = mockobject.objects.get(device)
        if not isinstance(obj, DeviceObject) or obj.adapter_name != self.name:
            raise _err(ERR + 'DoesNotExist', 'Does Not Exist')
        remove_device(obj)

    @dbus.service.method(ADAPTER_IFACE, in_signature='a{sv}', out_signature='o')
    def ConnectDevice(self, properties):
        log(f'ConnectDevice {self.name} {dict(properties)}')
        _check_injected(self.path, 'ConnectDevice')
        if not self.props[ADAPTER_IFACE]['Powered']:
            raise _err(ERR + 'NotReady', 'Resource Not Ready')
        address = properties.get('Address')
        if not isinstance(address, dbus.String) or not _is_address(address):
            raise _bluez_invalid()
        addr_type = properties.get('AddressType', dbus.String('public'))
        if not isinstance(addr_type, dbus.String) or addr_type not in ('public', 'random'):
            raise _bluez_invalid()
        for k in properties:
            if k not in ('Address', 'AddressType'):
                raise _bluez_invalid()
        path = device_path(self.name, address)
        if path in mockobject.objects:
            raise _err(ERR + 'AlreadyExists', 'Already Exists')
        adv = self.state.advertisers.get(str(address).upper())
        if adv is None:
            adv = Advertiser(self.state, str(address),
                             {'AddressType': dbus.String(addr_type)}, False)
            adv.in_range = False
        if not adv.connectable or not adv.in_range:
            raise _err(ERR + 'Failed', 'le-connection-abort-by-local')
        dev = create_device(adv, with_rssi=False)
        connect_device(dev)
        return dbus.ObjectPath(path)


class DeviceObject(BluezObject):
    WRITABLE = {DEVICE_IFACE: {'Alias': 's', 'Trusted': 'b', 'Blocked': 'b',
                               'WakeAllowed': 'b'}}

    def __init__(self, advertiser, props):
        super().__init__(advertiser.path, DEVICE_IFACE, props)
        self.advertiser = advertiser
        self.adapter_name = advertiser.adapter.name
        self.user_alias = False         # Alias set by a client (else it follows Name)
        self.gatt_paths = []            # exported GATT objects below it, in export order

    def set_property(self, interface, name, value):
        if interface == DEVICE_IFACE and name == 'Blocked' and bool(value) and self.connected:
            # src/device.c device_block: a blocked device is disconnected first
            # (checked in the lab: `block` of a connected device, Connected false after)
            disconnect_device(self)
        if interface == DEVICE_IFACE and name == 'Alias':
            self.user_alias = bool(str(value))
            if not self.user_alias:
                p = self.props[DEVICE_IFACE]
                value = dbus.String(p.get('Name', default_alias(self.advertiser.address)))
            self.update({'Alias': value})
        else:
            self.update({name: value}, interface)

    @property
    def connected(self):
        return bool(self.props[DEVICE_IFACE]['Connected'])

    @dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='',
                         async_callbacks=('ok', 'err'))
    def Connect(self, ok=None, err=None):
        log(f'Connect {self.path}')
        if _hangs(self.path, 'Connect', ok, err):
            return      # (HangMethod: bluetoothd busy, or about to crash)
        try:
            _check_injected(self.path, 'Connect')
            if not ADAPTERS[self.adapter_name].obj.props[ADAPTER_IFACE]['Powered']:
                raise _err(ERR + 'NotReady', 'Resource Not Ready')
            if self.connected:
                # src/device.c dev_connect: an LE device whose LE bearer is
                # connected → success at once (le_state.connected)
                ok()
                return
            if not self.advertiser.connectable or not self.advertiser.in_range:
                raise _err(ERR + 'Failed', 'le-connection-abort-by-local')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        connect_device(self)
        ok()

    @dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='')
    def Disconnect(self):
        log(f'Disconnect {self.path}')
        _check_injected(self.path, 'Disconnect')
        if not self.connected:
            raise _err(ERR + 'NotConnected', 'Not Connected')
        disconnect_device(self)

    @dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def Pair(self, sender=None, ok=None, err=None):
        log(f'Pair {self.path} from {sender}')
        try:
            _check_injected(self.path, 'Pair')
            if self.props[DEVICE_IFACE]['Paired']:
                raise _err(ERR + 'AlreadyExists', 'Already Exists')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        # src/device.c pair_device: agent_get(sender) (the caller's agent,
        # else the default agent) gives the IO capability sent to the kernel;
        # no agent → NoInputNoOutput
        client = _agent_client(sender)
        io_cap = AGENTS[client][1] if client else 'NoInputNoOutput'
        PAIR_LOG.append((self.path, sender, client or '', io_cap))
        how = PAIRING.get(self.path)
        if how is None:             # just works, no agent involved
            self.paired()
            ok()
            return
        if how[0] not in IO_CAP_METHODS[io_cap] and not (client and how[0] in PIN_METHODS):
            # The peripheral wants a method this IO capability cannot do: SMP
            # falls back to Just Works, which a peripheral that asks for a
            # passkey/confirmation (MITM) refuses → AuthenticationFailed, and
            # no agent is asked.
            AGENT_LOG.append((how[0], self.path, f'error:io capability {io_cap}'))
            err(_err(ERR + 'AuthenticationFailed', 'Authentication Failed'))
            return
        ask_agent(self, sender, how[0], how[1], ok, err)

    def paired(self):
        self.update({'Paired': dbus.Boolean(True), 'Bonded': dbus.Boolean(True)})

    @dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='')
    def CancelPairing(self):
        raise _err(ERR + 'DoesNotExist', 'Does Not Exist')

    @dbus.service.method(DEVICE_IFACE, in_signature='s', out_signature='')
    def ConnectProfile(self, uuid):
        raise _err(ERR + 'NotAvailable', 'Operation currently not available')

    @dbus.service.method(DEVICE_IFACE, in_signature='s', out_signature='')
    def DisconnectProfile(self, uuid):
        raise _err(ERR + 'NotAvailable', 'Operation currently not available')


def _read_options(options):
    offset = options.get('offset', dbus.UInt16(0))
    if not isinstance(offset, dbus.UInt16):
        raise _bluez_invalid()
    return int(offset)


class GattServiceObject(BluezObject):
    def __init__(self, d):
        super().__init__(d.path, GATT_SERVICE_IFACE, {
            'UUID': dbus.String(d.uuid),
            'Device': dbus.ObjectPath(d.advertiser.path),
            'Primary': dbus.Boolean(d.primary),
            'Includes': dbus.Array([], signature='o'),
        })   # src/gatt-client.c service_properties (5.66: no Handle)
        self.d = d


class GattCharacteristicObject(BluezObject):
    def __init__(self, d):
        super().__init__(d.path, GATT_CHRC_IFACE, {
            'UUID': dbus.String(d.uuid),
            'Service': dbus.ObjectPath(d.service.path),
            'Value': _ay(b''),
            'Flags': dbus.Array(d.flags, signature='s'),
            'MTU': dbus.UInt16(DEFAULT_MTU),
        })   # src/gatt-client.c characteristic_properties (5.66: no Handle)
        # src/gatt-client.c characteristic_notifying_exists (notify or
        # indicate), characteristic_notify_acquired_exists (notify only),
        # characteristic_write_acquired_exists (write-without-response)
        if 'notify' in d.flags or 'indicate' in d.flags:
            self.props[GATT_CHRC_IFACE]['Notifying'] = dbus.Boolean(False)
        if 'notify' in d.flags:
            self.props[GATT_CHRC_IFACE]['NotifyAcquired'] = dbus.Boolean(False)
        if 'write-without-response' in d.flags:
            self.props[GATT_CHRC_IFACE]['WriteAcquired'] = dbus.Boolean(False)
        self.d = d
        # StartNotify sessions, in order: sender → registered (bluetoothd's
        # struct notify_client with notify_id != 0). Sessions outlive a
        # disconnection unregistered and are registered again on reconnect
        # (src/gatt-client.c btd_gatt_client_disconnected clear_notify_id,
        # btd_gatt_client_connected register_notify).
        self.notify_clients = {}
        self.notify_sock = None         # our end of an AcquireNotify socket
        self.socket_drops = 0           # values still to drop on that socket (DropSocketNotifications)
        self.notify_watch = None
        self.write_sock = None
        self.write_watch = None

    def can_notify(self):
        return 'notify' in self.d.flags or 'indicate' in self.d.flags

    def gatt_connected(self):
        '''bluetoothd's chrc->service->client->gatt != NULL.'''
        return _device_connected(self.d.service.advertiser)

    @dbus.service.method(GATT_CHRC_IFACE, in_signature='a{sv}', out_signature='ay',
                         async_callbacks=('ok', 'err'))
    def ReadValue(self, options, ok=None, err=None):
        log(f'ReadValue {self.path} {dict(options)}')
        if not _hangs(self.path, 'ReadValue', ok, err):
            _answer(ok, err, lambda: self._read(options))

    def _read(self, options):
        _check_injected(self.path, 'ReadValue')
        return self.read_now(options)

    def read_now(self, options):
        # src/gatt-client.c characteristic_read_value: options are parsed
        # after the "Not connected" check; the flags are not checked by
        # bluetoothd, the peripheral answers Read Not Permitted (an ATT error
        # that create_gatt_dbus_error maps to NotPermitted)
        if not self.gatt_connected():
            raise _err(ERR + 'Failed', 'Not connected')
        offset = _read_options(options)
        if not any('read' in f for f in self.d.flags):
            raise _err(ERR + 'NotPermitted', 'Read not permitted')
        if offset > len(self.d.value):
            raise _err(ERR + 'InvalidOffset', 'Invalid offset')
        data = self.d.value[offset:]
        # src/gatt-client.c chrc_read_cb: every successful read is written to
        # the cache (reset first when offset is 0) and write_characteristic_cb
        # emits PropertiesChanged(Value) with G_DBUS_PROPERTY_CHANGED_FLAG_FLUSH,
        # whether or not the value changed and whoever asked
        cached = _bytes(self.props[GATT_CHRC_IFACE].get('Value', b''))
        self.value_signal(data if offset == 0 else cached[:offset] + data)
        return _ay(data)

    def value_signal(self, data):
        '''One PropertiesChanged(Value) (write_characteristic_cb).'''
        self.update({'Value': _ay(data)})
        VALUE_SIGNALS[self.path] = VALUE_SIGNALS.get(self.path, 0) + 1

    @dbus.service.method(GATT_CHRC_IFACE, in_signature='aya{sv}', out_signature='',
                         async_callbacks=('ok', 'err'))
    def WriteValue(self, value, options, ok=None, err=None):
        log(f'WriteValue {self.path} {_bytes(value).hex()} {dict(options)}')
        if not _hangs(self.path, 'WriteValue', ok, err):
            _answer(ok, err, lambda: self._write(value, options))

    WRITE_FLAGS = ('write', 'encrypt-write', 'encrypt-authenticated-write', 'secure-write')

    def _write(self, value, options):
        _check_injected(self.path, 'WriteValue')
        # src/gatt-client.c characteristic_write_value, in its order
        if not self.gatt_connected():
            raise _err(ERR + 'Failed', 'Not connected')
        if self.write_sock is not None:
            raise _err(ERR + 'NotPermitted', 'Write acquired')
        kind = options.get('type')
        if kind is not None and not isinstance(kind, dbus.String):
            raise _bluez_invalid()       # parse_options: "type" must be a string
        offset = _read_options(options)
        kind = None if kind is None else str(kind).lower()   # strcasecmp
        flags = self.d.flags
        data = _bytes(value)
        # "reliable" (or no type and the reliable-write extended property):
        # reliable long write; "request" (or no type and the write property):
        # write request. The flags are not checked for an explicit type: the
        # peripheral answers Write Not Permitted (→ NotPermitted).
        if kind == 'reliable' or (kind is None and 'reliable-write' in flags):
            if 'reliable-write' not in flags:
                raise _err(ERR + 'NotPermitted', 'Write not permitted')
            return self._store(data, offset, options, 'reliable')
        if kind == 'request' or (kind is None and 'write' in flags):
            if not any(f in flags for f in self.WRITE_FLAGS):
                raise _err(ERR + 'NotPermitted', 'Write not permitted')
            return self._store(data, offset, options, 'request')
        # write command: type "command", or no type and the
        # write-without-response property; no offset. bluetoothd does NOT
        # check the write-without-response property when the type is given:
        # the command is sent and the call succeeds. Any other type, an offset,
        # or no usable property → NotSupported.
        if (kind is not None and kind != 'command') or offset or \
                (kind is None and 'write-without-response' not in flags):
            raise _err(ERR + 'NotSupported', 'Operation is not supported')
        # The peripheral's ATT server checks the attribute's permissions,
        # not the characteristic's properties: a writable value takes a
        # command, anything else drops it silently (no reply either way).
        if 'write-without-response' in flags or any(f in flags for f in self.WRITE_FLAGS):
            self._store(data, 0, options, 'command')
        return None

    def _store(self, data, offset, options, kind):
        if offset > len(self.d.value):
            raise _err(ERR + 'InvalidOffset', 'Invalid offset')
        self.d.value = self.d.value[:offset] + data
        WRITES.setdefault(self.path, []).append((data, dict(options), kind))

    @dbus.service.method(GATT_CHRC_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StartNotify(self, sender=None):
        log(f'StartNotify {self.path} from {sender}')
        _check_injected(self.path, 'StartNotify')
        self.start_notify(sender)

    def start_notify(self, sender):
        # src/gatt-client.c characteristic_start_notify, in its order
        if self.notify_sock is not None:
            raise _err(ERR + 'NotPermitted', 'Notify acquired')
        if not self.can_notify():
            raise _err(ERR + 'NotSupported', 'Operation is not supported')
        # "Each client can only have one active notify session": a repeat
        # succeeds if the session is registered (notify_id != 0, which
        # bt_gatt_client_register_notify assigns at once, before the CCC
        # write completes), InProgress if it is not: a session kept across a
        # disconnection, waiting for the reconnection to register it again.
        if sender in self.notify_clients:
            if self.notify_clients[sender]:
                return
            raise _err(ERR + 'InProgress', 'In Progress')
        _watch_clients()
        if not self.gatt_connected():
            # "If the device is currently not connected, return success. We
            # will automatically try and register all clients when a GATT
            # client becomes ready." Notifying does not change now.
            self.notify_clients[sender] = False
            return
        self.notify_clients[sender] = True
        self.registered()

    def registered(self):
        '''src/gatt-client.c register_notify_cb: the CCC write succeeded.'''
        if not self.props[GATT_CHRC_IFACE].get('Notifying'):
            self.update({'Notifying': dbus.Boolean(True)})

    @dbus.service.method(GATT_CHRC_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StopNotify(self, sender=None):
        log(f'StopNotify {self.path} from {sender}')
        _check_injected(self.path, 'StopNotify')
        self.stop_notify(sender)

    def stop_notify(self, sender):
        # src/gatt-client.c characteristic_stop_notify: an acquired notify
        # socket is closed, whoever asks
        if self.notify_sock is not None:
            self.release_notify_sock()
            return
        if sender not in self.notify_clients:
            raise _err(ERR + 'Failed', 'No notify session started')
        self.drop_notify_client(sender)

    def drop_notify_client(self, sender):
        '''StopNotify, or the client left the bus (notify_client_disconnect).'''
        self.notify_clients.pop(sender, None)
        self.update_notifying()

    def update_notifying(self):
        '''src/gatt-client.c update_notifying: Notifying goes false when no
        session is registered (so a StopNotify while disconnected clears it).'''
        if self.props[GATT_CHRC_IFACE].get('Notifying') and not any(self.notify_clients.values()):
            self.update({'Notifying': dbus.Boolean(False)})

    def link_down(self):
        '''src/gatt-client.c btd_gatt_client_disconnected: the acquired
        sockets are shut down (client->ios: NotifyAcquired/WriteAcquired go
        false), StartNotify sessions stay queued unregistered
        (clear_notify_id) and Notifying is left as it is. MTU disappears
        (characteristic_mtu_exists: no GATT client), without a signal.'''
        self.release_notify_sock()
        self.release_write_sock()
        for sender in self.notify_clients:
            self.notify_clients[sender] = False
        self.props[GATT_CHRC_IFACE].pop('MTU', None)

    def link_up(self):
        '''src/gatt-client.c btd_gatt_client_connected: register_notify for
        every kept session; register_notify_cb sets Notifying if it fell.'''
        self.props[GATT_CHRC_IFACE]['MTU'] = dbus.UInt16(DEFAULT_MTU)
        if self.notify_clients:
            for sender in self.notify_clients:
                self.notify_clients[sender] = True
            self.registered()

    @dbus.service.method(GATT_CHRC_IFACE, in_signature='a{sv}', out_signature='hq')
    def AcquireNotify(self, options):
        log(f'AcquireNotify {self.path}')
        _check_injected(self.path, 'AcquireNotify')
        # src/gatt-client.c characteristic_acquire_notify, in its order; only
        # the notify property qualifies (an indicate-only characteristic is
        # NotSupported)
        if not self.gatt_connected():
            raise _err(ERR + 'Failed', 'Not connected')
        if self.notify_sock is not None:
            raise _err(ERR + 'NotPermitted', 'Notify acquired')
        if self.notify_clients:
            raise _err(ERR + 'InProgress', 'In Progress')
        if 'notify' not in self.d.flags:
            raise _err(ERR + 'NotSupported', 'Operation is not supported')
        # bluetoothd: socketpair(SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC):
        # the client's end arrives non-blocking too
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)
        theirs.setblocking(False)
        self.notify_sock = ours
        self.notify_watch = GLib.io_add_watch(ours.fileno(), GLib.PRIORITY_DEFAULT,
                                              GLib.IO_HUP | GLib.IO_ERR | GLib.IO_IN,
                                              self._notify_sock_event)
        fd = dbus.types.UnixFd(theirs)   # dups the descriptor
        theirs.close()
        self.update({'NotifyAcquired': dbus.Boolean(True)})
        return (fd, dbus.UInt16(DEFAULT_MTU))

    def _notify_sock_event(self, _fd, cond):
        # the client only reads; data or EOF from it means it closed its end
        if cond & GLib.IO_IN and not cond & (GLib.IO_HUP | GLib.IO_ERR):
            try:
                if self.notify_sock.recv(4096, socket.MSG_DONTWAIT):
                    return True
            except BlockingIOError:
                return True
            except OSError:
                pass
        self.release_notify_sock()
        return False

    def release_notify_sock(self, emit_change=True):
        if self.notify_sock is None:
            return
        if self.notify_watch is not None:
            GLib.source_remove(self.notify_watch)
            self.notify_watch = None
        self.notify_sock.close()
        self.notify_sock = None
        if emit_change and self.path in mockobject.objects:
            self.update({'NotifyAcquired': dbus.Boolean(False)})

    @dbus.service.method(GATT_CHRC_IFACE, in_signature='a{sv}', out_signature='hq')
    def AcquireWrite(self, options):
        log(f'AcquireWrite {self.path}')
        _check_injected(self.path, 'AcquireWrite')
        # src/gatt-client.c characteristic_acquire_write, in its order
        if not self.gatt_connected():
            raise _err(ERR + 'Failed', 'Not connected')
        if self.write_sock is not None:
            raise _err(ERR + 'NotPermitted', 'Write acquired')
        if 'write-without-response' not in self.d.flags:
            raise _err(ERR + 'NotSupported', 'Operation is not supported')
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)
        theirs.setblocking(False)    # as bluetoothd's SOCK_NONBLOCK pair
        self.write_sock = ours
        self.write_watch = GLib.io_add_watch(ours.fileno(), GLib.PRIORITY_DEFAULT,
                                             GLib.IO_HUP | GLib.IO_ERR | GLib.IO_IN,
                                             self._write_sock_event)
        fd = dbus.types.UnixFd(theirs)
        theirs.close()
        self.update({'WriteAcquired': dbus.Boolean(True)})
        return (fd, dbus.UInt16(DEFAULT_MTU))

    def _write_sock_event(self, _fd, cond):
        if cond & GLib.IO_IN:
            try:
                data = self.write_sock.recv(65536)
            except OSError:
                data = b''
            if data:
                self.d.value = data
                WRITES.setdefault(self.path, []).append((data, {'acquired': True}, 'command'))
                return True
        self.release_write_sock()
        return False

    def release_write_sock(self, emit_change=True):
        if self.write_sock is None:
            return
        if self.write_watch is not None:
            GLib.source_remove(self.write_watch)
            self.write_watch = None
        self.write_sock.close()
        self.write_sock = None
        if emit_change and self.path in mockobject.objects:
            self.update({'WriteAcquired': dbus.Boolean(False)})

    def notify(self, data):
        '''The peripheral sends a notification/indication.'''
        self.d.value = data
        receivers = 0
        if self.notify_sock is not None and self.socket_drops > 0:
            # as bluetoothd does when the socket is full: the value is gone, silently
            self.socket_drops -= 1
        elif self.notify_sock is not None:
            try:
                self.notify_sock.send(data)
                receivers += 1
            except BlockingIOError:
                pass    # full: bluetoothd drops it silently too
            except OSError:
                self.release_notify_sock()
        # src/gatt-client.c notify_cb runs once per registered StartNotify
        # session (each has its own bt_gatt_client_register_notify), and each
        # run writes the cache and emits PropertiesChanged(Value) with FLUSH
        # (write_characteristic_cb): N sessions → N identical signals.
        registered = [s for s, reg in self.notify_clients.items() if reg]
        for _ in registered:
            self.value_signal(data)
        receivers += len(registered)
        return receivers


class GattDescriptorObject(BluezObject):
    def __init__(self, d):
        super().__init__(d.path, GATT_DESC_IFACE, {
            'UUID': dbus.String(d.uuid),
            'Characteristic': dbus.ObjectPath(d.chrc.path),
            'Value': _ay(b''),
        })   # src/gatt-client.c descriptor_properties (5.66: no Flags, no Handle)
        self.d = d

    @dbus.service.method(GATT_DESC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        _check_injected(self.path, 'ReadValue')
        # src/gatt-client.c descriptor_read_value / desc_read_cb: every
        # successful read is cached and signalled (write_descriptor_cb)
        if not _device_connected(self.d.chrc.service.advertiser):
            raise _err(ERR + 'Failed', 'Not connected')
        offset = _read_options(options)
        if not any('read' in f for f in self.d.flags):
            raise _err(ERR + 'NotPermitted', 'Read not permitted')
        if offset > len(self.d.value):
            raise _err(ERR + 'InvalidOffset', 'Invalid offset')
        data = self.d.value[offset:]
        cached = _bytes(self.props[GATT_DESC_IFACE].get('Value', b''))
        self.update({'Value': _ay(data if offset == 0 else cached[:offset] + data)})
        return _ay(data)

    @dbus.service.method(GATT_DESC_IFACE, in_signature='aya{sv}', out_signature='')
    def WriteValue(self, value, options):
        _check_injected(self.path, 'WriteValue')
        if not _device_connected(self.d.chrc.service.advertiser):
            raise _err(ERR + 'Failed', 'Not connected')
        if not any('write' in f for f in self.d.flags):
            raise _err(ERR + 'NotPermitted', 'Write not permitted')
        offset = _read_options(options)
        if offset > len(self.d.value):
            raise _err(ERR + 'InvalidOffset', 'Invalid offset')
        data = _bytes(value)
        self.d.value = self.d.value[:offset] + data
        WRITES.setdefault(self.path, []).append((data, dict(options), 'request'))


# ---------------------------------------------------------------------------
# behaviour

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
            raise _bluez_invalid()
        if not _typed(value, types[key]):
            raise _bluez_invalid()
        if key == 'UUIDs':
            uuids = []
            for u in value:
                c = canonical_uuid(u)
                if c is None:
                    raise _bluez_invalid()
                uuids.append(c)
            out[key] = uuids
        elif key == 'Transport':
            if str(value) not in ('auto', 'bredr', 'le'):
                raise _bluez_invalid()
            out[key] = str(value)
        elif key in ('RSSI', 'Pathloss'):
            v = int(value)
            if key == 'RSSI' and not -127 <= v <= 20:
                raise _bluez_invalid()
            if key == 'Pathloss' and v > 137:
                raise _bluez_invalid()
            out[key] = v
        elif key in ('DuplicateData', 'Discoverable'):
            out[key] = bool(value)
        else:
            out[key] = str(value)
    if 'RSSI' in out and 'Pathloss' in out:
        raise _bluez_invalid()
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
        'UUIDs': dbus.Array([canonical_uuid(u) for u in p.get('UUIDs', [])], signature='s'),
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
    obj = DeviceObject(adv, device_props(adv, with_rssi))
    _add_object(obj)
    if announce:
        emit_interfaces_added(obj.path, obj.props)
    return obj


def discover(adv):
    '''The adapter received an advertisement from adv.'''
    st = adv.adapter
    if not adv.in_range or not st.wants(adv):
        return
    obj = mockobject.objects.get(adv.path)
    if obj is None:
        create_device(adv)
        return
    current = obj.props[DEVICE_IFACE]
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


def _advertise_all(st):
    for adv in list(st.advertisers.values()):
        discover(adv)
    return False


def end_discovery(st):
    '''Last discovery session ended: Discovering goes false at once; the
    clean-up of found devices (bluetoothd: discovery_cleanup) follows when
    the stand-in is idle, after the reply.'''
    obj = st.obj
    if obj.props[ADAPTER_IFACE]['Discovering']:
        obj.update({'Discovering': dbus.Boolean(False)})
    GLib.idle_add(_discovery_cleanup, st)


def _discovery_cleanup(st):
    '''RSSI/TxPower of found devices are invalidated; temporary devices that
    are not connectable are removed.'''
    if st.sessions or ADAPTERS.get(st.name) is not st:
        return False     # a new discovery began meanwhile, or the adapter went
    prefix = st.path + '/dev_'
    for path in [p for p in list(mockobject.objects) if p.startswith(prefix) and '/' not in p[len(prefix):]]:
        dev = mockobject.objects.get(path)
        if not isinstance(dev, DeviceObject):
            continue
        p = dev.props[DEVICE_IFACE]
        if not dev.connected and not p['Paired'] and not p['Trusted'] and \
                not dev.advertiser.connectable:
            remove_device(dev)
        else:
            dev.update({}, invalidated=['RSSI', 'TxPower'])
    return False


def set_powered(st, on):
    obj = st.obj
    props = obj.props[ADAPTER_IFACE]
    if bool(props['Powered']) == on:
        return
    if not on:
        for sender in st.sessions:
            st.events.append(('PoweredOff', sender))
        st.sessions.clear()
        end_discovery(st)
        for path in [p for p in list(mockobject.objects) if p.startswith(st.path + '/dev_')]:
            dev = mockobject.objects.get(path)
            if isinstance(dev, DeviceObject) and dev.connected:
                disconnect_device(dev)
    obj.update({'Powered': dbus.Boolean(on), 'PowerState': dbus.String('on' if on else 'off')})
    if not on and props['Discoverable']:
        obj.update({'Discoverable': dbus.Boolean(False)})


def connect_device(dev):
    dev.update({'Connected': dbus.Boolean(True)})
    GLib.timeout_add(10, _resolve_services, dev)


def _resolve_services(dev):
    if not dev.connected or dev.path not in mockobject.objects:
        return False
    for svc in dev.advertiser.services:
        export_service(svc)     # (kept objects are not announced again)
    for path in list(dev.gatt_paths):
        obj = mockobject.objects.get(path)
        if isinstance(obj, GattCharacteristicObject):
            obj.link_up()
    dev.update({'ServicesResolved': dbus.Boolean(True)})
    return False


def export_service(svc):
    if svc.path not in mockobject.objects:
        o = GattServiceObject(svc)
        _add_object(o)
        _note_child(svc.advertiser, o.path)
        emit_interfaces_added(o.path, o.props)
    for chrc in svc.characteristics:
        export_characteristic(chrc)


def export_characteristic(chrc):
    if chrc.path not in mockobject.objects:
        o = GattCharacteristicObject(chrc)
        _add_object(o)
        _note_child(chrc.service.advertiser, o.path)
        emit_interfaces_added(o.path, o.props)
    for desc in chrc.descriptors:
        export_descriptor(desc)


def export_descriptor(desc):
    if desc.path not in mockobject.objects:
        o = GattDescriptorObject(desc)
        _add_object(o)
        _note_child(desc.chrc.service.advertiser, o.path)
        emit_interfaces_added(o.path, o.props)


def _note_child(adv, path):
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, DeviceObject):
        dev.gatt_paths.append(path)


def _unexport_gatt(dev):
    '''Removes the device's exported GATT objects, descriptors first.'''
    paths, dev.gatt_paths = dev.gatt_paths, []
    for path in reversed(paths):
        _unexport(path)


def _children(path):
    '''Exported objects below path, deepest first (O(objects)).'''
    kids = [p for p in mockobject.objects if p.startswith(path + '/')]
    kids.sort(key=lambda p: p.count('/'), reverse=True)
    return kids


def _unexport(path):
    obj = _remove_object(path)
    if obj is None:
        return
    if isinstance(obj, GattCharacteristicObject):
        obj.release_notify_sock(emit_change=False)
        obj.release_write_sock(emit_change=False)
    emit_interfaces_removed(path, sorted(obj.props.keys()))


def gatt_cache_enabled(dev):
    '''src/device.c gatt_cache_is_enabled: main.conf [GATT] Cache.'''
    mode = GATT_CACHE[0]
    return mode == 'always' or (mode == 'yes' and bool(dev.props[DEVICE_IFACE]['Paired']))


def disconnect_device(dev):
    '''The link goes (Disconnect, the remote, power-off).

    src/device.c device_remove_connection → device_set_svc_refreshed(false)
    (ServicesResolved false); att_disconnected_cb → src/gatt-client.c
    btd_gatt_client_disconnected (sockets closed, notify sessions kept but
    unregistered); attio_cleanup → gatt_client_cleanup → gatt_cache_cleanup,
    which clears the GATT database (the objects go, and their notify
    sessions with them) only when the cache is disabled: with the default
    Cache=always the objects stay exported.'''
    _fail_hung_calls(dev.path)
    if dev.props[DEVICE_IFACE]['ServicesResolved']:
        dev.update({'ServicesResolved': dbus.Boolean(False)})
    for path in list(dev.gatt_paths):
        obj = mockobject.objects.get(path)
        if isinstance(obj, GattCharacteristicObject):
            obj.link_down()
    if not gatt_cache_enabled(dev):
        _unexport_gatt(dev)
    dev.update({'Connected': dbus.Boolean(False)})


def _fail_hung_calls(prefix):
    '''Parked calls on attributes below prefix are answered as bluetoothd
    answers pending ATT requests when the link goes.'''
    keep = []
    for path, method, ok, err in HUNG_CALLS:
        if path.startswith(prefix + '/'):
            err(_err(ERR + 'Failed', 'Not connected'))
        else:
            keep.append((path, method, ok, err))
    HUNG_CALLS[:] = keep


def remove_device(dev):
    if dev.connected:
        disconnect_device(dev)
    _unexport_gatt(dev)
    _unexport(dev.path)


def client_gone(name):
    client_gone_agent(name)
    for st in ADAPTERS.values():
        st.filters.pop(name, None)
        if name in st.sessions:
            log(f'client {name} left the bus: ending its discovery on {st.name}')
            del st.sessions[name]
            st.events.append(('ClientLeft', name))
            if not st.sessions:
                end_discovery(st)
    for obj in list(mockobject.objects.values()):
        if isinstance(obj, GattCharacteristicObject) and name in obj.notify_clients:
            obj.drop_notify_client(name)


def _on_name_owner_changed(name, old_owner, new_owner):
    if str(name).startswith(':') and not new_owner:
        client_gone(str(name))


def _watch_clients():
    global _WATCHING  # pylint: disable=global-statement
    if _WATCHING:
        return
    _bus().add_signal_receiver(_on_name_owner_changed, signal_name='NameOwnerChanged',
                               dbus_interface='org.freedesktop.DBus',
                               bus_name='org.freedesktop.DBus',
                               path='/org/freedesktop/DBus')
    _WATCHING = True


# ---------------------------------------------------------------------------
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
                raise _mock_err('InvalidArgs', 'Connectable must be b')
            connectable = bool(value)
            continue
        sig = ADVERTISER_KEYS.get(key)
        if sig is None:
            raise _mock_err('InvalidArgs', f'unknown advertiser property {key}')
        if sig == 'a{qv}':
            if not isinstance(value, dbus.Dictionary):
                raise _mock_err('InvalidArgs', f'{key} must be a{{qv}}')
            md = {}
            for company, data in value.items():
                if not _typed(data, 'ay'):
                    raise _mock_err('InvalidArgs', f'{key} values must be ay')
                md[dbus.UInt16(int(company))] = _ay(_bytes(data), variant_level=1)
            out[key] = dbus.Dictionary(md, signature='qv')
        elif sig == 'a{sv}':
            if not isinstance(value, dbus.Dictionary):
                raise _mock_err('InvalidArgs', f'{key} must be a{{sv}}')
            sd = {}
            for uuid, data in value.items():
                c = canonical_uuid(uuid)
                if c is None or not _typed(data, 'ay'):
                    raise _mock_err('InvalidArgs', f'{key}: bad UUID or value')
                sd[dbus.String(c)] = _ay(_bytes(data), variant_level=1)
            out[key] = dbus.Dictionary(sd, signature='sv')
        elif sig == 'ay':
            if not _typed(value, 'ay'):
                raise _mock_err('InvalidArgs', f'{key} must be ay')
            out[key] = _ay(_bytes(value))
        else:
            if not _typed(value, sig):
                raise _mock_err('InvalidArgs', f'{key} must be {sig}')
            if key == 'UUIDs':
                uuids = []
                for u in value:
                    c = canonical_uuid(u)
                    if c is None:
                        raise _mock_err('InvalidArgs', f'bad UUID {u}')
                    uuids.append(c)
                out[key] = dbus.Array(uuids, signature='s')
            elif key == 'AddressType':
                if str(value) not in ('public', 'random'):
                    raise _mock_err('InvalidArgs', 'AddressType must be public or random')
                out[key] = dbus.String(value)
            else:
                out[key] = value
    return out, connectable


def _gatt_flags(flags):
    return [str(f) for f in flags]


def _find_def(path):
    path = str(path)
    for st in ADAPTERS.values():
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
    raise _mock_err('NoSuchAttribute', f'no GATT attribute {path}')


# ---------------------------------------------------------------------------
# Mock control API (org.freedesktop.DBus.Mock on /)

@dbus.service.method(MOCK_IFACE, in_signature='sssb', out_signature='o')
def AddAdapter(self, device_name, address, name, powered):
    '''AddAdapter(hci s, address s, name s, powered b) → o

    Adds /org/bluez/<hci> with Adapter1 (Name and Alias = name).'''
    device_name = str(device_name)
    if not re.fullmatch(r'hci[0-9]+', device_name):
        raise _mock_err('InvalidArgs', 'adapter name must be hciN')
    if not _is_address(address):
        raise _mock_err('InvalidArgs', f'bad address {address}')
    if device_name in ADAPTERS:
        raise _mock_err('AdapterExists', f'{device_name} exists')
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
        'Modalias': dbus.String('usb:v1D6Bp0246d054F'),
        'Roles': dbus.Array(['central', 'peripheral'], signature='s'),
    }
    obj = AdapterObject(device_name, props)
    ADAPTERS[device_name] = AdapterState(device_name, obj)
    _add_object(obj)
    emit_interfaces_added(obj.path, obj.props)
    return dbus.ObjectPath(obj.path)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def RemoveAdapter(self, device_name):
    '''RemoveAdapter(hci s): the controller goes away (devices first).'''
    st = _adapter_state(device_name)
    for path in _children(st.path):
        _unexport(path)
    _unexport(st.path)
    del ADAPTERS[st.name]


@dbus.service.method(MOCK_IFACE, in_signature='sb', out_signature='')
def SetAdapterPowered(self, device_name, powered):
    '''SetAdapterPowered(hci s, powered b): as if rfkill/another tool did it.
    Powering off ends all discovery sessions and connections.'''
    set_powered(_adapter_state(device_name), bool(powered))


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}', out_signature='o')
def AddAdvertiser(self, device_name, address, properties):
    '''AddAdvertiser(hci s, address s, properties a{sv}) → o (future device path)

    See parse_advertiser_props for keys. If a discovery is running on the
    adapter, the device is discovered at once.'''
    st = _adapter_state(device_name)
    if not _is_address(address):
        raise _mock_err('InvalidArgs', f'bad address {address}')
    if str(address).upper() in st.advertisers:
        raise _mock_err('AdvertiserExists', f'{address} exists on {device_name}')
    props, connectable = parse_advertiser_props(properties)
    adv = Advertiser(st, str(address), props, True if connectable is None else connectable)
    st.advertisers[adv.address] = adv
    if st.sessions:
        discover(adv)
    return dbus.ObjectPath(adv.path)


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}as', out_signature='')
def UpdateAdvertiser(self, device_name, address, properties, removed):
    '''UpdateAdvertiser(hci s, address s, changed a{sv}, removed as)

    The peripheral advertises again with changed data (keys removed from its
    advertisement in `removed`). While discovering, the device's changes are
    signalled (PropertiesChanged of what differs; ManufacturerData/
    ServiceData every time while DuplicateData is on).'''
    adv = _advertiser(device_name, address)
    props, connectable = parse_advertiser_props(properties)
    adv.props.update(props)
    for key in removed:
        adv.props.pop(str(key), None)
    if connectable is not None:
        adv.connectable = connectable
    adv.in_range = True
    discover(adv)


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def RemoveAdvertiser(self, device_name, address):
    '''RemoveAdvertiser(hci s, address s): the peripheral leaves; its Device1
    object (if any) is removed (InterfacesRemoved), as by RemoveDevice.'''
    st = _adapter_state(device_name)
    adv = _advertiser(device_name, address)
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, DeviceObject):
        remove_device(dev)
    del st.advertisers[adv.address]


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='a{sv}')
def GetLastDiscoveryFilter(self, device_name):
    '''GetLastDiscoveryFilter(hci s) → a{sv}: the dict of the last accepted
    SetDiscoveryFilter call on the adapter (by any client), as sent.'''
    return _adapter_state(device_name).last_filter


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='u')
def GetDiscoveryFilterCallCount(self, device_name):
    '''GetDiscoveryFilterCallCount(hci s) → u: accepted SetDiscoveryFilter calls.'''
    return dbus.UInt32(_adapter_state(device_name).filter_calls)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='as')
def GetDiscoverySessions(self, device_name):
    '''GetDiscoverySessions(hci s) → as: unique names of clients with a
    running discovery session on the adapter.'''
    return dbus.Array(sorted(_adapter_state(device_name).sessions), signature='s')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='a(ss)')
def GetDiscoveryLog(self, device_name):
    '''GetDiscoveryLog(hci s) → a(event s, client s): successful
    SetDiscoveryFilter/StartDiscovery/StopDiscovery calls in order, plus
    "ClientLeft" (a client with a session left the bus) and "PoweredOff"
    (a session ended by power-off), each with the client's unique name.'''
    return dbus.Array([dbus.Struct((dbus.String(e), dbus.String(c)))
                       for e, c in _adapter_state(device_name).events], signature='(ss)')


@dbus.service.method(MOCK_IFACE, in_signature='sb', out_signature='')
def SetFilterEnforcement(self, device_name, enforce):
    '''SetFilterEnforcement(hci s, enforce b): false reports every advertiser
    whatever the filters (as when another client scans unfiltered).'''
    st = _adapter_state(device_name)
    st.enforce_filters = bool(enforce)
    if st.sessions:
        GLib.timeout_add(10, _advertise_all, st)


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
    st = _adapter_state(device_name)
    if not st.sessions:
        raise _mock_err('NotDiscovering', f'{device_name} is not discovering')
    n_devices = int(n_devices)
    n_updates = int(n_updates)
    if n_devices == 0 and n_updates > 0:
        raise _mock_err('InvalidArgs', 'updates need devices')
    bus = _bus()
    advs = []
    added = 0
    for i in range(n_devices):
        address = 'C0:00:00:%02X:%02X:%02X' % ((i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
        adv = st.advertisers.get(address)
        if adv is None:
            adv = Advertiser(st, address, {
                'AddressType': dbus.String('random'),
                'Name': dbus.String('burst-%05d' % i),
                'RSSI': dbus.Int16(-60),
                'ManufacturerData': dbus.Dictionary(
                    {dbus.UInt16(0xffff): _ay(struct.pack('>I', i), variant_level=1)},
                    signature='qv'),
                'AdvertisingFlags': _ay(b'\x06'),
            }, False)
            st.advertisers[address] = adv
        advs.append(adv)
        if adv.path not in mockobject.objects:
            create_device(adv)
            added += 1
    log(f'EmitAdvertisementBurst {device_name}: {added} devices added')
    fast = _fast_emitter()
    body, rssi_off, md_off = _rssi_md_body(0xffff)
    headers = {}
    for i in range(n_updates):
        d = i % n_devices
        adv = advs[d]
        rssi = -40 - i % 50
        payload = struct.pack('>II', d, i)
        dp = mockobject.objects[adv.path].props[DEVICE_IFACE]
        if fast is not None:
            h = headers.get(d)
            if h is None:
                h = headers[d] = _signal_header(adv.path, PROPS_IFACE, 'PropertiesChanged',
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
                msg = dbus.lowlevel.SignalMessage(adv.path, PROPS_IFACE, 'PropertiesChanged')
                msg.append(DEVICE_IFACE, {'RSSI': v_rssi, 'ManufacturerData': md}, [],
                           signature='sa{sv}as')
                bus.send_message(msg)
    log(f'EmitAdvertisementBurst {device_name}: {added} added, {n_updates} updates')
    return (dbus.UInt32(added), dbus.UInt32(n_updates))


@dbus.service.method(MOCK_IFACE, in_signature='sssb', out_signature='o')
def AddGattService(self, device_name, address, uuid, primary):
    '''AddGattService(hci s, address s, uuid s, primary b) → o

    Adds a service to the advertiser's GATT database. Objects are exported
    while the device is connected (after Connect, before ServicesResolved).'''
    adv = _advertiser(device_name, address)
    c = canonical_uuid(uuid)
    if c is None:
        raise _mock_err('InvalidArgs', f'bad UUID {uuid}')
    svc = GattServiceDef(adv, adv.alloc_handle(), c, bool(primary))
    adv.services.append(svc)
    _export_if_resolved(adv, svc)
    return dbus.ObjectPath(svc.path)


@dbus.service.method(MOCK_IFACE, in_signature='osasay', out_signature='o')
def AddGattCharacteristic(self, service, uuid, flags, value):
    '''AddGattCharacteristic(service o, uuid s, flags as, value ay) → o

    flags as in BlueZ: read, write, write-without-response, notify,
    indicate, reliable-write, encrypt-read, ...'''
    svc = _find_def(service)
    if not isinstance(svc, GattServiceDef):
        raise _mock_err('InvalidArgs', f'{service} is not a service')
    c = canonical_uuid(uuid)
    if c is None:
        raise _mock_err('InvalidArgs', f'bad UUID {uuid}')
    chrc = GattCharacteristicDef(svc, svc.advertiser.alloc_handle(2), c,
                                 _gatt_flags(flags), _bytes(value))
    svc.characteristics.append(chrc)
    _export_if_resolved(svc.advertiser, svc)
    return dbus.ObjectPath(chrc.path)


@dbus.service.method(MOCK_IFACE, in_signature='osasay', out_signature='o')
def AddGattDescriptor(self, characteristic, uuid, flags, value):
    '''AddGattDescriptor(characteristic o, uuid s, flags as, value ay) → o'''
    chrc = _find_def(characteristic)
    if not isinstance(chrc, GattCharacteristicDef):
        raise _mock_err('InvalidArgs', f'{characteristic} is not a characteristic')
    c = canonical_uuid(uuid)
    if c is None:
        raise _mock_err('InvalidArgs', f'bad UUID {uuid}')
    desc = GattDescriptorDef(chrc, chrc.service.advertiser.alloc_handle(), c,
                             _gatt_flags(flags), _bytes(value))
    chrc.descriptors.append(desc)
    _export_if_resolved(chrc.service.advertiser, chrc.service)
    return dbus.ObjectPath(desc.path)


def _export_if_resolved(adv, svc):
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, DeviceObject) and dev.props[DEVICE_IFACE]['ServicesResolved']:
        export_service(svc)


@dbus.service.method(MOCK_IFACE, in_signature='oay', out_signature='u')
def EmitNotification(self, characteristic, value):
    '''EmitNotification(characteristic o, value ay) → u receivers

    The peripheral notifies: PropertiesChanged(Value) if some client did
    StartNotify, and/or the bytes on an AcquireNotify socket.'''
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, GattCharacteristicObject):
        raise _mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    return dbus.UInt32(obj.notify(_bytes(value)))


@dbus.service.method(MOCK_IFACE, in_signature='ouu', out_signature='u')
def EmitNotifications(self, characteristic, first, count):
    '''EmitNotifications(characteristic o, first u, count u) → u values sent

    The peripheral notifies count values as fast as it can, each a uint32 LE
    sequence number first, first+1, … (for loss and order checks).'''
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, GattCharacteristicObject):
        raise _mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    for seq in range(int(first), int(first) + int(count)):
        obj.notify(struct.pack('<I', seq & 0xffffffff))
    return dbus.UInt32(count)


@dbus.service.method(MOCK_IFACE, in_signature='ou', out_signature='')
def DropSocketNotifications(self, characteristic, count):
    '''DropSocketNotifications(characteristic o, count u): the next count values
    are not written to the AcquireNotify socket — the silent loss bluetoothd
    causes when that socket is full or not yet ready.'''
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, GattCharacteristicObject):
        raise _mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    obj.socket_drops = int(count)


@dbus.service.method(MOCK_IFACE, in_signature='oay', out_signature='')
def SetGattValue(self, attribute, value):
    '''SetGattValue(attribute o, value ay): the peripheral's value changes
    silently (seen on the next ReadValue).'''
    _find_def(attribute).value = _bytes(value)


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='a(aysa{sv})')
def GetGattWrites(self, attribute):
    '''GetGattWrites(attribute o) → a(value ay, type s, options a{sv}):
    writes the peripheral received (WriteValue and AcquireWrite).'''
    out = []
    for data, options, kind in WRITES.get(str(attribute), []):
        opts = {str(k): v for k, v in options.items()}
        out.append(dbus.Struct((_ay(data), dbus.String(kind),
                                dbus.Dictionary(opts, signature='sv'))))
    return dbus.Array(out, signature='(aysa{sv})')


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='')
def DropConnection(self, device):
    '''DropConnection(device o): the peripheral disconnects (remote side).'''
    dev = mockobject.objects.get(str(device))
    if not isinstance(dev, DeviceObject):
        raise _mock_err('NoSuchDevice', f'{device} is not a device')
    if dev.connected:
        disconnect_device(dev)


@dbus.service.method(MOCK_IFACE, in_signature='ssss', out_signature='')
def InjectError(self, path, method, error_name, message):
    '''InjectError(path s, method s, error_name s, message s): the next and
    all later calls of method on path fail with that error; an empty
    error_name clears it. E.g. ("/org/bluez/hci0", "StartDiscovery",
    "org.bluez.Error.InProgress", "Operation already in progress").'''
    if error_name:
        INJECTED_ERRORS[(str(path), str(method))] = [str(error_name), str(message), None]
    else:
        INJECTED_ERRORS.pop((str(path), str(method)), None)


@dbus.service.method(MOCK_IFACE, in_signature='ssssu', out_signature='')
def InjectErrorTimes(self, path, method, error_name, message, count):
    '''InjectErrorTimes(path s, method s, error_name s, message s, count u):
    the next `count` calls of method on path fail with that error, later
    ones behave normally (e.g. Connect failing once with
    "le-connection-abort-by-local").'''
    if int(count) > 0:
        INJECTED_ERRORS[(str(path), str(method))] = [str(error_name), str(message), int(count)]


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='as')
def GetCalls(self, path):
    '''GetCalls(path s) → as: the BlueZ API methods called on path, in
    order (failed and unanswered calls included); path "" → "path method"
    for every call.'''
    if not str(path):
        return dbus.Array([f'{p} {m}' for p, m in CALLS], signature='s')
    return dbus.Array([m for p, m in CALLS if p == str(path)], signature='s')


@dbus.service.method(MOCK_IFACE, in_signature='ssb', out_signature='')
def HangMethod(self, path, method, hang):
    '''HangMethod(path s, method s, hang b): calls of method (ReadValue or
    WriteValue of a characteristic, Connect of a device) on path are never answered while hang is
    true (unless the device disconnects: then they fail "Not connected", as
    in bluetoothd).'''
    key = (str(path), str(method))
    if hang:
        HANGING.add(key)
    else:
        HANGING.discard(key)


@dbus.service.method(MOCK_IFACE, in_signature='ssa{sv}as', out_signature='')
def SetProperties(self, path, interface, changed, removed):
    '''SetProperties(path s, interface s, changed a{sv}, removed as): sets
    properties to the values given — any D-Bus type, also one BlueZ's API
    does not allow — and removes those in `removed`; one PropertiesChanged.
    For testing what a client does with malformed objects.'''
    obj = mockobject.objects.get(str(path))
    if not isinstance(obj, BluezObject) or str(interface) not in obj.props:
        raise _mock_err('NoSuchObject', f'{path} has no {interface}')
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
    if method and method not in AGENT_METHODS:
        raise _mock_err('InvalidArgs', f'unknown agent method {method}')
    if method:
        PAIRING[str(device)] = (method, int(value))
    else:
        PAIRING.pop(str(device), None)


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(sss)')
def GetAgentLog(self):
    '''GetAgentLog() → a(method s, device s, outcome s): agent calls made by
    Pair; outcome "ok", "ok:<answer>" or "error:<name>: <message>".'''
    return dbus.Array([dbus.Struct((dbus.String(m), dbus.String(d), dbus.String(o)))
                       for m, d, o in AGENT_LOG], signature='(sss)')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssss)')
def GetPairLog(self):
    '''GetPairLog() → a(device s, caller s, agent owner s, io capability s):
    one entry per Device1.Pair that got past its checks, with the IO
    capability bluetoothd would send to the kernel (src/device.c pair_device:
    the caller's agent, else the default agent; none → NoInputNoOutput;
    agent owner "" when there is no agent).'''
    return dbus.Array([dbus.Struct(tuple(dbus.String(x) for x in e)) for e in PAIR_LOG],
                      signature='(ssss)')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def SetGattCache(self, mode):
    '''SetGattCache(mode s): main.conf [GATT] Cache: "always" (bluetoothd's
    default: GATT objects and StartNotify sessions survive a disconnection),
    "yes" (only for paired devices) or "no" (objects removed on
    disconnection). src/device.c gatt_cache_is_enabled.'''
    if str(mode) not in ('always', 'yes', 'no'):
        raise _mock_err('InvalidArgs', f'bad cache mode {mode}')
    GATT_CACHE[0] = str(mode)


def _chrc_obj(characteristic):
    obj = mockobject.objects.get(str(characteristic))
    if not isinstance(obj, GattCharacteristicObject):
        raise _mock_err('NoSuchAttribute', f'{characteristic} is not an exported characteristic')
    return obj


@dbus.service.method(MOCK_IFACE, in_signature='o', out_signature='u')
def GetValueSignalCount(self, characteristic):
    '''GetValueSignalCount(characteristic o) → u: PropertiesChanged(Value)
    signals the characteristic has emitted (notifications × registered
    StartNotify sessions, plus one per successful ReadValue).'''
    return dbus.UInt32(VALUE_SIGNALS.get(str(characteristic), 0))


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
    return dbus.Array([dbus.Struct((dbus.String(p), dbus.String(c))) for p, c in AGENTS.values()],
                      signature='(ss)')


# agent method → (in signature, args builder, answer signature)
AGENT_METHODS = {
    'RequestConfirmation': ('ou', lambda dev, v: [dbus.ObjectPath(dev), dbus.UInt32(v)]),
    'DisplayPasskey': ('ouq', lambda dev, v: [dbus.ObjectPath(dev), dbus.UInt32(v), dbus.UInt16(0)]),
    'RequestPasskey': ('o', lambda dev, v: [dbus.ObjectPath(dev)]),
    'RequestPinCode': ('o', lambda dev, v: [dbus.ObjectPath(dev)]),
    'DisplayPinCode': ('os', lambda dev, v: [dbus.ObjectPath(dev), dbus.String(str(v))]),
    'RequestAuthorization': ('o', lambda dev, v: [dbus.ObjectPath(dev)]),
}


# BR/EDR legacy PIN pairing asks the agent whatever its IO capability (the
# kernel's PIN Code Request → src/adapter.c pin_code_request →
# src/device.c device_request_pincode; no io_cap check)
PIN_METHODS = {'RequestPinCode', 'DisplayPinCode'}

# IO capability → agent methods a pairing can use with it (the SMP method
# tables: DisplayOnly can only show a passkey, KeyboardOnly only enter one,
# NoInputNoOutput nothing, i.e. Just Works).
IO_CAP_METHODS = {
    'DisplayOnly': {'DisplayPasskey', 'DisplayPinCode', 'RequestAuthorization'},
    'DisplayYesNo': {'RequestConfirmation', 'DisplayPasskey', 'DisplayPinCode',
                     'RequestAuthorization'},
    'KeyboardOnly': {'RequestPasskey', 'RequestPinCode', 'RequestAuthorization'},
    'KeyboardDisplay': set(AGENT_METHODS),
    'NoInputNoOutput': set(),
}


def _agent_client(sender):
    '''src/agent.c agent_get: the caller's agent, else the default agent.'''
    if sender in AGENTS:
        return sender
    if DEFAULT_AGENT and DEFAULT_AGENT[0][0] in AGENTS:
        return DEFAULT_AGENT[0][0]
    return None


def ask_agent(dev, sender, method, value, ok, err):
    '''Pair's conversation with an agent (bluetoothd: agent.c).'''
    client = _agent_client(sender)
    if client is None or client not in AGENTS:
        AGENT_LOG.append((method, dev.path, 'error:no agent'))
        err(_err(ERR + 'AuthenticationFailed', 'Authentication Failed (no agent)'))
        return
    agent_path = AGENTS[client][0]
    sig, build = AGENT_METHODS[method]

    def on_reply(*answer):
        got = answer[0] if answer else None
        AGENT_LOG.append((method, dev.path, 'ok' if got is None else f'ok:{got}'))
        expected = {'RequestPasskey': value, 'RequestPinCode': str(value)}.get(method)
        if expected is not None and (got is None or type(expected)(got) != expected):
            err(_err(ERR + 'AuthenticationFailed', 'Authentication Failed'))
            return
        dev.paired()
        ok()

    def on_error(e):
        name = e.get_dbus_name() or ''
        AGENT_LOG.append((method, dev.path, f'error:{name}: {e.get_dbus_message()}'))
        if name == ERR + 'Rejected':
            err(_err(ERR + 'AuthenticationRejected', 'Authentication Rejected'))
        elif name == ERR + 'Canceled':
            err(_err(ERR + 'AuthenticationCanceled', 'Authentication Canceled'))
        else:
            err(_err(ERR + 'AuthenticationFailed', 'Authentication Failed'))

    log(f'Pair {dev.path}: {method} to agent {agent_path} of {client}')
    _bus().call_async(client, agent_path, 'org.bluez.Agent1', method, sig, build(dev.path, value),
                      on_reply, on_error, timeout=60)


class AgentManagerObject(BluezObject):
    '''/org/bluez: AgentManager1 (agents per client, as bluetoothd keeps
    them) and ProfileManager1.'''

    CAPABILITIES = ('DisplayOnly', 'DisplayYesNo', 'KeyboardOnly', 'NoInputNoOutput',
                    'KeyboardDisplay', '')

    def __init__(self):
        super().__init__('/org/bluez', AGENT_MANAGER_IFACE, {})
        self.props['org.bluez.ProfileManager1'] = dbus.Dictionary({}, signature='sv')

    @dbus.service.method(AGENT_MANAGER_IFACE, in_signature='os', out_signature='',
                         sender_keyword='sender')
    def RegisterAgent(self, agent, capability, sender=None):
        log(f'RegisterAgent {agent} {capability} from {sender}')
        _check_injected(self.path, 'RegisterAgent')
        if str(capability) not in self.CAPABILITIES:
            raise _bluez_invalid()
        if sender in AGENTS:
            raise _err(ERR + 'AlreadyExists', 'Already Exists')
        AGENTS[sender] = (str(agent), str(capability) or 'KeyboardDisplay')
        # src/agent.c agent_create: every agent joins default_agents; the
        # first one (into an empty queue) is the default
        DEFAULT_AGENT.append((sender, str(agent)))
        _watch_clients()

    @dbus.service.method(AGENT_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterAgent(self, agent, sender=None):
        log(f'UnregisterAgent {agent} from {sender}')
        _check_injected(self.path, 'UnregisterAgent')
        if AGENTS.get(sender, ('',))[0] != str(agent):
            raise _err(ERR + 'DoesNotExist', 'Does Not Exist')
        client_gone_agent(sender)

    @dbus.service.method(AGENT_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def RequestDefaultAgent(self, agent, sender=None):
        _check_injected(self.path, 'RequestDefaultAgent')
        if AGENTS.get(sender, ('',))[0] != str(agent):
            raise _err(ERR + 'DoesNotExist', 'Does Not Exist')
        # src/agent.c add_default_agent: moved to the head of default_agents
        DEFAULT_AGENT[:] = [(sender, str(agent))] + [a for a in DEFAULT_AGENT if a[0] != sender]

    @dbus.service.method('org.bluez.ProfileManager1', in_signature='osa{sv}', out_signature='')
    def RegisterProfile(self, profile, uuid, options):
        pass

    @dbus.service.method('org.bluez.ProfileManager1', in_signature='o', out_signature='')
    def UnregisterProfile(self, profile):
        pass


def client_gone_agent(name):
    AGENTS.pop(name, None)
    DEFAULT_AGENT[:] = [a for a in DEFAULT_AGENT if a[0] != name]


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='s')
def StandInVersion(self):
    '''StandInVersion() → s: identifies this template (readiness probe).'''
    return 'bluez_standin 1'


def load(mock, parameters):
    '''Template entry point. parameters (optional, -p JSON):
    {"adapters": [{"name": "hci0", "address": "...", "alias": "...", "powered": true}]}'''
    global ROOT  # pylint: disable=global-statement
    ROOT = mock
    # /org/bluez with AgentManager1 and ProfileManager1 from dbusmock's bluez5
    bluez5.load(mock, parameters)
    # ... but with agents kept per client (Pair asks the caller's agent)
    _remove_object('/org/bluez')
    _add_object(AgentManagerObject())
    # dbusmock broadcasts org.freedesktop.DBus.Mock.MethodCalled from org.bluez
    # for every Mock call and GetManagedObjects; bluetoothd sends no such
    # thing, so keep it quiet unless asked for.
    if not (parameters or {}).get('method_called_signals', False):
        mock.MethodCalled = lambda *_args: None
    _watch_clients()
    for a in (parameters or {}).get('adapters', []):
        AddAdapter(mock, a['name'], a['address'], a.get('alias', a['name']),
                   a.get('powered', True))
