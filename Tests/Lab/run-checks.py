#!/usr/bin/python3 -u
"""The lab test tier: bluectl against the real BlueZ stack in the lab VM.
Run it with `Scripts/lab test` (one boot runs every check). Each check runs
bluectl, captures its real stdout/stderr/exit status and asserts on them
(and, where it matters, on what bluetoothd says happened: labcheck/bluez.py).

usage: run-checks.py [PATTERN...]   shell globs on check names, e.g. 'scan_*'
                                    (default: the tier)
soak_* and extra_* checks (minutes long, or hard on bluetoothd 5.66) run only
when a pattern that starts with soak_ / extra_ names them. Output: PASS/FAIL/
SKIP lines, then exactly one line "N passed, M failed, K skipped".
Env (from Scripts/lab): BLUECTL CENTRAL CENTRAL_ADDR PERIPH_ADDR LAB_OUT REPO
PERIPHERAL2 PERIPH2_ADDR PERIPH2_ADDR_TYPE SERVER SERVER_ADDR [LAB_GATT_CHANNELS].
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from labcheck import runner  # noqa: E402

# The checks, in run order (each module registers its own in order).
import checks.adapters_scan    # noqa: E402,F401  adapters, usage, scan
import checks.central          # noqa: E402,F401  connect .. unknown_device
import checks.sharing          # noqa: E402,F401  several subscribers of one characteristic
import checks.long_runs        # noqa: E402,F401  soak_*, extra_* (only when named)
import checks.periph2          # noqa: E402,F401  the second peripheral (static random address)
import checks.lifecycle        # noqa: E402,F401  devices, pair, trust, block, unpair
import checks.two_devices      # noqa: E402,F401  two devices at once, faults injected
import checks.peripheral_role  # noqa: E402,F401  bluectl serve / advertise on hci3
import checks.l2cap            # noqa: E402,F401  L2CAP channels: bluectl both ways, l2test
import checks.gateway          # noqa: E402,F401  bluectl gateway to a broker in the guest, faults
import checks.proxy            # noqa: E402,F401  proxy_gatt, proxy_bleak, proxy_noise, proxy_killed_client: aioesphomeapi, bleak-esphome through bluectl proxy

# The tier (the default pattern) must run exactly this many checks, so a
# check dropped by accident fails it.
TIER_CHECKS = 58

if __name__ == '__main__':
    sys.exit(runner.main(sys.argv[1:], TIER_CHECKS))
