"""`bluectl gateway` (issue 27) on the central (hci1), publishing to a
mosquitto of the guest's own (the host's package, seen through the guest's
root; the guest's loopback brought up first), hearing `bluectl advertise
--bthome` on the server adapter (hci3); faults injected into the stack."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

from labcheck import bluez, lab
from labcheck.faults import bluetoothd_segv, power_cycle
from labcheck.jsonlines import check
from labcheck.lab import BODY_LOC, CENTRAL, DEV, HR_CTRL, HR_MEAS, PERIPH2_ADAPTER, SERVER, SERVER_ADDR
from labcheck.procs import read_text
from labcheck.runner import lab_check
from labcheck.serving import need_server, wait_out

PORT = 1883


def start_broker(c, log='mosquitto.log'):
    """lo up, then mosquitto on 127.0.0.1:PORT, persistent (the reader's session and
    what is queued for it outlive a restart of the broker; the gateway's own buffer
    is what is tested); returns once it takes connections."""
    if c.run(['ip', 'link', 'set', 'lo', 'up']) != 0:
        c.fail('cannot bring the loopback interface up')
    conf = c.path('mosquitto.conf')
    # its database in a folder of the check's own (a folder that does not exist makes
    # mosquitto keep nothing across the restart, saying so only in its log)
    store = c.path('mosquitto.d')
    os.makedirs(store, exist_ok=True)
    with open(conf, 'w') as f:
        f.write('listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\nuser root\n'
                % (PORT, store))
    log = c.path(log)
    broker = c.spawn(['mosquitto', '-c', conf], log, show='mosquitto -c %s   (background)' % conf)
    end = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(('127.0.0.1', PORT), 1).close()
            return broker
        except OSError:
            if not broker.alive() or time.monotonic() >= end:
                c.echo(read_text(log) + read_text(log + '.err'))
                c.fail('mosquitto did not take connections on 127.0.0.1:%d' % PORT)
            time.sleep(0.2)


def start_gateway(c, gateway, config, limit, extra=()):
    """mosquitto (start_broker), `mosquitto_sub -v -t bluectl/#` into mqtt.out, and `bluectl
    gateway --id GATEWAY` on the central with CONFIG (a dict) as its --config and a state
    folder of its own: (the gateway's process, its output file, mqtt.out, the broker's process).
    The reader's session is persistent (QoS 1, -c): it gets what was published while it
    reconnected after a restart of the broker."""
    broker = start_broker(c)
    mqtt = c.path('mqtt.out')
    sub = ['mosquitto_sub', '-h', '127.0.0.1', '-p', str(PORT), '-v', '-t', 'bluectl/#', '-q', '1', '-c', '-i', 'lab-reader-' + gateway]
    c.spawn(sub, mqtt, show=' '.join(sub[:1] + sub[5:]) + '   (background)')
    gw, gw_out = spawn_gateway(c, gateway, CENTRAL, config, limit, extra)
    return gw, gw_out, mqtt, broker


def spawn_gateway(c, gateway, adapter, config, limit, extra=(), name='gateway'):
    """`bluectl gateway --id GATEWAY --adapter ADAPTER` with CONFIG (a dict) as its --config
    (NAME.json) and a state folder of its own, output into NAME.out: (its process, NAME.out)."""
    state = tempfile.mkdtemp(prefix='gw-state-', dir='/tmp')
    path = c.path(name + '.json')
    with open(path, 'w') as f:
        json.dump(config, f)
    gw_out = c.path(name + '.out')
    args = ['gateway', '--broker', 'mqtt://127.0.0.1:%d' % PORT, '--id', gateway, '--adapter', adapter, '--config', path] + list(extra)
    gw = c.spawn(['env', 'STATE_DIRECTORY=' + state, lab.BLUECTL] + args, gw_out, limit=limit,
                 show='STATE_DIRECTORY=%s bluectl %s   (background)' % (state, ' '.join(args)))
    return gw, gw_out


def wait_scanning(c, gw, gw_out, adapter=CENTRAL, how='actively'):
    """The gateway says it scans ADAPTER (HOW) and that it connected to the broker; else the check fails."""
    if not wait_out(c, gw_out + '.err', 'scanning %s %s' % (adapter, how), 60, gw) or \
            not wait_out(c, gw_out + '.err', 'connected to mqtt://', 60, gw):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway on %s did not start scanning and connect' % adapter)


def wait_first_reading(c, gw_out, mqtt):
    """A record of the server's device with temperature 0 on the broker; else the check fails."""
    if not wait_out(c, mqtt, r'"temperature_c": ?0', 60):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway published no record of %s' % SERVER_ADDR)


def stop_gateway(c, gw, gw_out, mqtt, gateway):
    """SIGTERM: exit 143 (its stderr into the log), and its status `offline` on the broker."""
    gw.signal(signal.SIGTERM)
    rc = gw.wait(30)
    c.echo(read_text(gw_out + '.err'))
    if rc != 143:
        c.fail('the gateway exited %d on SIGTERM, expected 143' % rc)
    if not wait_out(c, mqtt, r'^bluectl/%s/status offline' % gateway, 20):
        c.fail('no offline status after SIGTERM')


