"""Xiaomi MiBeacon (service data of 0xFE95) v2 to v5 from the thermometers and hygrometers,
plain and encrypted (right key, wrong key, no key, a counter that goes back), truncated
and malformed frames, each decoded by Home Assistant's xiaomi-ble (README here)."""

from __future__ import annotations

import logging
import struct

from cryptography.hazmat.primitives.ciphers.aead import AESCCM
from reference import differs_by, emit, from_update, service_info, uuid16
from xiaomi_ble import XiaomiBluetoothDeviceData

REFERENCE = "xiaomi-ble 1.21.2"
SERVICE = uuid16(0xFE95)
KEY = bytes.fromhex("814aac74c4f17b6c1581e1ab87816b99")
WRONG = bytes.fromhex("00112233445566778899aabbccddeeff")
#: A 1.5 V AAA cell in these two, a CR2032 in the others (xiaomi-ble's voltage guess).
AAA_MODELS = ("LYWSDCGQ", "CGDK3")
#: The extended counter of each address's encrypted frames: it only rises, so the Swift
#: test's counter check (one SensorDecoder per file) accepts every frame but the one meant
#: to go back.
EXT: dict[str, int] = {}


def obj(object_id: int, data: bytes) -> bytes:
    return struct.pack("<HB", object_id, len(data)) + data


def mac_bytes(address: str) -> bytes:
    return bytes.fromhex(address.replace(":", ""))


def frame(address: str, product: int, counter: int, payload: bytes, *, version: int = 5, include_mac: bool = False,
          capability: int | None = None, key: bytes | None = None, ext: int | None = None, control_extra: int = 0,
          with_object: bool = True) -> bytes:
    """A MiBeacon frame; with `key`, the payload AES-CCM encrypted as xiaomi-ble expects."""
    control = version << 12 | (0x40 if with_object else 0) | (0x10 if include_mac else 0) | control_extra
    control |= 0x20 if capability is not None else 0
    control |= 0x08 if key is not None else 0
    head = struct.pack("<HHB", control, product, counter)
    if include_mac:
        head += mac_bytes(address)[::-1]
    if capability is not None:
        head += bytes([capability])
    if key is None:
        return head + payload
    if ext is None:
        EXT[address] = EXT.get(address, 0) + 1
        ext = EXT[address]
    ext_bytes = ext.to_bytes(3, "little")
    nonce = mac_bytes(address)[::-1] + struct.pack("<HB", product, counter) + ext_bytes
    sealed = AESCCM(key, tag_length=4).encrypt(nonce, payload, b"\x11")
    return head + sealed[:-4] + ext_bytes + sealed[-4:]


def shortest_float32(value: float) -> float:
    """The decimal bluectl gives for a float32: the shortest that reads back as the same single."""
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        text = f"{struct.unpack('<f', packed)[0]:.{digits}g}"
        if struct.pack("<f", float(text)) == packed:
            return float(text)
    return struct.unpack("<f", packed)[0]


FRAMES: list[dict] = []


def add(case: str, address: str, data: bytes, *, key: bytes | None = None, given_key: bytes | None = None, **facts) -> None:
    FRAMES.append({"case": case, "address": address, "data": data, "key": given_key if given_key is not None else key,
                   **facts})


