#!/usr/bin/python3 -u
"""Proves the lab itself, independently of bluectl: BlueZ's own tools
(D-Bus, btmgmt, bluetoothctl) check the set-up, then the whole lab tier
(run-checks.py) runs with BLUECTL=refctl.py, a python3-dbus stand-in that
implements bluectl's CLI contract -- so every check is shown to pass against
a correct implementation. `Scripts/lab selftest [PATTERN...]` runs this
(SELFTEST_TIER=0: the set-up checks only).
Output: PASS/FAIL lines, then exactly one line "N passed, M failed, K skipped"."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from labcheck import bluez, lab  # noqa: E402
from labcheck.faults import adapter_identity  # noqa: E402
from labcheck.runner import Runner  # noqa: E402


def prop(path, iface, name):
    v = bluez.prop(path, iface, name)
    return None if v is None else bluez.plain(v)


def settings(c, index):
    """btmgmt's current settings of hciINDEX (btmgmt quits at EOF on stdin
    before the reply arrives: its stdin stays open)."""
    sleeper = subprocess.Popen(['sleep', '15'], stdout=subprocess.PIPE)
    try:
        out = subprocess.run(['btmgmt', '--index', str(index), 'info'], stdin=sleeper.stdout,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20).stdout.decode()
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b'').decode()
    finally:
        sleeper.kill()
        sleeper.wait()
    m = re.search(r'current settings: (.*)', out)
    s = m.group(1).strip() if m else ''
    c.note('hci%d settings: %s' % (index, s))
    return ' %s ' % s


def s_adapters(c):
    for hci, want in (('hci0', lab.PERIPH_ADDR), ('hci1', lab.CENTRAL_ADDR)):
        if prop('/org/bluez/' + hci, 'org.bluez.Adapter1', 'Address') != want:
            c.fail('%s address is not %s' % (hci, want))
        if prop('/org/bluez/' + hci, 'org.bluez.Adapter1', 'Powered') is not True:
            c.fail('%s not powered' % hci)


def s_peripheral_le_only(c):
    s = settings(c, 0)
    if ' le ' not in s:
        c.fail('LE off on hci0: %s' % s.strip())
    if ' br/edr ' in s:
        c.fail('BR/EDR still on on hci0: %s' % s.strip())
    if ' discoverable ' not in s:
        c.fail('hci0 not discoverable: %s' % s.strip())


def s_second_peripheral(c):
    # hci2: LE-only, its LE identity the static random address the guest reports
    if lab.PERIPH2_ADDR_TYPE != 'random':
        c.fail('PERIPH2_ADDR_TYPE=%s' % lab.PERIPH2_ADDR_TYPE)
    ident = adapter_identity(lab.PERIPH2_ADAPTER)
    if ident != '%s random' % lab.PERIPH2_ADDR:
        c.fail("%s's identity is %s, not %s random" % (lab.PERIPH2_ADAPTER, ident, lab.PERIPH2_ADDR))
    s = settings(c, 2)
    if not (' static-addr ' in s and ' br/edr ' not in s and ' powered ' in s):
        c.fail('hci2 settings: %s' % s.strip())
    n = prop('/org/bluez/hci2', 'org.bluez.LEAdvertisingManager1', 'ActiveInstances')
    if n not in (1, 2, 3):
        c.fail('hci2 ActiveInstances=%s, expected 1 to 3' % n)


def s_advertising(c):
    # the example advertisement, plus one or two pulse copies (they take turns)
    n = prop('/org/bluez/hci0', 'org.bluez.LEAdvertisingManager1', 'ActiveInstances')
    if n not in (1, 2, 3):
        c.fail('hci0 ActiveInstances=%s, expected 1 to 3' % n)


def s_bluetoothctl_show(c):
    try:
        o = subprocess.run(['bluetoothctl', 'show', lab.CENTRAL_ADDR], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=20).stdout.decode()
    except subprocess.TimeoutExpired as e:
        o = (e.stdout or b'').decode()
    c.echo(o)
    if 'Powered: yes' not in o:
        c.fail("bluetoothctl show %s: not 'Powered: yes'" % lab.CENTRAL_ADDR)


def s_bluetoothd_version(c):
    v = subprocess.run(['/usr/libexec/bluetooth/bluetoothd', '--version'], stdout=subprocess.PIPE).stdout.decode().strip()
    c.note('bluetoothd ' + v)
    if not v:
        c.fail('no bluetoothd version')


def main(patterns):
    r = Runner()
    for name, fn in (('lab_adapters', s_adapters), ('lab_peripheral_le_only', s_peripheral_le_only),
                     ('lab_advertising', s_advertising), ('lab_second_peripheral', s_second_peripheral),
                     ('lab_bluetoothctl_show', s_bluetoothctl_show), ('lab_bluetoothd_version', s_bluetoothd_version)):
        r.run(name, fn)
    if os.environ.get('SELFTEST_TIER', '1') == '1':
        # the tier against the reference implementation; its own summary line
        # is replaced by ours (import_results prefixes everything else)
        out = os.path.join(lab.LAB_OUT, 'refctl')
        os.makedirs(out, exist_ok=True)
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, LAB_OUT=out, BLUECTL=os.path.join(here, 'refctl.py'))
        with open(os.path.join(out, 'tier.log'), 'wb') as f:
            subprocess.run([lab.PY, '-u', os.path.join(here, 'run-checks.py')] + patterns, env=env,
                           stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        with open(os.path.join(out, 'tier.log'), encoding='utf-8', errors='replace') as f:
            lines = [l for l in f.read().splitlines() if not re.fullmatch(r'\d+ passed, \d+ failed(, \d+ skipped)?', l)]
        r.import_results('refctl:', lines)
    return 0 if r.summary() else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