def received(path, gateway):
    """(the temperatures of the server's records in order of first arrival, the events) from mosquitto_sub -v."""
    temps, events = [], []
    for line in read_text(path).splitlines():
        topic, _, payload = line.partition(' ')
        try:
            obj = json.loads(payload)
        except ValueError:
            continue
        if topic == 'bluectl/%s/devices/%s' % (gateway, SERVER_ADDR):
            t = (obj.get('sensor') or {}).get('temperature_c')
            if t is not None and t not in temps:
                temps.append(t)
        elif topic == 'bluectl/%s/events' % gateway:
            events.append(obj)
    return temps, events


def start_bthome(c, duration):
    """`bluectl advertise --bthome temperature=0` on the server adapter, fed on stdin; once advertising."""
    adv_out = c.path('advertise.out')
    adv_args = ['advertise', '--adapter', SERVER, '--bthome', 'temperature=0', '--json', '--duration', str(duration)]
    adv = c.spawn([lab.BLUECTL] + adv_args, adv_out, stdin=subprocess.PIPE,
                  show='bluectl %s   (background; stdin: a pipe)' % ' '.join(adv_args))
    if not wait_out(c, adv_out, r'"event": ?"advertising"', 60, adv):
        c.echo(read_text(adv.err))
        c.fail('advertise --bthome printed no advertising line')
    return adv


def monitor_server_device(c, adapter, name):
    """Record (dbus-monitor, in the background) bluetoothd's PropertiesChanged of the server's
    device on `adapter` into c.path(name), for heard_by_bluetoothd: the emulated radio under TCG
    may miss an advertisement, and a reading never heard is no reading lost by a gateway."""
    path = c.path(name)
    c.spawn(['dbus-monitor', '--system', "type='signal',interface='org.freedesktop.DBus.Properties',"
             "member='PropertiesChanged',path='/org/bluez/%s/dev_%s'" % (adapter, SERVER_ADDR.replace(':', '_'))],
            path, show='dbus-monitor --system (PropertiesChanged of the server\'s device on %s)   (background)' % adapter)
    return path


def heard_by_bluetoothd(path):
    """The BTHome temperatures of the server's device on the central as bluetoothd reported
    them (dbus-monitor's PropertiesChanged of its ServiceData), distinct, in order."""
    temps = []
    for m in re.finditer(r'array of bytes \[\s*((?:[0-9a-f]{2}\s+)+)\]', read_text(path)):
        b = [int(x, 16) for x in m.group(1).split()]
        if len(b) >= 6 and b[0] == 0x40 and b[1] == 0x00 and b[3] == 0x02:
            t = float(int.from_bytes(bytes(b[4:6]), 'little', signed=True) / 100)
            if t not in temps:
                temps.append(t)
    return temps


