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

Peripheral role, as bluetoothd 5.66's server side (src/gatt-database.c,
src/shared/gatt-server.c, src/advertising.c, src/shared/ad.c; checked by
Fixtures/standin_server_selftest.py): GattManager1.RegisterApplication
calls the application's ObjectManager.GetManagedObjects (asynchronously)
and validates as client_ready_cb does — errors org.bluez.Error.Failed "No
object received" / "No valid service object found" (unknown or empty
Flags, a Service/Characteristic pointing nowhere) / "Failed to create entry
in database" (UUID, Primary, Includes, Handle; GAP/GATT UUIDs), AlreadyExists
for the same owner and path; UnregisterApplication → DoesNotExist when
unknown. An application goes when its owner leaves the bus; objects it adds
later are ignored, a removed service leaves the database.
LEAdvertisingManager1.RegisterAdvertisement reads the object with
Properties.GetAll(org.bluez.LEAdvertisement1) and parses it as
parse_advertisement (Type optional, "broadcast" by default; unknown
Includes ignored); a bad property → Failed "Failed to parse advertisement.",
data over the 31 bytes → Failed "Failed to register advertisement" (or the
former with SetAdvertisingCommands("legacy")); no free instance →
NotPermitted "Maximum advertisements reached". ActiveInstances counts held
advertisements, SupportedInstances the free ones (both signalled). Timeout →
Release() and removal; owner leaving → removal. A registered advertisement
is heard by the stand-in's other adapters (an advertiser: the adapter's
public address when "peripheral", a non-resolvable private address when
"broadcast"; name, UUIDs, manufacturer and service data, appearance,
tx-power carried). Remote centrals (Mock.RemoteConnect …) read, write and
subscribe through bluetoothd's ATT server: permissions checked first,
then the application called with bluetoothd's options; their ATT errors are
org.freedesktop.DBus.Mock.Error.Att.<Name> (ReadNotPermitted 0x02,
WriteNotPermitted 0x03, InsufficientAuthentication 0x05,
RequestNotSupported 0x06, InvalidOffset 0x07, InsufficientAuthorization 0x08,
InvalidAttributeValueLength 0x0d, Unlikely 0x0e, InsufficientEncryption
0x0f, CccImproperlyConfigured 0xfd, ProcedureAlreadyInProgress 0xfe,
Application80…Application9F, Timeout: no answer within the central's ATT
timeout), message "0xNN <application's error name>: <message>".

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
        self.advertise_pending = None   # GLib source of _advertise_all_soon
        # peripheral role (bluetoothd's btd_gatt_database and btd_adv_manager)
        self.apps = []                  # [LocalApp]: database->apps, in order
        self.next_handle = 0x0010       # local GATT database (core services below)
        self.centrals = {}              # address → RemoteCentral (simulated centrals)
        self.ads = []                   # [LocalAdvertisement]: manager->clients
        self.max_ads = 5                # manager->max_ads (read adv features)
        self.adv_instances = set()      # manager->instance_bitmap

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
REPLY_DELAYS = {}      # (path, method) → seconds its reply comes after the work is done (DelayReply)
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


