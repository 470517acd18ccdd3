#!/bin/bash
# The lab half of Tests/ProxyClient/ha_try.sh (a manual check, not CI): in the
# guest, a real Home Assistant (its virtualenv on the host, seen over 9p) adds
# `bluectl proxy` on the central (hci1) through its ESPHome integration (host,
# port, the Noise key) and hears `bluectl advertise --bthome` on the server
# adapter (hci3) through it. Everything goes to LAB_OUT/ha-try/.
#   guest.sh [HA_VENV]
set -u
HA_VENV=${1:-/work/ha-venv}   # the host's path: the guest sees the host's / read-only
HERE=$REPO/Tests/ProxyClient/ha
W=/tmp/ha-try
OUT=$LAB_OUT/ha-try
mkdir -p "$W" "$OUT"
. "$HERE/common.sh"
trap stop_all EXIT
ip link set lo up || { echo "cannot bring lo up"; exit 1; }
# Home Assistant's zeroconf (the ESPHome config flow asks for it) joins mDNS's multicast group: without
# a route for it (the guest has only loopback) that fails, ENODEV, and the flow with it
ip route add 224.0.0.0/4 dev lo || { echo "cannot add a multicast route"; exit 1; }

start_bthome "$SERVER"
start_proxy "$CENTRAL" 6053 lab-proxy || exit 1
cat "$OUT/proxy.err"
ha_config 8123
KEY=$(cat "$W/api.key")

# Home Assistant on another machine would see no local adapter: it gets no system bus here either
# (its Bluetooth integration would otherwise take the lab's adapters). Its Python is pyenv's under
# /root, which the lab covers with a tmpfs: uncovered in a mount namespace of its own.
unshare -m bash -c '
  umount /root || exit 1
  export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent HOME='"$W"'
  t0=$(date +%s)
  "'"$HA_VENV"'/bin/hass" -c "'"$W"'/config" --skip-pip > "'"$OUT"'/ha.out" 2>&1 & ha=$!
  "'"$HA_VENV"'/bin/python" "'"$HERE"'/ha_drive.py" http://127.0.0.1:8123 127.0.0.1 6053 "'"$KEY"'" --bthome "'"$SERVER_ADDR"'"
  rc=$?
  echo "ha_drive exit $rc after $(( $(date +%s) - t0 )) s"
  kill $ha; wait $ha
  exit $rc' > "$OUT/drive.out" 2> "$OUT/drive.err"
rc=$?
cat "$OUT/drive.out"; tail -20 "$OUT/drive.err"
echo "--- proxy log"; cat "$OUT/proxy.err"
echo "--- Home Assistant log (esphome, bluetooth, bthome, warnings)"
grep -E 'esphome|bluetooth|bthome|WARNING|ERROR' "$OUT/ha.out" | head -200
exit $rc
