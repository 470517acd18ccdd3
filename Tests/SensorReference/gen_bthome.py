#!/usr/bin/env python3
"""BTHome v2 frames across the format, decoded by Home Assistant's bthome-ble.

Prints one JSON line per frame (Tests/SensorReference/README.md): the published examples
of bthome.io/format and /encryption, every object id at its edges (zero, one, the smallest
and largest raw value, negatives), repeated objects, every event, text and raw of several
lengths, encrypted frames with the right key, a wrong key and none, altered and truncated
frames, counters that repeat and go back. `expected` is bthome-ble's reading in bluectl's
names; where bluectl differs on purpose, `expected` is bluectl's, `note` says why and
`reference_gives` what bthome-ble gives (docs/sensors.md lists the differences).

With --theengs: decodes the frames that carry a device name with Theengs Decoder too and
prints, instead of frames, where it disagrees with bthome-ble (a report, not a test).
"""
import datetime
import importlib.metadata
import json
import logging
import sys

logging.disable(logging.CRITICAL)  # bthome-ble logs every frame it refuses

from bthome_ble import BTHomeBluetoothDeviceData  # noqa: E402
from bthome_ble.parser import EncryptionScheme  # noqa: E402
from cryptography.hazmat.primitives.ciphers.aead import AESCCM  # noqa: E402
from habluetooth import BluetoothServiceInfoBleak  # noqa: E402

REFERENCE = "bthome-ble " + importlib.metadata.version("bthome-ble")
UUID = "0000fcd2-0000-1000-8000-00805f9b34fb"
ADDRESS = "54:48:E6:8F:80:A5"  # bthome.io/encryption's example
KEY = "231d39c1d7cc1ab1aee224cd096db932"
WRONG_KEY = "231d39c1d7cc1ab1aee224cd096db933"

# bthome-ble's (device class, unit) -> bluectl's key (docs/sensors.md)
SENSORS = {
    ("battery", "%"): "battery_percent", ("temperature", "°C"): "temperature_c",
    ("humidity", "%"): "humidity_percent", ("pressure", "mbar"): "pressure_hpa",
    ("illuminance", "lx"): "illuminance_lux", ("mass", "kg"): "mass_kg", ("mass", "lb"): "mass_lb",
    ("dew_point", "°C"): "dew_point_c", ("count", None): "count", ("energy", "kWh"): "energy_kwh",
    ("power", "W"): "power_w", ("voltage", "V"): "voltage_v", ("pm25", "µg/m³"): "pm25_ug_m3",
    ("pm10", "µg/m³"): "pm10_ug_m3", ("carbon_dioxide", "ppm"): "co2_ppm",
    ("volatile_organic_compounds", "µg/m³"): "tvoc_ug_m3", ("moisture", "%"): "moisture_percent",
    ("rotation", "°"): "rotation_deg", ("distance", "mm"): "distance_mm", ("distance", "m"): "distance_m",
    ("duration", "s"): "duration_s", ("current", "A"): "current_a", ("speed", "m/s"): "speed_m_s",
    ("uv_index", None): "uv_index", ("volume", "L"): "volume_l", ("volume", "mL"): "volume_ml",
    ("volume_flow_rate", "m³/h"): "volume_flow_rate_m3_h", ("gas", "m³"): "gas_m3", ("water", "L"): "water_l",
    ("timestamp", None): "timestamp", ("acceleration", "m/s²"): "acceleration_m_s2",
    ("gyroscope", "°/s"): "gyroscope_deg_s", ("text", None): "text", ("raw", None): "raw",
    ("volume_storage", "L"): "volume_storage_l", ("conductivity", "µS/cm"): "conductivity_us_cm",
    ("direction", "°"): "direction_deg", ("precipitation", "mm"): "precipitation_mm", ("channel", None): "channel",
    ("rotational_speed", "rpm"): "rotational_speed_rpm", ("light_level", None): "light_level",
    ("settings_revision", None): "settings_revision",
}
BINARY = {
    "battery": "battery_low", "battery_charging": "battery_charging", "carbon_monoxide": "carbon_monoxide",
    "cold": "cold", "connectivity": "connectivity", "door": "door", "garage_door": "garage_door",
    "gas": "gas_detected", "generic": "generic_boolean", "heat": "heat", "light": "light", "lock": "lock",
    "moisture": "wet", "motion": "motion", "moving": "moving", "occupancy": "occupancy", "opening": "opening",
    "plug": "plug", "power": "power_on", "presence": "presence", "problem": "problem", "running": "running",
    "safety": "safety", "smoke": "smoke", "sound": "sound", "tamper": "tamper", "vibration": "vibration",
    "window": "window",
}
IGNORED = {"signal_strength", "packet_id"}  # not measurements in bluectl (packet_id: SensorReading.packetID)


