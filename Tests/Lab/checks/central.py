"""bluectl's central subcommands against the hci0 peripheral (BlueZ's
example GATT server and the lab's service): connect, discover, read, write,
subscribe, pairing, disconnect."""
import hashlib
import json
import os
import re
import time

from labcheck import bluez, lab
from labcheck.faults import AgentRefusesNext, PasskeyDevice, forget_bond, peripheral_back_after_crash
from labcheck.jsonlines import check, is_hex, stream_value_ok, seq_of
from labcheck.lab import (BATT_LVL, BATT_SVC, BODY_LOC, CENTRAL, DEV, DEV_OPTS, HR_CTRL, HR_MEAS, HR_SVC,
                          LAB_CONTROL, LAB_LONG, LAB_SINK, LAB_STREAM, LAB_SVC, PERIPH_ADDR, PERIPH_LOG, TEST_CHR, TEST_DESC,
                          TEST_ENC_CHR, TEST_SVC, long_pattern)
from labcheck.procs import read_text
from labcheck.runner import lab_check, supervisor_mark
from labcheck.streams import burst_hex, read_value, ready


def wait_device(c, prop, want, secs, why, dev=DEV):
    """bluetoothd's Device1.PROP of dev reaches want within secs, else fail(why)."""
    if not bluez.wait(dev, prop, want, secs, log=c.echo):
        c.fail(why)


@lab_check('connect')
def _(c):
    c.bl('connect', DEV, *DEV_OPTS)
    c.expect_rc(0)
    wait_device(c, 'Connected', True, 10, 'bluetoothd does not show %s connected' % DEV)
    wait_device(c, 'ServicesResolved', True, 20, 'services not resolved after connect')


@lab_check('discover')
def _(c):
    c.bl('discover', DEV, '--json', *DEV_OPTS)
    c.expect_rc(0)
    svc, chrc, parent_of = {}, {}, {}
    last_handle = 0
    for l in c.json_lines():
        t, h = l.get('type'), l.get('handle')
        check(isinstance(h, int) and h > last_handle, 'handles not increasing at %r' % l)
        last_handle = h
        if t == 'service':
            check(l['path'].startswith('/org/bluez/%s/dev_' % CENTRAL), 'service path %r' % l['path'])
            cur_svc = l
            svc[l['uuid']] = l
        elif t == 'characteristic':
            check(l.get('service') == cur_svc['uuid'] and l['path'].startswith(cur_svc['path'] + '/char'),
                  'characteristic %s not under the service before it (%s)' % (l['uuid'], cur_svc['uuid']))
            cur_chr = l
            chrc[l['uuid']] = l
            parent_of[l['uuid']] = cur_svc['uuid']
        elif t == 'descriptor':
            check(l.get('characteristic') == cur_chr['uuid'] and l['path'].startswith(cur_chr['path'] + '/desc'),
                  'descriptor %s not under the characteristic before it (%s)' % (l['uuid'], cur_chr['uuid']))
            parent_of.setdefault(l['uuid'], cur_chr['uuid'])
        else:
            check(False, 'unknown line type %r' % t)
    tree = {HR_SVC: {HR_MEAS: ['notify'], BODY_LOC: ['read'], HR_CTRL: ['write']},
            BATT_SVC: {BATT_LVL: ['read', 'notify']},
            TEST_SVC: {TEST_CHR: None, TEST_ENC_CHR: None},
            LAB_SVC: {LAB_STREAM: ['read', 'notify'], LAB_CONTROL: ['read', 'write', 'write-without-response'],
                      LAB_LONG: ['read', 'write']}}
    for s_uuid, chars in tree.items():
        check(s_uuid in svc and svc[s_uuid].get('primary') is True, 'primary service %s missing' % s_uuid)
        for c_uuid, flags in chars.items():
            check(parent_of.get(c_uuid) == s_uuid, 'characteristic %s under %r, expected %s' % (c_uuid, parent_of.get(c_uuid), s_uuid))
            if flags is not None:
                check(sorted(chrc[c_uuid]['flags']) == sorted(flags),
                      '%s flags %r, expected %r' % (c_uuid, chrc[c_uuid]['flags'], flags))
    check(parent_of.get(TEST_DESC) == TEST_CHR, 'descriptor %s under %r' % (TEST_DESC, parent_of.get(TEST_DESC)))
    c.say('%d services, %d characteristics' % (len(svc), len(chrc)))


