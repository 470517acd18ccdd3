"""Bleak, the minimal one-shot read, handed the device's D-Bus path (by address
Bleak scans first, and a connected peripheral does not advertise). No `async with`:
that would disconnect the device on exit, though another process connected it.
Bleak also disconnects at the loop's teardown: the script leaves with os._exit.
usage: bleak_read.py ADDRESS DEVICE-PATH UUID"""
import asyncio
import os
import sys

from bleak import BleakClient
from bleak.backends.device import BLEDevice


async def main(address, path, uuid):
    client = BleakClient(BLEDevice(address, None, {"path": path, "props": {}}))
    await client.connect()  # already connected: Bleak skips Device1.Connect
    print((await client.read_gatt_char(uuid)).hex(), flush=True)
    # Bleak sends Device1.Disconnect when asyncio.run tears its loop down (even for a
    # connection another process made): leave without that, the device stays connected
    os._exit(0)

asyncio.run(main(*sys.argv[1:4]))