def service_info(data, address, name, time):
    return BluetoothServiceInfoBleak(
        name=name or address, address=address, rssi=-60, manufacturer_data={}, service_data={UUID: data},
        service_uuids=[UUID], source="local", device=None, advertisement=None, connectable=False, time=time,
        tx_power=None)


def ours(base, key, device_class):
    """bthome-ble names a repeated quantity class_1, class_2, ...; bluectl key, key_2, ..."""
    postfix = key[len(device_class):]
    return base if postfix in ("", "_1") else base + postfix


def reading(parser, update):
    """bthome-ble's update in bluectl's names; None when it decoded nothing."""
    out = {}
    for dkey, value in update.entity_values.items():
        description = update.entity_descriptions[dkey]
        device_class = str(description.device_class.value)
        if device_class in IGNORED:
            continue
        unit = description.native_unit_of_measurement
        unit = unit.value if unit is not None else None
        native = value.native_value
        if isinstance(native, datetime.datetime):
            native = int(native.timestamp())
        out[ours(SENSORS[(device_class, unit)], dkey.key, device_class)] = native
    for dkey, value in update.binary_entity_values.items():
        device_class = str(update.binary_entity_descriptions[dkey].device_class.value)
        out[ours(BINARY[device_class], dkey.key, device_class)] = bool(value.native_value)
    for dkey, event in update.events.items():
        device_class = dkey.key.rstrip("_0123456789")
        out[ours(device_class, dkey.key, device_class)] = event.event_type
    if parser.device_type_id is not None:
        out["device_type_id"] = parser.device_type_id
    version = update.devices[None].sw_version if None in update.devices else None
    if version and not version.startswith("BTHome"):
        out["firmware_version"] = version
    if not out:
        return None
    out["format"] = "bthome"
    out["encrypted"] = parser.encryption_scheme == EncryptionScheme.BTHOME_BINDKEY
    return out


class Generator:
    def __init__(self):
        self.frames = []
        self.parsers = {}  # address -> a parser kept across frames (the counter cases)
        self.time = 0.0

    def decode(self, data, address, key, name, keep):
        """bthome-ble's reading of one frame: by a fresh parser, or the address's kept one."""
        if keep:
            parser = self.parsers.setdefault(address, BTHomeBluetoothDeviceData(bytes.fromhex(key) if key else None))
            # a SensorUpdate holds every value since the parser began: keep this frame's only
            for updates in (parser._sensor_values_updates, parser._sensor_descriptions_updates,
                            parser._binary_sensor_values_updates, parser._binary_sensor_descriptions_updates):
                updates.clear()
        else:
            parser = BTHomeBluetoothDeviceData(bytes.fromhex(key) if key else None)
        self.time += 10  # more than bthome-ble's 4 s: its packet-id and repeat filters stay out of the way
        try:
            update = parser.update(service_info(data, address, name, self.time))
        except Exception as error:  # noqa: BLE001 (what bthome-ble raises is the finding)
            return {"raises": f"{type(error).__name__}: {error}"}
        return reading(parser, update)

    def frame(self, case, data, *, address=ADDRESS, key=None, name=None, keep=False, extra_ok=None,
              expected_error=None, ours=None, note=None):
        """One frame. `ours`: bluectl's reading where it differs from the reference's (with `note`);
        `expected_error`: the SensorDecodingError kind bluectl must give."""
        if isinstance(data, str):
            data = bytes.fromhex(data)
        reference = self.decode(data, address, key, name, keep)
        line = {"case": case, "reference": REFERENCE, "address": address, "service_data": {UUID: data.hex()}}
        if name:
            line["name"] = name
        if key:
            line["keys"] = {address: key}
        if expected_error:
            line["expected_error"] = expected_error
            if reference is not None:
                assert note, f"{case}: bthome-ble decodes {reference}; say why bluectl does not"
                line["reference_gives"] = reference
        elif ours is not None:
            assert note, f"{case}: bluectl's reading differs: say why"
            line["expected"] = ours
            line["reference_gives"] = reference
        else:
            line["expected"] = reference
        if extra_ok:
            line["extra_ok"] = extra_ok
        if note:
            line["note"] = note
        self.frames.append(line)
        return reference


