'''The peripheral role's common ground (bluetoothd 5.66's server side:
src/gatt-database.c, src/shared/gatt-server.c, src/advertising.c): ATT
permissions and errors, time limits, the calls made to applications.'''

import re

import dbus
import dbus.lowlevel
import dbus.service

from . import common


# peripheral role: bluetoothd 5.66's GATT server side (src/gatt-database.c,
# src/shared/gatt-server.c) and LE advertising (src/advertising.c,
# src/shared/ad.c), with simulated remote centrals (Mock.Remote*)

GATT_PROFILE_IFACE = 'org.bluez.GattProfile1'
LE_ADV_IFACE = 'org.bluez.LEAdvertisement1'
ATT_MOCK_ERR = common.MOCK_ERR + 'Att.'

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
    return common._err(ATT_MOCK_ERR + name, f'0x{code:02x}' + (f' {detail}' if detail else ''))


def dbus_error_to_att_ecode(name, message, perm_err):
    '''src/gatt-database.c dbus_error_to_att_ecode'''
    if name == common.ERR + 'Failed':
        m = re.fullmatch(r'\s*([+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*))', message or '')
        if not m:
            return 0x80         # "If message doesn't set an error code just use 0x80"
        code = int(m.group(1), 0)
        return code if 0x80 <= code <= 0x9f else 0x0e
    return {common.ERR + 'NotSupported': 0x06, common.ERR + 'NotAuthorized': 0x08,
            common.ERR + 'InvalidValueLength': 0x0d, common.ERR + 'InvalidOffset': 0x07,
            common.ERR + 'InProgress': 0xfe, common.ERR + 'NotPermitted': perm_err}.get(name, 0x0e)


def bt_uuid(text):
    '''lib/uuid.c bt_string_to_uuid → (bits 16|32|128, canonical 128-bit
    string), or None. A 128-bit string on the Bluetooth base is 16-bit.'''
    if not isinstance(text, str):
        return None
    s = str(text)
    if len(s) == 36 and s[8] == '-' and s[13] == '-' and s[18] == '-' and s[23] == '-':
        m = re.fullmatch(r'0000([0-9a-fA-F]{4})-0000-1000-8000-00805[fF]9[bB]34[fF][bB]', s)
        if m:
            return 16, common.canonical_uuid(m.group(1))
        if not re.fullmatch(r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', s):
            return None
        return 128, s.lower()
    if len(s) in (8, 10) and re.fullmatch(r'(0[xX])?[0-9a-fA-F]+', s):
        return 32, '%08x' % (int(s, 16) & 0xffffffff) + common.BASE_UUID_SUFFIX
    if len(s) in (4, 6) and re.fullmatch(r'(0[xX])?[0-9a-fA-F]+', s):
        return 16, '%08x' % (int(s, 16) & 0xffff) + common.BASE_UUID_SUFFIX
    return None


def _no_reply_call(owner, path, interface, method, signature='', args=()):
    '''g_dbus_proxy_method_call without a reply function: NO_REPLY_EXPECTED.'''
    msg = dbus.lowlevel.MethodCallMessage(owner, path, interface, method)
    msg.set_no_reply(True)
    if signature:
        msg.append(*args, signature=signature)
    common._bus().send_message(msg)


def _record_call(path, method, options=None):
    SERVER_CALLS.append((str(path), method, dict(options or {})))
