#!/usr/bin/env python3
"""Home Assistant's own client library against `bluectl proxy` (bus tier).

Run with the test virtualenv's python (Scripts/deps; aioesphomeapi pinned in
Scripts/requirements-test.txt). Each mode prints JSON lines on stdout; any
failure is an exception (exit 1) with its message on stderr.

  info HOST PORT [KEY]
      connect (hello), device_info, disconnect: one line with what Home
      Assistant reads from DeviceInfoResponse and HelloResponse. With KEY
      (base64), over the Noise encryption.
  refused HOST PORT [KEY]
      a connection that must fail (a wrong key, plaintext against an
      encrypted proxy): prints {"error": the aioesphomeapi exception's class}.
  adverts HOST PORT ADDRESS [SECONDS [KEY]]
      connect, subscribe to raw advertisements; prints {"subscribed": true}
      once subscribed, then one line for the first advertisement of ADDRESS
      (AA:BB:...), its data parsed by bluetooth-data-tools as Home Assistant
      does; a second device_info after it proves the connection still answers.
  garbage HOST PORT KIND
      a raw TCP client sending KIND (preamble, length, type, protobuf,
      before-hello): prints {"closed_by_server": true|false} after at most 10 s.
  gatt HOST PORT ADDRESS
      GATT through the proxy as Home Assistant's bleak-esphome does it, on
      the stand-in's heart-rate device: connect (V3 without cache), the
      services with handles, read the battery level, write the custom
      characteristic and read it back, read the heart-rate CCCD, errors for
      an unknown handle and a read-only characteristic; then notifications
      of the heart-rate measurement (start_notify, then the CCCD written as
      bleak-esphome writes it): prints {"notifying": true} and waits for one
      value; disconnect; prints one line with everything and the slot counts.
  slots HOST PORT ADDRESS...
      connects each address in turn (one more than the slots): one line with
      each connection's (connected, error), then disconnects them all.
  hold HOST PORT ADDRESS SECONDS
      connects, prints {"connected": true, "mtu": N}, then waits (at most
      SECONDS) for the proxy to report the device disconnected and prints
      {"connected": false, "error": N}.
  free HOST PORT
      subscribes to the connection slots: prints the first report.
  records HOST PORT ADDRESS OTHER
      BlueZ's records of a device: connect ADDRESS, pair, clear its cache
      (refused: connected and bonded), disconnect, unpair; then clear the
      cache of OTHER (neither connected nor bonded): one line with each answer.
  battery HOST PORT ADDRESS KEY GO_FILE
      over Noise (KEY, base64): connect, device_info, prints {"name": ...};
      waits (at most 120 s) for the file GO_FILE to exist (meanwhile the lab
      check refuses another client), then connects ADDRESS, reads its battery
      level (2a19), asks device_info again, disconnects: one line with both.
  pair-all HOST PORT ADDRESS...
      connects each address, then pairs them all at once (bluetooth_device_pair
      for each, gathered), disconnects them: one line with each [paired, error].
  scanner HOST PORT
      the scanner's state as Home Assistant follows it: subscribes to it and
      to raw advertisements, asks for a passive scan; one line with the
      states heard ([state, mode, configured_mode] each).
  scanner-follow HOST PORT COUNT
      subscribes to the scanner's state and to raw advertisements; prints
      each state heard as a line, and ends after COUNT (60 s at most).
"""
import asyncio
import json
import os
import socket
import sys

from aioesphomeapi import APIClient
from aioesphomeapi.core import BluetoothGATTAPIError
from aioesphomeapi.model import BluetoothScannerMode
from bluetooth_data_tools import int_to_bluetooth_address, parse_advertisement_data_tuple


def client(host, port, key=None):
    return APIClient(host, int(port), password=None, client_info="bluectl bus tier", noise_psk=key)