def _reply_later(path, method, ok):
    '''Sends the (empty) reply now, or DelayReply's seconds later.'''
    delay = REPLY_DELAYS.get((str(path), method))
    if not delay:
        ok()
        return
    log(f'{method} {path}: replying in {delay} s (DelayReply)')
    GLib.timeout_add(int(delay * 1000), lambda: ok() and False)


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
        _advertise_all_soon(st)

    @dbus.service.method(ADAPTER_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def StopDiscovery(self, sender=None, ok=None, err=None):
        st = self.state
        log(f'StopDiscovery {self.name} from {sender}')
        try:
            _check_injected(self.path, 'StopDiscovery')
            if not self.props[ADAPTER_IFACE]['Powered']:
                raise _err(ERR + 'NotReady', 'Resource Not Ready')
            if sender not in st.sessions:
                raise _err(ERR + 'Failed', 'No discovery started')
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
            _advertise_all_soon(st)

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


    # -- peripheral role (src/gatt-database.c, src/advertising.c): the work is
    # done by the server-side functions further down

    @dbus.service.method(GATT_MANAGER_IFACE, in_signature='oa{sv}', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def RegisterApplication(self, application, options, sender=None, ok=None, err=None):
        log(f'RegisterApplication {self.name} {application} from {sender}')
        try:
            _check_injected(self.path, 'RegisterApplication')
            gatt_register_app(self.state, sender, str(application), ok, err)
        except dbus.exceptions.DBusException as e:
            err(e)

    @dbus.service.method(GATT_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterApplication(self, application, sender=None):
        log(f'UnregisterApplication {self.name} {application} from {sender}')
        _check_injected(self.path, 'UnregisterApplication')
        gatt_unregister_app(self.state, sender, str(application))

    @dbus.service.method(LE_ADV_MANAGER_IFACE, in_signature='oa{sv}', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def RegisterAdvertisement(self, advertisement, options, sender=None, ok=None, err=None):
        log(f'RegisterAdvertisement {self.name} {advertisement} from {sender}')
        try:
            _check_injected(self.path, 'RegisterAdvertisement')
            adv_register(self.state, sender, str(advertisement), ok, err)
        except dbus.exceptions.DBusException as e:
            err(e)

    @dbus.service.method(LE_ADV_MANAGER_IFACE, in_signature='o', out_signature='',
                         sender_keyword='sender')
    def UnregisterAdvertisement(self, advertisement, sender=None):
        log(f'UnregisterAdvertisement {self.name} {advertisement} from {sender}')
        _check_injected(self.path, 'UnregisterAdvertisement')
        adv_unregister(self.state, sender, str(advertisement))

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

    @dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='',
                         async_callbacks=('ok', 'err'))
    def Disconnect(self, ok=None, err=None):
        log(f'Disconnect {self.path}')
        try:
            _check_injected(self.path, 'Disconnect')
            if not self.connected:
                raise _err(ERR + 'NotConnected', 'Not Connected')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        delay = REPLY_DELAYS.get((self.path, 'Disconnect'))
        if not delay:
            disconnect_device(self)
            ok()
            return
        # src/device.c device_request_disconnect: the link is taken down
        # DISCONNECT_TIMER (2 s in 5.66) later (disconnect_all); then
        # device_remove_connection answers the call and Connected=false
        # follows (a property change goes out when bluetoothd is idle).
        log(f'Disconnect {self.path}: the link goes down in {delay} s (DelayReply)')

        def link_down():
            ok()
            if self.connected:
                disconnect_device(self)
            return False
        GLib.timeout_add(int(delay * 1000), link_down)

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
    st = ADAPTERS.get(dev.adapter_name)
    central = st.centrals.get(dev.advertiser.address) if st else None
    if central is not None and central.connected:
        remote_disconnect(central)      # a remote central: bluetoothd's server side first
        return
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
    server_client_gone(name)
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
    server_adapter_removed(st)
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

    See parse_advertiser_props for keys; also InRange b (default true):
    false, and the peripheral does not advertise until UpdateAdvertiser. If a
    discovery is running on the adapter, the device is discovered at once.'''
    st = _adapter_state(device_name)
    if not _is_address(address):
        raise _mock_err('InvalidArgs', f'bad address {address}')
    if str(address).upper() in st.advertisers:
        raise _mock_err('AdvertiserExists', f'{address} exists on {device_name}')
    properties = dict(properties)
    in_range = properties.pop('InRange', dbus.Boolean(True))
    if not isinstance(in_range, dbus.Boolean):
        raise _mock_err('InvalidArgs', 'InRange must be b')
    props, connectable = parse_advertiser_props(properties)
    adv = Advertiser(st, str(address), props, True if connectable is None else connectable)
    adv.in_range = bool(in_range)
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
        _advertise_all_soon(st)


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
    _advertise_pending_now(st)
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


@dbus.service.method(MOCK_IFACE, in_signature='ssu', out_signature='')
def DelayReply(self, path, method, milliseconds):
    '''DelayReply(path s, method s, milliseconds u): the reply to method on
    path comes that long after the call, as bluetoothd's waits for the
    controller (0: at once again). StopDiscovery of an adapter: the session
    ends at once, the reply later. Disconnect of a device: the link goes down
    (then Connected=false) only with the reply, as 5.66's DISCONNECT_TIMER
    has it.'''
    if milliseconds > 0:
        REPLY_DELAYS[(str(path), str(method))] = int(milliseconds) / 1000
    else:
        REPLY_DELAYS.pop((str(path), str(method)), None)


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


# ---------------------------------------------------------------------------
# peripheral role: bluetoothd 5.66's GATT server side (src/gatt-database.c,
# src/shared/gatt-server.c) and LE advertising (src/advertising.c,
# src/shared/ad.c), with simulated remote centrals (Mock.Remote*)

GATT_PROFILE_IFACE = 'org.bluez.GattProfile1'
LE_ADV_IFACE = 'org.bluez.LEAdvertisement1'
ATT_MOCK_ERR = MOCK_ERR + 'Att.'

DBUS_DEFAULT_TIMEOUT = 25.0     # libdbus's default (-1): GetManagedObjects, GetAll
METHOD_CALL_TIMEOUT = 300.0     # gdbus/client.c METHOD_CALL_TIMEOUT: ReadValue, WriteValue
SERVER = {
    'att_timeout': 30.0,        # the remote central's ATT transaction timeout (shared/att.c)
    'adv_commands': 'extended', # KERNEL_HAS_EXT_ADV_ADD_CMDS (Debian 12's kernel) | "legacy"
    'temporary_timeout': 30.0,  # main.conf TemporaryTimeout: an advertiser's device after it stops
}
SERVER_CALLS = []   # [(path, method, options)] calls made to applications (ServerCalls)
ADV_TX_POWER = 0    # dBm, the TX Power AD the kernel adds for Includes "tx-power"
ADV_RSSI = -50      # what the other adapters of the stand-in hear

# src/shared/att-types.h
PERM_READ, PERM_WRITE = 0x01, 0x02
PERM_READ_ENCRYPT, PERM_WRITE_ENCRYPT = 0x04, 0x08
PERM_READ_AUTHEN, PERM_WRITE_AUTHEN = 0x10, 0x20
PERM_READ_SECURE, PERM_WRITE_SECURE = 0x100, 0x200
PERM_ENCRYPT = PERM_READ_ENCRYPT | PERM_WRITE_ENCRYPT
PERM_AUTHEN = PERM_READ_AUTHEN | PERM_WRITE_AUTHEN
PERM_SECURE = PERM_READ_SECURE | PERM_WRITE_SECURE
PERM_READ_MASK = PERM_READ | PERM_READ_ENCRYPT | PERM_READ_AUTHEN | PERM_READ_SECURE
PERM_WRITE_MASK = PERM_WRITE | PERM_WRITE_ENCRYPT | PERM_WRITE_AUTHEN | PERM_WRITE_SECURE
SECURITY = {'low': 1, 'medium': 2, 'high': 3, 'fips': 4}

PROP_BROADCAST, PROP_READ, PROP_WRITE_WITHOUT_RESP, PROP_WRITE = 0x01, 0x02, 0x04, 0x08
PROP_NOTIFY, PROP_INDICATE, PROP_AUTH, PROP_EXT_PROP = 0x10, 0x20, 0x40, 0x80
EXT_PROP_RELIABLE_WRITE, EXT_PROP_WRITABLE_AUX = 0x01, 0x02

ATT_ERRORS = {
    0x01: 'InvalidHandle', 0x02: 'ReadNotPermitted', 0x03: 'WriteNotPermitted',
    0x04: 'InvalidPdu', 0x05: 'InsufficientAuthentication', 0x06: 'RequestNotSupported',
    0x07: 'InvalidOffset', 0x08: 'InsufficientAuthorization', 0x09: 'PrepareQueueFull',
    0x0a: 'AttributeNotFound', 0x0b: 'AttributeNotLong',
    0x0c: 'InsufficientEncryptionKeySize', 0x0d: 'InvalidAttributeValueLength',
    0x0e: 'Unlikely', 0x0f: 'InsufficientEncryption', 0x10: 'UnsupportedGroupType',
    0x11: 'InsufficientResources', 0x12: 'DatabaseOutOfSync', 0x13: 'ValueNotAllowed',
    0xfd: 'CccImproperlyConfigured', 0xfe: 'ProcedureAlreadyInProgress', 0xff: 'OutOfRange',
}


def att_error(code, detail=''):
    '''The ATT Error Response a remote central receives, as a Mock error:
    org.freedesktop.DBus.Mock.Error.Att.<Name>, message "0xNN[ detail]".'''
    name = ATT_ERRORS.get(code) or (f'Application{code:02X}' if 0x80 <= code <= 0x9f
                                    else f'Error{code:02X}')
    return _err(ATT_MOCK_ERR + name, f'0x{code:02x}' + (f' {detail}' if detail else ''))


def dbus_error_to_att_ecode(name, message, perm_err):
    '''src/gatt-database.c dbus_error_to_att_ecode'''
    if name == ERR + 'Failed':
        m = re.fullmatch(r'\s*([+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*))', message or '')
        if not m:
            return 0x80         # "If message doesn't set an error code just use 0x80"
        code = int(m.group(1), 0)
        return code if 0x80 <= code <= 0x9f else 0x0e
    return {ERR + 'NotSupported': 0x06, ERR + 'NotAuthorized': 0x08,
            ERR + 'InvalidValueLength': 0x0d, ERR + 'InvalidOffset': 0x07,
            ERR + 'InProgress': 0xfe, ERR + 'NotPermitted': perm_err}.get(name, 0x0e)


def bt_uuid(text):
    '''lib/uuid.c bt_string_to_uuid → (bits 16|32|128, canonical 128-bit
    string), or None. A 128-bit string on the Bluetooth base is 16-bit.'''
    if not isinstance(text, str):
        return None
    s = str(text)
    if len(s) == 36 and s[8] == '-' and s[13] == '-' and s[18] == '-' and s[23] == '-':
        m = re.fullmatch(r'0000([0-9a-fA-F]{4})-0000-1000-8000-00805[fF]9[bB]34[fF][bB]', s)
        if m:
            return 16, canonical_uuid(m.group(1))
        if not re.fullmatch(r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', s):
            return None
        return 128, s.lower()
    if len(s) in (8, 10) and re.fullmatch(r'(0[xX])?[0-9a-fA-F]+', s):
        return 32, '%08x' % (int(s, 16) & 0xffffffff) + BASE_UUID_SUFFIX
    if len(s) in (4, 6) and re.fullmatch(r'(0[xX])?[0-9a-fA-F]+', s):
        return 16, '%08x' % (int(s, 16) & 0xffff) + BASE_UUID_SUFFIX
    return None


def _no_reply_call(owner, path, interface, method, signature='', args=()):
    '''g_dbus_proxy_method_call without a reply function: NO_REPLY_EXPECTED.'''
    msg = dbus.lowlevel.MethodCallMessage(owner, path, interface, method)
    msg.set_no_reply(True)
    if signature:
        msg.append(*args, signature=signature)
    _bus().send_message(msg)


def _record_call(path, method, options=None):
    SERVER_CALLS.append((str(path), method, dict(options or {})))


# -- GATT applications (src/gatt-database.c) ---------------------------------

class LocalAttribute:
    '''An external characteristic or descriptor (struct external_chrc/desc).'''
    kind = ''

    def __init__(self, service, path, iface):
        self.service = service
        self.path = path
        self.iface = iface
        self.handle = 0
        self.perm = 0
        self.pending = []               # in-flight ops (pending_reads/pending_writes)
        self.gone = False               # its proxy was removed (InterfacesRemoved)

    @property
    def app(self):
        return self.service.app

    @property
    def props(self):
        return self.app.objects.get(self.path, {}).get(self.iface, {})

    @property
    def uuid(self):
        u = bt_uuid(self.props.get('UUID'))
        return u[1] if u else ''


class LocalChrc(LocalAttribute):
    kind = 'characteristic'

    def __init__(self, service, path):
        super().__init__(service, path, GATT_CHRC_IFACE)
        self.flags = []
        self.cprops = 0
        self.ext_props = 0
        self.ccc_perm = 0
        self.ccc_handle = 0
        self.cep_handle = 0
        self.ntfy_cnt = 0
        self.descs = []


class LocalDesc(LocalAttribute):
    kind = 'descriptor'

    def __init__(self, service, path, chrc_path):
        super().__init__(service, path, GATT_DESC_IFACE)
        self.chrc_path = chrc_path
        self.handled = False


class LocalService:
    def __init__(self, app, path):
        self.app = app
        self.path = path
        self.chrcs = []
        self.descs = []
        self.handle = 0
        self.end = 0
        self.active = False


class LocalApp:
    '''struct gatt_app: one RegisterApplication (owner + root path).'''

    def __init__(self, st, owner, path, ok, err):
        self.st = st
        self.owner = owner
        self.path = path
        self.reg = (ok, err)            # app->reg: the RegisterApplication call, until answered
        self.state = 'pending'
        self.failed = False
        self.objects = {}               # path → {interface: props}: the GDBusClient's proxies
        self.services = []
        self.profiles = []
        self.matches = []

    def attributes(self):
        for svc in self.services:
            for chrc in svc.chrcs:
                yield chrc
                yield from chrc.descs

    def watch(self):
        '''The GDBusClient's match rules: signals from the owner under the root.'''
        bus = _bus()
        self.matches = [
            bus.add_signal_receiver(self._props_changed, signal_name='PropertiesChanged',
                                    dbus_interface=PROPS_IFACE, bus_name=self.owner,
                                    path_keyword='path', byte_arrays=True),
            bus.add_signal_receiver(self._ifaces_added, signal_name='InterfacesAdded',
                                    dbus_interface=OBJECT_MANAGER_IFACE, bus_name=self.owner,
                                    path=self.path, byte_arrays=True),
            bus.add_signal_receiver(self._ifaces_removed, signal_name='InterfacesRemoved',
                                    dbus_interface=OBJECT_MANAGER_IFACE, bus_name=self.owner,
                                    path=self.path),
        ]

    def unwatch(self):
        for m in self.matches:
            m.remove()
        self.matches = []

    def _props_changed(self, interface, changed, invalidated, path=None):
        ifaces = self.objects.get(str(path))
        if ifaces is None or str(interface) not in ifaces:
            return
        props = ifaces[str(interface)]
        for k, v in changed.items():
            props[str(k)] = v
        for k in invalidated:
            props.pop(str(k), None)
        # property_changed_cb: set on characteristics with notify/indicate
        # (database_add_ccc); every Value change — same value or not, Notifying
        # or not — goes to every central whose CCC is set
        if self.state != 'registered' or str(interface) != GATT_CHRC_IFACE:
            return
        chrc = self.find(str(path))
        if not isinstance(chrc, LocalChrc) or chrc.gone or \
                not chrc.cprops & (PROP_NOTIFY | PROP_INDICATE):
            return
        if 'Value' in changed:
            value = changed['Value']
            if not isinstance(value, (bytes, dbus.ByteArray)) and not (
                    isinstance(value, dbus.Array) and value.signature == 'y'):
                log(f'{path}: malformed "Value" property received')
                return
            send_value_to_centrals(chrc, _bytes(value))
        elif 'Value' in [str(k) for k in invalidated]:
            send_value_to_centrals(chrc, b'')

    def _ifaces_added(self, path, interfaces):
        # proxy_added_cb: queued in app->proxies, never added to the database
        if self.failed:
            return
        for iface, props in interfaces.items():
            if str(iface) in (INTROSPECT_IFACE, PROPS_IFACE):
                continue
            self.objects.setdefault(str(path), {})[str(iface)] = dict(props)
        log(f'application {self.owner}{self.path}: object added {path} (ignored, as bluetoothd does)')

    def _ifaces_removed(self, path, interfaces):
        path = str(path)
        for iface in interfaces:
            self.objects.get(path, {}).pop(str(iface), None)
            for a in self.attributes():
                if a.path == path and a.iface == str(iface):
                    a.gone = True
        if path in self.objects and not self.objects[path]:
            del self.objects[path]
        # proxy_removed_cb: only a service's removal changes the database
        if str(GATT_SERVICE_IFACE) in [str(i) for i in interfaces]:
            for svc in [s for s in self.services if s.path == path]:
                log(f'application {self.owner}{self.path}: service {path} removed')
                self.services.remove(svc)
                service_free(svc)

    def find(self, path):
        for a in self.attributes():
            if a.path == path:
                return a
        return None


def gatt_register_app(st, sender, path, ok, err):
    '''manager_register_app + create_app'''
    if any(a.owner == sender and a.path == path for a in st.apps):
        raise _err(ERR + 'AlreadyExists', 'Already Exists')
    if not path.startswith('/'):
        raise _err(ERR + 'Failed', 'Failed to register application')
    app = LocalApp(st, sender, path, ok, err)
    st.apps.append(app)
    _watch_clients()
    app.watch()
    _record_call(path, 'GetManagedObjects')

    def reply(objects):
        if app not in st.apps:
            return      # unregistered meanwhile: app_free drops app->reg unanswered
        for opath, ifaces in objects.items():
            for iface, props in ifaces.items():
                if str(iface) in (INTROSPECT_IFACE, PROPS_IFACE):
                    continue
                app.objects.setdefault(str(opath), {})[str(iface)] = dict(props)
        gatt_client_ready(app)

    def error(e):
        log(f'GetManagedObjects {sender}{path}: {e.get_dbus_name()}')
        if app in st.apps:
            gatt_client_ready(app)      # get_managed_objects_reply: ready, no objects

    _bus().call_async(sender, path, OBJECT_MANAGER_IFACE, 'GetManagedObjects', '', (),
                      reply, error, timeout=DBUS_DEFAULT_TIMEOUT, byte_arrays=True)


def _reply_registration(app, error=None):
    ok, err = app.reg
    app.reg = None
    if error is None:
        ok()
    else:
        err(_err(ERR + 'Failed', error))


def gatt_client_ready(app):
    '''client_ready_cb'''
    proxies = [(p, i, props) for p, ifaces in app.objects.items() for i, props in ifaces.items()]
    if not proxies:
        return _fail_app(app, 'No object received')
    for p, i, props in proxies:             # register_profile
        if i == GATT_PROFILE_IFACE and not app.failed:
            uuids = props.get('UUIDs')
            if not isinstance(uuids, dbus.Array) or not [u for u in uuids if isinstance(u, dbus.String)]:
                app.failed = True
            else:
                app.profiles.append(p)
    for p, i, props in proxies:             # register_service → create_service
        if i == GATT_SERVICE_IFACE and not app.failed:
            app.services.append(LocalService(app, p))
    for p, i, props in proxies:             # register_characteristic → chrc_create
        if i == GATT_CHRC_IFACE and not app.failed:
            if not _chrc_create(app, p, props):
                app.failed = True
    for p, i, props in proxies:             # register_descriptor → desc_create
        if i == GATT_DESC_IFACE and not app.failed:
            if not _desc_create(app, p, props):
                app.failed = True
    if (not app.services and not app.profiles) or app.failed:
        return _fail_app(app, 'No valid service object found')
    for svc in app.services:                # database_add_app
        if not database_add_service(svc):
            return _fail_app(app, 'Failed to create entry in database')
    app.state = 'registered'
    log(f'GATT application registered: {app.owner}:{app.path}')
    _reply_registration(app)
    return None


def _fail_app(app, message):
    log(f'GATT application {app.owner}:{app.path} refused: {message}')
    _reply_registration(app, message)
    remove_app(app)


def _object_path(value):
    return str(value) if isinstance(value, dbus.ObjectPath) else None


def parse_chrc_flags(flags):
    '''parse_chrc_flags → (props, ext_props, perm, ccc_perm) or None. An
    empty Flags array fails too (its do/while reads an invalid element).'''
    if not isinstance(flags, dbus.Array) or not len(flags):
        return None
    props = ext = perm = ccc = 0
    table = {
        'broadcast': (PROP_BROADCAST, 0, 0, 0),
        'read': (PROP_READ, 0, PERM_READ, 0),
        'write-without-response': (PROP_WRITE_WITHOUT_RESP, 0, PERM_WRITE, 0),
        'write': (PROP_WRITE, 0, PERM_WRITE, 0),
        'notify': (PROP_NOTIFY, 0, 0, PERM_WRITE),
        'indicate': (PROP_INDICATE, 0, 0, PERM_WRITE),
        'authenticated-signed-writes': (PROP_AUTH, 0, PERM_WRITE, 0),
        'extended-properties': (PROP_EXT_PROP, 0, 0, 0),
        'reliable-write': (0, EXT_PROP_RELIABLE_WRITE, PERM_WRITE, 0),
        'writable-auxiliaries': (0, EXT_PROP_WRITABLE_AUX, 0, 0),
        'encrypt-read': (PROP_READ, 0, PERM_READ | PERM_READ_ENCRYPT, 0),
        'encrypt-write': (PROP_WRITE, 0, PERM_WRITE | PERM_WRITE_ENCRYPT, 0),
        'encrypt-authenticated-read': (PROP_READ, 0, PERM_READ | PERM_READ_AUTHEN, 0),
        'encrypt-authenticated-write': (PROP_WRITE, 0, PERM_WRITE | PERM_WRITE_AUTHEN, 0),
        'secure-read': (PROP_READ, 0, PERM_READ | PERM_READ_SECURE, 0),
        'secure-write': (PROP_WRITE, 0, PERM_WRITE | PERM_WRITE_SECURE, 0),
        'authorize': (0, 0, 0, 0),
        'encrypt-notify': (PROP_NOTIFY, 0, 0, PERM_WRITE_ENCRYPT),
        'encrypt-authenticated-notify': (PROP_NOTIFY, 0, 0, PERM_WRITE_AUTHEN),
        'secure-notify': (PROP_NOTIFY, 0, 0, PERM_WRITE_SECURE),
        'encrypt-indicate': (PROP_INDICATE, 0, 0, PERM_WRITE_ENCRYPT),
        'encrypt-authenticated-indicate': (PROP_INDICATE, 0, 0, PERM_WRITE_AUTHEN),
        'secure-indicate': (PROP_INDICATE, 0, 0, PERM_WRITE_SECURE),
    }
    for f in flags:
        if not isinstance(f, dbus.String) or str(f) not in table:
            log(f'Invalid characteristic flag: {f}')
            return None
        p, e, m, c = table[str(f)]
        props |= p
        ext |= e
        perm |= m
        ccc |= c
    if ext:
        props |= PROP_EXT_PROP
    return props, ext, perm, ccc


def parse_desc_flags(flags):
    '''parse_desc_flags → perm or None'''
    if not isinstance(flags, dbus.Array) or not len(flags):
        return None
    table = {'read': PERM_READ, 'write': PERM_WRITE,
             'encrypt-read': PERM_READ | PERM_READ_ENCRYPT,
             'encrypt-write': PERM_WRITE | PERM_WRITE_ENCRYPT,
             'encrypt-authenticated-read': PERM_READ | PERM_READ_AUTHEN,
             'encrypt-authenticated-write': PERM_WRITE | PERM_WRITE_AUTHEN,
             'secure-read': PERM_READ | PERM_READ_SECURE,
             'secure-write': PERM_WRITE | PERM_WRITE_SECURE, 'authorize': 0}
    perm = 0
    for f in flags:
        if not isinstance(f, dbus.String) or str(f) not in table:
            log(f'Invalid descriptor flag: {f}')
            return None
        perm |= table[str(f)]
    return perm


def _chrc_create(app, path, props):
    svc_path = _object_path(props.get('Service'))
    if svc_path is None:
        log('Failed to obtain service path for characteristic')
        return False
    svc = next((s for s in app.services if s.path == svc_path), None)
    if svc is None:
        log(f'Unable to find service for characteristic: {path}')
        return False
    parsed = parse_chrc_flags(props.get('Flags'))
    if parsed is None:
        log('Failed to parse characteristic properties')
        return False
    chrc = LocalChrc(svc, path)
    chrc.flags = [str(f) for f in props['Flags']]
    chrc.cprops, chrc.ext_props, chrc.perm, chrc.ccc_perm = parsed
    svc.chrcs.append(chrc)
    return True


def _desc_create(app, path, props):
    chrc_path = _object_path(props.get('Characteristic'))
    if chrc_path is None:
        log('Failed to obtain characteristic path for descriptor')
        return False
    svc = next((s for s in app.services if any(c.path == chrc_path for c in s.chrcs)), None)
    if svc is None:
        log(f'Unable to find service for characteristic: {chrc_path}')
        return False
    perm = parse_desc_flags(props.get('Flags'))
    if perm is None:
        log('Failed to parse characteristic properties')
        return False
    desc = LocalDesc(svc, path, chrc_path)
    desc.perm = perm
    svc.descs.append(desc)
    return True


def _parse_gatt_uuid(props):
    '''parse_uuid: a valid UUID string, not GAP (0x1800) or GATT (0x1801).'''
    u = bt_uuid(props.get('UUID')) if isinstance(props.get('UUID'), dbus.String) else None
    if u is None:
        return None
    if u[1] in (canonical_uuid('1800'), canonical_uuid('1801')):
        log('GAP/GATT service must be handled by BlueZ')
        return None
    return u


def _parse_handle(props):
    '''parse_handle: optional, q → handle (0 = allocate), or None if mistyped.'''
    h = props.get('Handle')
    if h is None:
        return 0
    return int(h) if isinstance(h, dbus.UInt16) else None


def _write_handle(attr_or_svc, props, path, handle):
    '''write_handle: only if the object has a Handle property.'''
    if 'Handle' not in props:
        return
    props['Handle'] = dbus.UInt16(handle)
    app = attr_or_svc.app
    iface = getattr(attr_or_svc, 'iface', GATT_SERVICE_IFACE)
    _record_call(path, 'Set Handle')
    _bus().call_async(app.owner, path, PROPS_IFACE, 'Set', 'ssv',
                      (iface, 'Handle', dbus.UInt16(handle, variant_level=1)),
                      lambda *a: None, lambda e: None, timeout=DBUS_DEFAULT_TIMEOUT)


def database_add_service(svc):
    '''database_add_service (+ database_add_chrc, _ccc, _cep, _desc)'''
    props = svc.app.objects.get(svc.path, {}).get(GATT_SERVICE_IFACE, {})
    if _parse_gatt_uuid(props) is None:
        log('Failed to read "UUID" property of service')
        return False
    if not isinstance(props.get('Primary'), dbus.Boolean):
        log('Failed to read "Primary" property of service')
        return False
    inc = props.get('Includes')
    if inc is not None and (not isinstance(inc, dbus.Array) or
                            not all(isinstance(x, dbus.ObjectPath) for x in inc)):
        log('Failed to read "Includes" property of service')
        return False
    handle = _parse_handle(props)
    if handle is None:
        log('Failed to read "Handle" property of service')
        return False
    count = 1 + len(inc or [])
    for chrc in svc.chrcs:
        count += 2 + (1 if chrc.cprops & (PROP_NOTIFY | PROP_INDICATE) else 0) + \
            (1 if chrc.ext_props else 0)
    count += len(svc.descs)
    st = svc.app.st
    if handle:
        taken = [(s.handle, s.end) for a in st.apps for s in a.services if s.active]
        if any(not (handle + count - 1 < lo or handle > hi) for lo, hi in taken):
            return False        # gatt_db_insert_service: range in use
        svc.handle = handle
    else:
        svc.handle = st.next_handle
        _write_handle(svc, props, svc.path, svc.handle)
    svc.end = svc.handle + count - 1
    st.next_handle = max(st.next_handle, svc.end + 1)
    h = svc.handle + 1 + len(inc or [])
    for chrc in svc.chrcs:
        cp = chrc.props
        ch = _parse_handle(cp)
        if ch is None or _parse_gatt_uuid(cp) is None or \
                _object_path(cp.get('Service')) != svc.path:
            return _service_fail(svc)
        chrc.handle = ch or h + 1           # the value attribute's handle
        h = max(h, chrc.handle) + 1
        if chrc.cprops & (PROP_NOTIFY | PROP_INDICATE):
            chrc.ccc_perm |= PERM_WRITE | PERM_READ
            chrc.ccc_handle = h
            h += 1
        if chrc.ext_props:
            chrc.cep_handle = h
            h += 1
        if not ch:
            _write_handle(chrc, cp, chrc.path, chrc.handle)
        for desc in svc.descs:
            if desc.handled or desc.chrc_path != chrc.path:
                continue
            dp = desc.props
            dh = _parse_handle(dp)
            if dh is None or _parse_gatt_uuid(dp) is None:
                return _service_fail(svc)
            desc.handle = dh or h
            h = max(h, desc.handle) + 1
            desc.handled = True
            chrc.descs.append(desc)
            if not dh:
                _write_handle(desc, dp, desc.path, desc.handle)
    if any(not d.handled for d in svc.descs):
        log('Found descriptor with no matching characteristic!')
        return _service_fail(svc)
    svc.active = True
    return True


def _service_fail(svc):
    svc.active = False
    return False


def cancel_pending(attr):
    '''cancel_pending_read/_write: the central gets Request Not Supported.'''
    ops, attr.pending = attr.pending, []
    for op in ops:
        op.finish(att_error(0x06, 'the application went away'))


def service_free(svc):
    '''service_free (+ gatt_db_service_removed: the CCC states of its
    characteristics are dropped for every device, without StopNotify)'''
    for chrc in svc.chrcs:
        cancel_pending(chrc)
        for desc in chrc.descs:
            cancel_pending(desc)
        for central in svc.app.st.centrals.values():
            central.ccc.pop(chrc, None)
    svc.active = False


def remove_app(app):
    '''remove_app / app_free: services leave the database; a pending
    RegisterApplication is dropped unanswered (app->reg unref'd).'''
    if app in app.st.apps:
        app.st.apps.remove(app)
    app.unwatch()
    for svc in app.services:
        service_free(svc)
    app.state = 'removed'


def gatt_unregister_app(st, sender, path):
    '''manager_unregister_app'''
    app = next((a for a in st.apps if a.owner == sender and a.path == path), None)
    if app is None:
        raise _err(ERR + 'DoesNotExist', 'Does Not Exist')
    remove_app(app)


# -- simulated remote centrals --------------------------------------------------

class RemoteCentral:
    def __init__(self, st, address, addr_type, mtu, security):
        self.st = st
        self.address = address
        self.adv = Advertiser(st, address, {'AddressType': dbus.String(addr_type)}, False)
        self.adv.in_range = False
        self.mtu = mtu
        self.security = security
        self.connected = False
        self.ccc = {}                   # LocalChrc → CCC value (device_state's ccc_states)
        self.received = {}              # LocalChrc → [bytes] since the last subscription
        self.pending = []               # ops waiting for an application

    @property
    def path(self):
        return device_path(self.st.name, self.address)


class ServerOp:
    '''A request from a remote central waiting for an application's reply.'''

    def __init__(self, central, attr, ok, err):
        self.central = central
        self.attr = attr
        self.ok = ok
        self.err = err
        self.done = False
        self.timer = GLib.timeout_add(int(SERVER['att_timeout'] * 1000), self._att_timeout)
        central.pending.append(self)
        attr.pending.append(self)

    def finish(self, error=None, value=None):
        if self.done:
            return
        self.done = True
        if self.timer:
            GLib.source_remove(self.timer)
            self.timer = None
        for lst in (self.central.pending, self.attr.pending):
            if self in lst:
                lst.remove(self)
        if error is not None:
            self.err(error)
        elif value is None:
            self.ok()
        else:
            self.ok(value)

    def _att_timeout(self):
        # shared/att.c timeout_cb: the central gives up and drops the link;
        # bluetoothd's own call to the application goes on (300 s) and its
        # reply is then ignored (pending_disconnect_cb)
        self.timer = None
        log(f'{self.attr.path}: no answer within the central\'s ATT timeout')
        self.finish(_mock_err('Att.Timeout', f'no ATT response within {SERVER["att_timeout"]} s;'
                              ' the central disconnected'))
        if self.central.connected:
            remote_disconnect(self.central)
        return False


def _central(adapter, address):
    st = _adapter_state(adapter)
    c = st.centrals.get(str(address).upper())
    if c is None or not c.connected:
        raise _mock_err('NotConnected', f'central {address} is not connected to {adapter}')
    return c


def _server_attr(st, ref):
    '''An attribute of a registered application on st, by object path or
    by UUID (first match in registration order).'''
    ref = str(ref)
    want = canonical_uuid(ref)
    for app in st.apps:
        if app.state != 'registered':
            continue
        for a in app.attributes():
            if not a.service.active:
                continue
            if a.path == ref or (want is not None and a.uuid == want):
                return a
    raise _mock_err('NoSuchAttribute', f'no registered characteristic/descriptor {ref} on {st.name}')


def check_permissions(central, perm, mask):
    '''src/shared/gatt-server.c check_permissions → ATT error or 0'''
    if perm and mask & PERM_READ and not perm & PERM_READ:
        return 0x02
    if perm and mask & PERM_WRITE and not perm & PERM_WRITE:
        return 0x03
    perm &= mask
    if not perm:
        return 0
    sec = central.security
    if perm & PERM_SECURE and sec < SECURITY['fips']:
        return 0x05
    if perm & PERM_AUTHEN and sec < SECURITY['high']:
        return 0x05
    if perm & PERM_ENCRYPT and sec < SECURITY['medium']:
        return 0x0f
    return 0


def _options(central, offset=0):
    '''append_options'''
    opts = {'device': dbus.ObjectPath(central.path)}
    if offset:
        opts['offset'] = dbus.UInt16(offset)
    opts['link'] = dbus.String('LE')
    opts['mtu'] = dbus.UInt16(central.mtu)
    return dbus.Dictionary(opts, signature='sv')


def remote_read(central, attr, offset, ok, err):
    '''handle_read_req → check_permissions → chrc_read_cb/desc_read_cb → send_read'''
    code = check_permissions(central, attr.perm, PERM_READ_MASK)
    if code:
        raise att_error(code)
    if attr.gone:
        raise att_error(0x0e, 'the object is gone (g_dbus_proxy_method_call fails)')
    op = ServerOp(central, attr, ok, err)
    opts = _options(central, offset)
    _record_call(attr.path, 'ReadValue', opts)

    def reply(*args):
        if op.done:
            return
        if len(args) != 1 or not isinstance(args[0], (bytes, dbus.ByteArray)):
            return op.finish(att_error(0x06, 'invalid return value for "ReadValue"'))
        data = _bytes(args[0])[:512]
        op.finish(value=_ay(data[:central.mtu - 1]))     # read_complete_cb: MTU - 1

    def error(e):
        if op.done:
            return
        name, msg = e.get_dbus_name() or '', e.get_dbus_message() or ''
        op.finish(att_error(dbus_error_to_att_ecode(name, msg, 0x02), f'{name}: {msg}'))

    _bus().call_async(attr.app.owner, attr.path, attr.iface, 'ReadValue', 'a{sv}', (opts,),
                      reply, error, timeout=METHOD_CALL_TIMEOUT, byte_arrays=True)


def remote_write(central, attr, data, kind, ok, err):
    '''write_cb → check_length, check_permissions → chrc_write_cb/desc_write_cb
    → send_write. A write command's errors are silent (no response).'''
    command = kind == 'command'
    code = 0x0d if len(data) > 512 else check_permissions(central, attr.perm, PERM_WRITE_MASK)
    if not code and attr.gone:
        code = 0x0e
    if code:
        if command:
            log(f'{attr.path}: write command dropped (ATT 0x{code:02x})')
            return ok()
        raise att_error(code)
    if isinstance(attr, LocalChrc):
        if 'WriteAcquired' in attr.props:
            raise _mock_err('NotModelled', 'AcquireWrite (WriteAcquired property) is not modelled')
        if attr.cprops & PROP_WRITE_WITHOUT_RESP:
            # chrc_write_cb: queue = NULL → WriteValue without a reply
            # function (NO_REPLY_EXPECTED), and write_setup_cb reports
            # success at once — for write requests too
            opts = _options(central)
            _record_call(attr.path, 'WriteValue', opts)
            _no_reply_call(attr.app.owner, attr.path, attr.iface, 'WriteValue', 'aya{sv}',
                           (_ay(data), opts))
            return ok()
    op = ServerOp(central, attr, ok, err)
    opts = _options(central)
    _record_call(attr.path, 'WriteValue', opts)

    def reply(*args):
        if op.done:
            return
        if command:
            return op.finish()
        if args:
            return op.finish(att_error(0x06, 'invalid return value for "WriteValue"'))
        op.finish()

    def error(e):
        if op.done:
            return
        if command:
            return op.finish()
        name, msg = e.get_dbus_name() or '', e.get_dbus_message() or ''
        op.finish(att_error(dbus_error_to_att_ecode(name, msg, 0x03), f'{name}: {msg}'))

    _bus().call_async(attr.app.owner, attr.path, attr.iface, 'WriteValue', 'aya{sv}',
                      (_ay(data), opts), reply, error, timeout=METHOD_CALL_TIMEOUT)
    if command:
        # no ATT response for a command: the central is done at once
        op.finish()


def ccc_write_cb(chrc, value):
    '''src/gatt-database.c ccc_write_cb → ATT error or 0 (value None: the
    CCC state cleared on disconnection, clear_ccc_state)'''
    if not value:
        if not chrc.ntfy_cnt:
            return 0
        chrc.ntfy_cnt -= 1
        if chrc.ntfy_cnt:
            return 0
        _record_call(chrc.path, 'StopNotify')
        if not chrc.gone:
            _no_reply_call(chrc.app.owner, chrc.path, GATT_CHRC_IFACE, 'StopNotify')
        return 0
    if value > 2 or (value == 1 and not chrc.cprops & PROP_NOTIFY) or \
            (value == 2 and not chrc.cprops & PROP_INDICATE):
        return 0xfd
    if 'NotifyAcquired' in chrc.props:
        raise _mock_err('NotModelled', 'AcquireNotify (NotifyAcquired property) is not modelled')
    # "Always call StartNotify for an incoming enable and ignore the return value"
    if chrc.gone:
        return 0x0e
    _record_call(chrc.path, 'StartNotify')
    _no_reply_call(chrc.app.owner, chrc.path, GATT_CHRC_IFACE, 'StartNotify')
    chrc.ntfy_cnt += 1
    return 0


def remote_ccc_write(central, chrc, value):
    '''gatt-server write_cb (CCC permissions) → gatt_ccc_write_cb'''
    if not isinstance(chrc, LocalChrc) or not chrc.ccc_handle:
        raise att_error(0x0a, 'the characteristic has no CCC descriptor')
    code = check_permissions(central, chrc.ccc_perm, PERM_WRITE_MASK)
    if code:
        raise att_error(code)
    if value == central.ccc.get(chrc, 0):
        return      # "If value is identical, then just succeed"
    code = ccc_write_cb(chrc, value)
    if code:
        raise att_error(code)
    central.ccc[chrc] = value
    if value:
        central.received[chrc] = []


def send_value_to_centrals(chrc, value):
    '''send_notification_to_devices: a notification, or an indication when
    the CCC has the indicate bit (Confirm() to the application once the
    central confirms: conf_cb)'''
    for central in chrc.app.st.centrals.values():
        ccc = central.ccc.get(chrc, 0)
        if not central.connected or not ccc & 3:
            continue
        central.received.setdefault(chrc, []).append(value[:central.mtu - 3])
        if ccc & 2:
            def confirm(c=chrc):
                _record_call(c.path, 'Confirm')
                if not c.gone:
                    _no_reply_call(c.app.owner, c.path, GATT_CHRC_IFACE, 'Confirm')
                return False
            GLib.idle_add(confirm)


def remote_disconnect(central):
    '''The link goes: att_disconnected (CCC states of an unbonded device are
    cleared: ccc_write_cb(NULL) each), pending ops are answered to no one.'''
    central.connected = False
    for op in list(central.pending):
        op.finish(_mock_err('NotConnected', 'the link went down'))
    dev = mockobject.objects.get(central.path)
    bonded = isinstance(dev, DeviceObject) and bool(dev.props[DEVICE_IFACE]['Bonded'])
    if not bonded:
        for chrc, value in list(central.ccc.items()):
            if value:
                ccc_write_cb(chrc, None)
        central.ccc.clear()
    if isinstance(dev, DeviceObject) and dev.connected:
        disconnect_device(dev)


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
        self.match = _bus().add_signal_receiver(
            self._props_changed, signal_name='PropertiesChanged', dbus_interface=PROPS_IFACE,
            bus_name=self.owner, path=self.path, byte_arrays=True)

    def unwatch(self):
        if self.match is not None:
            self.match.remove()
            self.match = None

    def _props_changed(self, interface, changed, invalidated):
        if str(interface) != LE_ADV_IFACE:
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
    p = st.obj.props[LE_ADV_MANAGER_IFACE]
    p['ActiveInstances'] = dbus.Byte(len(st.ads))
    p['SupportedInstances'] = dbus.Byte(max(st.max_ads - len(st.ads), 0))


def _adv_emit_instances(st):
    p = st.obj.props[LE_ADV_MANAGER_IFACE]
    emit_props_changed(st.path, LE_ADV_MANAGER_IFACE,
                       {'SupportedInstances': p['SupportedInstances'],
                        'ActiveInstances': p['ActiveInstances']})


def adv_register(st, sender, path, ok, err):
    '''register_advertisement + client_create'''
    if any(a.owner == sender and a.path == path for a in st.ads):
        raise _err(ERR + 'AlreadyExists', 'Already Exists')
    if not path.startswith('/'):
        raise _err(ERR + 'Failed', 'Failed to register advertisement')
    instance = next((i for i in range(1, st.max_ads + 1) if i not in st.adv_instances), 0)
    if not instance:
        raise _err(ERR + 'NotPermitted', 'Maximum advertisements reached')
    ad = LocalAdvertisement(st, sender, path, instance, ok, err)
    st.adv_instances.add(instance)
    st.ads.append(ad)
    _adv_instances_changed(st)
    _watch_clients()
    ad.watch()
    _record_call(path, 'GetAll')

    def reply(props):
        ad.props = {str(k): v for k, v in props.items()}
        adv_proxy_added(ad)

    def error(e):
        # get_all_properties_reply: an error still adds the proxy, with no
        # properties: an empty broadcast advertisement gets registered
        log(f'GetAll {sender}{path}: {e.get_dbus_name()}')
        adv_proxy_added(ad)

    _bus().call_async(sender, path, PROPS_IFACE, 'GetAll', 's', (LE_ADV_IFACE,),
                      reply, error, timeout=DBUS_DEFAULT_TIMEOUT, byte_arrays=True)


def adv_proxy_added(ad):
    '''client_proxy_added → parse_advertisement → refresh → add_adv_callback'''
    if ad not in ad.st.ads or ad.reg is None:
        return
    parsed, error = parse_advertisement(ad, start_timers=True)
    if parsed is not None:
        error = refresh_advertisement(ad, parsed)
        if error and SERVER['adv_commands'] == 'extended':
            # add_adv_params_callback fails → add_client_complete
            error = 'Failed to register advertisement'
    if error:
        log(f'advertisement {ad.owner}{ad.path} refused: {error}')
        ok, err = ad.reg
        ad.reg = None
        free_advertisement(ad)
        err(_err(ERR + 'Failed', error if error.startswith('Failed') else
                 'Failed to parse advertisement.'))
        return
    ad.parsed = parsed
    ad.state = 'registered'
    _adv_emit_instances(ad.st)
    publish_advertisement(ad)
    ok, _err_cb = ad.reg
    ad.reg = None
    log(f'Advertisement registered: {ad.owner}{ad.path} (instance {ad.instance})')
    ok()


def _ay_value(v):
    if isinstance(v, (bytes, dbus.ByteArray)):
        return bytes(v)
    if isinstance(v, dbus.Array) and v.signature == 'y':
        return _bytes(v)
    return None


def parse_advertisement(ad, start_timers):
    '''parse_advertisement with the parsers in bluetoothd's order →
    (parsed dict, None) or (None, "Failed to parse advertisement.")'''
    fail = (None, 'Failed to parse advertisement.')
    p = ad.props
    out = {'type': 'broadcast', 'uuids': [], 'solicit': [], 'manufacturer': {},
           'service_data': {}, 'includes': [], 'name': None, 'appearance': None,
           'timeout': 0, 'data': {}, 'flags': None, 'discoverable_to': None}
    adapter_discoverable = bool(ad.st.obj.props[ADAPTER_IFACE]['Discoverable'])

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
            u = bt_uuid(x)
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
            u = bt_uuid(k)
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
            log('Broadcast cannot set flags')
            return fail
        if out['discoverable_to'] is not None:
            set_flags(AD_FLAG_LIMITED)
    else:
        out['discoverable_to'] = None       # ignored if not discoverable
    if out['timeout'] and out['discoverable_to'] is not None and \
            out['timeout'] < out['discoverable_to']:
        log('DiscoverableTimeout > Timeout')
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
        if ad.st.obj.props[ADAPTER_IFACE]['Discoverable'] and parsed['flags'] is None:
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
    if SERVER['adv_commands'] == 'extended':
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
    log(f'advertisement {ad.owner}{ad.path}: Timeout, released')
    _record_call(ad.path, 'Release')
    _no_reply_call(ad.owner, ad.path, LE_ADV_IFACE, 'Release')
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
        err(_err(ERR + 'Failed', 'Failed to complete registration'))
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
        raise _err(ERR + 'DoesNotExist', 'Does Not Exist')
    client_remove(ad)


def _advertised_props(ad):
    '''What a scanning adapter's Device1 shows for this advertisement (AD
    and, with bluetoothd's active scan, the scan response).'''
    p = ad.parsed
    flags = _adv_flags(ad, p)
    props = {'AddressType': dbus.String(ad.address_type), 'RSSI': dbus.Int16(ADV_RSSI)}
    name = p['name']
    if name:
        # serialize_name: a name that does not fit is shortened (to 29 bytes)
        name = name.encode()[:29].decode('utf-8', 'ignore')
    elif 'local-name' in flags:
        # the kernel's eir_append_local_name: complete if ≤ 10 bytes, else shortened
        name = str(ad.st.obj.props[ADAPTER_IFACE]['Alias']).encode()[:10].decode('utf-8', 'ignore')
    if name:
        props['Name'] = dbus.String(name)
    if p['uuids']:
        props['UUIDs'] = dbus.Array([u[1] for u in p['uuids']], signature='s')
    if p['manufacturer']:
        props['ManufacturerData'] = dbus.Dictionary(
            {dbus.UInt16(k): _ay(v, variant_level=1) for k, v in p['manufacturer'].items()},
            signature='qv')
    if p['service_data']:
        props['ServiceData'] = dbus.Dictionary(
            {dbus.String(u[1]): _ay(v, variant_level=1) for u, v in p['service_data'].items()},
            signature='sv')
    if 'appearance' in flags or p['appearance'] is not None:
        props['Appearance'] = dbus.UInt16(p['appearance'] or 0)
    if 'tx-power' in flags:
        props['TxPower'] = dbus.Int16(ADV_TX_POWER)
    ad_flags = p['flags']
    if ad_flags is None and 'discov' in flags:
        ad_flags = AD_FLAG_GENERAL          # the kernel adds Flags for MGMT_ADV_FLAG_DISCOV
    if ad_flags is not None:
        props['AdvertisingFlags'] = _ay(bytes([ad_flags]))
    return props


def publish_advertisement(ad):
    '''The other adapters of the stand-in hear it: a connectable
    ("peripheral") one from the adapter's public address, a broadcast one
    from a non-resolvable private address (the kernel's choice for
    non-connectable advertising without privacy).'''
    connectable = ad.parsed['type'] == 'peripheral'
    if ad.address is None:
        if connectable:
            ad.address = str(ad.st.obj.props[ADAPTER_IFACE]['Address']).upper()
            ad.address_type = 'public'
        else:
            import random  # pylint: disable=import-outside-toplevel
            b = [random.randrange(256) for _ in range(6)]
            b[0] &= 0x3f        # non-resolvable private: top two bits 00
            ad.address = ':'.join('%02X' % x for x in b)
            ad.address_type = 'random'
    props = _advertised_props(ad)
    for other in ADAPTERS.values():
        if other is ad.st:
            continue
        adv = other.advertisers.get(ad.address)
        if adv is None:
            adv = Advertiser(other, ad.address, props, connectable)
            other.advertisers[adv.address] = adv
        else:
            for key in ADVERTISER_KEYS:
                if key not in props:
                    adv.props.pop(key, None)
            adv.props.update(props)
            adv.connectable = connectable
        adv.in_range = True
        adv.local_ad = ad
        if other.sessions:
            discover(adv)


def unpublish_advertisement(ad):
    '''Its advertising stops: no more reports; a discovered Device1 that is
    not connected, paired or trusted goes after TemporaryTimeout.'''
    if ad.address is None:
        return
    for other in ADAPTERS.values():
        adv = other.advertisers.get(ad.address)
        if adv is None or getattr(adv, 'local_ad', None) is not ad:
            continue
        adv.in_range = False
        adv.local_ad = None
        GLib.timeout_add(int(SERVER['temporary_timeout'] * 1000), _temporary_expired, adv)


def _temporary_expired(adv):
    if adv.in_range or ADAPTERS.get(adv.adapter.name) is not adv.adapter:
        return False
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, DeviceObject):
        p = dev.props[DEVICE_IFACE]
        if dev.connected or p['Paired'] or p['Trusted']:
            return False
        remove_device(dev)
    if adv.adapter.advertisers.get(adv.address) is adv:
        del adv.adapter.advertisers[adv.address]
    return False


def server_client_gone(name):
    '''The owner left the bus: its applications (client_disconnect_cb) and
    its registered advertisements (client_disconnect_cb, set once the
    registration completed) go.'''
    for st in ADAPTERS.values():
        for app in [a for a in st.apps if a.owner == name]:
            log(f'client {name} left the bus: application {app.path} removed')
            remove_app(app)
        for ad in [a for a in st.ads if a.owner == name and a.state == 'registered']:
            log(f'client {name} left the bus: advertisement {ad.path} removed')
            client_remove(ad)


def server_adapter_removed(st):
    '''btd_adv_manager_destroy (client_destroy: Release, then free) and
    btd_gatt_database_destroy (applications freed without a call).'''
    for ad in list(st.ads):
        _record_call(ad.path, 'Release')
        _no_reply_call(ad.owner, ad.path, LE_ADV_IFACE, 'Release')
        free_advertisement(ad)
    for app in list(st.apps):
        if app.reg is not None:
            app.reg = None
        remove_app(app)
    for c in st.centrals.values():
        c.connected = False


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
    st = _adapter_state(device_name)
    if not _is_address(address):
        raise _mock_err('InvalidArgs', f'bad address {address}')
    if not st.obj.props[ADAPTER_IFACE]['Powered']:
        raise _mock_err('NotPowered', f'{device_name} is off')
    address = str(address).upper()
    addr_type = str(options.get('AddressType', 'public'))
    mtu = int(options.get('MTU', 517))
    security = str(options.get('Security', 'low'))
    if addr_type not in ('public', 'random') or not 23 <= mtu <= 517 or security not in SECURITY:
        raise _mock_err('InvalidArgs', 'AddressType public|random, MTU 23…517, '
                        'Security low|medium|high|fips')
    old = st.centrals.get(address)
    if old is not None and old.connected:
        raise _mock_err('AlreadyConnected', f'{address} is connected to {device_name}')
    central = RemoteCentral(st, address, addr_type, mtu, SECURITY[security])
    if 'Name' in options:
        central.adv.props['Name'] = dbus.String(options['Name'])
    st.centrals[address] = central
    dev = mockobject.objects.get(central.path)
    if not isinstance(dev, DeviceObject):
        dev = create_device(central.adv, with_rssi=False)
    central.connected = True
    if not dev.connected:
        connect_device(dev)
    log(f'RemoteConnect {address} → {device_name}')
    return dbus.ObjectPath(central.path)


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def RemoteDisconnect(self, device_name, address):
    '''RemoteDisconnect(hci s, central s): the central drops the link. Its
    subscriptions end as bluetoothd ends them for an unbonded device (each
    set CCC is cleared: StopNotify after the last subscriber); requests
    still waiting for an application fail with Mock.Error.NotConnected.'''
    remote_disconnect(_central(device_name, address))


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
        central = _central(device_name, address)
        remote_read(central, _server_attr(central.st, attribute), int(offset), ok, err)
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
            raise _mock_err('InvalidArgs', 'type must be "request" or "command"')
        central = _central(device_name, address)
        data = _bytes(value)
        if len(data) > central.mtu - 3:
            raise _mock_err('InvalidArgs', f'{len(data)} bytes do not fit one ATT PDU '
                            f'(MTU {central.mtu} − 3); long writes are not modelled')
        remote_write(central, _server_attr(central.st, attribute), data, str(kind), ok, err)
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
    central = _central(device_name, address)
    if str(mode) not in ('notify', 'indicate'):
        raise _mock_err('InvalidArgs', 'mode must be "notify" or "indicate"')
    remote_ccc_write(central, _server_attr(central.st, characteristic),
                     1 if str(mode) == 'notify' else 2)


@dbus.service.method(MOCK_IFACE, in_signature='sss', out_signature='')
def RemoteUnsubscribe(self, device_name, address, characteristic):
    '''RemoteUnsubscribe(hci s, central s, characteristic s): the central
    writes 0 to the CCC; StopNotify (no reply awaited) when the last
    enabled subscription ends.'''
    central = _central(device_name, address)
    remote_ccc_write(central, _server_attr(central.st, characteristic), 0)


@dbus.service.method(MOCK_IFACE, in_signature='sss', out_signature='aay')
def RemoteNotifications(self, device_name, address, characteristic):
    '''RemoteNotifications(hci s, central s, characteristic s) → aay: the
    notifications/indications the central received since it last
    subscribed, in order (each PropertiesChanged(Value) the application
    emitted, cut to MTU − 3). Indications are confirmed at once: bluetoothd
    then calls the application's Confirm().'''
    st = _adapter_state(device_name)
    central = st.centrals.get(str(address).upper())
    if central is None:
        raise _mock_err('NoSuchCentral', f'no central {address} on {device_name}')
    chrc = _server_attr(st, characteristic)
    return dbus.Array([_ay(v) for v in central.received.get(chrc, [])], signature='ay')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssss)')
def RegisteredApplications(self):
    '''RegisteredApplications() → a(hci s, owner s, path s, state s): GATT
    applications bluetoothd holds, state "pending" (RegisterApplication
    not answered yet) or "registered".'''
    return dbus.Array([dbus.Struct((dbus.String(st.name), dbus.String(a.owner),
                                    dbus.String(a.path), dbus.String(a.state)))
                       for st in ADAPTERS.values() for a in st.apps], signature='(ssss)')


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='a(ssss)')
def RegisteredAdvertisements(self):
    '''RegisteredAdvertisements() → a(hci s, owner s, path s, state s):
    advertisements bluetoothd holds (each holds an instance), state
    "pending" or "registered".'''
    return dbus.Array([dbus.Struct((dbus.String(st.name), dbus.String(a.owner),
                                    dbus.String(a.path), dbus.String(a.state)))
                       for st in ADAPTERS.values() for a in st.ads], signature='(ssss)')


