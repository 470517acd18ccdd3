#!/usr/bin/env python3
"""Writes api.proto cut to the messages `bluectl proxy` reads or writes (and the
types their fields use), for Scripts/gen-esphome-proto: Swift for all 171
messages of ESPHome's API, each an exported public type, added about 2.5 MB to
the static binary, most of it for entities a Bluetooth proxy never has. The
service block goes too (protoc-gen-swift writes no services). The message-id
table is still made from the whole file: every id is known, generated or not.

usage: trim.py FULL_API_PROTO OUT_API_PROTO
"""
import re
import sys

# What ProxySessionMachine and ProxyServer use by type (docs/proxy.md).
KEEP = [
    "HelloRequest", "HelloResponse", "AuthenticationRequest", "AuthenticationResponse",
    "DisconnectRequest", "DisconnectResponse", "PingRequest", "PingResponse",
    "DeviceInfoRequest", "DeviceInfoResponse", "ListEntitiesRequest", "ListEntitiesDoneResponse",
    "SubscribeBluetoothLEAdvertisementsRequest", "UnsubscribeBluetoothLEAdvertisementsRequest",
    "BluetoothLERawAdvertisementsResponse", "SubscribeBluetoothConnectionsFreeRequest",
    "BluetoothConnectionsFreeResponse",
    # GATT through the proxy (ProxyLinks): connect/disconnect/pair/unpair/clear cache,
    # services, reads, writes, notifications, and their answers.
    "BluetoothDeviceRequest", "BluetoothDeviceConnectionResponse", "BluetoothDevicePairingResponse",
    "BluetoothDeviceUnpairingResponse", "BluetoothDeviceClearCacheResponse",
    "BluetoothGATTGetServicesRequest", "BluetoothGATTGetServicesResponse", "BluetoothGATTGetServicesDoneResponse",
    "BluetoothGATTReadRequest", "BluetoothGATTReadResponse", "BluetoothGATTWriteRequest", "BluetoothGATTWriteResponse",
    "BluetoothGATTReadDescriptorRequest", "BluetoothGATTWriteDescriptorRequest",
    "BluetoothGATTNotifyRequest", "BluetoothGATTNotifyResponse", "BluetoothGATTNotifyDataResponse",
    "BluetoothGATTErrorResponse",
    # The scanner's state and mode (reported; BlueZ's discovery is always active).
    "BluetoothScannerStateResponse", "BluetoothScannerSetModeRequest",
]

FIELD = re.compile(r"^\s*(?:repeated\s+|optional\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s+[a-z_][A-Za-z0-9_]*\s*=\s*\d+")


def blocks(lines):
    """Top-level items: (kind, name, lines with their leading comments) or (None, None, lines)."""
    items, pending, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(message|enum|service)\s+(\w+)\s*\{", line)
        if not m:
            if line.strip().startswith("//"):
                pending.append(line)
            else:
                items.append((None, None, pending + [line]))
                pending = []
            i += 1
            continue
        depth, body = 0, []
        while True:
            body.append(lines[i])
            depth += lines[i].count("{") - lines[i].count("}")
            i += 1
            if depth == 0:
                break
        items.append((m.group(1), m.group(2), pending + body))
        pending = []
    return items + ([(None, None, pending)] if pending else [])


def main(src, dst):
    lines = open(src).read().split("\n")
    items = blocks(lines)
    defined = {name: (kind, body) for kind, name, body in items if kind in ("message", "enum")}
    keep, todo = set(), list(KEEP)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        if name not in defined:
            sys.exit(f"trim.py: {name} is not a top-level message or enum of {src}")
        keep.add(name)
        for line in defined[name][1]:
            m = FIELD.match(line)
            if m and m.group(1) in defined:
                todo.append(m.group(1))
    out = []
    for kind, name, body in items:
        if kind is None:
            out += body
        elif kind != "service" and name in keep:
            out += body
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out))
    open(dst, "w").write(text)
    print(f"trim.py: {len(keep)} of {len(defined)} messages and enums kept: {', '.join(sorted(keep))}", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