async def info(host, port, key=None):
    api = client(host, port, key)
    await api.connect(login=False)
    device = await api.device_info()
    version = api.api_version
    await api.disconnect()
    print(json.dumps({
        "name": device.name,
        "mac_address": device.mac_address,
        "bluetooth_mac_address": device.bluetooth_mac_address,
        "bluetooth_proxy_feature_flags": device.bluetooth_proxy_feature_flags,
        "feature_flags_compat": device.bluetooth_proxy_feature_flags_compat(version),
        "legacy_bluetooth_proxy_version": device.legacy_bluetooth_proxy_version,
        "api_version": [version.major, version.minor],
        "manufacturer": device.manufacturer,
    }), flush=True)


async def adverts(host, port, address, seconds="20", key=None):
    api = client(host, port, key)
    await api.connect(login=False)
    found = asyncio.get_running_loop().create_future()

    def on_advertisements(response):
        for adv in response.advertisements:
            if int_to_bluetooth_address(adv.address) == address and not found.done():
                found.set_result(adv)

    unsubscribe = api.subscribe_bluetooth_le_raw_advertisements(on_advertisements)
    print(json.dumps({"subscribed": True}), flush=True)
    adv = await asyncio.wait_for(found, float(seconds))
    name, uuids, service_data, manufacturer_data, tx_power = parse_advertisement_data_tuple((bytes(adv.data),))
    unsubscribe()
    again = await api.device_info()   # the connection still answers after the batches
    assert again.name, "no name in the second DeviceInfoResponse"
    await api.disconnect()
    print(json.dumps({
        "address": int_to_bluetooth_address(adv.address),
        "address_type": adv.address_type,
        "rssi": adv.rssi,
        "data": bytes(adv.data).hex(),
        "name": name,
        "service_uuids": sorted(uuids),
        "service_data": {k: v.hex() for k, v in service_data.items()},
        "manufacturer_data": {str(k): v.hex() for k, v in manufacturer_data.items()},
        "tx_power": tx_power,
    }), flush=True)


async def refused(host, port, key=None):
    api = client(host, port, key)
    try:
        await asyncio.wait_for(api.connect(login=False), 20)
    except Exception as err:  # the class says which refusal it was
        print(json.dumps({"error": type(err).__name__, "message": str(err)}), flush=True)
        return
    raise SystemExit("connected, but the connection should have been refused")


GARBAGE = {
    # a wrong preamble (0x01 is the Noise framing's, 0x42 nothing)
    "preamble": b"\x42\x03\x01abc",
    # a length beyond the 65,535-byte bound
    "length": b"\x00\xff\xff\x7f\x01",
    # a well-formed frame of a message type api.proto does not have
    "type": b"\x00\x00\xf3\x07",
    # a HelloRequest whose protobuf is cut off inside a field
    "protobuf": b"\x00\x03\x01\x0a\x10a",
    # a valid PingRequest before HelloRequest
    "before-hello": b"\x00\x00\x07",
}


def garbage(host, port, kind):
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(GARBAGE[kind])
        try:
            closed = s.recv(4096) == b""
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        except socket.timeout:
            closed = False
    print(json.dumps({"closed_by_server": closed}), flush=True)


def address_int(address):
    return int(address.replace(":", ""), 16)


async def connected_client(host, port, key=None):
    api = client(host, port, key)
    await api.connect(login=False)
    device = await api.device_info()
    return api, device.bluetooth_proxy_feature_flags_compat(api.api_version)


async def connect_device(api, flags, address, on_state=None, timeout=40):
    """bluetooth_device_connect as bleak-esphome calls it; returns the first (connected, mtu, error)."""
    states = []

    def record(connected, mtu, error):
        states.append((connected, mtu, error))
        if on_state:
            on_state(connected, mtu, error)

    await api.bluetooth_device_connect(address_int(address), record, timeout=timeout, feature_flags=flags,
                                       has_cache=False, address_type=0)
    return states[0]


def service_json(services):
    return [{
        "uuid": s.uuid, "handle": s.handle,
        "characteristics": [{
            "uuid": c.uuid, "handle": c.handle, "properties": c.properties,
            "descriptors": [{"uuid": d.uuid, "handle": d.handle} for d in c.descriptors],
        } for c in s.characteristics],
    } for s in services]


async def gatt_error(call):
    try:
        await call
    except BluetoothGATTAPIError as err:
        return err.error.error
    raise SystemExit("the request should have failed")


