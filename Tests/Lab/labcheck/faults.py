"""Fault injection and the stack's state, for checks on either peripheral
(hci0 = lab.PERIPH_ADAPTER, hci2 = lab.PERIPH2_ADAPTER): adapter power,
SIGSEGV to bluetoothd, the lab agent's refusal, bonds and bluetoothd's
storage."""
import os
import re
import signal
import subprocess
import time

import dbus

from . import bluez, lab
from .procs import read_text
from .runner import crashes_since, supervisor_mark, supervisor_since, wait_peripheral_back
from .serving import wait_out


def adapter_power(c, adapter, on):
    """Adapter1.Powered through bluetoothd, then wait (20 s) until it reads
    back. Powering a peripheral's adapter off drops its links: the central
    sees the device disconnect."""
    c.note('%s powered %s' % (adapter, 'on' if on else 'off'))
    try:
        bluez.set_prop('/org/bluez/' + adapter, 'org.bluez.Adapter1', 'Powered', dbus.Boolean(on, variant_level=1))
    except dbus.DBusException as e:
        c.echo('cannot power %s %s: %s' % (adapter, 'on' if on else 'off', e))
        return False
    return bluez._wait('/org/bluez/' + adapter, 'org.bluez.Adapter1', 'Powered', on, 20, c.echo)


def power_cycle(c, adapter, off_secs=2):
    """Off, off_secs seconds, on."""
    if not adapter_power(c, adapter, False):
        return False
    time.sleep(off_secs)
    return adapter_power(c, adapter, True)


def adapter_identity(adapter):
    """'ADDR public|random': the kernel's LE identity (debugfs). For hci2 it
    is the static random address, while bluetoothd's Adapter1.Address still
    shows the controller's public one. None when unreadable."""
    try:
        with open('/sys/kernel/debug/bluetooth/%s/identity' % adapter) as f:
            for line in f:
                m = re.match(r'^([0-9a-f:]{17}) \(type ([01])\)', line)
                if m:
                    return '%s %s' % (m.group(1).upper(), 'random' if m.group(2) == '1' else 'public')
    except OSError:
        pass
    return None


def bluetoothd_segv(c, secs=150):
    """SIGSEGV to bluetoothd, as its own 5.66 crashes do; then wait (secs)
    until the guest's supervisor has restarted it and brought both
    peripherals (hci0, hci2) up again: its "peripheral ready again" line in
    supervisor.log after the death's. A "deliberate:" line goes to
    supervisor.log first, so the kill is not counted as a crash."""
    mark = supervisor_mark()
    try:
        pid = int(subprocess.check_output(['pidof', 'bluetoothd']).split()[0])
    except (subprocess.CalledProcessError, ValueError, IndexError):
        c.echo('bluetoothd is not running')
        return False
    with open(lab.SUPERVISOR_LOG, 'a') as f:
        f.write('%s deliberate: check %s sends SIGSEGV to bluetoothd (%d)\n' % (_uptime(), c.name, pid))
    c.note('kill -SEGV %d (bluetoothd)' % pid)
    os.kill(pid, signal.SIGSEGV)
    end = time.monotonic() + secs
    while not any('killed by signal 11' in l for l in supervisor_since(mark)):
        if time.monotonic() >= end:
            c.echo('bluetoothd did not die of SIGSEGV')
            return False
        time.sleep(0.2)
    while not any('peripheral ready again' in l for l in supervisor_since(mark)):
        if time.monotonic() >= end:
            c.echo('the supervisor did not bring the peripherals up again: %s;' % ';'.join(supervisor_since(mark)))
            return False
        time.sleep(0.5)
    c.note('supervisor: %s;' % ';'.join(supervisor_since(mark)))
    return True


def _uptime():
    with open('/proc/uptime') as f:
        return f.read().split()[0]


class AgentRefusesNext:
    """The lab agent refuses its next request while this is in effect
    (`with AgentRefusesNext(): ...`): /run/lab/agent-refuse-next."""
    FLAG = '/run/lab/agent-refuse-next'

    def __enter__(self):
        open(self.FLAG, 'w').close()
        return self

    def __exit__(self, *_):
        try:
            os.remove(self.FLAG)
        except OSError:
            pass


