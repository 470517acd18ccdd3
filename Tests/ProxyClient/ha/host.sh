#!/bin/bash
# The host half of Tests/ProxyClient/ha_try.sh --host (a manual check, not CI):
# the same run as guest.sh without the lab, on a private bus with the BlueZ
# stand-in (Tests/BusTierTests/Fixtures) in place of bluetoothd: the proxy on
# its hci0, `bluectl advertise --bthome` on its hci1 (the stand-in's adapters
# hear each other's advertisements), a real Home Assistant adding the proxy.
#   host.sh HA_VENV BLUECTL OUT       (PROXY_LOG_LEVEL: the proxy's BLUECTL_LOG_LEVEL, default info)
set -u
HA_VENV=$1 BLUECTL=$2 OUT=$3
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$REPO/Tests/ProxyClient/ha
W=$(mktemp -d /tmp/ha-try.XXXXXX)
PORT=16053 HA_PORT=18123
mkdir -p "$OUT"
. "$HERE/common.sh"
trap 'stop_all; rm -rf "$W"' EXIT

dbus-daemon --config-file="$REPO/Tests/BusTierTests/Fixtures/bus.conf" --nofork --nopidfile \
  --address="unix:path=$W/bus" --print-address=1 > "$W/bus.addr" & pids+=($!)
for _ in $(seq 50); do [ -s "$W/bus.addr" ] && break; sleep 0.1; done
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$W/bus
/usr/bin/python3 -m dbusmock --system --template "$REPO/Tests/BusTierTests/Fixtures/bluez_standin.py" \
  --logfile "$W/standin.log" -p '{"adapters": [
    {"name": "hci0", "address": "00:AA:01:00:00:23", "alias": "host-proxy", "powered": true},
    {"name": "hci1", "address": "00:AA:01:00:00:24", "alias": "sensor", "powered": true}]}' \
  > "$OUT/standin.out" 2>&1 & pids+=($!)
for _ in $(seq 120); do
  busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" call org.bluez / org.freedesktop.DBus.Mock StandInVersion \
    > /dev/null 2>&1 && break
  sleep 0.5
done

start_proxy hci0 $PORT host-proxy || exit 1
start_bthome hci1
ha_config $HA_PORT

# Home Assistant on another machine: no system bus for it (its Bluetooth integration takes none of the adapters)
DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent "$HA_VENV/bin/hass" -c "$W/config" --skip-pip > "$OUT/ha.out" 2>&1 & pids+=($!)
"$HA_VENV/bin/python" "$HERE/ha_drive.py" http://127.0.0.1:$HA_PORT 127.0.0.1 $PORT "$(cat "$W/api.key")" \
  --bthome 00:AA:01:00:00:24 > "$OUT/drive.out" 2> "$OUT/drive.err"
rc=$?
cat "$OUT/drive.out"; tail -20 "$OUT/drive.err"
echo "--- proxy log"; cat "$OUT/proxy.err"
exit $rc