def build() -> None:
    a1, a2, a3, a4 = "A4:C1:38:11:22:33", "58:2D:34:35:93:21", "A4:C1:38:AA:BB:CC", "E4:AA:EC:01:02:03"
    # LYWSD03MMC, stock firmware: v5, encrypted, one object per frame.
    for n, t in enumerate((-400, -1, 0, 1, 215, 600, 999)):
        add(f"LYWSD03MMC v5 encrypted temperature {t / 10} °C", a1,
            frame(a1, 0x055B, n, obj(0x1004, struct.pack("<h", t)), key=KEY), key=KEY)
    for n, h in enumerate((0, 457, 1000)):
        add(f"LYWSD03MMC v5 encrypted humidity {h / 10} % (object 0x1006)", a1,
            frame(a1, 0x055B, 20 + n, obj(0x1006, struct.pack("<H", h)), key=KEY), key=KEY, humidity_1006=h)
    for n, b in enumerate((0, 57, 100)):
        add(f"LYWSD03MMC v5 encrypted battery {b} %", a1, frame(a1, 0x055B, 30 + n, obj(0x100A, bytes([b])), key=KEY),
            key=KEY, battery=b)
    add("LYWSD03MMC v5 encrypted, MAC included", a1,
        frame(a1, 0x055B, 40, obj(0x1004, struct.pack("<h", 231)), key=KEY, include_mac=True), key=KEY)
    add("LYWSD03MMC v5 encrypted, wrong key", a1, frame(a1, 0x055B, 41, obj(0x1004, struct.pack("<h", 231)), key=KEY),
        given_key=WRONG, want_error="authentication_failed")
    add("LYWSD03MMC v5 encrypted, no key", a1, frame(a1, 0x055B, 42, obj(0x1004, struct.pack("<h", 231)), key=KEY),
        given_key=b"", want_error="no_key")
    add("LYWSD03MMC v5 encrypted, one bit of the tag flipped", a1,
        flip(frame(a1, 0x055B, 43, obj(0x1004, struct.pack("<h", 231)), key=KEY), -1), key=KEY,
        want_error="authentication_failed")
    add("LYWSD03MMC v5 encrypted, counter lower than one accepted", a1,
        frame(a1, 0x055B, 1, obj(0x1004, struct.pack("<h", 231)), key=KEY, ext=0), key=KEY,
        want_error="counter_went_back")
    add("LYWSD03MMC v5 encrypted, truncated before its tag", a1,
        frame(a1, 0x055B, 44, obj(0x1004, struct.pack("<h", 231)), key=KEY)[:9], key=KEY)
    # MHO-C401 and CGG1: humidity and temperature+humidity objects.
    add("MHO-C401 v5 encrypted humidity 63.8 %", a3, frame(a3, 0x0387, 1, obj(0x1006, struct.pack("<H", 638)), key=KEY),
        key=KEY, humidity_1006=638)
    for n, (t, h) in enumerate(((-123, 0), (0, 1000), (255, 462))):
        add(f"CGG1 v4 encrypted temperature+humidity {t / 10} °C {h / 10} %", a3,
            frame(a3, 0x0347, 10 + n, obj(0x100D, struct.pack("<hH", t, h)), version=4, key=KEY), key=KEY)
    add("CGG1-ENCRYPTED v5 battery 84 %", a3, frame(a3, 0x0B48, 20, obj(0x100A, bytes([84])), key=KEY), key=KEY, battery=84)
    # LYWSDCGQ: v2 and v3, plain, MAC included.
    for n, (t, h) in enumerate(((-52, 201), (268, 999))):
        add(f"LYWSDCGQ v2 plain temperature+humidity {t / 10} °C {h / 10} %", a2,
            frame(a2, 0x01AA, n, obj(0x100D, struct.pack("<hH", t, h)), version=2, include_mac=True))
    add("LYWSDCGQ v3 plain battery 93 %", a2, frame(a2, 0x01AA, 5, obj(0x100A, bytes([93])), version=3, include_mac=True),
        battery=93)
    add("LYWSDCGQ v3 plain temperature -12.5 °C", a2,
        frame(a2, 0x01AA, 6, obj(0x1004, struct.pack("<h", -125)), version=3, include_mac=True))
    add("LYWSDCGQ v3 plain humidity 55.5 % (no rounding for this model)", a2,
        frame(a2, 0x01AA, 7, obj(0x1006, struct.pack("<H", 555)), version=3, include_mac=True))
    add("LYWSDCGQ v3, capability byte", a2,
        frame(a2, 0x01AA, 8, obj(0x1004, struct.pack("<h", 100)), version=3, include_mac=True, capability=0x08))
    add("LYWSD02 v5 plain two objects in one frame", a2,
        frame(a2, 0x045B, 9, obj(0x1004, struct.pack("<h", 222)) + obj(0x100A, bytes([40]))), battery=40)
    # MJWSD05MMC and friends: the 0x4Cxx and 0x48xx objects.
    for n, t in enumerate((-20.5, 0.0, 23.45, 58.0)):
        add(f"MJWSD05MMC v5 encrypted float temperature {t} °C (0x4C01)", a4,
            frame(a4, 0x2832, n, obj(0x4C01, struct.pack("<f", t)), key=KEY), key=KEY, float_temp=(t, 2))
    add("MJWSD05MMC v5 encrypted humidity 38 % (0x4C02)", a4, frame(a4, 0x2832, 10, obj(0x4C02, bytes([38])), key=KEY), key=KEY)
    add("MJWSD05MMC v5 encrypted battery 99 % (0x4C03)", a4, frame(a4, 0x2832, 11, obj(0x4C03, bytes([99])), key=KEY), key=KEY)
    add("MJWSD06MMC v5 encrypted float humidity 99.9 % (0x4C08)", a4,
        frame(a4, 0x55B5, 12, obj(0x4C08, struct.pack("<f", 99.9)), key=KEY), key=KEY, float_hum=99.9)
    add("MBS17 v5 encrypted float temperature -7.5 °C (0x4801)", a4,
        frame(a4, 0x5DB1, 13, obj(0x4801, struct.pack("<f", -7.5)), key=KEY), key=KEY, float_temp=(-7.5, 1))
    add("MBS17 v5 encrypted humidity 71 % (0x4802)", a4, frame(a4, 0x5DB1, 14, obj(0x4802, bytes([71])), key=KEY), key=KEY)
    add("MBS17 v5 encrypted battery 12 % (0x4803)", a4, frame(a4, 0x5DB1, 15, obj(0x4803, bytes([12])), key=KEY), key=KEY)
    add("MBS17 float temperature 21.37 °C in 0x4801 (xiaomi-ble rounds to 0.1)", a4,
        frame(a4, 0x5DB1, 16, obj(0x4801, struct.pack("<f", 21.37)), key=KEY), key=KEY, float_temp=(21.37, 1))
    add("MJWSD05MMC float temperature NaN", a4, frame(a4, 0x2832, 17, obj(0x4C01, struct.pack("<f", float("nan"))), key=KEY),
        key=KEY, want_error="invalid", why="xiaomi-ble gives NaN; bluectl refuses a float object that is not a finite number")
    # Frames bluectl and xiaomi-ble both leave undecoded, or fail on.
    add("header of 4 bytes", a2, bytes.fromhex("5020aa01"))
    add("unknown product 0x9999", a2, frame(a2, 0x9999, 1, obj(0x1004, struct.pack("<h", 100))))
    add("plant sensor HHCCJCY01 (0x0098): not a thermometer", a2, frame(a2, 0x0098, 1, obj(0x1008, bytes([33]))),
        want_error="unsupported")
    add("mesh frame", a2, frame(a2, 0x055B, 1, obj(0x1004, struct.pack("<h", 100)), control_extra=0x80))
    add("MiBeacon version 1", a2, frame(a2, 0x055B, 1, obj(0x1004, struct.pack("<h", 100)), version=1))
    add("MiBeacon version 6", a2, frame(a2, 0x055B, 1, obj(0x1004, struct.pack("<h", 100)), version=6),
        want_error="unsupported")
    add("frame without an object", a2, frame(a2, 0x055B, 1, b"", with_object=False))
    add("MAC in the frame is not the advertiser's", a2,
        frame("11:22:33:44:55:66", 0x01AA, 1, obj(0x1004, struct.pack("<h", 100)), version=3, include_mac=True))
    add("v3 encrypted (legacy, no tag), no key", a2,
        frame(a2, 0x01AA, 1, bytes(5) + b"\x01\x02\x03", version=3, control_extra=0x08))
    add("object length past the end", a2, frame(a2, 0x01AA, 2, bytes.fromhex("041009d200"), version=3))
    add("two bytes after the object", a2, frame(a2, 0x01AA, 3, obj(0x1004, struct.pack("<h", 100)) + b"\x00\x00", version=3),
        want_error="truncated")
    add("temperature object of 3 bytes", a2, frame(a2, 0x01AA, 4, obj(0x1004, b"\x01\x02\x03"), version=3))
    add("battery object 0x4803 of 2 bytes", a2, frame(a2, 0x2832, 5, obj(0x4803, b"\x50\x00")), want_error="invalid",
        why="xiaomi-ble reads the first byte of a 1-byte object sent with 2; bluectl refuses an object of the wrong length")
    add("object 0x4c14 (mode) only", a2, frame(a2, 0x2832, 6, obj(0x4C14, b"\x01")))
    add("I/O capability field", a2, frame(a2, 0x055B, 7, b"\x00" + obj(0x1004, struct.pack("<h", 100)), capability=0x28),
        want_error="unsupported")