def encrypt(payload, counter, key=KEY, address=ADDRESS, info=0x41):
    """bthome.io/encryption: nonce = address, d2 fc, the information byte, the counter (LE)."""
    counter_bytes = counter.to_bytes(4, "little")
    nonce = bytes.fromhex(address.replace(":", "")) + b"\xd2\xfc" + bytes([info]) + counter_bytes
    sealed = AESCCM(bytes.fromhex(key), tag_length=4).encrypt(nonce, payload, None)
    return bytes([info]) + sealed[:-4] + counter_bytes + sealed[-4:]


# (object id, published example, its bytes after the id) from bthome.io/format's tables
PUBLISHED = [
    (0x51, "518756"), (0x63, "630057D0FF"), (0x01, "0161"), (0x60, "6001"), (0x12, "12E204"), (0x56, "56E803"),
    (0x09, "0960"), (0x3D, "3D0960"), (0x3E, "3E2A2C0960"), (0x59, "59EA"), (0x5A, "5AEAEA"), (0x5B, "5BEA0234EA"),
    (0x43, "434E34"), (0x5D, "5D02EA"), (0x08, "08CA06"), (0x5E, "5E9F8C"), (0x40, "400C00"), (0x41, "414E00"),
    (0x42, "424E3400"), (0x4D, "4d12138a14"), (0x0A, "0A138A14"), (0x4B, "4B138A14"), (0x4C, "4C41018A01"),
    (0x52, "528756"), (0x03, "03BF13"), (0x2E, "2E23"), (0x05, "05138A14"), (0x64, "6402"), (0x06, "065E1F"),
    (0x07, "073E1D"), (0x14, "14020C"), (0x2F, "2F23"), (0x0D, "0D120C"), (0x0E, "0E021C"), (0x0B, "0B021B00"),
    (0x5C, "5C02FBFFFF"), (0x5F, "5FA00F"), (0x04, "04138A01"), (0x54, "540C48656C6C6F20576F726C6421"),
    (0x3F, "3F020C"), (0x61, "61AC0D"), (0x65, "6503"), (0x44, "444E34"), (0x62, "624099DFFF"), (0x57, "57EA"),
    (0x58, "58EA"), (0x45, "451101"), (0x02, "02CA09"), (0x53, "530C48656C6C6F20576F726C6421"),
    (0x50, "505d396164"), (0x13, "133301"), (0x0C, "0C020C"), (0x4A, "4A020C"), (0x4E, "4E87562A01"),
    (0x47, "478756"), (0x48, "48DC87"), (0x55, "5587562A01"), (0x49, "49DC87"), (0x46, "4632"), (0x4F, "4F87562A01"),
    (0x15, "1501"), (0x16, "1601"), (0x17, "1700"), (0x18, "1801"), (0x19, "1900"), (0x1A, "1A00"), (0x1B, "1B01"),
    (0x1C, "1C01"), (0x0F, "0F01"), (0x1D, "1D00"), (0x1E, "1E01"), (0x1F, "1F01"), (0x20, "2001"), (0x21, "2100"),
    (0x22, "2201"), (0x23, "2301"), (0x11, "1100"), (0x24, "2400"), (0x10, "1001"), (0x25, "2500"), (0x26, "2601"),
    (0x27, "2701"), (0x28, "2800"), (0x29, "2901"), (0x2A, "2A00"), (0x2B, "2B00"), (0x2C, "2C01"), (0x2D, "2D01"),
    (0x3A, "3A01"), (0x3A, "3A02"), (0x3A, "3A03"), (0x3A, "3A04"), (0x3A, "3A05"), (0x3A, "3A06"), (0x3A, "3A80"),
    (0x3B, "3B0000"), (0x3B, "3B0001"), (0x3B, "3B0002"), (0x3B, "3B010305"), (0x3B, "3B010405"),
    (0x3C, "3C0103"), (0x3C, "3C020A"), (0xF0, "F00100"), (0xF1, "F100010204"), (0xF2, "F2000106"), (0x00, "0009"),
]

