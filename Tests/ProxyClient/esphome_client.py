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
"""
import asyncio
import json
import socket
import sys

from aioesphomeapi import APIClient
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
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
