"""The lifecycle commands (devices, pair, trust, untrust, block, unblock,
unpair) on the random-address peripheral, each step checked in bluetoothd's
state and storage. The bond is forgotten on both sides first and last (the
peripheral's adapter keeps its own: faults.forget_bond)."""
import os

import dbus

from labcheck import bluez
from labcheck.faults import forget_bond, has_bond, has_gatt_cache, storage_note
from labcheck.jsonlines import check, fields, one
from labcheck.lab import ADV2_NAME, CENTRAL, CENTRAL_ADDR, DEV2, DEV_OPTS, LAB_SVC, PERIPH2_ADAPTER, PERIPH2_ADDR
from labcheck.runner import lab_check
from labcheck.streams import connect_all

KEYS = ('address', 'address_type', 'name', 'alias', 'connected', 'paired', 'bonded', 'trusted', 'blocked',
        'services_resolved', 'service_uuids', 'path')


def listed(lines):
    return any(l['address'] == PERIPH2_ADDR for l in lines)


def only_line(c, what, **want):
    """The command's first line has these fields (what: for the message)."""
    l = c.json_lines()[0]
    check(fields(l, device=PERIPH2_ADDR, **want), '%s: %r' % (what, l))


def wait_device(c, prop, want, secs, why):
    if not bluez.wait(DEV2, prop, want, secs, log=c.echo):
        c.fail(why)