@lab_check('gateway_faults')
def _(c):
    """A gateway on hci1 hearing `bluectl advertise --bthome` on hci3 change its
    temperature once a second, publishing to a mosquitto in the guest: every
    value arrives, in order, before and after bluetoothd dies (SIGSEGV; the
    supervisor restarts it), after hci1 is powered off and on, and after the
    broker was stopped for 60 s while 60 readings changed (kept on disk, all
    published once it is back: one `reconnected` event, away_s >= 60; "all"
    are those bluetoothd reported, which dbus-monitor records: the emulated
    radio may miss an advertisement, at most 6 of the 60 here); each
    scan fault is a scan_interrupted / scan_resumed pair on the events topic,
    and the gateway's process lives through all three (SIGTERM: 143, status
    offline)."""
    need_server(c)
    gw, gw_out, mqtt, broker = start_gateway(c, 'lab', {'advertisements': {'addresses': [SERVER_ADDR]}}, 900)
    wait_scanning(c, gw, gw_out)
    heard = monitor_server_device(c, CENTRAL, 'heard.out')
    # the scan runs before the advertiser starts: btvirt reports an advertisement when its set is enabled
    adv = start_bthome(c, 800)
    adv_out = c.path('advertise.out')

    def feed(first, last):
        """Temperatures first..last, one a second; then until the last arrived (a limit only against a hang)."""
        for t in range(first, last + 1):
            adv.p.stdin.write(b'{"temperature": %d}\n' % t)
            adv.p.stdin.flush()
            time.sleep(1)
        end = time.monotonic() + 60
        while float(last) not in received(mqtt, 'lab')[0] and time.monotonic() < end:
            time.sleep(0.5)
        temps = received(mqtt, 'lab')[0]
        c.note('received so far: %r' % temps)
        check(temps == [float(t) for t in range(0, last + 1)], 'temperatures %r, expected 0..%d in order' % (temps, last))

    def fault_survived(what, n):
        """The n-th scan_interrupted / scan_resumed pair arrived; the gateway still runs."""
        end = time.monotonic() + 120
        while time.monotonic() < end:
            names = [e.get('event') for e in received(mqtt, 'lab')[1] if e.get('event') != 'scan_recovery']
            if names.count('scan_resumed') >= n:
                break
            time.sleep(0.5)
        events = received(mqtt, 'lab')[1]
        c.note('events after %s: %r' % (what, events))
        names = [e.get('event') for e in events if e.get('event') != 'scan_recovery']
        check(names == ['scan_interrupted', 'scan_resumed'] * n, '%s: events %r' % (what, events))
        check(gw.alive(), '%s: the gateway exited: %s' % (what, read_text(gw_out + '.err')[-600:]))

    wait_first_reading(c, gw_out, mqtt)
    feed(1, 5)
    if not bluetoothd_segv(c, 150):
        c.fail('bluetoothd was not restarted')
    fault_survived('bluetoothd SIGSEGV', 1)
    # advertise registers its advertisement again with the new bluetoothd (and after the supervisor's power cycle of hci3)
    if not wait_out(c, adv_out, r'"event": ?"restored"', 90, adv):
        c.echo(read_text(adv.err))
        c.fail('advertise did not register again after the restart')
    feed(6, 10)
    if not power_cycle(c, CENTRAL):
        c.fail('cannot power-cycle %s' % CENTRAL)
    fault_survived('%s powered off and on' % CENTRAL, 2)
    feed(11, 15)
    # The broker stopped 60 s while the readings change, one a second: the gateway keeps
    # them on disk and, once the broker is back, every one arrives, in order.
    broker.signal(signal.SIGTERM)
    check(broker.wait(30) == 0, 'mosquitto did not stop on SIGTERM')
    if not wait_out(c, gw_out + '.err', r'to mqtt://.*; buffering', 60, gw):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway did not notice the broker gone')
    stopped = time.monotonic()
    for t in range(16, 76):
        adv.p.stdin.write(b'{"temperature": %d}\n' % t)
        adv.p.stdin.flush()
        time.sleep(max(0.0, stopped + (t - 15) - time.monotonic()))
    check(time.monotonic() - stopped >= 60, 'the broker was away %.1f s' % (time.monotonic() - stopped))
    broker = start_broker(c, 'mosquitto-restarted.log')
    if not wait_out(c, gw_out + '.err', 'reconnected to mqtt://', 60, gw):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway did not reconnect to the restarted broker')
    end = time.monotonic() + 120
    while 75.0 not in received(mqtt, 'lab')[0] and time.monotonic() < end:
        time.sleep(0.5)
    temps, reported = received(mqtt, 'lab')[0], heard_by_bluetoothd(heard)
    # the outage's readings: dbus-monitor may itself miss a signal (it did 0 and 6, around
    # bluetoothd's restart, while the gateway published them), so what it recorded must be
    # among those published, not equal to them
    during, reported_during = [t for t in temps if t >= 16], [t for t in reported if t >= 16]
    unheard = [float(t) for t in range(16, 76) if float(t) not in reported_during and float(t) not in during]
    c.note('after the broker\'s 60 s away: %r; not heard by %s (the radio): %r' % (during, CENTRAL, unheard))
    # every reading bluetoothd reported is published, in order; the radio may miss a few, not most
    check(during == sorted(during) and all(t in during for t in reported_during),
          'published %r, bluetoothd reported %r' % (during, reported_during))
    check(len(unheard) <= 6 and 75.0 in during, '%d of the 60 readings not heard: %r' % (len(unheard), unheard))
    away = [e.get('away_s') for e in received(mqtt, 'lab')[1] if e.get('event') == 'reconnected']
    check(len(away) == 1 and away[0] >= 60, 'reconnected events %r' % away)
    check(gw.alive(), 'the gateway exited: %s' % read_text(gw_out + '.err')[-600:])
    events = received(mqtt, 'lab')[1]
    reasons = [e.get('reason') for e in events if e.get('event') == 'scan_interrupted']
    check(reasons == ['bluetoothd stopped (exited or crashed)', '%s was powered off' % CENTRAL], 'reasons %r' % reasons)
    gaps = [e.get('gap_s') for e in events if e.get('event') == 'scan_resumed']
    c.note('gaps (s): %r; watchdog recoveries: %d' % (gaps, sum(1 for e in events if e.get('event') == 'scan_recovery')))
    check(all(isinstance(g, (int, float)) and g > 0 for g in gaps), 'gaps %r' % gaps)
    stop_gateway(c, gw, gw_out, mqtt, 'lab')
    adv.signal(signal.SIGINT)
    adv.wait(20)
    adv.p.stdin.close()


