#!/bin/bash
# Runs scenario.py against the BlueZ stand-in (Tests/BusTierTests/Fixtures/
# bluez_standin.py) on a private dbus-daemon, as the bus tier starts them
# (PrivateBus.swift): adapter hci1 and a peripheral whose GATT database
# mirrors the lab's service (Scripts/lab.d/guest/periph.py).
#
# usage: standin.sh OUT.json     (unattended; cleans up its processes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fixtures=$here/../BusTierTests/Fixtures
out=${1:?usage: standin.sh OUT.json}
py=/usr/bin/python3          # dbus-python lives there
addr=00:AA:01:00:00:00

dir=$(mktemp -d /tmp/conformance.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dbus-daemon --config-file="$fixtures/bus.conf" --address="unix:path=$dir/system_bus_socket" \
    --nofork --print-address=1 </dev/null >"$dir/address" 2>"$dir/daemon.err" &
pids+=($!)
for _ in $(seq 100); do [ -s "$dir/address" ] && break; sleep 0.05; done
export DBUS_SYSTEM_BUS_ADDRESS=$(head -1 "$dir/address")
[ -n "$DBUS_SYSTEM_BUS_ADDRESS" ] || { echo "standin.sh: dbus-daemon did not start: $(cat "$dir/daemon.err")" >&2; exit 1; }

"$py" -m dbusmock --system --template "$fixtures/bluez_standin.py" --logfile "$dir/standin.log" \
    -p '{"adapters": [{"name": "hci1", "address": "00:AA:01:01:00:01", "alias": "central", "powered": true}]}' \
    </dev/null >"$dir/standin.out" 2>&1 &
pids+=($!)

"$py" - "$addr" <<'PY'
import sys, time
import dbus
addr = sys.argv[1]
bus = dbus.SystemBus()
for _ in range(300):
    try:
        mock = dbus.Interface(bus.get_object('org.bluez', '/'), 'org.freedesktop.DBus.Mock')
        mock.StandInVersion()
        break
    except dbus.exceptions.DBusException:
        time.sleep(0.05)
else:
    sys.exit('standin.sh: the stand-in did not come up')
mock.AddAdvertiser('hci1', addr, {'Name': 'bluectl-lab', 'AddressType': 'public',
                                  'AdvertisingFlags': dbus.ByteArray(b'\x06')}, signature='ssa{sv}')
base = 'b1ec7100-0000-4000-8000-%012x'
svc = mock.AddGattService('hci1', addr, base % 0, True)
ay = lambda b: dbus.ByteArray(b)
stream = mock.AddGattCharacteristic(svc, base % 1, ['read', 'notify'], ay(bytes(20)))
mock.AddGattDescriptor(stream, '2902', ['read', 'write'], ay(b'\0\0'))
mock.AddGattCharacteristic(svc, base % 2, ['read', 'write', 'write-without-response'], ay(bytes(10)))
mock.AddGattCharacteristic(svc, base % 3, ['read', 'write'], ay(bytes(i & 0xff for i in range(300))))
ind = mock.AddGattCharacteristic(svc, base % 4, ['indicate'], ay(b''))
mock.AddGattDescriptor(ind, '2902', ['read', 'write'], ay(b'\0\0'))
mock.AddGattCharacteristic(svc, base % 5, ['write-without-response'], ay(b''))  # the sink (write streams)
PY

"$py" "$here/scenario.py" hci1 "$addr" "$out" </dev/null
