"""`bluectl proxy` (issue 28) on the central (hci1), driven by Home
Assistant's ESPHome client (aioesphomeapi) and by a plain Bleak program over
bleak-esphome (both from the repository's test virtualenv, seen through the
guest's root) over the guest's loopback: GATT through the proxy on the lab
peripheral, plaintext and Noise, against the real bluetoothd."""
import base64
import json
import os
import re

from labcheck import bluez, lab
from labcheck.jsonlines import check
from labcheck.lab import ADV_NAME, BATT_LVL, CENTRAL, CENTRAL_ADDR, DEV, HR_MEAS, HR_SVC, REPO, TEST_CHR
from labcheck.procs import read_text
from labcheck.runner import lab_check
from labcheck.serving import wait_out
from checks.central import wait_device

PORT = 6053
PYTHON = os.path.join(REPO, '.venv', 'bin', 'python')
CLIENT = os.path.join(REPO, 'Tests', 'ProxyClient', 'esphome_client.py')
BLEAK_CLIENT = os.path.join(REPO, 'Tests', 'ProxyClient', 'bleak_client.py')


def start_proxy(c, extra=()):
    """`bluectl proxy` on hci1 in the background, once it listens and its
    scan has found the peripheral: (the process, its output file)."""
    if not os.access(PYTHON, os.X_OK):
        c.skip('no test virtualenv at %s (Scripts/deps makes it)' % PYTHON)
    if c.run(['ip', 'link', 'set', 'lo', 'up']) != 0:
        c.fail('cannot bring the loopback interface up')
    out = c.path('proxy.out')
    args = ['proxy', '--adapter', CENTRAL, '--port', str(PORT), '--name', 'lab-proxy', '--no-mdns'] + list(extra)
    proxy = c.spawn(['env', 'BLUECTL_LOG_LEVEL=info', lab.BLUECTL] + args, out, limit=600,
                    show='BLUECTL_LOG_LEVEL=info bluectl %s   (background)' % ' '.join(args))
    if not wait_out(c, out + '.err', 'listening on port %d' % PORT, 60, proxy):
        c.echo(read_text(out + '.err'))
        c.fail('the proxy did not listen')
    # Home Assistant connects to a device it has heard: here, once the proxy's scan made it known to bluetoothd
    # (the lab's advertisement never changes, so a client subscribing late hears nothing new to forward).
    wait_device(c, 'Address', True, 90, 'the proxy\'s scan did not find %s' % DEV)
    return proxy, out


def stop_proxy(c, proxy, out):
    """SIGTERM: the proxy exits 143 leaving the device disconnected."""
    proxy.signal(15)
    rc = proxy.wait(30)
    c.echo(read_text(out + '.err')[-3000:])
    check(rc == 143, 'the proxy exited %r after SIGTERM' % rc)
    wait_device(c, 'Connected', False, 10, 'bluetoothd still shows %s connected after the proxy' % DEV)


def start_client(c, script, args, name, limit):
    """SCRIPT run by the test virtualenv's python in the background: its
    process and output file."""
    path = c.path(name)
    return c.spawn([PYTHON, script] + args, path, limit=limit,
                   show='%s %s' % (os.path.basename(script), ' '.join(args))), path


def wait_client(c, client, path, regex, secs, out, why):
    """The client's output has REGEX within SECS, else its stderr and the
    proxy's end are shown and the check fails with WHY."""
    if not wait_out(c, path, regex, secs, client):
        c.echo(read_text(path + '.err') + read_text(out + '.err')[-3000:])
        c.fail(why)


