"""bluectl's peripheral role: `bluectl serve`/`advertise` on the server
adapter (lab.SERVER, hci3: LE-only, nothing else registered on it),
centrals on hci1 (issue 14)."""
import os
import re
import signal
import subprocess
import time

from labcheck import bluez, lab
from labcheck.faults import bluetoothd_segv
from labcheck.jsonlines import check, fields, one, u16
from labcheck.lab import CENTRAL, CENTRAL_ADDR, DEV_OPTS, PY, SERVER, SERVER_ADDR, SRV, SRV_ADAPTER, long_pattern
from labcheck.procs import read_text
from labcheck.runner import lab_check
from labcheck.serving import (Registrations, Scan, Serve, adv_instances, need_server, serve_stream,
                              wait_adv_instances, wait_out)

EX = '/usr/share/doc/bluez-test-scripts/examples'
FL_SVC = 'b1ec7200-0000-4000-8000-000000000000'
FL_READ = 'b1ec7200-0000-4000-8000-000000000001'       # read, value 0102
FL_WRITE = 'b1ec7200-0000-4000-8000-000000000002'      # write (request) only
FL_WWR = 'b1ec7200-0000-4000-8000-000000000003'        # write-without-response only
FL_NOTIFY = 'b1ec7200-0000-4000-8000-000000000004'     # notify only
FL_INDICATE = 'b1ec7200-0000-4000-8000-000000000005'   # indicate only
FL_LONG = 'b1ec7200-0000-4000-8000-000000000006'       # read, write; 300 bytes i & 0xff; descriptors 2901, ...a6
FL_LONG_DESC = 'b1ec7200-0000-4000-8000-0000000000a6'
FL_ALL = 'b1ec7200-0000-4000-8000-000000000007'        # read, write, write-without-response, notify, indicate


def discovered(lines, name):
    d = one(lines, lambda l: l.get('event') == 'discovered' and l.get('address') == SERVER_ADDR, 'discovered ' + SERVER_ADDR)
    check(d.get('name') == name, 'name %r' % d.get('name'))
    return d


