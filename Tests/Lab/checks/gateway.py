"""`bluectl gateway` (issue 27) on the central (hci1), publishing to a
mosquitto of the guest's own (the host's package, seen through the guest's
root; the guest's loopback brought up first), hearing `bluectl advertise
--bthome` on the server adapter (hci3); faults injected into the stack."""
import json
import signal
import socket
import subprocess
import tempfile
import time

from labcheck import lab
from labcheck.faults import bluetoothd_segv, power_cycle
from labcheck.jsonlines import check
from labcheck.lab import CENTRAL, SERVER, SERVER_ADDR
from labcheck.procs import read_text
from labcheck.runner import lab_check
from labcheck.serving import need_server, wait_out

PORT = 1883


def start_broker(c):
    """lo up, then mosquitto on 127.0.0.1:PORT (no persistence: the gateway's own
    buffer is what is tested elsewhere); returns once it takes connections."""
    if c.run(['ip', 'link', 'set', 'lo', 'up']) != 0:
        c.fail('cannot bring the loopback interface up')
    conf = c.path('mosquitto.conf')
    with open(conf, 'w') as f:
        f.write('listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n' % PORT)
    broker = c.spawn(['mosquitto', '-c', conf], c.path('mosquitto.log'), show='mosquitto -c %s   (background)' % conf)
    end = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(('127.0.0.1', PORT), 1).close()
            return broker
        except OSError:
            if not broker.alive() or time.monotonic() >= end:
                c.echo(read_text(c.path('mosquitto.log')) + read_text(c.path('mosquitto.log') + '.err'))
                c.fail('mosquitto did not take connections on 127.0.0.1:%d' % PORT)
            time.sleep(0.2)


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


@lab_check('gateway_faults')
def _(c):
    """A gateway on hci1 hearing `bluectl advertise --bthome` on hci3 change its
    temperature once a second, publishing to a mosquitto in the guest: every
    value arrives, in order, before and after bluetoothd dies (SIGSEGV; the
    supervisor restarts it) and after hci1 is powered off and on; each fault is
    a scan_interrupted / scan_resumed pair on the events topic, and the
    gateway's process lives through both (SIGTERM: 143, status offline)."""
    need_server(c)
    start_broker(c)
    mqtt = c.path('mqtt.out')
    c.spawn(['mosquitto_sub', '-h', '127.0.0.1', '-p', str(PORT), '-v', '-t', 'bluectl/#'], mqtt,
            show='mosquitto_sub -v -t bluectl/#   (background)')
    state = tempfile.mkdtemp(prefix='gw-state-', dir='/tmp')
    config = c.path('gateway.json')
    with open(config, 'w') as f:
        json.dump({'advertisements': {'addresses': [SERVER_ADDR]}}, f)
    gw_out = c.path('gateway.out')
    args = ['gateway', '--broker', 'mqtt://127.0.0.1:%d' % PORT, '--id', 'lab', '--adapter', CENTRAL, '--config', config]
    gw = c.spawn(['env', 'STATE_DIRECTORY=' + state, lab.BLUECTL] + args, gw_out, limit=900,
                 show='STATE_DIRECTORY=%s bluectl %s   (background)' % (state, ' '.join(args)))
    if not wait_out(c, gw_out + '.err', 'scanning %s actively' % CENTRAL, 60, gw) or \
            not wait_out(c, gw_out + '.err', 'connected to mqtt://', 60, gw):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway did not start scanning and connect')
    # the scan runs before the advertiser starts: btvirt reports an advertisement when its set is enabled
    adv_out = c.path('advertise.out')
    adv_args = ['advertise', '--adapter', SERVER, '--bthome', 'temperature=0', '--json', '--duration', '800']
    adv = c.spawn([lab.BLUECTL] + adv_args, adv_out, stdin=subprocess.PIPE,
                  show='bluectl %s   (background; stdin: a pipe)' % ' '.join(adv_args))
    if not wait_out(c, adv_out, r'"event": ?"advertising"', 60, adv):
        c.echo(read_text(adv.err))
        c.fail('advertise --bthome printed no advertising line')

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

    if not wait_out(c, mqtt, r'"temperature_c": ?0', 60):
        c.echo(read_text(gw_out + '.err'))
        c.fail('the gateway published no record of %s' % SERVER_ADDR)
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
    events = received(mqtt, 'lab')[1]
    reasons = [e.get('reason') for e in events if e.get('event') == 'scan_interrupted']
    check(reasons == ['bluetoothd stopped (exited or crashed)', '%s was powered off' % CENTRAL], 'reasons %r' % reasons)
    gaps = [e.get('gap_s') for e in events if e.get('event') == 'scan_resumed']
    c.note('gaps (s): %r; watchdog recoveries: %d' % (gaps, sum(1 for e in events if e.get('event') == 'scan_recovery')))
    check(all(isinstance(g, (int, float)) and g > 0 for g in gaps), 'gaps %r' % gaps)
    gw.signal(signal.SIGTERM)
    rc = gw.wait(20)
    c.echo(read_text(gw_out + '.err'))
    if rc != 143:
        c.fail('the gateway exited %d on SIGTERM, expected 143' % rc)
    if not wait_out(c, mqtt, r'^bluectl/lab/status offline', 20):
        c.fail('no offline status after SIGTERM')
    adv.signal(signal.SIGINT)
    adv.wait(20)
    adv.p.stdin.close()
