"""Bleak, the minimal one-shot read, handed the device's D-Bus path (by address
Bleak scans first, and a connected peripheral does not advertise). No `async with`:
that would disconnect the device on exit, though another process connected it.
usage: bleak_read.py ADDRESS DEVICE-PATH UUID"""
import asyncio
import sys

from bleak import BleakClient
from bleak.backends.device import BLEDevice


async def main(address, path, uuid):
    client = BleakClient(BLEDevice(address, None, {"path": path, "props": {}}))
    await client.connect()  # already connected: Bleak skips Device1.Connect
    print((await client.read_gatt_char(uuid)).hex(), flush=True)

asyncio.run(main(*sys.argv[1:4]))
