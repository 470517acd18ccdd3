'''org.bluez.GattManager1: applications registered by clients, validated
and put into the local database as client_ready_cb does.'''

import dbus
import dbus.lowlevel
import dbus.service
from dbusmock import OBJECT_MANAGER_IFACE


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
        u = peripheral.bt_uuid(self.props.get('UUID'))
        return u[1] if u else ''


class LocalChrc(LocalAttribute):
    kind = 'characteristic'

    def __init__(self, service, path):
        super().__init__(service, path, common.GATT_CHRC_IFACE)
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
        super().__init__(service, path, common.GATT_DESC_IFACE)
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
        bus = common._bus()
        self.matches = [
            bus.add_signal_receiver(self._props_changed, signal_name='PropertiesChanged',
                                    dbus_interface=common.PROPS_IFACE, bus_name=self.owner,
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
        if self.state != 'registered' or str(interface) != common.GATT_CHRC_IFACE:
            return
        chrc = self.find(str(path))
        if not isinstance(chrc, LocalChrc) or chrc.gone or \
                not chrc.cprops & (peripheral.PROP_NOTIFY | peripheral.PROP_INDICATE):
            return
        if 'Value' in changed:
            value = changed['Value']
            if not isinstance(value, (bytes, dbus.ByteArray)) and not (
                    isinstance(value, dbus.Array) and value.signature == 'y'):
                common.log(f'{path}: malformed "Value" property received')
                return
            att_server.send_value_to_centrals(chrc, common._bytes(value))
        elif 'Value' in [str(k) for k in invalidated]:
            att_server.send_value_to_centrals(chrc, b'')

    def _ifaces_added(self, path, interfaces):
        # proxy_added_cb: queued in app->proxies, never added to the database
        if self.failed:
            return
        for iface, props in interfaces.items():
            if str(iface) in (common.INTROSPECT_IFACE, common.PROPS_IFACE):
                continue
            self.objects.setdefault(str(path), {})[str(iface)] = dict(props)
        common.log(f'application {self.owner}{self.path}: object added {path} (ignored, as bluetoothd does)')

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
        if str(common.GATT_SERVICE_IFACE) in [str(i) for i in interfaces]:
            for svc in [s for s in self.services if s.path == path]:
                common.log(f'application {self.owner}{self.path}: service {path} removed')
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
        raise common._err(common.ERR + 'AlreadyExists', 'Already Exists')
    if not path.startswith('/'):
        raise common._err(common.ERR + 'Failed', 'Failed to register application')
    app = LocalApp(st, sender, path, ok, err)
    st.apps.append(app)
    clients._watch_clients()
    app.watch()
    peripheral._record_call(path, 'GetManagedObjects')

    def reply(objects):
        if app not in st.apps:
            return      # unregistered meanwhile: app_free drops app->reg unanswered
        for opath, ifaces in objects.items():
            for iface, props in ifaces.items():
                if str(iface) in (common.INTROSPECT_IFACE, common.PROPS_IFACE):
                    continue
                app.objects.setdefault(str(opath), {})[str(iface)] = dict(props)
        gatt_client_ready(app)

    def error(e):
        common.log(f'GetManagedObjects {sender}{path}: {e.get_dbus_name()}')
        if app in st.apps:
            gatt_client_ready(app)      # get_managed_objects_reply: ready, no objects

    common._bus().call_async(sender, path, OBJECT_MANAGER_IFACE, 'GetManagedObjects', '', (),
                      reply, error, timeout=peripheral.DBUS_DEFAULT_TIMEOUT, byte_arrays=True)


def _reply_registration(app, error=None):
    ok, err = app.reg
    app.reg = None
    if error is None:
        ok()
    else:
        err(common._err(common.ERR + 'Failed', error))


def gatt_client_ready(app):
    '''client_ready_cb'''
    proxies = [(p, i, props) for p, ifaces in app.objects.items() for i, props in ifaces.items()]
    if not proxies:
        return _fail_app(app, 'No object received')
    for p, i, props in proxies:             # register_profile
        if i == peripheral.GATT_PROFILE_IFACE and not app.failed:
            uuids = props.get('UUIDs')
            if not isinstance(uuids, dbus.Array) or not [u for u in uuids if isinstance(u, dbus.String)]:
                app.failed = True
            else:
                app.profiles.append(p)
    for p, i, props in proxies:             # register_service → create_service
        if i == common.GATT_SERVICE_IFACE and not app.failed:
            app.services.append(LocalService(app, p))
    for p, i, props in proxies:             # register_characteristic → chrc_create
        if i == common.GATT_CHRC_IFACE and not app.failed:
            if not _chrc_create(app, p, props):
                app.failed = True
    for p, i, props in proxies:             # register_descriptor → desc_create
        if i == common.GATT_DESC_IFACE and not app.failed:
            if not _desc_create(app, p, props):
                app.failed = True
    if (not app.services and not app.profiles) or app.failed:
        return _fail_app(app, 'No valid service object found')
    for svc in app.services:                # database_add_app
        if not database_add_service(svc):
            return _fail_app(app, 'Failed to create entry in database')
    app.state = 'registered'
    common.log(f'GATT application registered: {app.owner}:{app.path}')
    _reply_registration(app)
    return None


def _fail_app(app, message):
    common.log(f'GATT application {app.owner}:{app.path} refused: {message}')
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
        'broadcast': (peripheral.PROP_BROADCAST, 0, 0, 0),
        'read': (peripheral.PROP_READ, 0, peripheral.PERM_READ, 0),
        'write-without-response': (peripheral.PROP_WRITE_WITHOUT_RESP, 0, peripheral.PERM_WRITE, 0),
        'write': (peripheral.PROP_WRITE, 0, peripheral.PERM_WRITE, 0),
        'notify': (peripheral.PROP_NOTIFY, 0, 0, peripheral.PERM_WRITE),
        'indicate': (peripheral.PROP_INDICATE, 0, 0, peripheral.PERM_WRITE),
        'authenticated-signed-writes': (peripheral.PROP_AUTH, 0, peripheral.PERM_WRITE, 0),
        'extended-properties': (peripheral.PROP_EXT_PROP, 0, 0, 0),
        'reliable-write': (0, peripheral.EXT_PROP_RELIABLE_WRITE, peripheral.PERM_WRITE, 0),
        'writable-auxiliaries': (0, peripheral.EXT_PROP_WRITABLE_AUX, 0, 0),
        'encrypt-read': (peripheral.PROP_READ, 0, peripheral.PERM_READ | peripheral.PERM_READ_ENCRYPT, 0),
        'encrypt-write': (peripheral.PROP_WRITE, 0, peripheral.PERM_WRITE | peripheral.PERM_WRITE_ENCRYPT, 0),
        'encrypt-authenticated-read': (peripheral.PROP_READ, 0, peripheral.PERM_READ | peripheral.PERM_READ_AUTHEN, 0),
        'encrypt-authenticated-write': (peripheral.PROP_WRITE, 0, peripheral.PERM_WRITE | peripheral.PERM_WRITE_AUTHEN, 0),
        'secure-read': (peripheral.PROP_READ, 0, peripheral.PERM_READ | peripheral.PERM_READ_SECURE, 0),
        'secure-write': (peripheral.PROP_WRITE, 0, peripheral.PERM_WRITE | peripheral.PERM_WRITE_SECURE, 0),
        'authorize': (0, 0, 0, 0),
        'encrypt-notify': (peripheral.PROP_NOTIFY, 0, 0, peripheral.PERM_WRITE_ENCRYPT),
        'encrypt-authenticated-notify': (peripheral.PROP_NOTIFY, 0, 0, peripheral.PERM_WRITE_AUTHEN),
        'secure-notify': (peripheral.PROP_NOTIFY, 0, 0, peripheral.PERM_WRITE_SECURE),
        'encrypt-indicate': (peripheral.PROP_INDICATE, 0, 0, peripheral.PERM_WRITE_ENCRYPT),
        'encrypt-authenticated-indicate': (peripheral.PROP_INDICATE, 0, 0, peripheral.PERM_WRITE_AUTHEN),
        'secure-indicate': (peripheral.PROP_INDICATE, 0, 0, peripheral.PERM_WRITE_SECURE),
    }
    for f in flags:
        if not isinstance(f, dbus.String) or str(f) not in table:
            common.log(f'Invalid characteristic flag: {f}')
            return None
        p, e, m, c = table[str(f)]
        props |= p
        ext |= e
        perm |= m
        ccc |= c
    if ext:
        props |= peripheral.PROP_EXT_PROP
    return props, ext, perm, ccc


def parse_desc_flags(flags):
    '''parse_desc_flags → perm or None'''
    if not isinstance(flags, dbus.Array) or not len(flags):
        return None
    table = {'read': peripheral.PERM_READ, 'write': peripheral.PERM_WRITE,
             'encrypt-read': peripheral.PERM_READ | peripheral.PERM_READ_ENCRYPT,
             'encrypt-write': peripheral.PERM_WRITE | peripheral.PERM_WRITE_ENCRYPT,
             'encrypt-authenticated-read': peripheral.PERM_READ | peripheral.PERM_READ_AUTHEN,
             'encrypt-authenticated-write': peripheral.PERM_WRITE | peripheral.PERM_WRITE_AUTHEN,
             'secure-read': peripheral.PERM_READ | peripheral.PERM_READ_SECURE,
             'secure-write': peripheral.PERM_WRITE | peripheral.PERM_WRITE_SECURE, 'authorize': 0}
    perm = 0
    for f in flags:
        if not isinstance(f, dbus.String) or str(f) not in table:
            common.log(f'Invalid descriptor flag: {f}')
            return None
        perm |= table[str(f)]
    return perm


def _chrc_create(app, path, props):
    svc_path = _object_path(props.get('Service'))
    if svc_path is None:
        common.log('Failed to obtain service path for characteristic')
        return False
    svc = next((s for s in app.services if s.path == svc_path), None)
    if svc is None:
        common.log(f'Unable to find service for characteristic: {path}')
        return False
    parsed = parse_chrc_flags(props.get('Flags'))
    if parsed is None:
        common.log('Failed to parse characteristic properties')
        return False
    chrc = LocalChrc(svc, path)
    chrc.flags = [str(f) for f in props['Flags']]
    chrc.cprops, chrc.ext_props, chrc.perm, chrc.ccc_perm = parsed
    svc.chrcs.append(chrc)
    return True


def _desc_create(app, path, props):
    chrc_path = _object_path(props.get('Characteristic'))
    if chrc_path is None:
        common.log('Failed to obtain characteristic path for descriptor')
        return False
    svc = next((s for s in app.services if any(c.path == chrc_path for c in s.chrcs)), None)
    if svc is None:
        common.log(f'Unable to find service for characteristic: {chrc_path}')
        return False
    perm = parse_desc_flags(props.get('Flags'))
    if perm is None:
        common.log('Failed to parse characteristic properties')
        return False
    desc = LocalDesc(svc, path, chrc_path)
    desc.perm = perm
    svc.descs.append(desc)
    return True


def _parse_gatt_uuid(props):
    '''parse_uuid: a valid UUID string, not GAP (0x1800) or GATT (0x1801).'''
    u = peripheral.bt_uuid(props.get('UUID')) if isinstance(props.get('UUID'), dbus.String) else None
    if u is None:
        return None
    if u[1] in (common.canonical_uuid('1800'), common.canonical_uuid('1801')):
        common.log('GAP/GATT service must be handled by BlueZ')
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
    iface = getattr(attr_or_svc, 'iface', common.GATT_SERVICE_IFACE)
    peripheral._record_call(path, 'Set Handle')
    common._bus().call_async(app.owner, path, common.PROPS_IFACE, 'Set', 'ssv',
                      (iface, 'Handle', dbus.UInt16(handle, variant_level=1)),
                      lambda *a: None, lambda e: None, timeout=peripheral.DBUS_DEFAULT_TIMEOUT)


def database_add_service(svc):
    '''database_add_service (+ database_add_chrc, _ccc, _cep, _desc)'''
    props = svc.app.objects.get(svc.path, {}).get(common.GATT_SERVICE_IFACE, {})
    if _parse_gatt_uuid(props) is None:
        common.log('Failed to read "UUID" property of service')
        return False
    if not isinstance(props.get('Primary'), dbus.Boolean):
        common.log('Failed to read "Primary" property of service')
        return False
    inc = props.get('Includes')
    if inc is not None and (not isinstance(inc, dbus.Array) or
                            not all(isinstance(x, dbus.ObjectPath) for x in inc)):
        common.log('Failed to read "Includes" property of service')
        return False
    handle = _parse_handle(props)
    if handle is None:
        common.log('Failed to read "Handle" property of service')
        return False
    count = 1 + len(inc or [])
    for chrc in svc.chrcs:
        count += 2 + (1 if chrc.cprops & (peripheral.PROP_NOTIFY | peripheral.PROP_INDICATE) else 0) + \
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
        if chrc.cprops & (peripheral.PROP_NOTIFY | peripheral.PROP_INDICATE):
            chrc.ccc_perm |= peripheral.PERM_WRITE | peripheral.PERM_READ
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
        common.log('Found descriptor with no matching characteristic!')
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
        op.finish(peripheral.att_error(0x06, 'the application went away'))


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
        raise common._err(common.ERR + 'DoesNotExist', 'Does Not Exist')
    remove_app(app)


# The parts used only when called: imported last, so that this part is
# complete when one of them reads it as it loads.
from . import att_server, clients, common, peripheral  # noqa: E402 pylint: disable=wrong-import-position