@dbus.service.method(MOCK_IFACE, in_signature='so', out_signature='a{sv}')
def AdvertisementInfo(self, device_name, path):
    '''AdvertisementInfo(hci s, path o) → a{sv} of a registered
    advertisement (any owner): Type s, Instance y, Address s, AddressType s
    (what other adapters hear), AdvDataLength y and MaxAdvDataLength y
    (bluetoothd's AD and its limit), ScanResponseLength y, Includes as,
    Advertised a{sv} (the Device1 properties a scanner gets).'''
    st = _adapter_state(device_name)
    ad = next((a for a in st.ads if a.path == str(path) and a.parsed is not None), None)
    if ad is None:
        raise _mock_err('NoSuchAdvertisement', f'{path} is not registered on {device_name}')
    return dbus.Dictionary({
        'Type': dbus.String(ad.parsed['type']), 'Instance': dbus.Byte(ad.instance),
        'Address': dbus.String(ad.address or ''), 'AddressType': dbus.String(ad.address_type),
        'AdvDataLength': dbus.Byte(ad.lengths[0]), 'MaxAdvDataLength': dbus.Byte(ad.lengths[1]),
        'ScanResponseLength': dbus.Byte(ad.lengths[2]),
        'Includes': dbus.Array(ad.parsed['includes'], signature='s'),
        'Advertised': dbus.Dictionary(_advertised_props(ad), signature='sv'),
    }, signature='sv')


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='a(qsss)')
def LocalDatabase(self, device_name):
    '''LocalDatabase(hci s) → a(handle q, kind s, uuid s, path s): the
    adapter's GATT database as applications built it (kind service,
    characteristic (value handle), ccc, cep, descriptor; bluetoothd's own
    CCC/CEP have the characteristic's path).'''
    st = _adapter_state(device_name)
    rows = []
    for app in st.apps:
        if app.state != 'registered':
            continue
        for svc in app.services:
            if not svc.active:
                continue
            u = _parse_gatt_uuid(app.objects.get(svc.path, {}).get(GATT_SERVICE_IFACE, {}))
            rows.append((svc.handle, 'service', u[1] if u else '', svc.path))
            for c in svc.chrcs:
                rows.append((c.handle, 'characteristic', c.uuid, c.path))
                if c.ccc_handle:
                    rows.append((c.ccc_handle, 'ccc', canonical_uuid('2902'), c.path))
                if c.cep_handle:
                    rows.append((c.cep_handle, 'cep', canonical_uuid('2900'), c.path))
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
                       for p, m, o in SERVER_CALLS], signature='(ssa{sv})')