@lab_check('proxy_gatt')
def _(c):
    """The proxy on hci1; aioesphomeapi's `gatt` run (esphome_client.py) on the
    peripheral: connected with bluetoothd's MTU, the services with handles, the
    battery level read, the test characteristic written and read back, the
    heart-rate CCCD read, the two error codes, a heart-rate notification after
    start_notify and the CCCD write, the disconnect, the slots back to 3; then
    the proxy stops on SIGTERM (143) leaving the device disconnected."""
    proxy, out = start_proxy(c)
    client, gatt = start_client(c, CLIENT, ['gatt', '127.0.0.1', str(PORT), DEV], 'gatt.out', 180)
    wait_client(c, client, gatt, r'"mtu"', 180, out, 'the gatt client did not finish')
    line = json.loads(read_text(gatt).splitlines()[-1])
    c.note('aioesphomeapi read: %s' % json.dumps(line)[:1500])
    chars = {ch['uuid']: ch for s in line['services'] for ch in s['characteristics']}
    check(line['connected'] and line['mtu'] >= 23, 'connected with an MTU: %r' % line['mtu'])
    check(HR_MEAS in chars and BATT_LVL in chars, 'the services lack heart rate or battery: %r' % sorted(chars))
    handles = [ch['handle'] for ch in chars.values()] + [d['handle'] for ch in chars.values() for d in ch['descriptors']]
    check(all(h > 0 for h in handles) and len(set(handles)) == len(handles), 'handles not unique and set: %r' % handles)
    check(len(bytes.fromhex(line['battery'])) == 1, 'battery level %r' % line['battery'])
    check(line['written'] == '627965', 'read back %r after writing "bye"' % line['written'])
    check(len(bytes.fromhex(line['cccd_before'])) == 2, 'CCCD %r' % line['cccd_before'])
    check(line['unknown_handle_error'] == 1 and line['read_only_error'] == 3,
          'errors %r %r' % (line['unknown_handle_error'], line['read_only_error']))
    check(line['notified']['handle'] == chars[HR_MEAS]['handle'] and line['notified']['data'],
          'notification %r' % line['notified'])
    check(line['free'][0][:2] == [3, 3] and line['free'][-1][:2] == [3, 3] and [2, 3] in [f[:2] for f in line['free']],
          'slots %r' % line['free'])
    stop_proxy(c, proxy, out)


@lab_check('proxy_bleak')
def _(c):
    """The proxy on hci1; a plain Bleak program through it as Home Assistant
    sets one up (bleak_client.py: habluetooth's manager, bleak-esphome's
    remote scanner registered): bleak.BleakScanner finds the peripheral with
    its advertisement, bleak.BleakClient (bleak-esphome's backend) connects,
    lists the services, reads the battery level, writes the test
    characteristic and reads it back, gets a heart-rate notification and
    disconnects; SIGTERM ends the proxy (143) with the device disconnected."""
    proxy, out = start_proxy(c)
    client, run = start_client(c, BLEAK_CLIENT, ['run', '127.0.0.1', str(PORT), DEV], 'bleak.out', 300)
    wait_client(c, client, run, r'"subscribed": true', 180, out, 'bleak_client.py did not register the proxy\'s scanner')
    # The proxy forwards what bluetoothd signals after a client subscribed, and the lab's advertisement never
    # changes: bluetoothd forgets the device, so its next advertisement (every ~1.5 s) is news again.
    bluez.remove(DEV)
    wait_client(c, client, run, r'"backend"', 240, out, 'bleak_client.py did not finish')
    line = json.loads(read_text(run).splitlines()[-1])
    c.note('bleak read: %s' % json.dumps(line)[:1500])
    chars = {ch['uuid']: ch for s in line['services'] for ch in s['characteristics']}
    check(line['address'] == DEV and line['source'] == CENTRAL_ADDR,
          'found %r through %r' % (line['address'], line['source']))
    check(line['name'] == ADV_NAME and HR_SVC in line['service_uuids'], 'advertisement %r %r'
          % (line['name'], line['service_uuids']))
    # btvirt's reports carry no RSSI (127, "not available"): forwarded as the weakest reading.
    check(line['rssi'] == -127, 'RSSI %r' % line['rssi'])
    check(line['backend'] == 'ESPHomeClient' and line['mtu'] >= 23, 'backend %r, MTU %r' % (line['backend'], line['mtu']))
    check(HR_MEAS in chars and BATT_LVL in chars and TEST_CHR in chars, 'services lack some: %r' % sorted(chars))
    check(len(bytes.fromhex(line['battery'])) == 1, 'battery level %r' % line['battery'])
    check(line['written'] == '627965', 'read back %r after writing "bye"' % line['written'])
    check(line['notified']['uuid'] == HR_MEAS and line['notified']['data'], 'notification %r' % line['notified'])
    check(client.wait(30) == 0, 'bleak_client.py did not exit 0')
    stop_proxy(c, proxy, out)


