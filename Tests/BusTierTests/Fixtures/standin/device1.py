'''org.bluez.Device1: connect, services resolved, disconnect, pair,
RemoveDevice.'''

import dbus
import dbus.lowlevel
import dbus.service
from gi.repository import GLib
from dbusmock import mockobject

from . import bluez_object, common


class DeviceObject(bluez_object.BluezObject):
    WRITABLE = {common.DEVICE_IFACE: {'Alias': 's', 'Trusted': 'b', 'Blocked': 'b',
                               'WakeAllowed': 'b'}}

    def __init__(self, advertiser, props):
        super().__init__(advertiser.path, common.DEVICE_IFACE, props)
        self.advertiser = advertiser
        self.adapter_name = advertiser.adapter.name
        self.user_alias = False         # Alias set by a client (else it follows Name)
        self.gatt_paths = []            # exported GATT objects below it, in export order

    def set_property(self, interface, name, value):
        if interface == common.DEVICE_IFACE and name == 'Blocked' and bool(value) and self.connected:
            # src/device.c device_block: a blocked device is disconnected first
            # (checked in the lab: `block` of a connected device, Connected false after)
            disconnect_device(self)
        if interface == common.DEVICE_IFACE and name == 'Alias':
            self.user_alias = bool(str(value))
            if not self.user_alias:
                p = self.props[common.DEVICE_IFACE]
                value = dbus.String(p.get('Name', adapter1.default_alias(self.advertiser.address)))
            self.update({'Alias': value})
        else:
            self.update({name: value}, interface)

    @property
    def connected(self):
        return bool(self.props[common.DEVICE_IFACE]['Connected'])

    @dbus.service.method(common.DEVICE_IFACE, in_signature='', out_signature='',
                         async_callbacks=('ok', 'err'))
    def Connect(self, ok=None, err=None):
        common.log(f'Connect {self.path}')
        if state._hangs(self.path, 'Connect', ok, err):
            return      # (HangMethod: bluetoothd busy, or about to crash)
        try:
            state._check_injected(self.path, 'Connect')
            if not state.ADAPTERS[self.adapter_name].obj.props[common.ADAPTER_IFACE]['Powered']:
                raise common._err(common.ERR + 'NotReady', 'Resource Not Ready')
            if self.connected:
                # src/device.c dev_connect: an LE device whose LE bearer is
                # connected → success at once (le_state.connected)
                ok()
                return
            if not self.advertiser.connectable or not self.advertiser.in_range:
                raise common._err(common.ERR + 'Failed', 'le-connection-abort-by-local')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        connect_device(self)
        ok()

    @dbus.service.method(common.DEVICE_IFACE, in_signature='', out_signature='',
                         async_callbacks=('ok', 'err'))
    def Disconnect(self, ok=None, err=None):
        common.log(f'Disconnect {self.path}')
        try:
            state._check_injected(self.path, 'Disconnect')
            if not self.connected:
                raise common._err(common.ERR + 'NotConnected', 'Not Connected')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        delay = state.REPLY_DELAYS.get((self.path, 'Disconnect'))
        if not delay:
            disconnect_device(self)
            ok()
            return
        # src/device.c device_request_disconnect: the link is taken down
        # DISCONNECT_TIMER (2 s in 5.66) later (disconnect_all); then
        # device_remove_connection answers the call and Connected=false
        # follows (a property change goes out when bluetoothd is idle).
        common.log(f'Disconnect {self.path}: the link goes down in {delay} s (DelayReply)')

        def link_down():
            ok()
            if self.connected:
                disconnect_device(self)
            return False
        GLib.timeout_add(int(delay * 1000), link_down)

    @dbus.service.method(common.DEVICE_IFACE, in_signature='', out_signature='',
                         sender_keyword='sender', async_callbacks=('ok', 'err'))
    def Pair(self, sender=None, ok=None, err=None):
        common.log(f'Pair {self.path} from {sender}')
        try:
            state._check_injected(self.path, 'Pair')
            if self.props[common.DEVICE_IFACE]['Paired']:
                raise common._err(common.ERR + 'AlreadyExists', 'Already Exists')
        except dbus.exceptions.DBusException as e:
            err(e)
            return
        # src/device.c pair_device: agent_get(sender) (the caller's agent,
        # else the default agent) gives the IO capability sent to the kernel;
        # no agent → NoInputNoOutput
        client = agent_manager1._agent_client(sender)
        io_cap = state.AGENTS[client][1] if client else 'NoInputNoOutput'
        state.PAIR_LOG.append((self.path, sender, client or '', io_cap))
        how = state.PAIRING.get(self.path)
        if how is None:             # just works, no agent involved
            delay = state.REPLY_DELAYS.get((self.path, 'Pair'))
            if not delay:
                self.paired()
                ok()
                return
            # SMP over the air takes a while: Paired and the reply come then.
            common.log(f'Pair {self.path}: paired in {delay} s (DelayReply)')

            def done():
                if self.path in mockobject.objects:
                    self.paired()
                    ok()
                else:
                    err(common._err(common.ERR + 'AuthenticationCanceled', 'Authentication Canceled'))
                return False
            GLib.timeout_add(int(delay * 1000), done)
            return
        if how[0] not in agent_manager1.IO_CAP_METHODS[io_cap] and not (client and how[0] in agent_manager1.PIN_METHODS):
            # The peripheral wants a method this IO capability cannot do: SMP
            # falls back to Just Works, which a peripheral that asks for a
            # passkey/confirmation (MITM) refuses → AuthenticationFailed, and
            # no agent is asked.
            state.AGENT_LOG.append((how[0], self.path, f'error:io capability {io_cap}'))
            err(common._err(common.ERR + 'AuthenticationFailed', 'Authentication Failed'))
            return
        agent_manager1.ask_agent(self, sender, how[0], how[1], ok, err)

    def paired(self):
        self.update({'Paired': dbus.Boolean(True), 'Bonded': dbus.Boolean(True)})

    @dbus.service.method(common.DEVICE_IFACE, in_signature='', out_signature='')
    def CancelPairing(self):
        raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')

    @dbus.service.method(common.DEVICE_IFACE, in_signature='s', out_signature='')
    def ConnectProfile(self, uuid):
        raise common._err(common.ERR + 'NotAvailable', 'Operation currently not available')

    @dbus.service.method(common.DEVICE_IFACE, in_signature='s', out_signature='')
    def DisconnectProfile(self, uuid):
        raise common._err(common.ERR + 'NotAvailable', 'Operation currently not available')