@lab_check('extra_gateway_passive')
def _(c):
    """Needs bluetoothd -E (a boot of its own: Scripts/lab test --bluetoothd-opts -E
    extra_gateway_passive; Scripts/test does so). The gateway with --scan auto (the default) and a
    config naming every sensor format on hci1, which offers AdvertisementMonitorManager1 and is bluetoothd 5.66 (its Modalias), scans
    passively and says why: its 16 patterns in three monitor objects of at most 7 (more in one and
    5.66 aborts, docs/advertisement-monitor.md), each added to the kernel and activated, bluetoothd
    alive throughout; it hears `bluectl advertise --bthome` on hci3 through its monitor alone
    (hci1's Discovering stays false: the readings come as Device1 changes bluetoothd makes for
    monitored devices, DeviceFound from the object with BTHome's pattern), publishes temperatures
    0..8 in order, and at SIGTERM unregisters the monitor (bluetoothd's log says the application's
    path was removed)."""
    need_server(c)
    central = '/org/bluez/' + CENTRAL
    if 'org.bluez.AdvertisementMonitorManager1' not in bluez.managed().get(central, {}):
        c.fail('%s has no AdvertisementMonitorManager1: this check needs bluetoothd -E (--bluetoothd-opts -E)' % CENTRAL)
    log_start = len(read_text(lab.BTD_LOG))
    deaths = read_text(lab.SUPERVISOR_LOG).count('restarting')
    # every sensor format named (a config that names none admits every advertisement: auto is active then)
    formats = ['bthome', 'ruuvi', 'xiaomi', 'pvvx', 'atc1441', 'switchbot', 'govee', 'inkbird']
    gw, gw_out, mqtt, _ = start_gateway(c, 'passive', {'advertisements': {'addresses': [SERVER_ADDR], 'sensor_formats': formats}}, 600)
    if not wait_out(c, gw_out + '.err', r'scanning %s passively \(AdvertisementMonitor1\): bluetoothd 5\.66 offers' % CENTRAL, 60, gw) or \
            not wait_out(c, gw_out + '.err', 'connected to mqtt://', 60, gw):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway did not start scanning passively and connect')
    adv = start_bthome(c, 600)
    if not wait_out(c, mqtt, r'"temperature_c": ?0', 60):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway published no record of %s' % SERVER_ADDR)
    for t in range(1, 9):
        adv.p.stdin.write(b'{"temperature": %d}\n' % t)
        adv.p.stdin.flush()
        time.sleep(1)
        check(not bluez.prop(central, 'org.bluez.Adapter1', 'Discovering'), '%s is discovering: the scan is not passive' % CENTRAL)
    end = time.monotonic() + 60
    while 8.0 not in received(mqtt, 'passive')[0] and time.monotonic() < end:
        time.sleep(0.5)
    temps = received(mqtt, 'passive')[0]
    c.note('received: %r' % temps)
    check(temps == [float(t) for t in range(0, 9)], 'temperatures %r, expected 0..8 in order' % temps)
    stop_gateway(c, gw, gw_out, mqtt, 'passive')
    adv.signal(signal.SIGINT)
    adv.wait(20)
    adv.p.stdin.close()
    log = read_text(lab.BTD_LOG)[log_start:]
    monitor_lines = [l for l in log.splitlines() if 'Adv Monitor' in l or 'adv_monitor' in l]
    c.note('bluetoothd about the monitor:\n' + '\n'.join(monitor_lines[-12:]))
    check(any('reserved for Adv Monitor app' in l for l in monitor_lines), 'bluetoothd did not log the registration')
    allocated = sorted(set(l.split(' at path ')[-1] for l in monitor_lines if 'Adv Monitor allocated for the object at path' in l))
    activated = [l for l in monitor_lines if 'Calling Activate() on Adv Monitor' in l]
    check(len(allocated) == 3 and len(activated) == 3, 'monitor objects %r, %d activated: expected 3 and 3' % (allocated, len(activated)))
    check(any('Calling DeviceFound() on Adv Monitor' in l and allocated[0] in l for l in monitor_lines),
          'no DeviceFound from %s, the object with BTHome\'s pattern' % (allocated[:1],))
    check(read_text(lab.SUPERVISOR_LOG).count('restarting') == deaths, 'bluetoothd died during the check')
    check(any('removed along with Adv Monitor app' in l for l in monitor_lines),
          'bluetoothd did not log the application removed (UnregisterMonitor)')


def gatt_messages(path, topic):
    """The JSON payloads published on `topic`, in order of arrival (mosquitto_sub -v)."""
    out = []
    for line in read_text(path).splitlines():
        t, _, payload = line.partition(' ')
        if t == topic:
            try:
                out.append(json.loads(payload))
            except ValueError:
                out.append(payload)
    return out