class PasskeyDevice:
    """While in effect (`with PasskeyDevice(c, '123456'): ...`), the
    peripheral's side of a pairing is a device with a fixed passkey: a second
    lab agent (Scripts/lab.d/guest/agent.py KeyboardOnly PASSKEY) is
    bluetoothd's default agent, so both sides enter the passkey and its
    RequestPasskey answers PASSKEY. On exit the agent is stopped and the lab's
    own agent is the default again."""

    def __init__(self, c, passkey):
        self.c, self.passkey = c, passkey
        self.log = c.path('passkey-agent.log')

    def __enter__(self):
        agent = os.path.join(lab.REPO, 'Scripts/lab.d/guest/agent.py')
        self.proc = self.c.spawn([lab.PY, '-Iu', agent, 'KeyboardOnly', self.passkey], self.log, self.log + '.err', limit=600,
                                 show='agent.py KeyboardOnly %s   (background: the peripheral side\'s default agent)' % self.passkey)
        if not wait_out(self.c, self.log, 'agent registered', 60, self.proc):
            self.c.fail('the passkey agent did not register: %s' % read_text(self.log + '.err')[-300:])
        return self

    def asked(self):
        """The RequestPasskey lines the agent logged."""
        return [l for l in read_text(self.log).splitlines() if 'RequestPasskey' in l]

    def __exit__(self, *_):
        self.proc.end()


def forget_bond(c, dev=None, its=None):
    """Forget the bond on both sides (default: the hci0 peripheral): the
    peripheral's adapter keeps its own, and with it a later connection is
    encrypted with the old keys, or the pairing asked again (and refused,
    when the lab agent is told to) before bluectl acts."""
    dev, its = dev or lab.DEV, its or lab.PERIPH_ADAPTER
    for addr, adapter, who in ((dev, None, 'the central did not know %s' % dev),
                               (lab.CENTRAL_ADDR, its, 'the peripheral (%s) did not know the central' % its)):
        try:
            if not bluez.remove(addr, adapter):
                c.note('remove: ' + who)
        except dbus.DBusException as e:
            c.note('remove: %s (%s)' % (who, e.get_dbus_name()))


# bluetoothd's storage of a device: /var/lib/bluetooth/ADAPTER_ADDR/DEVICE_ADDR/info
# and the GATT cache /var/lib/bluetooth/ADAPTER_ADDR/cache/DEVICE_ADDR.
# ADAPTER_ADDR is the adapter's address as bluetoothd knows it (the central:
# lab.CENTRAL_ADDR). An LE bond's key is [LongTermKey] (ours, for when we are
# central: legacy pairing) and/or [PeripheralLongTermKey] (= the deprecated
# [SlaveLongTermKey], both written by 5.66); a central that paired with LE
# Secure Connections stores only the latter (seen in the lab); BR/EDR: [LinkKey].
def _groups(path):
    try:
        with open(path) as f:
            return re.findall(r'^\[([A-Za-z]+)\]', f.read(), re.M)
    except OSError:
        return None


def has_bond(adapter_addr, dev):
    g = _groups('/var/lib/bluetooth/%s/%s/info' % (adapter_addr, dev)) or []
    return any(k in g for k in ('LongTermKey', 'PeripheralLongTermKey', 'SlaveLongTermKey', 'LinkKey'))


def has_gatt_cache(adapter_addr, dev):
    """The cache file outlives RemoveDevice: bluetoothd 5.66 (src/device.c
    device_remove_stored) removes its [Attributes] and [ServiceRecords]
    groups and keeps the rest ([General] Name=...). So "a GATT cache" =
    [Attributes]."""
    return 'Attributes' in (_groups('/var/lib/bluetooth/%s/cache/%s' % (adapter_addr, dev)) or [])


def storage_note(c, adapter_addr, dev):
    """What bluetoothd stores of the device, as a note."""
    info = _groups('/var/lib/bluetooth/%s/%s/info' % (adapter_addr, dev))
    cache = _groups('/var/lib/bluetooth/%s/cache/%s' % (adapter_addr, dev))
    fmt = lambda g: 'absent' if g is None else ''.join('[%s]' % x for x in g)
    c.note('storage of %s on %s: info %s; cache %s' % (dev, adapter_addr, fmt(info), fmt(cache)))


def peripheral_back_after_crash(c, mark, secs=90):
    """True when bluetoothd died by itself (not by bluetoothd_segv) since mark
    and the supervisor has brought the peripheral side up again (waits secs
    for its "peripheral ready again" line after the last death). One
    bluetoothd serves both sides here, so its crash also takes down the
    peripheral's GATT application until then: a remote device's would stay.
    False when there was no such crash, or the peripheral did not come back."""
    if crashes_since(mark) == 0:
        return False
    back = wait_peripheral_back(mark, secs)
    lines = ';'.join(supervisor_since(mark))
    if back:
        c.note('bluetoothd died during the check; supervisor: %s;' % lines)
    else:
        c.echo('the supervisor did not bring the peripherals up again: %s;' % lines)
    return back