async def gatt(host, port, address):
    api, flags = await connected_client(host, port)
    free = []
    api.subscribe_bluetooth_connections_free(lambda f, limit, allocated: free.append([f, limit, list(allocated)]))
    connected, mtu, error = await connect_device(api, flags, address)
    assert connected, f"not connected: error {error}"
    addr = address_int(address)
    services = (await api.bluetooth_gatt_get_services(addr)).services
    chars = {c.uuid[4:8] if c.uuid.endswith("-0000-1000-8000-00805f9b34fb") else c.uuid: c
             for s in services for c in s.characteristics}
    battery = await api.bluetooth_gatt_read(addr, chars["2a19"].handle)
    custom = chars["12345678-1234-5678-1234-56789abcdef1"].handle
    await api.bluetooth_gatt_write(addr, custom, b"bye", True)
    written = await api.bluetooth_gatt_read(addr, custom)
    hrm = chars["2a37"]
    cccd = next(d for d in hrm.descriptors if d.uuid.startswith("00002902"))
    cccd_before = await api.bluetooth_gatt_read_descriptor(addr, cccd.handle)
    unknown_handle = await gatt_error(api.bluetooth_gatt_read(addr, 0xFFF0))
    read_only = await gatt_error(api.bluetooth_gatt_write(addr, chars["2a38"].handle, b"\x02", True))
    value = asyncio.get_running_loop().create_future()

    def on_notify(handle, data):
        if not value.done():
            value.set_result((handle, bytes(data)))

    await api.bluetooth_gatt_start_notify(addr, hrm.handle, on_notify)
    await api.bluetooth_gatt_write_descriptor(addr, cccd.handle, b"\x01\x00")
    print(json.dumps({"notifying": True}), flush=True)
    handle, data = await asyncio.wait_for(value, 30)
    api.bluetooth_gatt_stop_notify(addr, hrm.handle)
    await api.bluetooth_device_disconnect(addr)
    for _ in range(100):   # the slot is freed once the link is down
        if free and free[-1][0] == free[-1][1]:
            break
        await asyncio.sleep(0.1)
    await api.disconnect()
    print(json.dumps({
        "connected": connected, "mtu": mtu, "services": service_json(services),
        "battery": battery.hex(), "written": written.hex(), "cccd_before": cccd_before.hex(),
        "unknown_handle_error": unknown_handle, "read_only_error": read_only,
        "notified": {"handle": handle, "data": data.hex()}, "notify_handle": hrm.handle, "free": free,
    }), flush=True)


async def slots(host, port, *addresses):
    api, flags = await connected_client(host, port)
    results = [list(await connect_device(api, flags, a)) for a in addresses]
    for a, (connected, _, _) in zip(addresses, results):
        if connected:
            await api.bluetooth_device_disconnect(address_int(a))
    await api.disconnect()
    print(json.dumps({"results": [{"connected": c, "error": e} for c, _, e in results]}), flush=True)


async def hold(host, port, address, seconds, connect_timeout="40"):
    """Connects (waiting at most connect_timeout seconds), then holds the link for `seconds`."""
    api, flags = await connected_client(host, port)
    down = asyncio.get_running_loop().create_future()

    def on_state(connected, mtu, error):
        if not connected and not down.done():
            down.set_result(error)

    connected, mtu, error = await connect_device(api, flags, address, on_state, timeout=float(connect_timeout))
    assert connected, f"not connected: error {error}"
    print(json.dumps({"connected": True, "mtu": mtu}), flush=True)
    error = await asyncio.wait_for(down, float(seconds))
    print(json.dumps({"connected": False, "error": error}), flush=True)
    await api.disconnect()


async def free(host, port):
    api, _ = await connected_client(host, port)
    first = asyncio.get_running_loop().create_future()
    api.subscribe_bluetooth_connections_free(
        lambda f, limit, allocated: first.done() or first.set_result((f, limit, list(allocated))))
    f, limit, allocated = await asyncio.wait_for(first, 10)
    await api.disconnect()
    print(json.dumps({"free": f, "limit": limit, "allocated": allocated}), flush=True)


