'''bluetoothd's ATT server as simulated remote centrals (Mock.Remote*) meet
it: permissions, reads, writes, CCC writes, notifications and indications.'''

import dbus
import dbus.lowlevel
import dbus.service
from gi.repository import GLib
from dbusmock import mockobject


# -- simulated remote centrals --------------------------------------------------

class RemoteCentral:
    def __init__(self, st, address, addr_type, mtu, security):
        self.st = st
        self.address = address
        self.adv = state.Advertiser(st, address, {'AddressType': dbus.String(addr_type)}, False)
        self.adv.in_range = False
        self.mtu = mtu
        self.security = security
        self.connected = False
        self.ccc = {}                   # LocalChrc → CCC value (device_state's ccc_states)
        self.received = {}              # LocalChrc → [bytes] since the last subscription
        self.pending = []               # ops waiting for an application

    @property
    def path(self):
        return common.device_path(self.st.name, self.address)


class ServerOp:
    '''A request from a remote central waiting for an application's reply.'''

    def __init__(self, central, attr, ok, err):
        self.central = central
        self.attr = attr
        self.ok = ok
        self.err = err
        self.done = False
        self.timer = GLib.timeout_add(int(peripheral.SERVER['att_timeout'] * 1000), self._att_timeout)
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
        common.log(f'{self.attr.path}: no answer within the central\'s ATT timeout')
        self.finish(common._mock_err('Att.Timeout', f'no ATT response within {peripheral.SERVER["att_timeout"]} s;'
                              ' the central disconnected'))
        if self.central.connected:
            remote_disconnect(self.central)
        return False


def _central(adapter, address):
    st = state._adapter_state(adapter)
    c = st.centrals.get(str(address).upper())
    if c is None or not c.connected:
        raise common._mock_err('NotConnected', f'central {address} is not connected to {adapter}')
    return c


def _server_attr(st, ref):
    '''An attribute of a registered application on st, by object path or
    by UUID (first match in registration order).'''
    ref = str(ref)
    want = common.canonical_uuid(ref)
    for app in st.apps:
        if app.state != 'registered':
            continue
        for a in app.attributes():
            if not a.service.active:
                continue
            if a.path == ref or (want is not None and a.uuid == want):
                return a
    raise common._mock_err('NoSuchAttribute', f'no registered characteristic/descriptor {ref} on {st.name}')


def check_permissions(central, perm, mask):
    '''src/shared/gatt-server.c check_permissions → ATT error or 0'''
    if perm and mask & peripheral.PERM_READ and not perm & peripheral.PERM_READ:
        return 0x02
    if perm and mask & peripheral.PERM_WRITE and not perm & peripheral.PERM_WRITE:
        return 0x03
    perm &= mask
    if not perm:
        return 0
    sec = central.security
    if perm & peripheral.PERM_SECURE and sec < peripheral.SECURITY['fips']:
        return 0x05
    if perm & peripheral.PERM_AUTHEN and sec < peripheral.SECURITY['high']:
        return 0x05
    if perm & peripheral.PERM_ENCRYPT and sec < peripheral.SECURITY['medium']:
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
    code = check_permissions(central, attr.perm, peripheral.PERM_READ_MASK)
    if code:
        raise peripheral.att_error(code)
    if attr.gone:
        raise peripheral.att_error(0x0e, 'the object is gone (g_dbus_proxy_method_call fails)')
    op = ServerOp(central, attr, ok, err)
    opts = _options(central, offset)
    peripheral._record_call(attr.path, 'ReadValue', opts)

    def reply(*args):
        if op.done:
            return
        if len(args) != 1 or not isinstance(args[0], (bytes, dbus.ByteArray)):
            return op.finish(peripheral.att_error(0x06, 'invalid return value for "ReadValue"'))
        data = common._bytes(args[0])[:512]
        op.finish(value=common._ay(data[:central.mtu - 1]))     # read_complete_cb: MTU - 1

    def error(e):
        if op.done:
            return
        name, msg = e.get_dbus_name() or '', e.get_dbus_message() or ''
        op.finish(peripheral.att_error(peripheral.dbus_error_to_att_ecode(name, msg, 0x02), f'{name}: {msg}'))

    common._bus().call_async(attr.app.owner, attr.path, attr.iface, 'ReadValue', 'a{sv}', (opts,),
                      reply, error, timeout=peripheral.METHOD_CALL_TIMEOUT, byte_arrays=True)