# Fixed-length numeric objects: (id, length, signed, factor as (numerator, denominator))
NUMBERS = [
    (0x01, 1, False), (0x02, 2, True), (0x03, 2, False), (0x04, 3, False), (0x05, 3, False), (0x06, 2, False),
    (0x07, 2, False), (0x08, 2, True), (0x09, 1, False), (0x0A, 3, False), (0x0B, 3, False), (0x0C, 2, False),
    (0x0D, 2, False), (0x0E, 2, False), (0x12, 2, False), (0x13, 2, False), (0x14, 2, False), (0x2E, 1, False),
    (0x2F, 1, False), (0x3D, 2, False), (0x3E, 4, False), (0x3F, 2, True), (0x40, 2, False), (0x41, 2, False),
    (0x42, 3, False), (0x43, 2, False), (0x44, 2, False), (0x45, 2, True), (0x46, 1, False), (0x47, 2, False),
    (0x48, 2, False), (0x49, 2, False), (0x4A, 2, False), (0x4B, 3, False), (0x4C, 4, False), (0x4D, 4, False),
    (0x4E, 4, False), (0x4F, 4, False), (0x50, 4, False), (0x51, 2, False), (0x52, 2, False), (0x55, 4, False),
    (0x56, 2, False), (0x57, 1, True), (0x58, 1, True), (0x59, 1, True), (0x5A, 2, True), (0x5B, 4, True),
    (0x5C, 4, True), (0x5D, 2, True), (0x5E, 2, False), (0x5F, 2, False), (0x60, 1, False), (0x61, 2, False),
    (0x62, 4, True), (0x63, 4, True), (0x64, 1, False), (0x65, 1, False), (0xF0, 2, False),
]
BINARIES = list(range(0x0F, 0x12)) + list(range(0x15, 0x2E))