@dbus.service.method(MOCK_IFACE, in_signature='d', out_signature='')
def SetAttTimeout(self, seconds):
    '''SetAttTimeout(seconds d): the remote centrals' ATT transaction
    timeout (30 s, as BlueZ's shared/att.c). bluetoothd itself waits 300 s
    for an application (gdbus METHOD_CALL_TIMEOUT).'''
    SERVER['att_timeout'] = max(float(seconds), 0.001)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def SetAdvertisingCommands(self, mode):
    '''SetAdvertisingCommands(mode s): "extended" (default: kernels with
    MGMT Add Extended Advertising, as Debian 12's: a too-long advertisement
    fails "Failed to register advertisement") or "legacy" ("Failed to parse
    advertisement.", and appearance counted against the 31 bytes).'''
    if str(mode) not in ('extended', 'legacy'):
        raise _mock_err('InvalidArgs', 'mode must be extended or legacy')
    SERVER['adv_commands'] = str(mode)


@dbus.service.method(MOCK_IFACE, in_signature='sy', out_signature='')
def SetMaxAdvertisements(self, device_name, count):
    '''SetMaxAdvertisements(hci s, count y): the controller's advertising
    instances (manager->max_ads; 5 by default).'''
    st = _adapter_state(device_name)
    st.max_ads = int(count)
    _adv_instances_changed(st)
    _adv_emit_instances(st)


@dbus.service.method(MOCK_IFACE, in_signature='d', out_signature='')
def SetTemporaryTimeout(self, seconds):
    '''SetTemporaryTimeout(seconds d): how long a discovered device of a
    stand-in advertisement that stopped stays (main.conf TemporaryTimeout, 30).'''
    SERVER['temporary_timeout'] = max(float(seconds), 0.0)


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