@lab_check('read_battery')
def _(c):
    c.bl('read', DEV, 'battery_level', '--json', *DEV_OPTS)
    c.expect_rc(0)
    lines = c.json_lines()
    check(len(lines) == 1, 'expected one line, got %d' % len(lines))
    r = lines[0]
    check(r.get('characteristic') == '00002a19-0000-1000-8000-00805f9b34fb', 'characteristic %r' % r.get('characteristic'))
    check(is_hex(r.get('value'), 1) and int(r['value'], 16) <= 100, 'value %r is not a battery level' % r.get('value'))
    check('device' in r, 'no device key')


@lab_check('read_plain')
def _(c):
    c.bl('read', DEV, BODY_LOC, *DEV_OPTS)
    c.expect_rc(0)
    # exactly the value and its meaning (the example's body sensor location is 0x01, "chest");
    # like $(cat), trailing newlines do not count
    out = c.last.stdout.rstrip('\n')
    if out != '01 (Chest)':
        c.fail('stdout %r, expected exactly 01 (Chest)' % out[:80])


@lab_check('write_read_back')
def _(c):
    c.bl('write', DEV, TEST_CHR, '0x0102', '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    v = read_value(c, DEV, TEST_CHR)
    if v != '0102':
        c.fail('read back %s after writing 0102' % v)


@lab_check('write_without_response')
def _(c):
    c.bl('write', DEV, TEST_CHR, '0xa1b2c3', '--without-response', *DEV_OPTS)
    c.expect_rc(0)
    for _ in range(3):
        v = read_value(c, DEV, TEST_CHR)
        if v == 'a1b2c3':
            return
        time.sleep(1)
    c.fail('read back %s after write-without-response of a1b2c3' % v)


def sink_summaries():
    """periph.py's sink lines: (bytes, writes, sha256) of each stream it took."""
    return [(int(m[0]), int(m[1]), m[2]) for m in
            re.findall(r'sink: (\d+) bytes in (\d+) writes, \d+ first, [\d.]+ s first to last, sha256 ([0-9a-f]+)',
                       read_text(PERIPH_LOG))]


@lab_check('write_stream')
def _(c):
    """write --stream through bluetoothd's AcquireWrite: 100 KB of random bytes
    into periph.py's sink, every byte arriving in order (its SHA-256), in
    Write Commands of at most the MTU less 3, and the socket released."""
    data = os.urandom(100_000)
    src = c.path('stream.bin')
    with open(src, 'wb') as f:
        f.write(data)
    before = len(sink_summaries())
    c.bl('write', DEV, LAB_SINK, '--file', src, '--stream', '--json', *DEV_OPTS)
    c.expect_rc(0)
    lines = c.json_lines()
    check(len(lines) == 1, 'one JSON line, got %d' % len(lines))
    r = lines[0]
    check(r.get('via') == 'acquire-write', 'via %r, expected acquire-write' % r.get('via'))
    check(r.get('bytes') == len(data), 'bytes %r of %d' % (r.get('bytes'), len(data)))
    end = time.monotonic() + 10   # periph.py logs half a second after the last write
    while len(sink_summaries()) <= before and time.monotonic() < end:
        time.sleep(0.1)
    got = sink_summaries()[before:]
    check(len(got) == 1, 'the sink logged %d summaries (a pause in the stream?)' % len(got))
    total, writes, sha = got[0]
    c.say('sink: %d bytes in %d writes (bluectl: %s writes)' % (total, writes, r.get('writes')))
    check(total == len(data) and sha == hashlib.sha256(data).hexdigest(), 'the sink got %d bytes, sha256 %s' % (total, sha))
    check(writes == r.get('writes'), 'bluectl counted %r writes, the sink %d' % (r.get('writes'), writes))
    check(writes >= len(data) // 510, "%d writes cannot carry %d bytes in values of at most 510" % (writes, len(data)))
    dev = lab.dev_path(DEV)
    acquired = [c.get('WriteAcquired') for p, ifs in bluez.managed().items()
                for c in [ifs.get('org.bluez.GattCharacteristic1')]
                if c and str(p).startswith(dev + '/') and str(c['UUID']) == LAB_SINK]
    check(acquired and not any(acquired), 'WriteAcquired %r after bluectl exited' % acquired)


@lab_check('write_rejected')
def _(c):
    # the example's heart rate control point accepts only 0x01
    # (its WriteValue raises org.bluez.Error.Failed("0x80"): ATT error 0x80 on the
    # wire, which the central's bluetoothd reports as org.bluez.Error.Failed)
    c.bl('write', DEV, HR_CTRL, '0x02', '--with-response', *DEV_OPTS)
    c.expect_rc(1)
    err = c.last.stderr
    if err.count('\n') != 1:
        c.fail('stderr is not one line: %s' % c.first_err())
    if not re.search(r'^bluectl: write 2a39 \(Heart Rate Control Point\) failed: .*ATT error: 0x80 \(org.bluez.Error.Failed\)$',
                     err, re.M):
        c.fail("stderr does not name BlueZ's error and the ATT error: %s" % c.first_err())
    if c.last.stdout:
        c.fail('stdout not empty')


@lab_check('subscribe_heart_rate')
def _(c):
    c.bl('subscribe', DEV, 'heart_rate_measurement', '--count', '3', '--json', *DEV_OPTS)
    c.expect_rc(0)
    vals = [l for l in c.json_lines() if 'value' in l]
    check(len(vals) == 3, '--count 3 gave %d values' % len(vals))
    for l in vals:
        v = l.get('value')
        check(is_hex(v) and len(v) >= 4, 'value %r is not a heart rate measurement' % v)
        check(int(v[:2], 16) & 0x06 == 0x06, 'flags byte %r (example sends 06/0e)' % v[:2])


@lab_check('long_read')
def _(c):
    v = read_value(c, DEV, LAB_LONG)
    if v != long_pattern():
        c.fail('long value: got %d hex digits, expected the 300-byte pattern' % len(v))


@lab_check('long_write')
def _(c):
    v = long_pattern(down=True)
    c.bl('write', DEV, LAB_LONG, '0x' + v, '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    got = read_value(c, DEV, LAB_LONG)
    if got != v:
        c.fail('read back %d hex digits, not the 300 bytes written' % len(got))


@lab_check('stream_burst')
def _(c):
    n = 500
    c.note('subscribe in the background, wait until bluetoothd shows Notifying, then ask for %d values' % n)
    sub = c.bluectl_bg('subscribe', DEV, LAB_STREAM, '--count', n, '--json', *DEV_OPTS,
                       out=c.path('stream.out'), err=c.path('stream.err'), limit=90)
    ready(c, sub, bluez.wait_notifying(DEV, LAB_STREAM, 30), 'subscription never became active')
    t0 = time.monotonic()
    c.bl('write', DEV, LAB_CONTROL, '0x' + burst_hex(n), '--with-response', *DEV_OPTS)
    c.expect_rc(0)
    rc = sub.wait()
    c.note('subscriber exit %d after %.1fs; stderr: %s' % (rc, time.monotonic() - t0, read_text(sub.err)[:300]))
    if rc != 0:
        c.fail('subscribe --count %d exited %d' % (n, rc))
    seqs = []
    for l in [l for l in c.json_lines(sub.out) if 'value' in l]:
        v = bytes.fromhex(l['value'])
        check(len(v) == 20, 'value of %d bytes' % len(v))
        check(stream_value_ok(l['value']), 'corrupt value %s' % l['value'])
        seqs.append(seq_of(l['value']))
    check(len(seqs) == n, '%d values, expected %d' % (len(seqs), n))
    missing = sorted(set(range(n)) - set(seqs))
    dups = len(seqs) - len(set(seqs))
    check(not missing and not dups, 'missing %d (first %s), %d duplicates' % (len(missing), missing[:5], dups))
    inorder = all(a < b for a, b in zip(seqs, seqs[1:]))
    c.say('in order: %s' % inorder)
    if os.environ.get('LAB_GATT_CHANNELS') == '1':
        check(inorder, 'out of order with EATT off (one ATT channel)')


def pair_on_demand(c):
    """Pairing on demand against the real bluetoothd. An encrypted write makes
    bluetoothd raise the link's security by itself, and the lab's default
    agent (which must answer the peripheral's half of any pairing: one
    bluetoothd serves both sides, src/device.c new_auth asks agent_get(NULL))
    would accept. Here it refuses that first request (the lab agent's fault
    injection), so the automatic attempt fails and only bluectl's own pairing
    on demand -- its agent registered, Device1.Pair, the write again -- can
    succeed."""
    forget_bond(c)
    a0 = len(read_text(lab.AGENT_LOG).splitlines())
    with AgentRefusesNext():
        c.bl('write', DEV, TEST_ENC_CHR, '0x0badcafe', '--with-response', *DEV_OPTS, env={'BLUECTL_DEBUG': '1'})
    agent = read_text(lab.AGENT_LOG).splitlines()[a0:]
    for line in agent:
        c.echo('# lab agent: ' + line)
    c.expect_rc(0)
    if c.last.stdout:
        c.fail('write printed to stdout: %s' % c.last.stdout[:200])
    if not any('REFUSED' in l for l in agent):
        c.fail("bluetoothd's own pairing attempt never reached the lab's agent")
    if 'agent: registered' not in c.last.stderr:
        c.fail('bluectl registered no agent')
    if 'pair %s: Device1.Pair' % DEV not in c.last.stderr:
        c.fail('bluectl did not pair on demand')
    wait_device(c, 'Paired', True, 5, 'bluetoothd does not show the device paired')
    mark = supervisor_mark()
    c.bl('read', DEV, TEST_ENC_CHR, '--json', *DEV_OPTS)
    if c.last.rc != 0 and peripheral_back_after_crash(c, mark):
        # bluetoothd 5.66 died by itself during the read (it does, on the reconnect after a
        # pairing): bluectl must have said so and ended with a documented status, naming what
        # the device had then (the peripheral's application not yet registered again); once
        # the peripheral is back, the same read succeeds with the bond bluetoothd kept.
        if 'bluetoothd stopped' not in c.last.stderr or c.last.rc not in (68, 69, 74):
            c.fail('after bluetoothd died during the read: exit %d, %s' % (c.last.rc, c.first_err()))
        c.bl('read', DEV, TEST_ENC_CHR, '--json', *DEV_OPTS)
    c.expect_rc(0)
    m = re.search(r'"value" *: *"([0-9a-fA-F]*)"', c.last.stdout)
    v = m.group(1) if m else None
    if v != '0badcafe':
        c.fail('read back %s from the encrypted characteristic' % v)


@lab_check('encrypted_write_read')
def _(c):
    pair_on_demand(c)


@lab_check('pair')
def _(c):
    # forget the bond, then connect --pair: bluectl scans for the device, connects and
    # calls Device1.Pair with its own agent registered (the lab's default agent answers for hci0)
    forget_bond(c)
    c.bl('connect', DEV, '--pair', '--json', '--timeout', '45', *DEV_OPTS)
    c.expect_rc(0)
    lines = c.json_lines()
    check(lines and lines[0].get('paired') is True, 'paired %r' % (lines[0].get('paired') if lines else None))
    wait_device(c, 'Paired', True, 5, 'bluetoothd does not show the device paired')


@lab_check('info')
def _(c):
    c.bl('info', DEV, '--json', *DEV_OPTS)
    c.expect_rc(0)
    lines = c.json_lines()
    d = lines[0] if lines else {}
    check(PERIPH_ADDR in json.dumps(d), 'info lacks the address')
    check(d.get('connected') is True, 'connected %r, expected true' % d.get('connected'))
    # the link's ATT MTU (GattCharacteristic1.MTU): 517 between two BlueZ stacks, at least 23 anywhere
    check(isinstance(d.get('mtu'), int) and d['mtu'] >= 23, 'mtu %r, expected the ATT MTU' % d.get('mtu'))


@lab_check('disconnect')
def _(c):
    c.bl('disconnect', DEV, *DEV_OPTS)
    c.expect_rc(0)
    wait_device(c, 'Connected', False, 10, 'bluetoothd still shows %s connected' % DEV)


@lab_check('pair_passkey')
def _(c):
    """Pairing without a person (after `disconnect`: `info` and `disconnect`
    need the connection `pair` left): the peripheral's side plays a device
    with a fixed passkey (PasskeyDevice: both sides enter it). A wrong --passkey
    fails with 79 and one line, the device not paired; the right one pairs
    (exit 0), bluectl's agent registered KeyboardOnly."""
    forget_bond(c)
    with PasskeyDevice(c, '314159') as device:
        c.bl('pair', DEV, '--passkey', '271828', '--timeout', '45', *DEV_OPTS)
        c.expect_rc(79)
        check(len(c.last.stderr.splitlines()) == 1 and 'failed authentication' in c.last.stderr, c.first_err())
        check('271828' not in c.last.stderr and '314159' not in c.last.stderr, 'a passkey shown: %s' % c.first_err())
        check(device.asked(), 'the device side was never asked for its passkey (was it passkey entry?)')
        check(not bluez.prop(lab.dev_path(DEV), 'org.bluez.Device1', 'Paired'), 'paired with a wrong passkey')
        forget_bond(c)
        c.bl('pair', DEV, '--passkey', '314159', '--timeout', '45', *DEV_OPTS, env={'BLUECTL_DEBUG': '1'})
        c.expect_rc(0)
        check('KeyboardOnly' in c.last.stderr, "bluectl's agent did not register KeyboardOnly")
        wait_device(c, 'Paired', True, 5, 'bluetoothd does not show the device paired')
    forget_bond(c)


@lab_check('read_own_connection')
def _(c):
    # not connected now: read connects, reads, and disconnects the connection it made
    c.bl('disconnect', DEV, *DEV_OPTS)
    c.expect_rc(0)
    wait_device(c, 'Connected', False, 10, 'device still connected before the check')
    c.bl('read', DEV, 'battery_level', '--json', *DEV_OPTS)
    c.expect_rc(0)
    lines = c.json_lines()
    check(is_hex(lines[0].get('value'), 1), 'value %r' % lines[0].get('value'))
    wait_device(c, 'Connected', False, 10, 'bluectl left its own connection up')


@lab_check('subscribe_disconnect')
def _(c):
    c.note('subscribe in the background; disconnect the device from another process: subscribe must exit 74')
    sub = c.bluectl_bg('subscribe', DEV, 'heart_rate_measurement', '--json', *DEV_OPTS,
                       out=c.path('sub.out'), err=c.path('sub.err'), limit=90)
    ready(c, sub, bluez.wait_notifying(DEV, HR_MEAS, 40), 'subscription never became active')
    time.sleep(2)
    c.bl('disconnect', DEV, *DEV_OPTS)
    c.expect_rc(0)
    rc = sub.wait()
    c.note('subscriber exit %d; stderr: %s' % (rc, read_text(sub.err)[:300]))
    if rc != 74:
        c.fail('subscribe exited %d after the device disconnected, expected 74' % rc)
    if not read_text(sub.err):
        c.fail('no message on stderr')
    check(len(c.json_lines(sub.out)) >= 1, 'no notification before the disconnect')


@lab_check('unknown_device')
def _(c):
    c.bl('read', '00:11:22:33:44:55', 'battery_level', '--json', *DEV_OPTS)
    c.expect_rc(68)
