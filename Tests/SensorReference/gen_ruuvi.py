"""Ruuvi data formats 5 and 3 (manufacturer data of 0x0499) across their ranges, each frame
decoded by Home Assistant's ruuvitag-ble and by Ruuvi's own ruuvitag-sensor (README here).

The four format 5 and three format 3 test vectors of ruuvi/ruuvi-sensor-protocols come
first; the unit tests (RuuviDecoderTests) check the same vectors against the specification's
own tables.
"""

from __future__ import annotations

import logging
import struct

from reference import differs_by, emit, from_update, service_info
from ruuvitag_ble import RuuvitagBluetoothDeviceData
from ruuvitag_sensor.decoder import get_decoder

ADDRESS = "CB:B8:33:4C:88:4F"
MAC = bytes.fromhex("CBB8334C884F")
HA = "ruuvitag-ble 0.4.0"
RUUVI = "ruuvitag-sensor 4.1.0"
NA16, NA8 = object(), object()


def df5(temp=4860, hum=21396, pres=50044, ax=4, ay=-4, az=1036, mv=1377, tx=22, move=66, seq=205, mac=MAC):
    """Format 5 from raw field values (the specification's units)."""
    return struct.pack(">BhHHhhhHBH", 5, temp, hum, pres, ax, ay, az, (mv << 5) | tx, move, seq) + mac


def df3(hum=41, temp=0x1A, frac=0x1E, pres=52766, ax=-1000, ay=-1726, az=714, mv=2899):
    """Format 3 from raw field values."""
    return struct.pack(">BBBBHhhhH", 3, hum, temp, frac, pres, ax, ay, az, mv)


FRAMES: list[tuple[str, bytes]] = [
    ("df5 spec vector: valid data", bytes.fromhex("0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")),
    ("df5 spec vector: maximum values", bytes.fromhex("057FFFFFFEFFFE7FFF7FFF7FFFFFDEFEFFFECBB8334C884F")),
    ("df5 spec vector: minimum values (issue #30)", bytes.fromhex("058001000000008001800180010000000000CBB8334C884F")),
    ("df5 spec vector: invalid values", bytes.fromhex("058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF")),
]
for t in (-32767, -8000, -1000, -451, -1, 0, 1, 4301, 4861, 17000, 32767):
    FRAMES.append((f"df5 temperature raw {t} ({t * 5 / 1000} °C)", df5(temp=t)))
FRAMES.append(("df5 temperature not available (0x8000)", df5(temp=-32768)))
for h in (0, 1, 10010, 21397, 40000, 65534):
    FRAMES.append((f"df5 humidity raw {h} ({h * 25 / 10000} %)", df5(hum=h)))
FRAMES.append(("df5 humidity not available (0xFFFF)", df5(hum=0xFFFF)))
for p in (0, 51325, 65534):
    FRAMES.append((f"df5 pressure raw {p} ({(p + 50000) / 100} hPa)", df5(pres=p)))
FRAMES.append(("df5 pressure not available (0xFFFF)", df5(pres=0xFFFF)))
FRAMES.append(("df5 acceleration -1000/1000/-32767 mg", df5(ax=-1000, ay=1000, az=-32767)))
FRAMES.append(("df5 acceleration y not available (0x8000)", df5(ay=-32768)))
for mv, tx in ((0, 0), (1400, 22), (2046, 30), (2047, 5), (1000, 31)):
    FRAMES.append((f"df5 power info battery {mv} tx {tx}", df5(mv=mv, tx=tx)))
for move in (0, 254, 255):
    FRAMES.append((f"df5 movement counter {move}", df5(move=move)))
for seq in (0, 65534, 65535):
    FRAMES.append((f"df5 measurement sequence {seq}", df5(seq=seq)))
FRAMES.append(("df5 mac not available", df5(mac=b"\xff" * 6)))
FRAMES.append(("df5 truncated to 23 bytes", df5()[:23]))
FRAMES.append(("df5 truncated to 1 byte", df5()[:1]))
FRAMES.append(("df5 with a byte too many", df5() + b"\x00"))
FRAMES.append(("empty manufacturer data", b""))
FRAMES.append(("data format 6 (Ruuvi Air, not decoded)", bytes([6]) + bytes(19)))
FRAMES += [
    ("df3 spec vector: valid data", bytes.fromhex("03291A1ECE1EFC18F94202CA0B53")),
    ("df3 spec vector: maximum values", bytes.fromhex("03FF7F63FFFF7FFF7FFF7FFFFFFF")),
    ("df3 spec vector: minimum values", bytes.fromhex("0300FF6300008001800180010000")),
    ("df3 spec example -1.69 °C", df3(temp=0x81, frac=0x45)),
    ("df3 spec example +1.69 °C", df3(temp=0x01, frac=0x45)),
    ("df3 -0.50 °C", df3(temp=0x80, frac=50)),
    ("df3 -40.00 °C", df3(temp=0x80 | 40, frac=0)),
    ("df3 humidity 200 (100 %)", df3(hum=200)),
    ("df3 humidity 201 (100.5 %)", df3(hum=201)),
    ("df3 temperature fraction 100 (invalid)", df3(frac=100)),
    ("df3 acceleration -32768", df3(ax=-32768)),
    ("df3 truncated to 13 bytes", df3()[:13]),
]


