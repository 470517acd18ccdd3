"""What bluetoothd says, independently of bluectl (python3-dbus, in the
runner's process: no python start per question). The checks assert on
bluectl's output AND on what BlueZ says really happened."""
import time

import dbus

from . import lab

BLUEZ = 'org.bluez'
PROPS = 'org.freedesktop.DBus.Properties'
_bus = None


def bus():
    global _bus
    if _bus is None:
        _bus = dbus.SystemBus()
    return _bus


def _obj(path, name=BLUEZ):
    # a new proxy each time: a proxy is bound to the owner of the name when
    # made, and bluetoothd may have been restarted since (the supervisor)
    return bus().get_object(name, path, introspect=False)


def plain(v):
    """A D-Bus value as plain JSON-able python (byte arrays as hex)."""
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.Byte, dbus.Int16, dbus.UInt16, dbus.Int32, dbus.UInt32, dbus.Int64, dbus.UInt64)):
        return int(v)
    if isinstance(v, dbus.Array) and getattr(v, 'signature', None) == 'y':
        return bytes(v).hex()
    if isinstance(v, (dbus.Array, list)):
        return [plain(x) for x in v]
    if isinstance(v, (dbus.Dictionary, dict)):
        return {str(k): plain(x) for k, x in v.items()}
    return str(v)


def prop(path, iface, name):
    """A property's value, or None when it cannot be read (no such object,
    bluetoothd restarting)."""
    try:
        return dbus.Interface(_obj(path), PROPS).Get(iface, name)
    except dbus.DBusException:
        return None


def set_prop(path, iface, name, value):
    """Properties.Set; value must carry variant_level=1 (the proxies here are
    not introspected: the signature comes from the values, "ssv")."""
    dbus.Interface(_obj(path), PROPS).Set(iface, name, value, signature='ssv')


def managed():
    return dbus.Interface(_obj('/'), 'org.freedesktop.DBus.ObjectManager').GetManagedObjects()


def _wait(path, iface, name, want, secs, log=None):
    end = time.monotonic() + secs
    while True:
        v = prop(path, iface, name)
        if v is not None and bool(v) == want:
            return True
        if time.monotonic() >= end:
            break
        time.sleep(0.2)
    if log:
        log('timeout: %s %s=%s, wanted %s within %s s' % (path, name, '?' if v is None else str(bool(v)).lower(),
                                                          str(want).lower(), secs))
    return False


def wait(addr, name, want, secs, log=None):
    """Until Device1.NAME of ADDR on the central is want (bool), at most secs."""
    return _wait(lab.dev_path(addr), 'org.bluez.Device1', name, want, secs, log)


def wait_adapter(name, want, secs, adapter=None, log=None):
    """Until Adapter1.NAME of the central (or adapter) is want, at most secs."""
    return _wait('/org/bluez/' + (adapter or lab.CENTRAL), 'org.bluez.Adapter1', name, want, secs, log)


def device(addr, adapter=None):
    """Device1 of ADDR on the central as plain values with its path ({} if none)."""
    a = '/org/bluez/' + (adapter or lab.CENTRAL)
    for path, ifs in managed().items():
        d = ifs.get('org.bluez.Device1')
        if d and str(d['Adapter']) == a and str(d['Address']).upper() == addr.upper():
            out = {k: plain(v) for k, v in d.items()}
            out['path'] = str(path)
            return out
    return {}


def wait_notifying(addr, uuid, secs):
    """Until the characteristic UUID of ADDR (on the central) is Notifying."""
    end = time.monotonic() + secs
    dev = lab.dev_path(addr)
    while time.monotonic() < end:
        try:
            for p, ifs in managed().items():
                c = ifs.get('org.bluez.GattCharacteristic1')
                if c and str(p).startswith(dev + '/') and str(c['UUID']) == uuid.lower() and c.get('Notifying'):
                    return True
        except dbus.DBusException:
            pass
        time.sleep(0.1)
    return False


def remove(addr, adapter=None):
    """Adapter1.RemoveDevice of ADDR on the central (or adapter); False when
    that adapter did not know it."""
    d = device(addr, adapter)
    if not d:
        return False
    a = '/org/bluez/' + (adapter or lab.CENTRAL)
    dbus.Interface(_obj(a), 'org.bluez.Adapter1').RemoveDevice(dbus.ObjectPath(d['path']))
    return True


def bus_names(pid):
    """The unique bus names of process PID on the system bus."""
    d = dbus.Interface(_obj('/org/freedesktop/DBus', 'org.freedesktop.DBus'), 'org.freedesktop.DBus')
    names = []
    for n in d.ListNames():
        if n.startswith(':'):
            try:
                if int(d.GetConnectionUnixProcessID(n)) == int(pid):
                    names.append(str(n))
            except dbus.DBusException:
                pass
    return names


def _uuid(u):
    u = u.lower()
    return '0000%s-0000-1000-8000-00805f9b34fb' % u if len(u) == 4 else u


def services(uuid):
    """Every GattService1 of that UUID, all adapters: sorted paths."""
    uuid = _uuid(uuid)
    return sorted(str(p) for p, ifs in managed().items()
                  if str(ifs.get('org.bluez.GattService1', {}).get('UUID', '')).lower() == uuid)


def remove_with_service(uuid, keep=None):
    """RemoveDevice of the central's devices that expose that service (but
    the one at address keep); their addresses."""
    objs = managed()
    uuid = _uuid(uuid)
    paths = [str(p) for p, ifs in objs.items()
             if str(ifs.get('org.bluez.GattService1', {}).get('UUID', '')).lower() == uuid]
    a = '/org/bluez/' + lab.CENTRAL
    gone = []
    for p, ifs in objs.items():
        d = ifs.get('org.bluez.Device1')
        if not d or str(d['Adapter']) != a or (keep and str(d['Address']).upper() == keep.upper()):
            continue
        if any(x.startswith(str(p) + '/') for x in paths):
            dbus.Interface(_obj(a), 'org.bluez.Adapter1').RemoveDevice(p)
            gone.append(str(d['Address']))
    return gone


def adv_instances(adapter):
    """LEAdvertisingManager1.ActiveInstances of adapter (None if unreadable)."""
    v = prop('/org/bluez/' + adapter, 'org.bluez.LEAdvertisingManager1', 'ActiveInstances')
    return None if v is None else int(v)
