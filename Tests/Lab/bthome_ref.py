#!/usr/bin/python3
"""A second scanner for the lab's BTHome check: python3-dbus on the central adapter, its
own discovery (DuplicateData), and every distinct BTHome service data (0xFCD2) that
bluetoothd reports for one device decoded by Home Assistant's bthome-ble (from the
repository's .venv, Scripts/deps; mapped to bluectl's names as
Tests/SensorReference/gen_bthome.py maps it). One JSON line per frame:

    {"service_data": "40000002660803a00f", "bthome_ble": {"temperature_c": 21.5, ...}}

usage: bthome_ref.py ADAPTER ADDRESS [KEY]   (runs until SIGTERM; prints "ready" first)
       bthome_ref.py compare SCAN_OUT REF_OUT ADDRESS
the second: every `bluectl scan --json` line of ADDRESS with a BTHome frame against this
scanner's decoding of the same bytes: prints each comparison, exits 1 on a disagreement
or when a frame bluectl decoded was not seen here.
"""
import glob
import json
import os
import signal
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = glob.glob(os.path.join(REPO, ".venv/lib/python3*/site-packages")) + [os.path.join(REPO, "Tests/SensorReference")]
from gen_bthome import UUID, reading, service_info  # noqa: E402  (bthome-ble's mapping, one place)
from bthome_ble import BTHomeBluetoothDeviceData  # noqa: E402


def compare(scan_out, ref_out, address):
    theirs = {}
    for line in open(ref_out):
        if line.startswith("{"):
            frame = json.loads(line)
            theirs[frame["service_data"]] = frame["bthome_ble"]
    compared = failed = 0
    compared_frames = set()
    for line in open(scan_out):
        event = json.loads(line)
        data = (event.get("service_data") or {}).get(UUID)
        if event.get("address") != address or data is None or data in compared_frames:
            continue
        compared_frames.add(data)
        ours = event.get("sensor") or {"sensor_error": event.get("sensor_error")}
        if data not in theirs:
            print(f"FAIL {data}: bluectl {ours}; the python3-dbus scanner never saw these bytes")
            failed += 1
            continue
        reference = theirs[data]
        compared += 1
        mine = {k: v for k, v in ours.items() if k not in ("packet_id", "counter", "model")}
        same = reference is not None and set(mine) == set(reference) and all(
            abs(mine[k] - reference[k]) <= 1e-6 if isinstance(mine[k], float) and not isinstance(mine[k], bool) else mine[k] == reference[k]
            for k in mine)
        print(f"{'ok' if same else 'FAIL'} {data}: bluectl {mine}, bthome-ble {reference}")
        failed += 0 if same else 1
    print(f"{compared} distinct frames compared, {failed} disagreements")
    return compared > 0 and failed == 0


if sys.argv[1] == "compare":
    sys.exit(0 if compare(sys.argv[2], sys.argv[3], sys.argv[4].upper()) else 1)

adapter, address = sys.argv[1], sys.argv[2].upper()
key = bytes.fromhex(sys.argv[3]) if len(sys.argv) > 3 else None
adapter_path = "/org/bluez/" + adapter
device_path = adapter_path + "/dev_" + address.replace(":", "_")
seen = set()


def frames(properties):
    for uuid, data in (properties.get("ServiceData") or {}).items():
        if str(uuid).lower() != UUID:
            continue
        data = bytes(bytearray(data))
        if data in seen:
            continue
        seen.add(data)
        parser = BTHomeBluetoothDeviceData(key)
        decoded = reading(parser, parser.update(service_info(data, address, None, 0.0)))
        print(json.dumps({"service_data": data.hex(), "bthome_ble": decoded}), flush=True)


def changed(interface, properties, invalidated, path=None):
    if path == device_path and interface == "org.bluez.Device1":
        frames(properties)


def added(path, interfaces):
    if str(path) == device_path and "org.bluez.Device1" in interfaces:
        frames(interfaces["org.bluez.Device1"])


dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SystemBus()
bus.add_signal_receiver(changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", "org.bluez", path_keyword="path")
bus.add_signal_receiver(added, "InterfacesAdded", "org.freedesktop.DBus.ObjectManager", "org.bluez")
adapter_object = dbus.Interface(bus.get_object("org.bluez", adapter_path), "org.bluez.Adapter1")
adapter_object.SetDiscoveryFilter({"Transport": "le", "DuplicateData": dbus.Boolean(True)})
adapter_object.StartDiscovery()
loop = GLib.MainLoop()
GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
print("ready", flush=True)
loop.run()
adapter_object.StopDiscovery()