def fields(data: bytes) -> dict | None:
    """The raw fields the generator encoded, for predicting the references' rounding."""
    if len(data) == 24 and data[0] == 5:
        v = struct.unpack(">BhHHhhhHBH6B", data)
        return {"temp": v[1], "hum": v[2], "pres": v[3], "acc": v[4:7], "mv": v[7] >> 5, "tx": v[7] & 31,
                "move": v[8], "seq": v[9]}
    if len(data) == 14 and data[0] == 3:
        v = struct.unpack(">BBBBHhhhH", data)
        return {"hum": v[1], "temp": v[2], "frac": v[3], "pres": v[4], "acc": v[5:8], "mv": v[8]}
    return None


def ours_df5(f: dict) -> dict:
    """bluectl's reading of a format 5 frame, from the specification (what the notes compare to)."""
    na = lambda cond, value: None if cond else value  # noqa: E731
    out = {
        "temperature_c": na(f["temp"] == -32768, f["temp"] * 5 / 1000),
        "humidity_percent": na(f["hum"] == 0xFFFF, f["hum"] * 25 / 10000),
        "pressure_hpa": na(f["pres"] == 0xFFFF, (f["pres"] + 50000) / 100),
        "voltage_v": na(f["mv"] == 2047, (f["mv"] + 1600) / 1000),
        "tx_power_dbm": na(f["tx"] == 31, f["tx"] * 2 - 40),
        "movement_counter": na(f["move"] == 255, f["move"]),
    }
    for axis, raw in zip("xyz", f["acc"]):
        out[f"acceleration_{axis}_g"] = na(raw == -32768, raw / 1000)
    return out


def ha_expected(data: bytes) -> tuple[dict | None, list[str], list[str]]:
    """ruuvitag-ble's reading in bluectl's names, its documented differences explained."""
    try:
        ref = from_update(RuuvitagBluetoothDeviceData().update(service_info(ADDRESS, "Ruuvi 884F", {0x0499: data})))
    except (ValueError, IndexError, struct.error) as error:
        return None, [f"ruuvitag-ble raises {type(error).__name__}: {error}"], []
    f = fields(data)
    if not ref or f is None:
        return (ref or None), [], []
    notes: list[str] = []
    expected = dict(ref)
    ref_acc = [expected.pop(f"ha:acceleration_{a}") for a in "xyz"]
    total = expected.pop("ha:acceleration_total")
    notes.append(f"ruuvitag-ble adds acceleration_total {total} m/s² (a magnitude it computes, not a field of the frame)")
    for axis, raw, said in zip("xyz", f["acc"], ref_acc):
        ours = None if raw == -32768 and data[0] == 5 else raw / 1000
        predicted = None if -32768 in f["acc"] else round(raw * 0.00980665, 2)
        if not differs_by(said, ours, predicted):
            expected[f"acceleration_{axis}_g"] = said  # unexplained: the Swift test reports it
            continue
        expected[f"acceleration_{axis}_g"] = ours
        if said is None and ours is not None:
            notes.append(f"acceleration_{axis}: ruuvitag-ble drops all three axes when one is 0x8000; "
                         "the specification marks each field on its own")
    if any(raw != -32768 for raw in f["acc"]):
        notes.append(f"ruuvitag-ble reports acceleration in m/s² rounded to 0.01 ({ref_acc}); bluectl in g, as sent (mg / 1000)")
    if data[0] == 5:
        ours = ours_df5(f)
        for key, digits in (("temperature_c", 2), ("humidity_percent", 2), ("pressure_hpa", 2)):
            said, mine = expected.get(key), ours[key]
            if said != mine and mine is not None and differs_by(said, mine, round(mine, digits)):
                expected[key] = mine
                notes.append(f"{key}: ruuvitag-ble rounds to {digits} decimals ({said}); the frame's step gives {mine}")
        said = expected.pop("ha:movement_counter")
        expected["movement_counter"] = ours["movement_counter"] if said == 255 else said
        if said == 255:
            notes.append("movement_counter: ruuvitag-ble reports 255, which the specification reserves for not available")
        return expected, notes, ["tx_power_dbm"]
    # format 3
    if expected.get("humidity_percent") is None and f["hum"] > 200:
        expected["humidity_percent"] = f["hum"] / 2
        notes.append(f"humidity: ruuvitag-ble drops values over 200 (100 %); the specification's maximum vector "
                     f"sends 255 as 127.5 %, and bluectl decodes {f['hum']} as {f['hum'] / 2}")
    return expected, notes, []