@lab_check('gateway_gatt')
def _(c):
    """A gateway on hci1 with a config of GATT work for the lab's peripheral
    (BlueZ's example-gatt-server on hci0): heart-rate notifications and the
    body sensor location read every 2 s arrive on their topics as `subscribe
    --json` records; commands to the allow-listed control point are answered
    `done` (01, which the example takes) and `failed` (02, which it refuses),
    one to a characteristic not allow-listed `refused`; with --home-assistant,
    the heart rate's bpm has its retained discovery config (on this gateway's
    2a37 topic, the field its values carry), the location (text) none;
    SIGTERM: 143, the status offline."""
    gw, gw_out, mqtt, _ = start_gateway(c, 'labgatt', {
        'advertisements': {'addresses': [DEV]},
        'devices': {DEV: {'subscribe': ['heart_rate_measurement'], 'read': [{'characteristic': '2a38', 'every': 2}],
                          'writable': ['2a39']}}}, 600, ['--home-assistant'])
    base = 'bluectl/labgatt/devices/%s/gatt/' % DEV
    hrm, location, control = base + '2a37', base + '2a38', base + '2a39'
    end = time.monotonic() + 120   # a limit only against a hang: find, connect, discover under TCG
    while time.monotonic() < end and gw.alive() and \
            (len(gatt_messages(mqtt, hrm)) < 3 or len(gatt_messages(mqtt, location)) < 2):
        time.sleep(0.5)
    notes, reads = gatt_messages(mqtt, hrm), gatt_messages(mqtt, location)
    c.note('heart rate %r; location %r' % (notes[:3], reads[:2]))
    if len(notes) < 3 or len(reads) < 2:
        c.echo(read_text(gw_out + '.err'))
        c.fail('%d heart-rate values and %d location reads arrived, expected 3 and 2' % (len(notes), len(reads)))
    for r in notes + reads:
        check(isinstance(r, dict) and sorted(r) == ['characteristic', 'decoded', 'device', 'time', 'value'], 'record %r' % (r,))
        check(r.get('device') == DEV, 'device %r' % r.get('device'))
    check(all(r['characteristic'] == HR_MEAS for r in notes), 'heart rate records %r' % notes[:3])
    for r in notes:
        v = r['value']
        check(len(v) >= 4 and int(v[:2], 16) & 0x06 == 0x06, 'value %r is not a heart rate measurement' % v)
    check(all(r['characteristic'] == BODY_LOC and r['value'] == '01' for r in reads), 'location reads %r' % reads)
    events = [e.get('event') for e in gatt_messages(mqtt, 'bluectl/labgatt/events') if isinstance(e, dict)]
    check(events[:1] == ['device_connected'], 'events %r' % events)
    # Home Assistant's configs of the GATT values, retained: what a subscriber gets now.
    node = 'bluectl_' + DEV.lower().replace(':', '')
    configs = subprocess.run(['mosquitto_sub', '-h', '127.0.0.1', '-p', str(PORT), '-v', '-t', 'homeassistant/device/%s/config' % node,
                              '-W', '3'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20).stdout.decode()
    c.note('retained configs:\n' + configs)
    found = dict(line.split(' ', 1) for line in configs.splitlines() if ' ' in line)
    components = json.loads(found.get('homeassistant/device/%s/config' % node, '{}')).get('components', {})
    bpm = components.get('2a37_bpm', {})
    check(sorted(found) == ['homeassistant/device/%s/config' % node], 'config topics %r' % sorted(found))
    check(sorted(components) == ['2a37_bpm'], 'components %r' % sorted(components))
    check(bpm.get('platform') == 'sensor' and bpm.get('state_topic') == hrm and
          bpm.get('value_template') == '{{ value_json.decoded.bpm }}' and
          bpm.get('unit_of_measurement') == 'bpm' and bpm.get('availability_topic') == 'bluectl/labgatt/status',
          'bpm config %r' % bpm)
    check(all(isinstance((r.get('decoded') or {}).get('bpm'), int) for r in notes), 'values without decoded.bpm: %r' % notes[:3])

    def command(topic, payload, n):
        """Publishes a command; returns the n-th result on its result topic."""
        if c.run(['mosquitto_pub', '-h', '127.0.0.1', '-p', str(PORT), '-q', '1', '-t', topic + '/write', '-m', payload]) != 0:
            c.fail('mosquitto_pub failed')
        end = time.monotonic() + 60
        while len(gatt_messages(mqtt, topic + '/result')) < n and time.monotonic() < end:
            time.sleep(0.3)
        results = gatt_messages(mqtt, topic + '/result')
        if len(results) < n:
            c.echo(read_text(gw_out + '.err'))
            c.fail('no result on %s/result for %s' % (topic, payload))
        c.note('%s %s -> %r' % (topic, payload, results[n - 1]))
        return results[n - 1]

    done = command(control, '{"value": "01", "id": "c1"}', 1)
    check(done == {'result': 'done', 'id': 'c1', 'device': DEV, 'characteristic': HR_CTRL,
                   'type': 'with-response', 'value': '01'}, 'result %r' % (done,))
    failed = command(control, '02', 2)
    check(failed.get('result') == 'failed' and 'reason' in failed, 'result %r' % (failed,))
    refused = command(base + '2a38', '01', 1)
    check(refused.get('result') == 'refused' and 'reason' in refused, 'result %r' % (refused,))
    check(gw.alive(), 'the gateway exited: %s' % read_text(gw_out + '.err')[-600:])
    stop_gateway(c, gw, gw_out, mqtt, 'labgatt')


def packet_ids(path, topic):
    """The BTHome packet ids of the records on `topic` (repeats kept), in order of arrival."""
    return [m['sensor']['packet_id'] for m in gatt_messages(path, topic)
            if isinstance(m, dict) and 'packet_id' in (m.get('sensor') or {})]


@lab_check('gateway_two')
def _(c):
    """Two gateways with --home-assistant hearing one BTHome sensor (`bluectl advertise
    --bthome` on hci3, fed a temperature a second): gwa on hci1, also doing gateway_gatt's
    GATT work with the example peripheral (hci0), and gwb on hci2 (the second peripheral,
    scanning while it advertises). Each publishes every reading its adapter reported (bluetoothd's
    signals, recorded by dbus-monitor: the radio may miss a few, at most 3 of 12) on its own
    topic; the shared topic bluectl/sensors/<MAC> carries each reading (packet id) once, in
    order; Home Assistant's
    `online` brings each gateway's device config again, equal, naming both gateways'
    status; gwa's heart-rate values arrive; SIGTERM: 143 and offline, both."""
    need_server(c)
    start_broker(c)
    mqtt = c.path('mqtt.out')
    sub = ['mosquitto_sub', '-h', '127.0.0.1', '-p', str(PORT), '-v', '-t', 'bluectl/#', '-t', 'homeassistant/#',
           '-q', '1', '-c', '-i', 'lab-reader-two']
    c.spawn(sub, mqtt, show=' '.join(sub[:1] + sub[5:]) + '   (background)')
    adverts = {'advertisements': {'addresses': [SERVER_ADDR]}}
    gatt = dict(adverts, devices={DEV: {'subscribe': ['heart_rate_measurement'], 'read': [{'characteristic': '2a38', 'every': 2}]}})
    gwa, gwa_out = spawn_gateway(c, 'gwa', CENTRAL, gatt, 600, ['--home-assistant'], name='gateway-a')
    gwb, gwb_out = spawn_gateway(c, 'gwb', PERIPH2_ADAPTER, adverts, 600, ['--home-assistant'], name='gateway-b')
    for gw, out, adapter in ((gwa, gwa_out, CENTRAL), (gwb, gwb_out, PERIPH2_ADAPTER)):
        wait_scanning(c, gw, out, adapter)
    # what bluetoothd reports of the server's device on each adapter: the emulated radio may
    # miss an advertisement (hci2 also advertises), and a reading never heard is none lost
    heard = {g: monitor_server_device(c, adapter, 'heard-%s.out' % g) for g, adapter in (('gwa', CENTRAL), ('gwb', PERIPH2_ADAPTER))}
    adv = start_bthome(c, 500)
    own = {g: 'bluectl/%s/devices/%s' % (g, SERVER_ADDR) for g in ('gwa', 'gwb')}
    shared = 'bluectl/sensors/%s' % SERVER_ADDR
    for g in own:
        if not wait_out(c, mqtt, r'^%s .*"temperature_c": ?0' % own[g], 90):
            c.echo(read_text((gwa_out if g == 'gwa' else gwb_out) + '.err'))
            c.fail('%s published no record of %s' % (g, SERVER_ADDR))
    last = 12
    for t in range(1, last + 1):
        adv.p.stdin.write(b'{"temperature": %d}\n' % t)
        adv.p.stdin.flush()
        # 2 s apart, more than gwb's hold (1 s) and a tick: a reading only gwb heard is
        # published before gwa's next one arrives (which drops readings held as older)
        time.sleep(2)
    end = time.monotonic() + 60   # a limit only against a hang
    while time.monotonic() < end and not all(float(last) in received(mqtt, g)[0] for g in own):
        time.sleep(0.5)
    time.sleep(3)   # gwb's holds (1 s each) end: a copy it should not publish would come by now
    temps = {g: received(mqtt, g)[0] for g in own}
    ids = packet_ids(mqtt, shared)
    c.note('gwa %r; gwb %r; shared packet ids %r' % (temps['gwa'], temps['gwb'], ids))
    for g in own:
        reported = heard_by_bluetoothd(heard[g])
        unheard = [float(t) for t in range(1, last + 1) if float(t) not in temps[g] and float(t) not in reported]
        c.note('%s: not heard by its adapter (the radio): %r' % (g, unheard))
        check(temps[g] == sorted(temps[g]) and 0.0 in temps[g] and float(last) in temps[g] and
              all(t in temps[g] for t in reported if t > 0), '%s: published %r, bluetoothd reported %r' % (g, temps[g], reported))
        check(len(unheard) <= 3, '%s: %d of the %d readings not heard: %r' % (g, len(unheard), last, unheard))
    heard_ids = sorted(set(packet_ids(mqtt, own['gwa']) + packet_ids(mqtt, own['gwb'])))
    check(len(ids) == len(set(ids)) and ids == sorted(ids), 'a packet id twice or out of order on the shared topic: %r' % ids)
    check(sorted(ids) == heard_ids, 'shared packet ids %r, the gateways heard %r' % (ids, heard_ids))
    publishers = [m.get('gateway') for m in gatt_messages(mqtt, shared) if isinstance(m, dict)]
    c.note('published on the shared topic by: %r' % publishers)
    # Home Assistant starts: each gateway publishes the sensor's device config again, equal.
    config = 'homeassistant/device/bluectl_%s/config' % SERVER_ADDR.lower().replace(':', '')
    before = len(gatt_messages(mqtt, config))
    if c.run(['mosquitto_pub', '-h', '127.0.0.1', '-p', str(PORT), '-q', '1', '-t', 'homeassistant/status', '-m', 'online']) != 0:
        c.fail('mosquitto_pub failed')
    end = time.monotonic() + 30
    while len(gatt_messages(mqtt, config)) < before + 2 and time.monotonic() < end:
        time.sleep(0.3)
    time.sleep(1)
    again = gatt_messages(mqtt, config)[before:]
    c.note('configs after online: %r' % again)
    check(len(again) == 2 and again[0] == again[1], 'configs after online %r' % again)
    temperature = (again[0].get('components') or {}).get('temperature_c', {}) if again and isinstance(again[0], dict) else {}
    check(temperature.get('state_topic') == shared and temperature.get('availability_mode') == 'any' and
          temperature.get('availability') == [{'topic': 'bluectl/gwa/status'}, {'topic': 'bluectl/gwb/status'}],
          'config %r' % again[:1])
    base = 'bluectl/gwa/devices/%s/gatt/' % DEV
    end = time.monotonic() + 120   # a limit only against a hang: find, connect, discover under TCG
    while time.monotonic() < end and gwa.alive() and \
            (len(gatt_messages(mqtt, base + '2a37')) < 3 or len(gatt_messages(mqtt, base + '2a38')) < 2):
        time.sleep(0.5)
    notes, reads = gatt_messages(mqtt, base + '2a37'), gatt_messages(mqtt, base + '2a38')
    c.note('gwa: %d heart-rate values, %d location reads' % (len(notes), len(reads)))
    check(len(notes) >= 3 and all(isinstance(r, dict) and r.get('characteristic') == HR_MEAS for r in notes), 'heart rate %r' % notes[:3])
    check(len(reads) >= 2 and all(isinstance(r, dict) and r.get('value') == '01' for r in reads), 'location %r' % reads[:2])
    for gw, out, g in ((gwa, gwa_out, 'gwa'), (gwb, gwb_out, 'gwb')):
        check(gw.alive(), '%s exited: %s' % (g, read_text(out + '.err')[-600:]))
        stop_gateway(c, gw, out, mqtt, g)
    adv.signal(signal.SIGINT)
    adv.wait(20)
    adv.p.stdin.close()


def hci_scan_off(adapter):
    """LE Set Scan Enable (0x200c) off, sent on a raw HCI socket: the controller stops scanning
    while the kernel's discovery state and bluetoothd's Discovering stay as they were."""
    sock = socket.socket(socket.AF_BLUETOOTH, socket.SOCK_RAW, socket.BTPROTO_HCI)
    try:
        sock.bind((int(adapter[3:]),))
        sock.send(bytes([0x01, 0x0c, 0x20, 0x02, 0x00, 0x00]))
    finally:
        sock.close()


@lab_check('gateway_mgmt_stall')
def _(c):
    """Scans stopped behind bluetoothd's back while the gateway (--scan-watchdog 3) on hci1
    hears `bluectl advertise --bthome` on hci3 change a temperature each second. First
    `btmgmt stop-find` (the kernel's discovery stopped through the management interface):
    bluetoothd 5.66 sees the kernel's Discovering event and starts the discovery again itself,
    and no reading is missed. Then the controller's scan switched off with a raw HCI command
    (the kernel still in discovery, Discovering still true: a silent stall): the readings
    resume, every one fed from 8 s after the stall arrives, in order, after the watchdog's
    scan_recovery restart_discovery (what is missed meanwhile is noted); the gateway lives on
    (SIGTERM: 143). In both, "every one" is every one bluetoothd reported (dbus-monitor records
    its signals) once it reported the server again, which must be by the reading fed 2 s after
    stop-find and by the one fed 8 s after the stall: the emulated radio may miss an
    advertisement, at most 2 of the 9 after stop-find and 2 of the 12 after the stall."""
    need_server(c)
    gw, gw_out, mqtt, _ = start_gateway(c, 'stall', {'advertisements': {'addresses': [SERVER_ADDR]}}, 600,
                                        ['--scan-watchdog', '3'])
    wait_scanning(c, gw, gw_out)
    adv = start_bthome(c, 500)
    wait_first_reading(c, gw_out, mqtt)
    central = '/org/bluez/' + CENTRAL
    heard = monitor_server_device(c, CENTRAL, 'heard.out')

    def all_heard_arrived(what, temps, fed_from, back_by, first, last):
        """Every one of first..last that bluetoothd reported arrived, in order; at most 2 unheard.
        bluetoothd's first report of a reading fed from `fed_from` on must be of `back_by` or
        earlier (the scan back in time): only readings fed after that count as unheard by the
        radio (first..last)."""
        reported = heard_by_bluetoothd(heard)
        since = [t for t in reported if t >= fed_from]
        check(since and since[0] <= back_by, '%s: bluetoothd first reported the server again at %r, after %d' % (what, since[:1], back_by))
        unheard = [float(t) for t in range(first, last + 1) if float(t) not in temps and float(t) not in reported]
        c.note('%s: not heard by the adapter (the radio): %r' % (what, unheard))
        check(temps == sorted(temps) and all(float(t) in temps for t in range(first, last + 1) if float(t) in reported),
              '%s: received %r, bluetoothd reported %r, expected every one of those in %d..%d' % (what, temps, reported, first, last))
        check(len(unheard) <= 2, '%s: %d readings of %d..%d not heard: %r' % (what, len(unheard), first, last, unheard))

    def stall_and_feed(stop, first, last):
        """STOP() once, then temperatures first..last one a second; until the last arrived (a
        limit only against a hang): (what arrived of first..last, the scan_recovery events,
        Discovering each second, bluetoothd's discovery lines meanwhile)."""
        log_start = len(read_text(lab.BTD_LOG))
        stop()
        stalled, discovering = time.monotonic(), []
        for t in range(first, last + 1):
            adv.p.stdin.write(b'{"temperature": %d}\n' % t)
            adv.p.stdin.flush()
            discovering.append(bool(bluez.prop(central, 'org.bluez.Adapter1', 'Discovering')))
            time.sleep(max(0.0, stalled + (t - first + 1) - time.monotonic()))
        end = time.monotonic() + 60
        while float(last) not in received(mqtt, 'stall')[0] and time.monotonic() < end:
            time.sleep(0.5)
        temps, events = received(mqtt, 'stall')
        lines = [l for l in read_text(lab.BTD_LOG)[log_start:].splitlines() if 'discover' in l.lower()]
        return [t for t in temps if first <= t <= last], [e for e in events if e.get('event') == 'scan_recovery'], discovering, lines

    for t in range(1, 4):
        adv.p.stdin.write(b'{"temperature": %d}\n' % t)
        adv.p.stdin.flush()
        time.sleep(1)
    temps, recoveries, discovering, lines = stall_and_feed(
        lambda: check(c.run(['btmgmt', '--index', CENTRAL[3:], 'stop-find']) == 0, 'btmgmt stop-find failed'), 4, 12)
    c.note('btmgmt stop-find: received %r; recoveries %r; Discovering %r' % (temps, recoveries, discovering))
    c.note('bluetoothd about discovery:\n' + '\n'.join(lines[:12]))
    all_heard_arrived('after stop-find', temps, 4, 6, 4, 12)
    check(any('discovering 0' in l for l in lines), 'bluetoothd saw no end of the discovery: did stop-find reach the kernel?')

    temps, recoveries, discovering, lines = stall_and_feed(lambda: hci_scan_off(CENTRAL), 13, 32)
    restarts = [l for l in lines if 'discovering_callback' in l]
    c.note('HCI scan off: received %r; recoveries %r; Discovering %r' % (temps, recoveries, discovering))
    c.note('bluetoothd about discovery:\n' + '\n'.join(lines[:16]))
    all_heard_arrived('after the HCI scan off', temps, 13, 21, 21, 32)
    check(gw.alive(), 'the gateway exited: %s' % read_text(gw_out + '.err')[-600:])
    c.note('missed during the silent stall: %r; restarted by %s' % (
        [float(t) for t in range(13, 33) if float(t) not in temps],
        'the watchdog (%s)' % ', '.join(e.get('action', '?') for e in recoveries) if recoveries else
        'bluetoothd (%d discovering events)' % len(restarts)))
    # nothing but the watchdog notices this stall (bluetoothd 5.66 and kernel 6.1 in the lab:
    # Discovering stays true and bluetoothd logs nothing about discovery until the restart)
    check([e.get('action') for e in recoveries][:1] == ['restart_discovery'], 'the watchdog did not restart the discovery: %r' % recoveries)
    stop_gateway(c, gw, gw_out, mqtt, 'stall')
    adv.signal(signal.SIGINT)
    adv.wait(20)
    adv.p.stdin.close()