@lab_check('devices_pair_trust_unpair')
def _(c):
    d = DEV2
    forget_bond(c, d, PERIPH2_ADAPTER)
    connect_all(c, d)
    c.bl('devices', *DEV_OPTS, '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    for l in lines:
        check(l.get('adapter') == CENTRAL, 'adapter %r' % l.get('adapter'))
        for k in KEYS:
            check(k in l, 'no %s in %r' % (k, l))
    x = one(lines, lambda l: l['address'] == PERIPH2_ADDR, 'address ' + PERIPH2_ADDR)
    check(x['address_type'] == 'random', 'address_type %r, expected random' % x['address_type'])
    check(x['connected'] is True and x['paired'] is False and x['bonded'] is False,
          'connected/paired/bonded %r/%r/%r' % (x['connected'], x['paired'], x['bonded']))
    check(x['trusted'] is False and x['blocked'] is False, 'trusted/blocked %r/%r' % (x['trusted'], x['blocked']))
    check(x['services_resolved'] is True and LAB_SVC in x['service_uuids'],
          'services_resolved %r, service_uuids %r' % (x['services_resolved'], x['service_uuids']))
    check(x['path'] == '/org/bluez/%s/dev_%s' % (CENTRAL, PERIPH2_ADDR.replace(':', '_')), 'path %r' % x['path'])
    check(x['name'] == ADV2_NAME, 'name %r' % x['name'])
    c.bl('devices', *DEV_OPTS, '--connected', '--service', LAB_SVC, '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    one(lines, lambda l: l['address'] == PERIPH2_ADDR, '--connected --service lists ' + PERIPH2_ADDR)
    check(all(l['connected'] is True and LAB_SVC in l['service_uuids'] for l in lines),
          'a line not connected or without the service')
    c.bl('devices', *DEV_OPTS, '--paired', '--json')
    c.expect_rc(0)
    check(not listed(c.json_lines()), '--paired lists the unpaired device')
    # pair: the peripheral's half goes to the lab's default agent
    c.bl('pair', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    check(len(lines) == 1, '%d lines' % len(lines))
    only_line(c, 'pair', paired=True, already_paired=False, bonded=True)
    wait_device(c, 'Paired', True, 10, 'bluetoothd does not show %s paired' % d)
    storage_note(c, CENTRAL_ADDR, d)
    if not has_bond(CENTRAL_ADDR, d):
        c.fail('no key in /var/lib/bluetooth/%s/%s/info after pair' % (CENTRAL_ADDR, d))
    c.bl('pair', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    only_line(c, 'pair again', paired=True, already_paired=True)
    c.bl('devices', *DEV_OPTS, '--paired', '--bonded', '--json')
    c.expect_rc(0)
    x = one(c.json_lines(), lambda l: l['address'] == PERIPH2_ADDR, '--paired --bonded lists ' + PERIPH2_ADDR)
    check(x['paired'] is True and x['bonded'] is True, '%r' % x)
    # trust
    c.bl('trust', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    only_line(c, 'trust', trusted=True, changed=True)
    wait_device(c, 'Trusted', True, 5, 'bluetoothd does not show %s trusted' % d)
    c.bl('trust', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    only_line(c, 'trust again', trusted=True, changed=False)
    c.bl('devices', *DEV_OPTS, '--trusted', '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    one(lines, lambda l: l['address'] == PERIPH2_ADDR, '--trusted lists ' + PERIPH2_ADDR)
    check(all(l['trusted'] is True for l in lines), 'an untrusted device listed')
    c.bl('untrust', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    only_line(c, 'untrust', trusted=False, changed=True)
    wait_device(c, 'Trusted', False, 5, 'bluetoothd still shows %s trusted' % d)
    c.bl('devices', *DEV_OPTS, '--trusted', '--json')
    c.expect_rc(0)
    check(not listed(c.json_lines()), '--trusted lists the untrusted device')
    # block (bluetoothd drops the link) and unblock
    c.bl('block', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    only_line(c, 'block', blocked=True, changed=True)
    wait_device(c, 'Blocked', True, 5, 'bluetoothd does not show %s blocked' % d)
    c.bl('devices', *DEV_OPTS, '--json')
    c.expect_rc(0)
    x = one(c.json_lines(), lambda l: l['address'] == PERIPH2_ADDR, PERIPH2_ADDR)
    check(x['blocked'] is True, 'blocked %r' % x['blocked'])
    c.bl('unblock', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    only_line(c, 'unblock', blocked=False, changed=True)
    wait_device(c, 'Blocked', False, 5, 'bluetoothd still shows %s blocked' % d)
    # unpair: the device, its bond and its GATT cache are gone
    if not has_gatt_cache(CENTRAL_ADDR, d):
        c.fail('no GATT cache of %s before unpair (its removal below would prove nothing)' % d)
    c.bl('unpair', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    check(len(lines) == 1 and fields(lines[0], device=PERIPH2_ADDR, removed=True), 'unpair: %r' % lines)
    storage_note(c, CENTRAL_ADDR, d)
    if has_bond(CENTRAL_ADDR, d):
        c.fail('the bond is still in /var/lib/bluetooth/%s/%s after unpair' % (CENTRAL_ADDR, d))
    if os.path.exists('/var/lib/bluetooth/%s/%s' % (CENTRAL_ADDR, d)):
        c.fail('/var/lib/bluetooth/%s/%s still exists after unpair' % (CENTRAL_ADDR, d))
    if has_gatt_cache(CENTRAL_ADDR, d):
        c.fail('the GATT cache ([Attributes] of /var/lib/bluetooth/%s/cache/%s) is still there after unpair' % (CENTRAL_ADDR, d))
    if bluez.device(d) != {}:
        c.fail('bluetoothd still knows %s after unpair' % d)
    c.bl('devices', *DEV_OPTS, '--json')
    c.expect_rc(0)
    check(not listed(c.json_lines()), 'devices still lists the removed device')
    c.bl('unpair', d, *DEV_OPTS, '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    check(len(lines) == 1 and fields(lines[0], device=PERIPH2_ADDR, removed=False), 'unpair of an unknown device: %r' % lines)
    # the peripheral's side keeps its own bond: forget it for the checks after this one
    try:
        if not bluez.remove(CENTRAL_ADDR, PERIPH2_ADAPTER):
            c.note('the peripheral (%s) did not know the central' % PERIPH2_ADAPTER)
    except dbus.DBusException:
        c.note('the peripheral (%s) did not know the central' % PERIPH2_ADAPTER)