def raw_values(length, signed):
    bits = 8 * length
    if signed:
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        return [0, 1, -1, low, high, low + 1, high - 1, 1234 % high if high > 1 else 1, -(4000 % high) if high > 1 else -1]
    high = (1 << bits) - 1
    return [0, 1, 2, high, high - 1, high // 2, 1234 % high if high > 1 else 1, 4000 % (high + 1)]


def le(value, length, signed):
    return value.to_bytes(length, "little", signed=signed)


def note_0x58(reference, payload_ids):
    """bthome-ble rounds a 0.35 factor to one decimal (parse_int rounds to the factor's first
    significant digit): 1 x 0.35 gives 0.3; bluectl gives the product the spec defines."""
    return ("bthome.io: 0x58 is sint8 x 0.35; bthome-ble rounds the product to one decimal "
            "(parser.parse_int: decimal places from the factor's exponent), bluectl keeps it exact")


def generate(g):
    # -- the published examples: bthome.io/format (the advertisement and every table row) and /encryption
    g.frame("bthome.io/format: the advertisement example (25.00 °C, 50.55 %)", "4002c40903bf13")
    g.frame("bthome.io/format: Ernst79's worked example in bthome-ble#118", "40003f015e02820803ac170c830b")
    for object_id, example in PUBLISHED:
        data = bytes([0x40]) + bytes.fromhex(example)
        case = f"bthome.io/format example {example.lower()} (object 0x{object_id:02x})"
        if object_id == 0x00:
            g.frame(case, data, ours={"format": "bthome", "encrypted": False},
                    note="a frame holding only its packet id: bluectl reads it into packetID (no measurement); "
                         "bthome-ble reports packet_id as a sensor and nothing else")
        else:
            g.frame(case, data)
    g.frame("bthome.io/encryption: the example frame (counter 0x33221100)",
            "41e445f3c9962b332211006c7c4519", key=KEY, address=ADDRESS)
    g.frame("bthome-ble tests/test_v2_encryption.py example 1 (counter bytes 00112233)",
            "41a47266c95f730011223378237214", key=KEY, address=ADDRESS)
    g.frame("bthome-ble tests/test_v2_encryption.py example 2 (motion, counter bytes 00112233)",
            "4187b90011223372b0231f", key=KEY, address=ADDRESS)

    # -- every fixed-length object at its edges
    for object_id, length, signed in NUMBERS:
        for raw in raw_values(length, signed):
            data = bytes([0x40, object_id]) + le(raw, length, signed)
            case = f"object 0x{object_id:02x} raw {raw}"
            if object_id == 0x58:
                reference = g.decode(data, ADDRESS, None, None, False)
                exact = raw * 35 / 100
                if abs(reference["temperature_c"] - exact) > 1e-9:
                    g.frame(case, data, ours={**reference, "temperature_c": exact}, note=note_0x58(reference, [0x58]))
                    continue
            g.frame(case, data)
    # negative temperatures in every temperature object, and a frame of all four
    for celsius in ["-40.00", "-0.01", "-10.25", "-327.68"]:
        raw = round(float(celsius) * 100)
        g.frame(f"temperature {celsius} °C (0x02)", bytes([0x40, 0x02]) + le(raw, 2, True))
    g.frame("temperature -40.0 °C (0x45), -40 °C (0x57)", bytes([0x40, 0x45]) + le(-400, 2, True) + bytes([0x57]) + le(-40, 1, True))

    # -- binary sensors: 0 and 1 each; 2 is not a binary value
    for object_id in BINARIES:
        for value in (0, 1):
            g.frame(f"binary 0x{object_id:02x} = {value}", bytes([0x40, object_id, value]))
    reference = g.decode(bytes.fromhex("40210202c409"), ADDRESS, None, None, False)
    g.frame("binary 0x21 (motion) = 2, then a temperature", "40210202c409",
            ours={"format": "bthome", "encrypted": False, "temperature_c": 25.0},
            note="bthome.io: a binary sensor's value 'should be 1 for on, and 0 for off'; bthome-ble reads "
                 "any other byte as true (bool(value)); bluectl leaves the object out and says so in "
                 "SensorReading.partial (kind invalid), the objects around it kept")

    # -- repeated objects, and objects out of order
    g.frame("three temperatures (0x02, 0x02, 0x45)", "4002c40902f6ff451101")
    g.frame("two humidities and two voltages", "4003bf132e230c020c4a020c")
    g.frame("two buttons: none, then press (bthome.io's own example)", "403a003a01", extra_ok=["button"],
            note="bthome.io: 0x00 is the event 'None' (no press); bthome-ble fires no event for it, bluectl "
                 "reports it as 'none' (it keeps the buttons' positions: the second is button_2 in both)")
    g.frame("four buttons (Shelly BLU RC Button 4's shape)", "40000c01643a003a013a043a00",
            extra_ok=["button", "button_4"],
            note="0x00 ('None') buttons: bthome-ble fires nothing for them, bluectl reports 'none'")
    g.frame("objects out of id order (bthome-ble warns, both decode)", "40030a1a02c409")
    g.frame("volume in L and in mL together", "4047875648dc87",
            ours={"format": "bthome", "encrypted": False, "volume_l": 2215.1, "volume_ml": 34780.0},
            note="bthome-ble keys both objects 'volume' (one device class) so the second overwrites the first; "
                 "bluectl keys them by unit")

    # -- events
    for code in range(0, 7):
        data = bytes([0x40, 0x3A, code])
        if code == 0:
            g.frame("button event 0x00 (None) alone", data, ours={"format": "bthome", "encrypted": False, "button": "none"},
                    note="bthome-ble fires no event for 'None' and so decodes nothing; bluectl reports 'none'")
        else:
            g.frame(f"button event 0x{code:02x}", data)
    g.frame("button event 0x81 (bthome-ble's hold_release, not in bthome.io/format)", "40016402c4093a81",
            ours={"format": "bthome", "encrypted": False, "battery_percent": 100.0, "temperature_c": 25.0, "button": "0x81"},
            note="bthome.io/format (2026-04-30) names button events 0x00-0x06 and 0x80; bthome-ble also names 0x81 "
                 "'hold_release'; bluectl shows an event id the spec does not name as its hex")
    g.frame("button event 0x07 (named by neither)", "40016402c4093a07", extra_ok=["button"],
            note="an event id the spec does not name: bthome-ble drops it, bluectl shows it as '0x07'")
    for code, steps in [(0, 0), (1, 1), (1, 255), (2, 10), (2, 0)]:
        data = bytes([0x40, 0x3C, code, steps])
        if code == 0:
            g.frame("dimmer event None", data, ours={"format": "bthome", "encrypted": False, "dimmer": "none"},
                    note="bthome-ble fires no event for 'None'; bluectl reports 'none'")
        else:
            g.frame(f"dimmer event 0x{code:02x}, {steps} steps", data)
    for hexdata, label in [("3b0000", "off"), ("3b0001", "on"), ("3b0002", "toggle"), ("3b010305", "step up 5"),
                           ("3b010405", "step down 5"), ("3b0003", "step up, no argument")]:
        g.frame(f"command {label}", "40" + hexdata)
    g.frame("command with two argument bytes", "403b0202abcd", extra_ok=["command_args"],
            note="the arguments are maker-specific: bthome-ble puts them in the event's properties, bluectl in "
                 "command_args (hex)")
    g.frame("command opcode 0x05 (not in the spec)", "403b0005", ours={"format": "bthome", "encrypted": False, "command": "0x05"},
            note="an opcode the spec does not name: bthome-ble drops it, bluectl shows it as '0x05'")

    # -- text, raw, timestamp, device information
    for text in ["Hello World!", "x", "21,5 °C", "🌡", "a" * 20]:
        encoded = text.encode()
        g.frame(f"text {text!r}", bytes([0x40, 0x53, len(encoded)]) + encoded)
    g.frame("text of 0 bytes", "405300", ours={"format": "bthome", "encrypted": False, "text": ""},
            note="an empty text: bthome-ble skips objects of length 0, bluectl reports the empty text")
    g.frame("text that is not UTF-8, between two objects", "4002c40953029fff03bf13",
            note="bthome-ble leaves the text out and keeps the rest; so does bluectl (SensorReading.partial says why)")
    for raw in ["00", "0102030405", "ff" * 16]:
        g.frame(f"raw {raw}", bytes([0x40, 0x54, len(raw) // 2]) + bytes.fromhex(raw))
    g.frame("raw of 0 bytes", "405400", ours={"format": "bthome", "encrypted": False, "raw": ""},
            note="empty raw data: bthome-ble skips objects of length 0, bluectl reports it")
    for seconds in [0, 1684093277, 2**32 - 1]:
        g.frame(f"timestamp {seconds}", bytes([0x40, 0x50]) + le(seconds, 4, False))
    g.frame("device type id and firmware 4.2.1.0, with a temperature", "4002c409f00100f100010204")

    # -- the device information byte
    g.frame("trigger-based device (bit 2)", "4402c40903bf13")
    for info in [0x00, 0x20, 0x60, 0xE0]:
        g.frame(f"version {info >> 5} (device information 0x{info:02x})", bytes([info]) + bytes.fromhex("02c40903bf13"),
                expected_error="unsupported")
    g.frame("bit 1 set (reserved in v2; bthome-ble reads 'MAC included')", "42a5808fe6485402c40903bf13",
            expected_error="unsupported",
            note="bthome.io/format has bit 1 'reserved for future use' since v2's first version (2022-10-19); "
                 "bthome-ble reads six bytes of MAC address after it; bluectl decodes neither way")
    g.frame("no objects", "40", ours={"format": "bthome", "encrypted": False},
            note="a frame with no objects: bthome-ble reports no update, bluectl a reading with no measurements")
    g.frame("empty service data", "", expected_error="truncated",
            note="bthome-ble raises IndexError on service data of 0 bytes (BTHomeData._get_adv_info); bluectl reports it truncated")

    # -- unknown object ids: the objects before are kept
    g.frame("unknown object 0x66 after a temperature", "4002c409660102")
    g.frame("unknown object 0x66 first", "40660102c409", expected_error="unknown_object")
    g.frame("unknown object 0xf3 after device information", "4002c409f3")

    # -- truncated objects
    for data, label in [("4002c4", "temperature with 1 of 2 bytes"), ("4053", "text without its length byte"),
                        ("40530548656c", "text of 5 bytes with 3"), ("4003bf1302", "humidity, then a temperature id alone"),
                        ("403b02", "command with its length byte only"), ("403c01", "dimmer without its steps")]:
        reference = g.decode(bytes.fromhex(data), ADDRESS, None, None, False)
        note = None
        if reference is not None:
            note = ("bthome-ble stops at the truncated object and keeps the objects before it; bluectl refuses "
                    "the frame: an object running past the end means the frame is not what its sender meant")
        g.frame(f"truncated: {label}", data, expected_error="truncated", note=note)

    # -- encrypted frames
    payloads = ["02c40903bf13", "2101", "00050164020a0903e8130c020c", "3a01", "53054869207468", "45fcff57d8",
                "0c020c4a020c"]
    for i, payload in enumerate(payloads):
        address = f"A4:C1:38:00:00:{i:02X}"
        g.frame(f"encrypted {payload}", encrypt(bytes.fromhex(payload), 1000 + i, address=address), key=KEY,
                address=address)
    g.frame("encrypted, trigger-based (0x45)", encrypt(bytes.fromhex("3a02"), 5, address="A4:C1:38:00:01:00", info=0x45),
            key=KEY, address="A4:C1:38:00:01:00")
    g.frame("encrypted, counter 0xffffffff", encrypt(bytes.fromhex("02c409"), 0xFFFFFFFF, address="A4:C1:38:00:01:01"),
            key=KEY, address="A4:C1:38:00:01:01")
    frame = encrypt(bytes.fromhex("02c40903bf13"), 77, address="A4:C1:38:00:01:02")
    g.frame("encrypted, wrong key", frame, key=WRONG_KEY, address="A4:C1:38:00:01:02", expected_error="authentication_failed")
    g.frame("encrypted, no key", frame, address="A4:C1:38:00:01:02", expected_error="no_key")
    for position in [1, len(frame) - 6, len(frame) - 1]:
        altered = bytearray(frame)
        altered[position] ^= 0x01
        g.frame(f"encrypted, byte {position} altered", bytes(altered), key=KEY, address="A4:C1:38:00:01:02",
                expected_error="authentication_failed")
    g.frame("encrypted, 8 bytes only", frame[:8], key=KEY, address="A4:C1:38:00:01:02", expected_error="truncated")
    g.frame("encrypted with another device's address in the nonce", encrypt(bytes.fromhex("02c409"), 3, address="A4:C1:38:00:01:03"),
            key=KEY, address="A4:C1:38:00:01:04", expected_error="authentication_failed")
    g.frame("plain frame from a device whose key is given", "4002c40903bf13", key=KEY, address="A4:C1:38:00:01:05",
            expected_error="authentication_failed")
    reference = g.decode(encrypt(b"", 9, address="A4:C1:38:00:01:06"), "A4:C1:38:00:01:06", KEY, None, False)
    g.frame("encrypted, no objects", encrypt(b"", 9, address="A4:C1:38:00:01:06"), key=KEY, address="A4:C1:38:00:01:06",
            ours={"format": "bthome", "encrypted": True},
            note="bthome-ble refuses a ciphertext under 2 bytes (_check_minimum_length); an empty one authenticates, "
                 "and bluectl gives a reading with no measurements")

    # -- counters, one device (frames in order through one decoder, as the README says)
    device = "A4:C1:38:00:02:00"
    for counter, payload, label in [(200, "02c409", "first, 200"), (201, "02c509", "201"), (201, "02c609", "201 again: equal is accepted"),
                                    (500, "02c709", "500")]:
        g.frame(f"counter {label}", encrypt(bytes.fromhex(payload), counter, address=device), key=KEY, address=device, keep=True)
    g.frame("counter back to 300 (>= 100: both refuse)", encrypt(bytes.fromhex("02c809"), 300, address=device), key=KEY,
            address=device, keep=True, expected_error="counter_went_back")
    g.frame("counter back to 5", encrypt(bytes.fromhex("02c909"), 5, address=device), key=KEY, address=device, keep=True,
            expected_error="counter_went_back",
            note="bthome-ble accepts a lower counter under 100 as a device restarted (parser._check_encryption_counter), "
                 "so anyone can replay any of a device's first 100 frames at any time; bluectl reports every counter "
                 "that goes back (bthome.io/encryption: the receiver must check that the counter increased)")
    g.frame("counter 501 after the refusals", encrypt(bytes.fromhex("02ca09"), 501, address=device), key=KEY,
            address=device, keep=True,
            note="bthome-ble took counter 5 above, so it accepts 501 too; so does bluectl (its last accepted was 500)")

    # -- devices with names (the model; Theengs Decoder's device layouts, --theengs)
    g.frame("Shelly BLU H&T (SBHT-003C)", "44000c01642e3245d200", name="SBHT-003C")
    g.frame("Shelly BLU H&T with a button press", "44000d01632e333a0145d300", name="SBHT-003C")
    g.frame("Shelly BLU Motion (SBMO-003Z)", "440001016405e803002101", name="SBMO-003Z")
    g.frame("Shelly BLU Door/Window (SBDW-002C)", "4400020164051027002d013f0000", name="SBDW-002C")
    g.frame("Shelly BLU Button1 (SBBT-002C)", "44000501643a01", name="SBBT-002C")
    g.frame("Shelly BLU RC Button 4 (SBBT-004CUS)", "44000601643a003a023a003a04", name="SBBT-004CUS",
            extra_ok=["button", "button_3"], note="0x00 ('None') buttons: bthome-ble fires nothing, bluectl reports 'none'")
    g.frame("pvvx firmware's BTHome frame (ATC_ name)", "4000aa0164020a0903e813", name="ATC_123456")
    g.frame("pvvx firmware's second BTHome frame", "4000ab0c020c10011101", name="ATC_123456")
    g.frame("b-parasite (prst)", "40015a02c409051027000c020c2e3c2f32", name="prst")
    g.frame("Tuya THB1", "400017016402c40903e8130c020c", name="THB1")


# Theengs Decoder's fields -> bluectl's keys (it decodes BTHome only in the layouts of the
# devices it knows, by name and length; its buttons are numbers of its own)
THEENGS_FIELDS = {"tempc": ["temperature_c"], "hum": ["humidity_percent"], "batt": ["battery_percent"],
                  "volt": ["voltage_v"], "lux": ["illuminance_lux"], "moi": ["moisture_percent"], "motion": ["motion"],
                  "open": ["opening", "window"], "power": ["power_on"], "rot": ["rotation_deg"], "button": ["button"],
                  "button1": ["button"], "button2": ["button_2"], "button3": ["button_3"], "button4": ["button_4"]}
THEENGS_IGNORED = {"id", "name", "servicedata", "servicedatauuid", "brand", "model", "model_id", "type", "acts", "cont",
                   "tempf", "packet", "packet_1", "packet_2", "mac", "cipher", "ctr", "mic"}


def theengs_report(frames):
    """Theengs Decoder against bthome-ble on the frames with a device name; printed, not a test."""
    import TheengsDecoder
    compared = decoded = 0
    problems = []
    for line in frames:
        if "name" not in line:
            continue
        compared += 1
        data = line["service_data"][UUID]
        out = TheengsDecoder.decodeBLE(json.dumps({"id": line["address"], "name": line["name"], "servicedata": data,
                                                   "servicedatauuid": "0xfcd2"}))
        if out is None:
            problems.append(f"{line['case']}: Theengs Decoder decodes nothing")
            continue
        decoded += 1
        theirs = json.loads(out)
        reference = line.get("reference_gives") or line.get("expected") or {}
        used = set()
        for field, value in theirs.items():
            if field in THEENGS_IGNORED:
                continue
            keys = [key for key in THEENGS_FIELDS.get(field, []) if key in reference]
            if not keys:
                problems.append(f"{line['case']}: Theengs {field}={value!r}, which bthome-ble does not give")
                continue
            key = keys[0]
            used.add(key)
            mine = reference[key]
            if isinstance(mine, str):  # an event: Theengs numbers them its own way
                problems.append(f"{line['case']}: Theengs {field}={value!r} for bthome-ble's {key}={mine!r} (its own numbering)")
            elif isinstance(mine, bool):
                if bool(value) != mine:
                    problems.append(f"{line['case']}: Theengs {field}={value!r}, bthome-ble {key}={mine!r}")
            elif abs(float(value) - float(mine)) > 1e-6:
                problems.append(f"{line['case']}: Theengs {field}={value!r}, bthome-ble {key}={mine!r}")
        for key, value in reference.items():
            if key not in used and key not in ("format", "encrypted"):
                problems.append(f"{line['case']}: bthome-ble {key}={value!r}, which Theengs does not give")
    version = importlib.metadata.version("theengsdecoder")
    print(f"theengsdecoder {version}: {compared} named frames, {decoded} decoded, {len(problems)} differences")
    for problem in problems:
        print("  " + problem)


def main():
    g = Generator()
    generate(g)
    if "--theengs" in sys.argv[1:]:
        theengs_report(g.frames)
        return
    for line in g.frames:
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