async def records(host, port, address, other):
    api, flags = await connected_client(host, port)
    addr = address_int(address)
    connected, _, error = await connect_device(api, flags, address)
    assert connected, f"not connected: error {error}"
    paired = await api.bluetooth_device_pair(addr)
    busy = await api.bluetooth_device_clear_cache(addr)
    await api.bluetooth_device_disconnect(addr)
    unpaired = await api.bluetooth_device_unpair(addr)
    cleared = await api.bluetooth_device_clear_cache(address_int(other))
    await api.disconnect()
    print(json.dumps({
        "pair": [paired.paired, paired.error], "clear_connected": [busy.success, busy.error],
        "unpair": [unpaired.success, unpaired.error], "clear_other": [cleared.success, cleared.error],
    }), flush=True)


async def battery(host, port, address, key, go_file):
    api, flags = await connected_client(host, port, key)
    name = (await api.device_info()).name
    print(json.dumps({"name": name}), flush=True)
    for _ in range(1200):
        if os.path.exists(go_file):
            break
        await asyncio.sleep(0.1)
    else:
        raise SystemExit(f"{go_file} did not appear in 120 s")
    connected, mtu, error = await connect_device(api, flags, address)
    assert connected, f"not connected: error {error}"
    addr = address_int(address)
    services = (await api.bluetooth_gatt_get_services(addr)).services
    level = next(c for s in services for c in s.characteristics if c.uuid.startswith("00002a19-"))
    value = await api.bluetooth_gatt_read(addr, level.handle)
    again = (await api.device_info()).name
    await api.bluetooth_device_disconnect(addr)
    await api.disconnect()
    print(json.dumps({"name": name, "battery": value.hex(), "name_again": again, "mtu": mtu}), flush=True)


async def pair_all(host, port, *addresses):
    api, flags = await connected_client(host, port)
    for address in addresses:
        connected, _, error = await connect_device(api, flags, address)
        assert connected, f"{address} not connected: error {error}"
    results = await asyncio.gather(*(api.bluetooth_device_pair(address_int(a)) for a in addresses))
    for address in addresses:
        await api.bluetooth_device_disconnect(address_int(address))
    await api.disconnect()
    print(json.dumps({"pair": [[r.paired, r.error] for r in results]}), flush=True)


async def scanner(host, port):
    api = client(host, port)
    await api.connect(login=False)
    states = []
    api.subscribe_bluetooth_scanner_state(
        lambda s: states.append([int(s.state), int(s.mode), int(s.configured_mode)]))
    api.subscribe_bluetooth_le_raw_advertisements(lambda response: None)
    for wanted in (1, 2):
        for _ in range(100):
            if len(states) >= wanted:
                break
            await asyncio.sleep(0.1)
        if wanted == 1:
            api.bluetooth_scanner_set_mode(BluetoothScannerMode.PASSIVE)
    await api.disconnect()
    print(json.dumps({"states": states}), flush=True)


async def scanner_follow(host, port, count):
    api = client(host, port)
    await api.connect(login=False)
    heard = asyncio.Queue()
    api.subscribe_bluetooth_scanner_state(lambda s: heard.put_nowait(s))
    api.subscribe_bluetooth_le_raw_advertisements(lambda response: None)
    for _ in range(int(count)):
        s = await asyncio.wait_for(heard.get(), 60)
        print(json.dumps({"state": int(s.state), "mode": int(s.mode)}), flush=True)
    await api.disconnect()


def main(argv):
    mode, args = argv[1], argv[2:]
    if mode == "info":
        asyncio.run(info(*args))
    elif mode == "refused":
        asyncio.run(refused(*args))
    elif mode == "adverts":
        asyncio.run(adverts(*args))
    elif mode == "garbage":
        garbage(*args)
    elif mode in ("gatt", "slots", "hold", "free", "records", "scanner"):
        asyncio.run(globals()[mode](*args))
    elif mode == "battery":
        asyncio.run(battery(*args))
    elif mode == "pair-all":
        asyncio.run(pair_all(*args))
    elif mode == "scanner-follow":
        asyncio.run(scanner_follow(*args))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
