'''BluezObject: the base of every BlueZ object of the stand-in
(org.freedesktop.DBus.Properties as bluetoothd answers it).'''

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import mockobject

from . import common


class BluezObject(mockobject.DBusMockObject):
    '''Properties behave as in bluetoothd (errors, read-only checks).'''

    WRITABLE = {}      # interface → {name: signature}

    def __init__(self, path, interface, props):
        super().__init__(state.ROOT.bus_name, path, interface, props)
        self.props.update(common._std_ifaces())

    @dbus.service.method(common.PROPS_IFACE, in_signature='ss', out_signature='v')
    def Get(self, interface_name, property_name):
        iface = self.props.get(str(interface_name))
        if iface is None:
            raise common._err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such interface '{interface_name}'")
        if property_name not in iface:
            raise common._err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such property '{property_name}'")
        return iface[property_name]

    @dbus.service.method(common.PROPS_IFACE, in_signature='s', out_signature='a{sv}')
    def GetAll(self, interface_name, *_, **__):
        state.CALLS.append((str(self.path), 'GetAll'))  # recorded (GetCalls), never failed by InjectError
        iface = self.props.get(str(interface_name))
        if iface is None:
            raise common._err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such interface '{interface_name}'")
        return dbus.Dictionary(iface, signature='sv')

    @dbus.service.method(common.PROPS_IFACE, in_signature='ssv', out_signature='')
    def Set(self, interface_name, property_name, value, *_, **__):
        iface = self.props.get(str(interface_name))
        if iface is None:
            raise common._err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such interface '{interface_name}'")
        if property_name not in iface:
            raise common._err('org.freedesktop.DBus.Error.InvalidArgs',
                       f"No such property '{property_name}'")
        sig = self.WRITABLE.get(str(interface_name), {}).get(str(property_name))
        if sig is None:
            raise common._err('org.freedesktop.DBus.Error.PropertyReadOnly',
                       f"Property '{property_name}' is not writable")
        if not _typed(value, sig):
            raise common._bluez_invalid()
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
            common.emit_props_changed(self.path, interface, out, inv)


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


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import state  # noqa: E402 pylint: disable=wrong-import-position
