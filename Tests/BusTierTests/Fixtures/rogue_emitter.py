#!/usr/bin/python3
'''Rogue bus client for bluectl's bus tier tests.

A client that is NOT org.bluez's owner broadcasts signals that look like
bluetoothd's, then exits:

  * PropertiesChanged on /org/bluez/<adapter> for org.bluez.Adapter1:
    Powered=false, PowerState="off", Discovering=false, Name/Alias changed;
  * InterfacesAdded on / for a fake /org/bluez/<adapter>/dev_<address> device
    (Device1 with Name, Alias, RSSI, UUIDs, ManufacturerData, ...);
  * PropertiesChanged for the fake device and, with --victim, for a real
    device path (Name, RSSI changed);
  * InterfacesRemoved on / for the victim device (if given).

bluectl must ignore all of them (it only accepts signals whose sender is the
current unique owner of org.bluez).

Usage: DBUS_SYSTEM_BUS_ADDRESS=... /usr/bin/python3 rogue_emitter.py \\
           [--adapter hci0] [--address DE:AD:BE:EF:00:01] [--name ROGUE-DEVICE] \\
           [--victim /org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF] [--repeat N]

Prints its unique bus name and then "emitted <n>" on stdout.
'''

import argparse
import os
import sys

import dbus

ADAPTER_IFACE = 'org.bluez.Adapter1'
DEVICE_IFACE = 'org.bluez.Device1'
PROPS_IFACE = 'org.freedesktop.DBus.Properties'
OM_IFACE = 'org.freedesktop.DBus.ObjectManager'


def signal(conn, path, iface, member, signature, args):
    msg = dbus.lowlevel.SignalMessage(path, iface, member)
    msg.append(*args, signature=signature)
    conn.send_message(msg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--adapter', default='hci0')
    ap.add_argument('--address', default='DE:AD:BE:EF:00:01')
    ap.add_argument('--name', default='ROGUE-DEVICE')
    ap.add_argument('--victim', default='', help='object path of a real device')
    ap.add_argument('--repeat', type=int, default=1)
    args = ap.parse_args()

    address = os.environ.get('DBUS_SYSTEM_BUS_ADDRESS')
    conn = dbus.bus.BusConnection(address) if address else dbus.SystemBus()
    print(conn.get_unique_name(), flush=True)

    adapter_path = '/org/bluez/' + args.adapter
    fake_path = adapter_path + '/dev_' + args.address.upper().replace(':', '_')
    fake_props = dbus.Dictionary({
        'Address': dbus.String(args.address.upper()),
        'AddressType': dbus.String('public'),
        'Name': dbus.String(args.name),
        'Alias': dbus.String(args.name),
        'Paired': dbus.Boolean(False),
        'Bonded': dbus.Boolean(False),
        'Trusted': dbus.Boolean(False),
        'Blocked': dbus.Boolean(False),
        'LegacyPairing': dbus.Boolean(False),
        'Connected': dbus.Boolean(False),
        'ServicesResolved': dbus.Boolean(False),
        'RSSI': dbus.Int16(-10),
        'TxPower': dbus.Int16(8),
        'UUIDs': dbus.Array(['0000180d-0000-1000-8000-00805f9b34fb'], signature='s'),
        'ManufacturerData': dbus.Dictionary(
            {dbus.UInt16(0xffff): dbus.Array([dbus.Byte(0xde), dbus.Byte(0xad)],
                                             signature='y', variant_level=1)},
            signature='qv'),
        'Adapter': dbus.ObjectPath(adapter_path),
    }, signature='sv')

    count = 0
    for _ in range(args.repeat):
        signal(conn, adapter_path, PROPS_IFACE, 'PropertiesChanged', 'sa{sv}as', [
            ADAPTER_IFACE,
            dbus.Dictionary({'Powered': dbus.Boolean(False),
                             'PowerState': dbus.String('off'),
                             'Discovering': dbus.Boolean(False),
                             'Name': dbus.String('ROGUE-ADAPTER'),
                             'Alias': dbus.String('ROGUE-ADAPTER')}, signature='sv'),
            dbus.Array([], signature='s')])
        signal(conn, '/', OM_IFACE, 'InterfacesAdded', 'oa{sa{sv}}', [
            dbus.ObjectPath(fake_path),
            dbus.Dictionary({DEVICE_IFACE: fake_props}, signature='sa{sv}')])
        signal(conn, fake_path, PROPS_IFACE, 'PropertiesChanged', 'sa{sv}as', [
            DEVICE_IFACE,
            dbus.Dictionary({'RSSI': dbus.Int16(-5),
                             'Name': dbus.String(args.name + '-2')}, signature='sv'),
            dbus.Array([], signature='s')])
        count += 3
        if args.victim:
            signal(conn, args.victim, PROPS_IFACE, 'PropertiesChanged', 'sa{sv}as', [
                DEVICE_IFACE,
                dbus.Dictionary({'RSSI': dbus.Int16(-1),
                                 'Name': dbus.String('ROGUE-RENAMED')}, signature='sv'),
                dbus.Array([], signature='s')])
            signal(conn, '/', OM_IFACE, 'InterfacesRemoved', 'oas', [
                dbus.ObjectPath(args.victim),
                dbus.Array([DEVICE_IFACE], signature='s')])
            count += 2
    conn.flush()
    print(f'emitted {count}', flush=True)
    conn.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
