"""Bleak notification consumer, handed the device's D-Bus path: one hex line per value
(flushed), exits after COUNT. Bleak 3 uses StartNotify by default; `acquire` asks for
AcquireNotify (bluez={"use_start_notify": False}).
usage: bleak_notify.py start|acquire ADDRESS DEVICE-PATH UUID COUNT"""
import asyncio
import os
import sys

from bleak import BleakClient
from bleak.backends.device import BLEDevice


async def main(mode, address, path, uuid, want):
    done = asyncio.Event()
    got = 0

    def value(_, data):
        nonlocal got
        sys.stdout.write(data.hex() + "\n")
        sys.stdout.flush()
        got += 1
        if got >= want:
            done.set()
    # no `async with`: that would disconnect the device on exit, though another process connected it
    client = BleakClient(BLEDevice(address, None, {"path": path, "props": {}}))
    await client.connect()  # already connected: Bleak skips Device1.Connect
    await client.start_notify(uuid, value, bluez={"use_start_notify": mode == "start"})
    await done.wait()
    await client.stop_notify(uuid)
    # Bleak sends Device1.Disconnect when asyncio.run tears its loop down (even for a
    # connection another process made): leave without that, the device stays connected
    os._exit(0)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
