'''org.bluez.GattService1, GattCharacteristic1 and GattDescriptor1 of a
remote device (bluetoothd 5.66's GATT client: src/gatt-client.c): reads,
writes, StartNotify sessions per client, AcquireNotify/AcquireWrite, the
GATT cache.'''

import socket

import dbus
import dbus.lowlevel
import dbus.service
from gi.repository import GLib
from dbusmock import mockobject

from . import bluez_object, common


def _read_options(options):
    offset = options.get('offset', dbus.UInt16(0))
    if not isinstance(offset, dbus.UInt16):
        raise common._bluez_invalid()
    return int(offset)


class GattServiceObject(bluez_object.BluezObject):
    def __init__(self, d):
        super().__init__(d.path, common.GATT_SERVICE_IFACE, {
            'UUID': dbus.String(d.uuid),
            'Device': dbus.ObjectPath(d.advertiser.path),
            'Primary': dbus.Boolean(d.primary),
            'Includes': dbus.Array([], signature='o'),
        })   # src/gatt-client.c service_properties (5.66: no Handle)
        self.d = d


class GattCharacteristicObject(bluez_object.BluezObject):
    def __init__(self, d):
        super().__init__(d.path, common.GATT_CHRC_IFACE, {
            'UUID': dbus.String(d.uuid),
            'Service': dbus.ObjectPath(d.service.path),
            'Value': common._ay(b''),
            'Flags': dbus.Array(d.flags, signature='s'),
            'MTU': dbus.UInt16(common.DEFAULT_MTU),
        })   # src/gatt-client.c characteristic_properties (5.66: no Handle)
        # src/gatt-client.c characteristic_notifying_exists (notify or
        # indicate), characteristic_notify_acquired_exists (notify only),
        # characteristic_write_acquired_exists (write-without-response)
        if 'notify' in d.flags or 'indicate' in d.flags:
            self.props[common.GATT_CHRC_IFACE]['Notifying'] = dbus.Boolean(False)
        if 'notify' in d.flags:
            self.props[common.GATT_CHRC_IFACE]['NotifyAcquired'] = dbus.Boolean(False)
        if 'write-without-response' in d.flags:
            self.props[common.GATT_CHRC_IFACE]['WriteAcquired'] = dbus.Boolean(False)
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
        return state._device_connected(self.d.service.advertiser)

    @dbus.service.method(common.GATT_CHRC_IFACE, in_signature='a{sv}', out_signature='ay',
                         async_callbacks=('ok', 'err'))
    def ReadValue(self, options, ok=None, err=None):
        common.log(f'ReadValue {self.path} {dict(options)}')
        if not state._hangs(self.path, 'ReadValue', ok, err):
            state._answer(ok, err, lambda: self._read(options))

    def _read(self, options):
        state._check_injected(self.path, 'ReadValue')
        return self.read_now(options)

    def read_now(self, options):
        # src/gatt-client.c characteristic_read_value: options are parsed
        # after the "Not connected" check; the flags are not checked by
        # bluetoothd, the peripheral answers Read Not Permitted (an ATT error
        # that create_gatt_dbus_error maps to NotPermitted)
        if not self.gatt_connected():
            raise common._err(common.ERR + 'Failed', 'Not connected')
        offset = _read_options(options)
        if not any('read' in f for f in self.d.flags):
            raise common._err(common.ERR + 'NotPermitted', 'Read not permitted')
        if offset > len(self.d.value):
            raise common._err(common.ERR + 'InvalidOffset', 'Invalid offset')
        data = self.d.value[offset:]
        # src/gatt-client.c chrc_read_cb: every successful read is written to
        # the cache (reset first when offset is 0) and write_characteristic_cb
        # emits PropertiesChanged(Value) with G_DBUS_PROPERTY_CHANGED_FLAG_FLUSH,
        # whether or not the value changed and whoever asked
        cached = common._bytes(self.props[common.GATT_CHRC_IFACE].get('Value', b''))
        self.value_signal(data if offset == 0 else cached[:offset] + data)
        return common._ay(data)

    def value_signal(self, data):
        '''One PropertiesChanged(Value) (write_characteristic_cb).'''
        self.update({'Value': common._ay(data)})
        state.VALUE_SIGNALS[self.path] = state.VALUE_SIGNALS.get(self.path, 0) + 1

    @dbus.service.method(common.GATT_CHRC_IFACE, in_signature='aya{sv}', out_signature='',
                         async_callbacks=('ok', 'err'))
    def WriteValue(self, value, options, ok=None, err=None):
        common.log(f'WriteValue {self.path} {common._bytes(value).hex()} {dict(options)}')
        if not state._hangs(self.path, 'WriteValue', ok, err):
            state._answer(ok, err, lambda: self._write(value, options))

    WRITE_FLAGS = ('write', 'encrypt-write', 'encrypt-authenticated-write', 'secure-write')

    def _write(self, value, options):
        state._check_injected(self.path, 'WriteValue')
        # src/gatt-client.c characteristic_write_value, in its order
        if not self.gatt_connected():
            raise common._err(common.ERR + 'Failed', 'Not connected')
        if self.write_sock is not None:
            raise common._err(common.ERR + 'NotPermitted', 'Write acquired')
        kind = options.get('type')
        if kind is not None and not isinstance(kind, dbus.String):
            raise common._bluez_invalid()       # parse_options: "type" must be a string
        offset = _read_options(options)
        kind = None if kind is None else str(kind).lower()   # strcasecmp
        flags = self.d.flags
        data = common._bytes(value)
        # "reliable" (or no type and the reliable-write extended property):
        # reliable long write; "request" (or no type and the write property):
        # write request. The flags are not checked for an explicit type: the
        # peripheral answers Write Not Permitted (→ NotPermitted).
        if kind == 'reliable' or (kind is None and 'reliable-write' in flags):
            if 'reliable-write' not in flags:
                raise common._err(common.ERR + 'NotPermitted', 'Write not permitted')
            return self._store(data, offset, options, 'reliable')
        if kind == 'request' or (kind is None and 'write' in flags):
            if not any(f in flags for f in self.WRITE_FLAGS):
                raise common._err(common.ERR + 'NotPermitted', 'Write not permitted')
            return self._store(data, offset, options, 'request')
        # write command: type "command", or no type and the
        # write-without-response property; no offset. bluetoothd does NOT
        # check the write-without-response property when the type is given:
        # the command is sent and the call succeeds. Any other type, an offset,
        # or no usable property → NotSupported.
        if (kind is not None and kind != 'command') or offset or \
                (kind is None and 'write-without-response' not in flags):
            raise common._err(common.ERR + 'NotSupported', 'Operation is not supported')
        # The peripheral's ATT server checks the attribute's permissions,
        # not the characteristic's properties: a writable value takes a
        # command, anything else drops it silently (no reply either way).
        if 'write-without-response' in flags or any(f in flags for f in self.WRITE_FLAGS):
            self._store(data, 0, options, 'command')
        return None

    def _store(self, data, offset, options, kind):
        if offset > len(self.d.value):
            raise common._err(common.ERR + 'InvalidOffset', 'Invalid offset')
        self.d.value = self.d.value[:offset] + data
        state.WRITES.setdefault(self.path, []).append((data, dict(options), kind))

    @dbus.service.method(common.GATT_CHRC_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StartNotify(self, sender=None):
        common.log(f'StartNotify {self.path} from {sender}')
        state._check_injected(self.path, 'StartNotify')
        self.start_notify(sender)

    def start_notify(self, sender):
        # src/gatt-client.c characteristic_start_notify, in its order
        if self.notify_sock is not None:
            raise common._err(common.ERR + 'NotPermitted', 'Notify acquired')
        if not self.can_notify():
            raise common._err(common.ERR + 'NotSupported', 'Operation is not supported')
        # "Each client can only have one active notify session": a repeat
        # succeeds if the session is registered (notify_id != 0, which
        # bt_gatt_client_register_notify assigns at once, before the CCC
        # write completes), InProgress if it is not: a session kept across a
        # disconnection, waiting for the reconnection to register it again.
        if sender in self.notify_clients:
            if self.notify_clients[sender]:
                return
            raise common._err(common.ERR + 'InProgress', 'In Progress')
        clients._watch_clients()
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
        if not self.props[common.GATT_CHRC_IFACE].get('Notifying'):
            self.update({'Notifying': dbus.Boolean(True)})

    @dbus.service.method(common.GATT_CHRC_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender')
    def StopNotify(self, sender=None):
        common.log(f'StopNotify {self.path} from {sender}')
        state._check_injected(self.path, 'StopNotify')
        self.stop_notify(sender)

    def stop_notify(self, sender):
        # src/gatt-client.c characteristic_stop_notify: an acquired notify
        # socket is closed, whoever asks
        if self.notify_sock is not None:
            self.release_notify_sock()
            return
        if sender not in self.notify_clients:
            raise common._err(common.ERR + 'Failed', 'No notify session started')
        self.drop_notify_client(sender)

    def drop_notify_client(self, sender):
        '''StopNotify, or the client left the bus (notify_client_disconnect).'''
        self.notify_clients.pop(sender, None)
        self.update_notifying()

    def update_notifying(self):
        '''src/gatt-client.c update_notifying: Notifying goes false when no
        session is registered (so a StopNotify while disconnected clears it).'''
        if self.props[common.GATT_CHRC_IFACE].get('Notifying') and not any(self.notify_clients.values()):
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
        self.props[common.GATT_CHRC_IFACE].pop('MTU', None)

    def link_up(self):
        '''src/gatt-client.c btd_gatt_client_connected: register_notify for
        every kept session; register_notify_cb sets Notifying if it fell.'''
        self.props[common.GATT_CHRC_IFACE]['MTU'] = dbus.UInt16(common.DEFAULT_MTU)
        if self.notify_clients:
            for sender in self.notify_clients:
                self.notify_clients[sender] = True
            self.registered()

    @dbus.service.method(common.GATT_CHRC_IFACE, in_signature='a{sv}', out_signature='hq')
    def AcquireNotify(self, options):
        common.log(f'AcquireNotify {self.path}')
        state._check_injected(self.path, 'AcquireNotify')
        # src/gatt-client.c characteristic_acquire_notify, in its order; only
        # the notify property qualifies (an indicate-only characteristic is
        # NotSupported)
        if not self.gatt_connected():
            raise common._err(common.ERR + 'Failed', 'Not connected')
        if self.notify_sock is not None:
            raise common._err(common.ERR + 'NotPermitted', 'Notify acquired')
        if self.notify_clients:
            raise common._err(common.ERR + 'InProgress', 'In Progress')
        if 'notify' not in self.d.flags:
            raise common._err(common.ERR + 'NotSupported', 'Operation is not supported')
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
        return (fd, dbus.UInt16(common.DEFAULT_MTU))

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

    @dbus.service.method(common.GATT_CHRC_IFACE, in_signature='a{sv}', out_signature='hq')
    def AcquireWrite(self, options):
        common.log(f'AcquireWrite {self.path}')
        state._check_injected(self.path, 'AcquireWrite')
        # src/gatt-client.c characteristic_acquire_write, in its order
        if not self.gatt_connected():
            raise common._err(common.ERR + 'Failed', 'Not connected')
        if self.write_sock is not None:
            raise common._err(common.ERR + 'NotPermitted', 'Write acquired')
        if 'write-without-response' not in self.d.flags:
            raise common._err(common.ERR + 'NotSupported', 'Operation is not supported')
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
        return (fd, dbus.UInt16(common.DEFAULT_MTU))

    def _write_sock_event(self, _fd, cond):
        if cond & GLib.IO_IN:
            try:
                data = self.write_sock.recv(65536)
            except OSError:
                data = b''
            if data:
                self.d.value = data
                state.WRITES.setdefault(self.path, []).append((data, {'acquired': True}, 'command'))
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


class GattDescriptorObject(bluez_object.BluezObject):
    def __init__(self, d):
        super().__init__(d.path, common.GATT_DESC_IFACE, {
            'UUID': dbus.String(d.uuid),
            'Characteristic': dbus.ObjectPath(d.chrc.path),
            'Value': common._ay(b''),
        })   # src/gatt-client.c descriptor_properties (5.66: no Flags, no Handle)
        self.d = d

    @dbus.service.method(common.GATT_DESC_IFACE, in_signature='a{sv}', out_signature='ay')
    def ReadValue(self, options):
        state._check_injected(self.path, 'ReadValue')
        # src/gatt-client.c descriptor_read_value / desc_read_cb: every
        # successful read is cached and signalled (write_descriptor_cb)
        if not state._device_connected(self.d.chrc.service.advertiser):
            raise common._err(common.ERR + 'Failed', 'Not connected')
        offset = _read_options(options)
        if not any('read' in f for f in self.d.flags):
            raise common._err(common.ERR + 'NotPermitted', 'Read not permitted')
        if offset > len(self.d.value):
            raise common._err(common.ERR + 'InvalidOffset', 'Invalid offset')
        data = self.d.value[offset:]
        cached = common._bytes(self.props[common.GATT_DESC_IFACE].get('Value', b''))
        self.update({'Value': common._ay(data if offset == 0 else cached[:offset] + data)})
        return common._ay(data)

    @dbus.service.method(common.GATT_DESC_IFACE, in_signature='aya{sv}', out_signature='')
    def WriteValue(self, value, options):
        state._check_injected(self.path, 'WriteValue')
        if not state._device_connected(self.d.chrc.service.advertiser):
            raise common._err(common.ERR + 'Failed', 'Not connected')
        if not any('write' in f for f in self.d.flags):
            raise common._err(common.ERR + 'NotPermitted', 'Write not permitted')
        offset = _read_options(options)
        if offset > len(self.d.value):
            raise common._err(common.ERR + 'InvalidOffset', 'Invalid offset')
        data = common._bytes(value)
        self.d.value = self.d.value[:offset] + data
        state.WRITES.setdefault(self.path, []).append((data, dict(options), 'request'))


def export_service(svc):
    if svc.path not in mockobject.objects:
        o = GattServiceObject(svc)
        state._add_object(o)
        _note_child(svc.advertiser, o.path)
        common.emit_interfaces_added(o.path, o.props)
    for chrc in svc.characteristics:
        export_characteristic(chrc)


def export_characteristic(chrc):
    if chrc.path not in mockobject.objects:
        o = GattCharacteristicObject(chrc)
        state._add_object(o)
        _note_child(chrc.service.advertiser, o.path)
        common.emit_interfaces_added(o.path, o.props)
    for desc in chrc.descriptors:
        export_descriptor(desc)


def export_descriptor(desc):
    if desc.path not in mockobject.objects:
        o = GattDescriptorObject(desc)
        state._add_object(o)
        _note_child(desc.chrc.service.advertiser, o.path)
        common.emit_interfaces_added(o.path, o.props)


def _note_child(adv, path):
    dev = mockobject.objects.get(adv.path)
    if isinstance(dev, device1.DeviceObject):
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
    obj = state._remove_object(path)
    if obj is None:
        return
    if isinstance(obj, GattCharacteristicObject):
        obj.release_notify_sock(emit_change=False)
        obj.release_write_sock(emit_change=False)
    common.emit_interfaces_removed(path, sorted(obj.props.keys()))


def gatt_cache_enabled(dev):
    '''src/device.c gatt_cache_is_enabled: main.conf [GATT] Cache.'''
    mode = state.GATT_CACHE[0]
    return mode == 'always' or (mode == 'yes' and bool(dev.props[common.DEVICE_IFACE]['Paired']))


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import clients, device1, state  # noqa: E402 pylint: disable=wrong-import-position