def flip(data: bytes, index: int) -> bytes:
    b = bytearray(data)
    b[index] ^= 0x01
    return bytes(b)


def main() -> None:
    logging.disable(logging.CRITICAL)
    build()
    for f in FRAMES:
        address, data = f["address"], f["data"]
        key = f["key"]
        parser = XiaomiBluetoothDeviceData(bindkey=key or None)
        update = parser.update(service_info(address, None, service_data={SERVICE: data}))
        ref = from_update(update)
        model = update.devices[None].model if None in update.devices else None
        keys = {address: key.hex()} if key else None
        common = {"service_data": {SERVICE: data}, "keys": keys}
        notes: list[str] = []
        want = f.get("want_error")
        if want in ("no_key", "authentication_failed", "invalid") and not ref:
            emit(f["case"], REFERENCE, address, expected_error=want,
                 note="xiaomi-ble gives no value either" if want != "invalid" else None, **common)
            continue
        if want is not None and ref:
            why = {
                "counter_went_back": "xiaomi-ble does not check the encryption counter; bluectl refuses one lower than "
                                     "one already accepted from the device (a replayed frame)",
                "unsupported": "bluectl decodes the MiBeacon versions 2-5 of thermometers and hygrometers, without the "
                               "I/O capability field (2 bytes in Xiaomi's specification, 1 in xiaomi-ble)",
                "truncated": "xiaomi-ble ignores bytes after the last object; bluectl reports a frame that ends "
                             "inside an object header",
            }.get(want) or f["why"]
            emit(f["case"], REFERENCE, address, expected_error=want, note=why, reference_said=ref, **common)
            continue
        if not ref:
            emit(f["case"], REFERENCE, address, expected=None, **common)
            continue
        expected = dict(ref)
        if "voltage_v" in expected and "battery" in f:
            b = f["battery"]
            guess = 0.8 + 0.8 * (b / 100) if model in AAA_MODELS else 2.2 + 0.9 * (b / 100)
            if differs_by(expected["voltage_v"], None, guess):
                del expected["voltage_v"]
                notes.append(f"xiaomi-ble adds voltage {guess:.4f} V, guessed from the battery percentage; not in the frame")
        if "humidity_1006" in f and model in ("LYWSD03MMC", "MHO-C401"):
            h = f["humidity_1006"]
            if expected.get("humidity_percent") == int(h / 10) and int(h / 10) != h / 10:
                expected["humidity_percent"] = h / 10
                notes.append(f"xiaomi-ble truncates this model's humidity to whole percent ({int(h / 10)}, "
                             f"'jagged stair stepping'); the object carries {h / 10}")
        if "float_temp" in f:
            value, digits = f["float_temp"]
            ours = shortest_float32(value)
            said = expected.get("temperature_c")
            if said != ours and differs_by(said, ours, round(struct.unpack("<f", struct.pack("<f", value))[0], digits)):
                expected["temperature_c"] = ours
                notes.append(f"xiaomi-ble rounds this float object to {digits} decimals ({said}); bluectl gives the "
                             f"shortest decimal of the float32 ({ours})")
        if "float_hum" in f:
            ours = shortest_float32(f["float_hum"])
            said = expected.get("humidity_percent")
            if said != ours and differs_by(said, ours, struct.unpack("<f", struct.pack("<f", f["float_hum"]))[0]):
                expected["humidity_percent"] = ours
                notes.append(f"xiaomi-ble reports the float32's binary value ({said}); bluectl the shortest decimal "
                             f"that reads back as the same float32 ({ours})")
        expected.update({"format": "xiaomi", "encrypted": bool(key) and data[0] & 0x08 != 0})
        if model:
            expected["model"] = model
        emit(f["case"], REFERENCE, address, expected=expected, note="; ".join(notes) or None, **common)


if __name__ == "__main__":
    main()
