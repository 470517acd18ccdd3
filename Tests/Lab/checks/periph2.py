"""The second peripheral (hci2, a static random address) with the commands
bluectl has: found by a scan as a random address, its services resolve (a
read of the long characteristic), notifications flow."""
import json

from labcheck import bluez
from labcheck.faults import adapter_identity
from labcheck.jsonlines import check, one
from labcheck.lab import (ADV2_NAME, CENTRAL, DEV2, DEV_OPTS, LAB_LONG, LAB_STREAM, LAB_SVC, PERIPH2_ADAPTER, PERIPH2_ADDR,
                          PERIPH2_ADDR_TYPE, SCAN_TIMEOUT, long_pattern)
from labcheck.procs import read_text
from labcheck.runner import lab_check
from labcheck.streams import connect_all, ready, seq_exact, stream_start, wait_stream


@lab_check('periph2_scan_random')
def _(c):
    if PERIPH2_ADDR_TYPE != 'random':
        c.fail('PERIPH2_ADDR_TYPE=%s, expected random' % PERIPH2_ADDR_TYPE)
    c.note("%s's LE identity: %s" % (PERIPH2_ADAPTER, adapter_identity(PERIPH2_ADAPTER) or ''))
    c.bl('scan', '--json', '--adapter', CENTRAL, '--name', ADV2_NAME, '--timeout', SCAN_TIMEOUT, '--count', '1')
    c.expect_rc(0)
    lines = c.json_lines()
    d = one(lines, lambda l: l.get('event') == 'discovered' and l.get('address') == PERIPH2_ADDR,
            'event discovered, address ' + PERIPH2_ADDR)
    check(d.get('address_type') == 'random', 'address_type %r, expected random' % d.get('address_type'))
    check(d.get('name') == ADV2_NAME, 'name %r' % d.get('name'))
    check(LAB_SVC in (d.get('service_uuids') or []), 'service_uuids %r lack %s' % (d.get('service_uuids'), LAB_SVC))
    check(d.get('path') == '/org/bluez/%s/dev_%s' % (CENTRAL, PERIPH2_ADDR.replace(':', '_')), 'path %r' % d.get('path'))
    dev = bluez.device(DEV2)
    with open(c.path('device.json'), 'w') as f:
        f.write(json.dumps(dev) + '\n')
    if dev.get('AddressType') != 'random':
        c.fail("bluetoothd's Device1.AddressType is not random: %s" % json.dumps(dev)[:300])


@lab_check('periph2_read_long')
def _(c):
    c.bl('read', DEV2, LAB_LONG, '--json', *DEV_OPTS)
    c.expect_rc(0)
    if '"value":"%s"' % long_pattern() not in c.last.stdout:
        c.fail('long value of %s: not the 300-byte pattern' % DEV2)
    if not bluez.wait(DEV2, 'Connected', False, 10, log=c.echo):
        c.fail('bluectl left its own connection to %s up' % DEV2)


@lab_check('periph2_stream')
def _(c):
    n = 300
    out = c.path('sub.out')
    c.note("subscribe to %s's stream, a burst of %d: every value exactly once, in order" % (DEV2, n))
    connect_all(c, DEV2)
    sub = c.bluectl_bg('subscribe', DEV2, LAB_STREAM, '--count', n, '--json', *DEV_OPTS, out=out, limit=120)
    ready(c, sub, wait_stream(c, 'notifying', 40, DEV2), 'the subscription never became active')
    stream_start(c, DEV2, n)
    rc = sub.wait()
    c.note('subscriber exit %d; stderr: %s' % (rc, read_text(sub.err)[:300]))
    if rc != 0:
        c.fail('subscribe --count %d exited %d' % (n, rc))
    seq_exact(c, out, n, 'json', DEV2)
