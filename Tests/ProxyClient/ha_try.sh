#!/bin/bash
# A manual check, not part of CI (docs/proxy.md, "Adding it to Home Assistant"):
# a real Home Assistant adds `bluectl proxy` through its ESPHome integration
# (host, port, the Noise key) and sets up a BTHome sensor from the
# advertisements the proxy forwards, in the lab (real bluetoothd 5.66 under
# qemu). Home Assistant runs in the guest from a virtualenv on the host
# (HA_VENV, made here the first time: Python 3.13 (HA_PYTHON, pyenv's), Home
# Assistant 2025.4.4 and the pinned requirements of the integrations it loads,
# from PyPI; in the guest it runs with --skip-pip). Takes 10-20 minutes under TCG.
# --host: the same on this machine, with the BlueZ stand-in on a private bus in
# place of the lab (about a minute; BLUECTL_BIN required).
#   Tests/ProxyClient/ha_try.sh [--host] [--out DIR]   (BLUECTL_BIN: a built bluectl, else the lab builds one)
set -euo pipefail
cd "$(dirname "$0")/../.."
HA_VERSION=2025.4.4
HA_VENV=${HA_VENV:-/work/ha-venv}
HA_PYTHON=${HA_PYTHON:-$HOME/.pyenv/versions/3.13.0/bin/python3}
OUT=/tmp/ha-try-lab HOST=0
[ "${1:-}" = --host ] && { HOST=1; OUT=/tmp/ha-try-host; shift; }
[ "${1:-}" = --out ] && OUT=$2
if [ ! -x "$HA_VENV/bin/hass" ]; then
  "$HA_PYTHON" -m venv "$HA_VENV"
  tmp=$(mktemp -d)
  "$HA_VENV/bin/pip" download -q --no-deps "homeassistant==$HA_VERSION" -d "$tmp"
  unzip -q -o "$tmp"/homeassistant-*.whl homeassistant/package_constraints.txt -d "$tmp"
  # what the loaded integrations' manifests require (esphome, bluetooth, bthome and their dependencies);
  # and the frontend (without it Home Assistant starts in recovery mode); the constraints file is its own pins, without which pip backtracks through sdists for long
  "$HA_VENV/bin/pip" install -q -c "$tmp/homeassistant/package_constraints.txt" "$tmp"/homeassistant-*.whl \
    Pillow==11.1.0 aioesphomeapi==29.9.0 aiousbwatcher==1.1.1 bleak-esphome==2.12.0 bleak-retry-connector==3.9.0 \
    bleak==0.22.3 bluetooth-adapters==0.21.4 bluetooth-auto-recovery==1.4.5 bluetooth-data-tools==1.26.5 \
    bthome-ble==3.12.4 dbus-fast==2.43.0 esphome-dashboard-api==1.2.3 ha-ffmpeg==3.2.2 habluetooth==3.37.0 \
    hassil==2.2.3 home-assistant-intents==2025.3.28 ifaddr==0.2.0 mutagen==1.47.0 pymicro-vad==1.0.1 \
    pyserial==3.5 pyspeex-noise==1.0.2 zeroconf==0.146.0 home-assistant-frontend==20250411.0
  rm -rf "$tmp"
fi
if [ "$HOST" = 1 ]; then
  exec Tests/ProxyClient/ha/host.sh "$HA_VENV" "${BLUECTL_BIN:?--host needs BLUECTL_BIN}" "$OUT"
fi
LAB_MEM=${LAB_MEM:-2048} exec Scripts/lab run ${BLUECTL_BIN:+--no-build} --timeout 1800 --out "$OUT" Tests/ProxyClient/ha/guest.sh "$HA_VENV"