def connect_device(dev):
    dev.update({'Connected': dbus.Boolean(True)})
    GLib.timeout_add(10, _resolve_services, dev)


def _resolve_services(dev):
    if not dev.connected or dev.path not in mockobject.objects:
        return False
    for svc in dev.advertiser.services:
        gatt_client.export_service(svc)     # (kept objects are not announced again)
    for path in list(dev.gatt_paths):
        obj = mockobject.objects.get(path)
        if isinstance(obj, gatt_client.GattCharacteristicObject):
            obj.link_up()
    dev.update({'ServicesResolved': dbus.Boolean(True)})
    return False


def disconnect_device(dev):
    '''The link goes (Disconnect, the remote, power-off).

    src/device.c device_remove_connection → device_set_svc_refreshed(false)
    (ServicesResolved false); att_disconnected_cb → src/gatt-client.c
    btd_gatt_client_disconnected (sockets closed, notify sessions kept but
    unregistered); attio_cleanup → gatt_client_cleanup → gatt_cache_cleanup,
    which clears the GATT database (the objects go, and their notify
    sessions with them) only when the cache is disabled: with the default
    Cache=always the objects stay exported.'''
    st = state.ADAPTERS.get(dev.adapter_name)
    central = st.centrals.get(dev.advertiser.address) if st else None
    if central is not None and central.connected:
        att_server.remote_disconnect(central)      # a remote central: bluetoothd's server side first
        return
    _fail_hung_calls(dev.path)
    if dev.props[common.DEVICE_IFACE]['ServicesResolved']:
        dev.update({'ServicesResolved': dbus.Boolean(False)})
    for path in list(dev.gatt_paths):
        obj = mockobject.objects.get(path)
        if isinstance(obj, gatt_client.GattCharacteristicObject):
            obj.link_down()
    if not gatt_client.gatt_cache_enabled(dev):
        gatt_client._unexport_gatt(dev)
    dev.update({'Connected': dbus.Boolean(False)})


def _fail_hung_calls(prefix):
    '''Parked calls on attributes below prefix are answered as bluetoothd
    answers pending ATT requests when the link goes.'''
    keep = []
    for path, method, ok, err in state.HUNG_CALLS:
        if path.startswith(prefix + '/'):
            err(common._err(common.ERR + 'Failed', 'Not connected'))
        else:
            keep.append((path, method, ok, err))
    state.HUNG_CALLS[:] = keep


def remove_device(dev):
    if dev.connected:
        disconnect_device(dev)
    gatt_client._unexport_gatt(dev)
    gatt_client._unexport(dev.path)


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import adapter1, agent_manager1, att_server, gatt_client, state  # noqa: E402 pylint: disable=wrong-import-position
