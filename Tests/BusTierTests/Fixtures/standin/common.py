'''Constants, errors and helpers shared by every part of the stand-in:
D-Bus interface names, UUIDs and addresses, signals, the log.'''

import re

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import OBJECT_MANAGER_IFACE


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
    return state.ROOT.bus_name.get_bus()


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
    state.ROOT.log(msg)


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import state  # noqa: E402 pylint: disable=wrong-import-position