def ruuvi_expected(data: bytes) -> tuple[dict | None, list[str], list[str]]:
    """ruuvitag-sensor's reading in bluectl's names, its documented differences explained."""
    if not data or data[0] not in (3, 5):
        return None, [], []
    decoded = get_decoder(data[0]).decode_data(data.hex().upper())
    if decoded is None:
        return None, [], []
    f = fields(data)
    notes: list[str] = []
    expected = {
        "temperature_c": decoded["temperature"], "humidity_percent": decoded["humidity"],
        "pressure_hpa": decoded["pressure"],
        "voltage_v": None if decoded["battery"] is None else decoded["battery"] / 1000,
    }
    for axis in "xyz":
        raw = decoded[f"acceleration_{axis}"]
        expected[f"acceleration_{axis}_g"] = None if raw is None else raw / 1000
    if f is None:
        # ruuvitag-sensor reads the first 24 bytes of a longer frame; the specification fixes the length
        return expected, ["ruuvitag-sensor decodes the first 24 bytes of a longer frame"], []
    if data[0] == 3:
        if f["frac"] > 99:
            return expected, [f"ruuvitag-sensor adds a fraction of {f['frac']} hundredths; the specification allows 0…99"], []
        return expected, notes, []
    ours = ours_df5(f)
    expected["tx_power_dbm"] = decoded["tx_power"]
    expected["movement_counter"] = decoded["movement_counter"]
    for key, digits in (("temperature_c", 2), ("humidity_percent", 2), ("pressure_hpa", 2)):
        said, mine = expected[key], ours[key]
        if said != mine and mine is not None and differs_by(said, mine, round(mine, digits)):
            expected[key] = mine
            notes.append(f"{key}: ruuvitag-sensor rounds to {digits} decimals ({said}); the frame's step gives {mine}")
    for axis, raw in zip("xyz", f["acc"]):
        key = f"acceleration_{axis}_g"
        if expected[key] is None and raw != -32768:
            expected[key] = raw / 1000
            notes.append(f"{key}: ruuvitag-sensor drops all three axes when one is 0x8000; the specification marks each on its own")
    if decoded["movement_counter"] == 255:
        expected["movement_counter"] = None
        notes.append("movement_counter: ruuvitag-sensor reports 255, which the specification reserves for not available")
    return expected, notes, []


def main() -> None:
    logging.disable(logging.CRITICAL)  # ruuvitag-sensor logs a traceback for each frame it cannot decode
    for case, data in FRAMES:
        for reference, expect in ((HA, ha_expected), (RUUVI, ruuvi_expected)):
            expected, notes, extra = expect(data)
            common = {"manufacturer_data": {0x0499: data}, "name": "Ruuvi 884F"}
            if expected is None:
                emit(case, reference, ADDRESS, expected=None, note="; ".join(notes) or None, **common)
                continue
            if data and data[0] not in (3, 5):
                emit(case, reference, ADDRESS, expected_error="unsupported",
                     note="bluectl decodes data formats 5 and 3 (issue 25); this one is reported as unsupported",
                     reference_said=expected, **common)
                continue
            if data and data[0] == 5 and len(data) > 24:
                emit(case, reference, ADDRESS, expected_error="invalid",
                     note="; ".join(notes + ["bluectl refuses a format 5 frame that is not 24 bytes"]),
                     reference_said=expected, **common)
                continue
            if data and data[0] == 3 and len(data) == 14 and data[3] > 99:
                emit(case, reference, ADDRESS, expected_error="invalid",
                     note="; ".join(notes + ["bluectl refuses a fraction over 99 (no temperature from garbage)"]),
                     reference_said=expected, **common)
                continue
            expected.update({"format": "ruuvi", "encrypted": False})
            emit(case, reference, ADDRESS, expected=expected, extra_ok=extra or None,
                 note="; ".join(notes) or None, **common)


if __name__ == "__main__":
    main()
