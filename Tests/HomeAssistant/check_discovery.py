#!/usr/bin/env python3
"""A manual check, not part of CI (docs/gateway.md, "Home Assistant"): Home Assistant's own MQTT
discovery code reads the device configs `bluectl gateway --home-assistant` publishes.

Each `homeassistant/device/<node>/config` line of FILE (`mosquitto_sub -v` output, as the lab's
gateway checks record) goes through Home Assistant's `_parse_device_payload` (abbreviations,
DEVICE_DISCOVERY_SCHEMA), then each component, with the device, origin and shared options merged
in as Home Assistant's discovery does, through its platform's DISCOVERY_SCHEMA (what the MQTT
sensor is set up from). Prints one line per config; exits 1 if Home Assistant refused any.

usage: $HA_VENV/bin/python Tests/HomeAssistant/check_discovery.py FILE...
(HA_VENV: a virtualenv with homeassistant and paho-mqtt, as Tests/ProxyClient/ha_try.sh makes)
"""
import asyncio
import importlib
import sys

import tempfile

from homeassistant.components.mqtt import discovery
from homeassistant.const import CONF_DEVICE, CONF_PLATFORM
from homeassistant.core import HomeAssistant
from homeassistant.helpers import frame


def check(topic, payload):
    """Problems Home Assistant finds with one device config (empty: none)."""
    node = topic.split('/')[2]
    parsed = discovery._parse_device_payload(None, payload, node, None)
    if not parsed:
        return ['refused by DEVICE_DISCOVERY_SCHEMA (Home Assistant logs why)']
    problems, ids = [], set()
    for component_id, config in parsed[discovery.CONF_COMPONENTS].items():
        config = dict(config)
        platform = config.pop(CONF_PLATFORM)
        config[CONF_DEVICE] = parsed[CONF_DEVICE]
        config[discovery.CONF_ORIGIN] = parsed.get(discovery.CONF_ORIGIN)
        discovery._merge_common_device_options(config, parsed)
        try:
            valid = importlib.import_module('homeassistant.components.mqtt.' + platform).DISCOVERY_SCHEMA(config)
        except Exception as error:  # voluptuous.Invalid, and anything else the schema raises
            problems.append('%s: %s' % (component_id, error))
            continue
        if valid.get('unique_id') in ids:
            problems.append('%s: unique_id %s twice' % (component_id, valid.get('unique_id')))
        ids.add(valid.get('unique_id'))
    return problems


async def main(paths):
    # The schemas' templates want a Home Assistant to report to (its frame helper): an empty one.
    frame.async_setup(HomeAssistant(tempfile.mkdtemp()))
    refused = seen = 0
    for path in paths:
        for line in open(path, encoding='utf-8', errors='replace'):
            topic, _, payload = line.rstrip('\n').partition(' ')
            if not (topic.startswith('homeassistant/device/bluectl_') and topic.endswith('/config')) or not payload:
                continue
            seen += 1
            problems = check(topic, payload)
            refused += bool(problems)
            print('%s %s: %s' % ('REFUSED' if problems else 'ok', topic, '; '.join(problems) or 'accepted'))
    print('%d device configs, %d refused' % (seen, refused))
    return 1 if refused or not seen else 0


if __name__ == '__main__':
    sys.exit(asyncio.run(main(sys.argv[1:])))