def get_managed_objects(name, app):
    """serve's objects, as bluetoothd sees them: GetManagedObjects at the path
    it registered (the system bus lets root call ObjectManager there, not
    Introspect: no busctl tree). (status, output)"""
    p = subprocess.run(['busctl', '--system', 'call', name, app, 'org.freedesktop.DBus.ObjectManager',
                        'GetManagedObjects'], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return p.returncode, p.stdout.decode('utf-8', 'replace')


@lab_check('serve_heart_rate_example_client')
def _(c):
    """BlueZ's own example-gatt-client against bluectl serve of a heart-rate
    database: it reads the body sensor location, subscribes to the
    measurement and prints what serve is fed on stdin; the control point is
    written by busctl (the example never writes it). After SIGINT nothing of
    bluectl stays registered."""
    need_server(c)
    ex_out = c.path('example.out')
    reg = Registrations(c)
    scan = Scan(c, 'bluectl-hr')
    serve = Serve(c, 'Tests/Lab/heart-rate.json', '--adapter', SRV_ADAPTER, '--advertise', '--name', 'bluectl-hr', '--json')
    s = serve.lines()[0]
    check(fields(s, event='serving', adapter=SERVER, address=SERVER_ADDR, advertising=True, name='bluectl-hr'), 'serving line %r' % s)
    check(s.get('services') == [u16('180d')], 'services %r' % s.get('services'))
    names = bluez.bus_names(serve.proc.pid)
    name = names[0] if len(names) == 1 else ' '.join(names)
    c.note("serve's bus name: %s" % (name or '?'))
    if not name:
        c.fail('serve (pid %d) owns no bus name' % serve.proc.pid)
    app = next((p for p in reg.paths('Register') if '/adv' not in p), '')
    c.note('application registered: %s' % (app or 'none'))
    if not app:
        c.fail("no RegisterApplication of serve's seen on the bus")
    rc, objects = get_managed_objects(name, app)
    with open(c.path('objects'), 'w') as f:
        f.write(objects)
    if rc != 0:
        c.fail('GetManagedObjects on %s %s: %s' % (name, app, objects[:200]))
    for i in ('180d', '2a37', '2a38', '2a39'):
        if '0000%s-0000-1000-8000-00805f9b34fb' % i not in objects:
            c.fail("serve's objects lack %s: %s" % (i, objects[:300]))
    d = discovered(scan.wait(), 'bluectl-hr')
    check(u16('180d') in (d.get('service_uuids') or []), 'service_uuids %r' % d.get('service_uuids'))
    g = c.gattc(SRV, 'connect')
    if g.rc != 0:
        c.fail('hci1 could not connect to %s (gattc.py connect exited %d)' % (SRV, g.rc))
    # the example takes the first Heart Rate service among ALL of bluetoothd's objects
    c.note('removed from %s (a cached heart rate service): %s' % (CENTRAL, ' '.join(bluez.remove_with_service('180d', SRV))))
    hrs = bluez.services('180d')
    if not (len(hrs) == 1 and hrs[0].startswith('%s/service' % lab.dev_path(SRV))):
        c.fail("heart rate services other than bluectl's (or none) among bluetoothd's objects: %s" % hrs)
    ex = c.spawn([PY, '-u', EX + '/example-gatt-client'], ex_out, err=ex_out)
    ex_wait = lambda pattern, secs, n=1: wait_out(c, ex_out, pattern, secs, ex, n)
    if not ex_wait('Heart Rate Service found: %s/' % lab.dev_path(SRV), 60):
        c.echo(read_text(ex_out))
        c.fail("example-gatt-client did not find bluectl's service")
    if not ex_wait('^Body sensor location value: Chest$', 30):
        c.echo(read_text(ex_out))
        c.fail('example-gatt-client did not read the body sensor location (01, Chest)')
    if not ex_wait('^HR Measurement notifications enabled$', 30):
        c.echo(read_text(ex_out))
        c.fail("example-gatt-client's StartNotify did not succeed")
    if not serve.wait_out(r'"event": ?"subscribed".*2a37|2a37.*"event": ?"subscribed"', 20):
        c.fail('serve printed no subscribed event for 2a37')
    serve.feed(''.join('{"characteristic":"2a37","value":"06%02x"}\n' % (70 + i) for i in range(5)))
    if not ex_wait('^\tHR: 7[0-4]$', 30, 5):
        c.echo(read_text(ex_out))
        c.fail('example-gatt-client did not get the 5 measurements fed to serve')
    hr = [l.replace('\t', '') for l in read_text(ex_out).splitlines() if l.startswith('\tHR: ')]
    if ' '.join(hr) + ' ' != 'HR: 70 HR: 71 HR: 72 HR: 73 HR: 74 ':
        c.fail('measurements not 70..74 in order: %s ' % ' '.join(hr))
    if '\tSensor Contact status: contact detected' not in read_text(ex_out).splitlines():
        c.fail('the flags (06) were not decoded as contact detected')
    # the control point: busctl (a plain D-Bus client) writes 01 with a write request
    p = subprocess.run([PY, '-I', os.path.join(lab.HERE, 'gattc.py'), '--adapter', CENTRAL, SRV, 'find', '2a39'],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, timeout=90)
    cp = p.stdout.decode().strip()
    if p.returncode != 0:
        c.fail('no control point under %s' % SRV)
    c.echo('$ busctl call org.bluez %s org.bluez.GattCharacteristic1 WriteValue aya{sv} 1 1 1 type s request' % cp)
    if c.run(['busctl', '--system', 'call', 'org.bluez', cp, 'org.bluez.GattCharacteristic1', 'WriteValue',
              'aya{sv}', '1', '1', '1', 'type', 's', 'request']) != 0:
        c.fail("busctl's write of the control point failed")
    if not serve.wait_out(r'"event": ?"write"', 20):
        c.fail('serve printed no write event')
    lines = serve.lines()
    w = one(lines, lambda l: l.get('event') == 'write', 'a write event')
    check(fields(w, characteristic=u16('2a39'), value='01', central=CENTRAL_ADDR, offset=0) and 'type' not in w,
          'write event %r (bluetoothd 5.66 does not tell a server how a central wrote: no type)' % w)
    r = one(lines, lambda l: l.get('event') == 'read', 'a read event (the example read 2a38)')
    check(fields(r, characteristic=u16('2a38'), central=CENTRAL_ADDR, offset=0), 'read event %r' % r)
    check(all('time' in l for l in lines[1:]), 'an event without time')
    # the example ends: bluetoothd drops its notify session, serve hears StopNotify
    ex.signal(signal.SIGTERM)
    ex.wait(10)
    if not serve.wait_out(r'"event": ?"unsubscribed"', 20):
        c.fail('serve printed no unsubscribed event after the client went away')
    rc = serve.stop('INT')
    if rc != 130:
        c.fail('serve exited %d on SIGINT, expected 130' % rc)
    # nothing of bluectl stays registered: serve undid each registration itself,
    # its bus name is gone, the adapter has no advertisement
    reg.all_undone()
    if get_managed_objects(name, app)[0] == 0:
        c.fail("serve's objects still answer on %s after it exited" % name)
    if not wait_adv_instances(0, 10):
        c.fail("%s's ActiveInstances %s after serve exited, expected 0" % (SRV_ADAPTER, adv_instances()))
    # the central, still connected, loses the service (Service Changed)
    if not bluez.wait(SRV, 'Connected', True, 3, log=c.echo):
        c.note('%s no longer connected to %s' % (CENTRAL, SRV))
    end = time.monotonic() + 30
    while bluez.services('180d'):
        if time.monotonic() >= end:
            c.fail('%s still sees a heart rate service 30 s after serve exited: %s' % (CENTRAL, bluez.services('180d')))
        time.sleep(0.5)
    c.gattc(SRV, 'disconnect')


@lab_check('serve_vs_bluectl_central')
def _(c):
    """bluectl's central against bluectl serve: every flag combination, the
    ATT errors, writes by type, 500 notifications and 500 indications fed on
    stdin."""
    need_server(c)
    sub_out = c.path('sub.out')
    n = 500
    reg = Registrations(c)
    scan = Scan(c, 'bluectl-flags')
    serve = Serve(c, 'Tests/Lab/serve-flags.json', '--adapter', SRV_ADAPTER, '--advertise', '--name', 'bluectl-flags', '--json')
    d = discovered(scan.wait(), 'bluectl-flags')
    check(FL_SVC in (d.get('service_uuids') or []), 'service_uuids %r' % d.get('service_uuids'))
    c.bl('connect', SRV, *DEV_OPTS)
    c.expect_rc(0)
    c.bl('discover', SRV, '--json', *DEV_OPTS)
    c.expect_rc(0)
    chrc, parent = {}, {}
    for l in c.json_lines():
        if l.get('type') == 'characteristic':
            chrc[l['uuid']] = l
        elif l.get('type') == 'descriptor':
            parent[l['uuid']] = l.get('characteristic')
    want = {FL_READ: ['read'], FL_WRITE: ['write'], FL_WWR: ['write-without-response'], FL_NOTIFY: ['notify'],
            FL_INDICATE: ['indicate'], FL_LONG: ['read', 'write'],
            FL_ALL: ['read', 'write', 'write-without-response', 'notify', 'indicate']}
    for u, f in want.items():
        check(u in chrc, 'characteristic %s missing' % u)
        check(sorted(chrc[u].get('flags', [])) == sorted(f), '%s flags %r, expected %r' % (u, chrc[u].get('flags'), f))
        check(chrc[u].get('service') == FL_SVC, '%s under %r' % (u, chrc[u].get('service')))
    check(parent.get(u16('2901')) == FL_LONG, '2901 under %r' % parent.get(u16('2901')))
    check(parent.get(FL_LONG_DESC) == FL_LONG, '%s under %r' % (FL_LONG_DESC, parent.get(FL_LONG_DESC)))
    # reads: the static value; a read of a write-only characteristic is refused:
    # by bluectl from the flags (exit 77, before any request), and on the wire
    # (gattc.py asks anyway) by ATT's Read Not Permitted from hci3's bluetoothd
    c.bl('read', SRV, FL_READ, '--json', *DEV_OPTS)
    c.expect_rc(0)
    v = c.json_lines()[0].get('value')
    check(v == '0102', 'value %r' % v)
    if not serve.wait_out(r'"event": ?"read"', 10):
        c.fail('serve printed no read event')
    c.bl('read', SRV, FL_WRITE, *DEV_OPTS)
    c.expect_rc(77)
    if c.last.stderr.count('\n') != 1:
        c.fail('stderr is not one line: %s' % c.first_err())
    if 'bluectl: characteristic %s is not readable (flags: write)' % FL_WRITE not in c.last.stderr.splitlines():
        c.fail('the read of a write-only characteristic: %s' % c.first_err())
    if c.last.stdout:
        c.fail('stdout not empty')
    g = c.gattc(SRV, 'read', FL_WRITE)
    if not (g.rc == 1 and 'org.bluez.Error.NotPermitted: Read not permitted' in g.stderr):
        c.fail("ReadValue of the write-only characteristic: exit %d, %s (expected BlueZ's NotPermitted for ATT's Read Not Permitted)"
               % (g.rc, g.stderr[:200]))
    # writes, each printed by serve with its type
    c.bl('write', SRV, FL_WRITE, '0xa1a2', '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    c.bl('write', SRV, FL_WWR, '0xb1b2', '--without-response', *DEV_OPTS)
    c.expect_rc(0)
    # a write request to the write-without-response characteristic: bluectl
    # notes the flags and tries; bluetoothd 5.66's server takes an ATT Write
    # Request whatever the properties say (hci3 answers Write Response)
    c.bl('write', SRV, FL_WWR, '0xc1c2', '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    if 'does not list write-with-response' not in c.last.stderr:
        c.fail('no note on stderr about the flags: %s' % c.first_err())
    v = long_pattern(down=True)
    c.bl('write', SRV, FL_LONG, '0x' + v, '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    c.bl('read', SRV, FL_LONG, '--json', *DEV_OPTS)
    c.expect_rc(0)
    m = re.search(r'"value" *: *"([0-9a-fA-F]*)"', c.last.stdout)
    got = m.group(1) if m else ''
    if got != v:
        c.fail('read back %d hex digits from the long characteristic, not the 300 bytes written' % len(got))
    if not serve.wait_out(r'"event": ?"write"', 20, 3):
        c.fail('serve printed fewer than 3 write events')
    w = [l for l in serve.lines() if l.get('event') == 'write']
    check(all(l.get('central') == CENTRAL_ADDR and 'time' in l for l in w), 'write events without the central or time: %r' % w)
    for ch, value in ((FL_WRITE, 'a1a2'), (FL_WWR, 'b1b2')):
        x = [l for l in w if l.get('characteristic') == ch]
        check(x and x[0].get('value') == value and 'type' not in x[0],
              '%s: write events %r, expected %s without a type (5.66 does not say)'
              % (ch, [(l.get('value', '')[:16], l.get('type')) for l in x], value[:16]))
    longw = [l for l in w if l.get('characteristic') == FL_LONG]
    check(''.join(l['value'] for l in sorted(longw, key=lambda l: l.get('offset', 0))) == v,
          'the long write: %d events, not the 300 bytes' % len(longw))
    # 500 notifications, then 500 indications, fed on stdin: all, in order
    serve_stream(c, serve, FL_NOTIFY, n, sub_out, 'notify')
    serve_stream(c, serve, FL_INDICATE, n, sub_out + '.ind', 'indicate')
    if not serve.wait_out(r'"event": ?"confirmed"', 30, n):
        c.fail('serve printed fewer than %d confirmed events' % n)
    rc = serve.stop('INT')
    if rc != 130:
        c.fail('serve exited %d on SIGINT, expected 130' % rc)
    reg.all_undone()
    if not wait_adv_instances(0, 10):
        c.fail("%s's ActiveInstances %s after serve exited, expected 0" % (SRV_ADAPTER, adv_instances()))
    c.bl('disconnect', SRV, *DEV_OPTS)
    c.expect_rc(0)
    # last (the streams above tell more when this fails): the write request of
    # c1c2 (an ATT Write Request on the wire, btmon.log) must not be printed as a command
    x = [l for l in serve.lines() if l.get('event') == 'write' and l.get('value') == 'c1c2']
    check(len(x) == 1 and 'type' not in x[0],
          'the ATT Write Request of c1c2 printed as type %r (a request on the wire; no guess from the flags)' % [l.get('type') for l in x])


@lab_check('advertise_fields_seen_by_scan')
def _(c):
    """bluectl advertise with every field, seen whole by bluectl scan; an
    advertisement that does not fit is refused; nothing stays registered."""
    need_server(c)
    adv_out = c.path('adv.out')
    a0 = adv_instances()
    c.note('%s ActiveInstances before: %s' % (SRV_ADAPTER, '' if a0 is None else a0))
    if a0 is None:
        c.fail("cannot read %s's LEAdvertisingManager1.ActiveInstances" % SRV_ADAPTER)
    reg = Registrations(c)
    scan = Scan(c, 'bluectl-adv')
    args = ['advertise', '--adapter', SRV_ADAPTER, '--name', 'bluectl-adv', '--service', 'fff0', '--manufacturer', '0xffff=0102',
            '--service-data', 'fff1=0a0b', '--appearance', '0x0341', '--tx-power', '--json', '--duration', '300']
    adv = c.spawn([lab.BLUECTL] + args, adv_out, show='bluectl %s   (background)' % ' '.join(args))
    if not wait_out(c, adv_out, r'"event": ?"advertising"', 60, adv):
        c.echo(read_text(adv.err))
        c.fail('advertise printed no advertising line')
    c.note('advertise: %s' % read_text(adv_out).split('\n', 1)[0])
    l = c.json_lines(adv_out)[0]
    check(fields(l, event='advertising', adapter=SERVER), 'advertising line %r' % l)
    if adv_instances() != a0 + 1:
        c.fail('ActiveInstances %s while advertising, expected %d' % (adv_instances(), a0 + 1))
    d = discovered(scan.wait(), 'bluectl-adv')
    check(d.get('address_type') == 'public', 'address_type %r' % d.get('address_type'))
    check(d.get('service_uuids') == [u16('fff0')], 'service_uuids %r' % d.get('service_uuids'))
    check(d.get('manufacturer_data') == {'0xffff': '0102'}, 'manufacturer_data %r' % d.get('manufacturer_data'))
    check(d.get('service_data') == {u16('fff1'): '0a0b'}, 'service_data %r' % d.get('service_data'))
    check(d.get('appearance') == 0x0341, 'appearance %r, expected 833 (0x0341)' % d.get('appearance'))
    check(isinstance(d.get('tx_power'), int), 'tx_power %r' % d.get('tx_power'))
    adv.signal(signal.SIGINT)
    rc = adv.wait(20)
    c.note('advertise exit %d; stderr: %s' % (rc, read_text(adv.err)[:300]))
    if rc != 130:
        c.fail('advertise exited %d on SIGINT, expected 130' % rc)
    if not wait_adv_instances(a0, 10):
        c.fail('ActiveInstances %s after advertise exited, expected %d' % (adv_instances(), a0))
    reg.all_undone()
    # --duration ends it by itself (exit 0), unregistered
    c.bl('advertise', '--adapter', SRV_ADAPTER, '--name', 'bluectl-dur', '--duration', '3', '--json')
    c.expect_rc(0)
    lines = c.json_lines()
    check(lines and fields(lines[0], event='advertising', adapter=SERVER), 'advertising line %r' % lines[:1])
    if not wait_adv_instances(a0, 10):
        c.fail('ActiveInstances %s after advertise --duration 3, expected %d' % (adv_instances(), a0))
    # too long for the adapter (31 bytes: 3 flags + 4 + 27 bytes of manufacturer data): refused, nothing registered
    c.bl('advertise', '--adapter', SRV_ADAPTER, '--manufacturer', '0xffff=' + '0' * 54, '--duration', '5')
    c.expect_rc(64)
    if c.last.stderr.count('\n') < 1:
        c.fail('no message on stderr')
    if not re.search(r'too long|does not fit|exceed|[0-9]+ bytes', c.last.stderr, re.I):
        c.fail('the refusal does not say it is too long: %s' % c.first_err())
    if adv_instances() != a0:
        c.fail('ActiveInstances %s after the refused advertisement, expected %d' % (adv_instances(), a0))


@lab_check('bthome_advertise_decoded')
def _(c):
    """`bluectl advertise --bthome` on the server adapter, plain then
    encrypted (--bthome-key), its values changed on stdin; on the central,
    `bluectl scan --json --duplicates --sensors --keys` decodes every frame
    through bluetoothd 5.66, and a python3-dbus scanner of its own
    (Tests/Lab/bthome_ref.py) decodes the same ServiceData bytes with Home
    Assistant's bthome-ble (the repository's .venv): both agree, frame by frame."""
    need_server(c)
    key = '231d39c1d7cc1ab1aee224cd096db932'
    none, keys = c.path('none.json'), c.path('keys.json')
    with open(none, 'w') as f:
        f.write('{}\n')
    with open(keys, 'w') as f:
        f.write('{"%s": "%s"}\n' % (SRV, key))
    os.chmod(none, 0o600)
    os.chmod(keys, 0o600)
    ref_py = os.path.join(lab.REPO, 'Tests/Lab/bthome_ref.py')
    for rnd in ('plain', 'encrypted'):
        scan_keys, ref_key, adv_key = (keys, [key], ['--bthome-key', key]) if rnd == 'encrypted' else (none, [], [])
        # hci1 forgets the last round's frame (a scan reports a cached device with it)
        if not bluez.remove(SRV):
            c.note('remove: %s did not know %s' % (CENTRAL, SRV))
        ref_out, scan_out, adv_out = c.path(rnd + '.ref'), c.path(rnd + '.scan'), c.path(rnd + '.adv')
        ref = c.spawn([PY, ref_py, CENTRAL, SRV] + ref_key, ref_out,
                      show='%s Tests/Lab/bthome_ref.py %s %s %s   (background)' % (PY, CENTRAL, SRV, ' '.join(ref_key)))
        # generous: importing bthome-ble under TCG on a loaded host took over 30 s
        if not wait_out(c, ref_out, '^ready', 90, ref):
            c.echo(read_text(ref.err))
            c.fail('the python3-dbus scanner did not start')
        scan = c.bluectl_bg('scan', '--adapter', CENTRAL, '--json', '--duplicates', '--sensors', '--keys', scan_keys,
                            '--timeout', '150', out=scan_out, limit=170)
        c.echo('$ bluectl scan --adapter %s --json --duplicates --sensors --keys %s --timeout 150   (background)' % (CENTRAL, scan_keys))
        if not bluez.wait_adapter('Discovering', True, 30):
            c.fail('%s not discovering for the scan' % CENTRAL)
        args = ['advertise', '--adapter', SRV_ADAPTER, '--bthome', 'temperature=21.5', '--bthome', 'humidity=40',
                '--bthome', 'door=false'] + adv_key + ['--json', '--duration', '300']
        adv = c.spawn([lab.BLUECTL] + args, adv_out, stdin=subprocess.PIPE,
                      show='bluectl %s   (background; stdin: a pipe)' % ' '.join(args))
        if not wait_out(c, adv_out, r'"event": ?"advertising"', 60, adv):
            c.echo(read_text(adv.err))
            c.fail('advertise --bthome printed no advertising line')
        c.note('advertise: %s' % read_text(adv_out).split('\n', 1)[0])
        if not wait_out(c, scan_out, r'"temperature_c": ?21\.5', 60, scan):
            c.fail('%s: the scan did not decode temperature 21.5 from %s' % (rnd, SRV))
        adv.p.stdin.write(b'{"temperature": -7.25, "door": true}\n')
        adv.p.stdin.flush()
        if not wait_out(c, adv_out, r'"event": ?"updated"', 20, adv):
            c.echo(read_text(adv.err))
            c.fail('%s: advertise printed no updated line' % rnd)
        if not wait_out(c, scan_out, r'"temperature_c": ?-7\.25', 60, scan):
            c.fail('%s: the scan did not see the frame changed on stdin' % rnd)
        adv.signal(signal.SIGINT)
        rc = adv.wait(20)
        adv.p.stdin.close()
        c.note('advertise exit %d; stderr: %s' % (rc, read_text(adv.err)[:300]))
        if rc != 130:
            c.fail('%s: advertise exited %d on SIGINT, expected 130' % (rnd, rc))
        scan.signal(signal.SIGINT)
        scan.wait(20)
        ref.signal(signal.SIGTERM)
        ref.wait(20)
        c.echo('# %s: bluectl scan\'s lines of %s' % (rnd, SRV))
        c.echo('\n'.join(l for l in read_text(scan_out).splitlines() if '"%s"' % SRV in l)[:4000])
        c.echo('# %s: the python3-dbus scanner' % rnd)
        c.echo(read_text(ref_out))
        lines = c.json_lines(scan_out)
        mine = [l for l in lines if l.get('address') == SERVER_ADDR]
        s = [l['sensor'] for l in mine if 'sensor' in l]
        check(s, 'no sensor line of ' + SERVER_ADDR)
        check(all(x['format'] == 'bthome' and x['encrypted'] == (rnd == 'encrypted') for x in s), 'format/encrypted %r' % s[:2])
        first = [x for x in s if x.get('temperature_c') == 21.5]
        last = [x for x in s if x.get('temperature_c') == -7.25]
        check(first and first[0].get('humidity_percent') == 40 and first[0].get('door') is False
              and first[0].get('packet_id') == 0, 'first frame %r' % first[:1])
        check(last and last[-1].get('door') is True and last[-1].get('packet_id') == 1, 'changed frame %r' % last[-1:])
        check(rnd == 'plain' or last[-1].get('counter') == first[0].get('counter') + 1, 'counters %r %r' % (first[:1], last[-1:]))
        check(not [l for l in mine if 'sensor_error' in l], 'a sensor_error')
        if c.run([PY, ref_py, 'compare', scan_out, ref_out, SRV]) != 0:
            c.fail('%s: bluectl and bthome-ble disagree, or bthome-ble did not see a frame (above)' % rnd)


@lab_check('serve_bluetoothd_segv')
def _(c):
    """bluectl serve survives bluetoothd 5.66 dying (SIGSEGV, as its own
    crashes do): serve says bluetoothd stopped, registers the service and the
    advertisement again once the supervisor has restarted it, and a central
    reads the served value again; at SIGINT every registration is undone."""
    need_server(c)
    reg = Registrations(c)
    # the central's scan first: btvirt reports an advertisement when it is switched on
    scan = Scan(c, 'bluectl-segv')
    serve = Serve(c, os.path.join(lab.REPO, 'Tests/Lab/heart-rate.json'), '--adapter', SERVER, '--advertise',
                  '--name', 'bluectl-segv', '--json')
    scan.wait()
    c.bl('read', SRV, '2a38', '--json', *DEV_OPTS)
    c.expect_rc(0)
    if not bluetoothd_segv(c, 150):
        c.fail('bluetoothd was not restarted')
    if not serve.wait_out(r'"event": ?"bluetoothd_stopped"', 30):
        c.echo(read_text(serve.err))
        c.fail('serve did not say bluetoothd stopped')
    if not serve.wait_out(r'"event": ?"restored"', 90):
        c.echo(read_text(serve.err))
        c.fail('serve did not register again after the restart')
    # (the supervisor powers hci3 off and on after the restart: serve registers its advertisement anew then, a second restored)
    if not wait_adv_instances(1, 30):
        c.fail("%s's ActiveInstances %s after the restart, expected serve's 1" % (SRV_ADAPTER, adv_instances()))
    r = [l for l in serve.lines() if l.get('event') == 'restored']
    check(r and all(l.get('detail') == 'registered again with bluetoothd' for l in r), 'restored events with failures: %r' % r)
    c.bl('read', SRV, '2a38', '--json', *DEV_OPTS)
    c.expect_rc(0)
    lines = c.json_lines()
    check(lines and lines[0].get('value') == '01', 'the body sensor location after the restart: %r' % lines)
    c.bl('disconnect', SRV, *DEV_OPTS)
    rc = serve.stop('INT')
    if rc != 130:
        c.fail('serve exited %d on SIGINT, expected 130' % rc)
    reg.all_undone()
