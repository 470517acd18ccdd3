#!/usr/bin/env python3
"""A plain Bleak program through `bluectl proxy`, as Home Assistant runs one.

Home Assistant's ESPHome integration hands a Bluetooth proxy to Bleak through
bleak-esphome: habluetooth's BluetoothManager (set up, it replaces
bleak.BleakScanner and bleak.BleakClient with its wrappers), and for each
proxy an aioesphomeapi connection, bleak-esphome's connect_scanner (the
remote scanner, its connection slots, its raw advertisement subscription)
and the scanner set up and registered with the manager. This does the same
without Home Assistant, then runs ordinary Bleak code. Run with the test
virtualenv's python (bleak-esphome pinned in Scripts/requirements-test.txt);
JSON lines on stdout, any failure an exception (exit 1).

  run HOST PORT ADDRESS
      prints {"subscribed": true} once the proxy's scanner is registered,
      then: bleak.BleakScanner finds ADDRESS (its advertisement data),
      bleak.BleakClient connects, lists the services, reads the battery
      level (2a19), writes "bye" to the test characteristic (the one
      esphome_client.py's gatt writes) and reads it back, starts
      notifications of the heart-rate measurement (2a37) and prints
      {"notifying": true}, waits for one value, stops them, disconnects;
      one line with everything.
"""
import asyncio
import json
import os
import sys

import bleak
import habluetooth
from bleak_esphome import connect_scanner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from esphome_client import client  # noqa: E402  (the one APIClient maker)

BATTERY_LEVEL = "00002a19-0000-1000-8000-00805f9b34fb"
HEART_RATE_MEASUREMENT = "00002a37-0000-1000-8000-00805f9b34fb"
TEST_CHARACTERISTIC = "12345678-1234-5678-1234-56789abcdef1"


class Manager(habluetooth.BluetoothManager):
    """Home Assistant's manager subclass hands each advertisement to the
    integrations that match it; this program has none."""

    def _discover_service_info(self, service_info):
        pass


async def register_proxy(host, port):
    """The proxy as Home Assistant's ESPHome integration registers it
    (bleak_esphome.APIConnectionManager._on_connect, which has port 6053
    fixed): returns the manager, the API client, bleak-esphome's client data
    and the calls that unregister the scanner."""
    manager = Manager()
    habluetooth.set_manager(manager)
    await manager.async_setup()
    api = client(host, port)
    await api.connect(login=False)
    device_info = await api.device_info()
    client_data = connect_scanner(api, device_info, True)
    scanner = client_data.scanner
    teardown = [scanner.async_setup(), manager.async_register_scanner(scanner)]
    return manager, api, client_data, teardown


async def find(address, seconds):
    """bleak.BleakScanner (habluetooth's wrapper once the manager is set up)
    until ADDRESS advertises: its BLEDevice and AdvertisementData."""
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(device, advertisement):
        if device.address == address and not found.done():
            found.set_result((device, advertisement))

    async with bleak.BleakScanner(detection_callback=on_advertisement):
        return await asyncio.wait_for(found, seconds)


async def run(host, port, address):
    manager, api, client_data, teardown = await register_proxy(host, port)
    print(json.dumps({"subscribed": True, "source": client_data.scanner.source}), flush=True)
    device, advertisement = await find(address, 60)
    notified = asyncio.get_running_loop().create_future()

    def on_notify(characteristic, data):
        if not notified.done():
            notified.set_result((characteristic.uuid, bytes(data)))

    async with bleak.BleakClient(device, timeout=40) as ble:
        services = [{"uuid": s.uuid, "handle": s.handle,
                     "characteristics": [{"uuid": c.uuid, "handle": c.handle, "properties": c.properties,
                                          "descriptors": [{"uuid": d.uuid, "handle": d.handle} for d in c.descriptors]}
                                         for c in s.characteristics]}
                    for s in ble.services]
        battery = await ble.read_gatt_char(BATTERY_LEVEL)
        await ble.write_gatt_char(TEST_CHARACTERISTIC, b"bye", response=True)
        written = await ble.read_gatt_char(TEST_CHARACTERISTIC)
        await ble.start_notify(HEART_RATE_MEASUREMENT, on_notify)
        print(json.dumps({"notifying": True}), flush=True)
        uuid, data = await asyncio.wait_for(notified, 30)
        await ble.stop_notify(HEART_RATE_MEASUREMENT)
        backend = type(ble._backend).__name__
        mtu = ble.mtu_size
    for undo in teardown:
        undo()
    await api.disconnect()
    manager.async_stop()
    print(json.dumps({
        "address": device.address, "name": advertisement.local_name, "rssi": advertisement.rssi,
        "service_uuids": sorted(advertisement.service_uuids),
        "manufacturer_data": {str(k): v.hex() for k, v in advertisement.manufacturer_data.items()},
        "service_data": {k: v.hex() for k, v in advertisement.service_data.items()}, "tx_power": advertisement.tx_power,
        "source": device.details.get("source") if isinstance(device.details, dict) else None,
        "backend": backend, "mtu": mtu, "services": services,
        "battery": battery.hex(), "written": written.hex(),
        "notified": {"uuid": uuid, "data": data.hex()},
    }), flush=True)


def main(argv):
    mode, args = argv[1], argv[2:]
    if mode != "run":
        raise SystemExit(f"unknown mode {mode}")
    asyncio.run(run(*args))


if __name__ == "__main__":
    main(sys.argv)