def remote_write(central, attr, data, kind, ok, err):
    '''write_cb → check_length, check_permissions → chrc_write_cb/desc_write_cb
    → send_write. A write command's errors are silent (no response).'''
    command = kind == 'command'
    code = 0x0d if len(data) > 512 else check_permissions(central, attr.perm, peripheral.PERM_WRITE_MASK)
    if not code and attr.gone:
        code = 0x0e
    if code:
        if command:
            common.log(f'{attr.path}: write command dropped (ATT 0x{code:02x})')
            return ok()
        raise peripheral.att_error(code)
    if isinstance(attr, gatt_manager1.LocalChrc):
        if 'WriteAcquired' in attr.props:
            raise common._mock_err('NotModelled', 'AcquireWrite (WriteAcquired property) is not modelled')
        if attr.cprops & peripheral.PROP_WRITE_WITHOUT_RESP:
            # chrc_write_cb: queue = NULL → WriteValue without a reply
            # function (NO_REPLY_EXPECTED), and write_setup_cb reports
            # success at once — for write requests too
            opts = _options(central)
            peripheral._record_call(attr.path, 'WriteValue', opts)
            peripheral._no_reply_call(attr.app.owner, attr.path, attr.iface, 'WriteValue', 'aya{sv}',
                           (common._ay(data), opts))
            return ok()
    op = ServerOp(central, attr, ok, err)
    opts = _options(central)
    peripheral._record_call(attr.path, 'WriteValue', opts)

    def reply(*args):
        if op.done:
            return
        if command:
            return op.finish()
        if args:
            return op.finish(peripheral.att_error(0x06, 'invalid return value for "WriteValue"'))
        op.finish()

    def error(e):
        if op.done:
            return
        if command:
            return op.finish()
        name, msg = e.get_dbus_name() or '', e.get_dbus_message() or ''
        op.finish(peripheral.att_error(peripheral.dbus_error_to_att_ecode(name, msg, 0x03), f'{name}: {msg}'))

    common._bus().call_async(attr.app.owner, attr.path, attr.iface, 'WriteValue', 'aya{sv}',
                      (common._ay(data), opts), reply, error, timeout=peripheral.METHOD_CALL_TIMEOUT)
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
        peripheral._record_call(chrc.path, 'StopNotify')
        if not chrc.gone:
            peripheral._no_reply_call(chrc.app.owner, chrc.path, common.GATT_CHRC_IFACE, 'StopNotify')
        return 0
    if value > 2 or (value == 1 and not chrc.cprops & peripheral.PROP_NOTIFY) or \
            (value == 2 and not chrc.cprops & peripheral.PROP_INDICATE):
        return 0xfd
    if 'NotifyAcquired' in chrc.props:
        raise common._mock_err('NotModelled', 'AcquireNotify (NotifyAcquired property) is not modelled')
    # "Always call StartNotify for an incoming enable and ignore the return value"
    if chrc.gone:
        return 0x0e
    peripheral._record_call(chrc.path, 'StartNotify')
    peripheral._no_reply_call(chrc.app.owner, chrc.path, common.GATT_CHRC_IFACE, 'StartNotify')
    chrc.ntfy_cnt += 1
    return 0


def remote_ccc_write(central, chrc, value):
    '''gatt-server write_cb (CCC permissions) → gatt_ccc_write_cb'''
    if not isinstance(chrc, gatt_manager1.LocalChrc) or not chrc.ccc_handle:
        raise peripheral.att_error(0x0a, 'the characteristic has no CCC descriptor')
    code = check_permissions(central, chrc.ccc_perm, peripheral.PERM_WRITE_MASK)
    if code:
        raise peripheral.att_error(code)
    if value == central.ccc.get(chrc, 0):
        return      # "If value is identical, then just succeed"
    code = ccc_write_cb(chrc, value)
    if code:
        raise peripheral.att_error(code)
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
                peripheral._record_call(c.path, 'Confirm')
                if not c.gone:
                    peripheral._no_reply_call(c.app.owner, c.path, common.GATT_CHRC_IFACE, 'Confirm')
                return False
            GLib.idle_add(confirm)


def remote_disconnect(central):
    '''The link goes: att_disconnected (CCC states of an unbonded device are
    cleared: ccc_write_cb(NULL) each), pending ops are answered to no one.'''
    central.connected = False
    for op in list(central.pending):
        op.finish(common._mock_err('NotConnected', 'the link went down'))
    dev = mockobject.objects.get(central.path)
    bonded = isinstance(dev, device1.DeviceObject) and bool(dev.props[common.DEVICE_IFACE]['Bonded'])
    if not bonded:
        for chrc, value in list(central.ccc.items()):
            if value:
                ccc_write_cb(chrc, None)
        central.ccc.clear()
    if isinstance(dev, device1.DeviceObject) and dev.connected:
        device1.disconnect_device(dev)


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import common, device1, gatt_manager1, peripheral, state  # noqa: E402 pylint: disable=wrong-import-position