@lab_check('proxy_noise')
def _(c):
    """The proxy encrypted (`--key-file`, a fresh base64 key): aioesphomeapi
    with that key (`noise_psk`) gets the device info; a client with another
    key is refused (InvalidEncryptionKeyAPIError, one line in the proxy's
    log) while the first stays connected and then reads the peripheral's
    battery level through the proxy and the device info again."""
    key = base64.b64encode(os.urandom(32)).decode()
    key_file = c.path('key')
    with open(os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'w') as f:
        f.write(key + '\n')
    proxy, out = start_proxy(c, ['--key-file', key_file])
    check('encrypted (Noise)' in read_text(out + '.err'), 'the proxy does not say it is encrypted')
    good, go = c.path('good.out'), c.path('go')
    client = c.spawn([PYTHON, CLIENT, 'battery', '127.0.0.1', str(PORT), DEV, key, go], good, limit=240,
                     show='esphome_client.py battery 127.0.0.1 %d %s KEY %s   (background)' % (PORT, DEV, go))
    if not wait_out(c, good, r'"name"', 60, client):
        c.echo(read_text(good + '.err') + read_text(out + '.err')[-3000:])
        c.fail('the client with the key got no device info')
    check(json.loads(read_text(good).splitlines()[0]) == {'name': 'lab-proxy'}, 'device info %r' % read_text(good))
    wrong = base64.b64encode(bytes(b ^ 0xFF for b in base64.b64decode(key))).decode()
    bad = c.path('bad.out')
    rc = c.spawn([PYTHON, CLIENT, 'refused', '127.0.0.1', str(PORT), wrong], bad, limit=60,
                 show='esphome_client.py refused 127.0.0.1 %d OTHER-KEY' % PORT).wait()
    refusal = json.loads(read_text(bad).splitlines()[-1]) if rc == 0 and read_text(bad) else {}
    check(refusal.get('error') == 'InvalidEncryptionKeyAPIError', 'the other key: %r (rc %r, %s)'
          % (refusal, rc, read_text(bad + '.err')[-500:]))
    wait_out(c, out + '.err', "encryption key is not this proxy's", 30, proxy)
    lines = [l for l in read_text(out + '.err').splitlines() if "encryption key is not this proxy's" in l]
    check(len(lines) == 1, 'the proxy logged %d lines for the wrong key: %r' % (len(lines), lines))
    open(go, 'w').close()
    if not wait_out(c, good, r'"battery"', 180, client):
        c.echo(read_text(good + '.err') + read_text(out + '.err')[-3000:])
        c.fail('the client with the key did not read the battery level')
    line = json.loads(read_text(good).splitlines()[-1])
    c.note('aioesphomeapi over Noise: %s' % json.dumps(line))
    check(len(bytes.fromhex(line['battery'])) == 1, 'battery level %r' % line['battery'])
    check(line['name_again'] == 'lab-proxy' and line['mtu'] >= 23, 'after the refusal: %r' % line)
    stop_proxy(c, proxy, out)


@lab_check('proxy_killed_client')
def _(c):
    """A client killed (SIGKILL) while it holds a connection through the proxy:
    the proxy disconnects the device and frees the slot (free 2 while held,
    3 after), bluetoothd shows the device disconnected, and the proxy goes on
    answering; SIGTERM: 143."""
    proxy, out = start_proxy(c)
    holder, held = start_client(c, CLIENT, ['hold', '127.0.0.1', str(PORT), DEV, '120'], 'hold.out', 300)
    wait_client(c, holder, held, r'"connected": true', 120, out, 'the holding client did not connect')

    def free(name):
        client, path = start_client(c, CLIENT, ['free', '127.0.0.1', str(PORT)], name, 60)
        check(client.wait(60) == 0, 'esphome_client.py free failed: %s' % read_text(path + '.err')[-500:])
        return json.loads(read_text(path).splitlines()[-1])
    busy = free('free-held.out')
    check(busy['free'] == 2, 'slots while held: %r' % busy)
    holder.signal(9)
    holder.wait(10)
    line = re.escape('disconnected %s (0 of 3 slots in use)' % DEV)
    if not wait_out(c, out + '.err', line, 30, proxy):
        c.echo(read_text(out + '.err')[-3000:])
        c.fail('the proxy did not free the killed client\'s connection')
    wait_device(c, 'Connected', False, 20, 'bluetoothd still shows %s connected after its client was killed' % DEV)
    after = free('free-after.out')
    check(after['free'] == 3, 'slots after the kill: %r' % after)
    stop_proxy(c, proxy, out)
