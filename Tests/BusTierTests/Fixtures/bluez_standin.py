# -*- coding: utf-8 -*-
'''BlueZ (bluetoothd) stand-in for bluectl's bus tier tests.

A python-dbusmock template. Run it on a private bus with

    DBUS_SYSTEM_BUS_ADDRESS=unix:path=... /usr/bin/python3 -m dbusmock \\
        --system --template /path/to/bluez_standin.py

(dbusmock accepts a template given as a path ending in ".py").

It owns org.bluez and keeps BlueZ's object layout:

    /                                        org.freedesktop.DBus.ObjectManager
    /org/bluez                               AgentManager1, ProfileManager1
    /org/bluez/hci0                          Adapter1 (+ GattManager1, LEAdvertisingManager1,
                                             AdvertisementMonitorManager1 when "experimental")
    /org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF    Device1
    .../dev_XX/service000a                   GattService1
    .../dev_XX/service000a/char000b          GattCharacteristic1
    .../dev_XX/service000a/char000b/desc000d GattDescriptor1

Properties carry BlueZ's D-Bus types; optional ones (Name, RSSI, TxPower,
ManufacturerData, ...) are absent when unknown, as in BlueZ.

Simulated radio: tests register *advertisers* per adapter (Mock.AddAdvertiser).
An advertiser is invisible until some client runs a discovery session on its
adapter; then it is "discovered": a Device1 object appears (InterfacesAdded),
and later advertisement changes (Mock.UpdateAdvertiser) arrive as
PropertiesChanged. When the last discovery session ends, Discovering goes
false, RSSI/TxPower are invalidated and non-connectable devices are removed,
as bluetoothd does.

Discovery is tracked per bus client, as in bluetoothd: each client has its own
session and filter; a client's session and filter end when it leaves the bus
(NameOwnerChanged). A device is reported if it matches the filter of any
client with a session (a client without a filter matches everything), so a
client must re-check what it receives.

GATT follows bluetoothd 5.66 (src/gatt-client.c, src/device.c), checked
against the real one by Tests/Conformance: with the default [GATT]
Cache=always a disconnected device keeps its GATT objects and its clients'
StartNotify sessions (registered again on reconnection; Mock.SetGattCache
changes the mode); each notification is one PropertiesChanged(Value) per
registered StartNotify session, and every successful ReadValue emits one.

Peripheral role, as bluetoothd 5.66's server side (src/gatt-database.c,
src/shared/gatt-server.c, src/advertising.c, src/shared/ad.c; checked by
Fixtures/standin_server_selftest.py): GattManager1.RegisterApplication
calls the application's ObjectManager.GetManagedObjects (asynchronously)
and validates as client_ready_cb does — errors org.bluez.Error.Failed "No
object received" / "No valid service object found" (unknown or empty
Flags, a Service/Characteristic pointing nowhere) / "Failed to create entry
in database" (UUID, Primary, Includes, Handle; GAP/GATT UUIDs), AlreadyExists
for the same owner and path; UnregisterApplication → DoesNotExist when
unknown. An application goes when its owner leaves the bus; objects it adds
later are ignored, a removed service leaves the database.
LEAdvertisingManager1.RegisterAdvertisement reads the object with
Properties.GetAll(org.bluez.LEAdvertisement1) and parses it as
parse_advertisement (Type optional, "broadcast" by default; unknown
Includes ignored); a bad property → Failed "Failed to parse advertisement.",
data over the 31 bytes → Failed "Failed to register advertisement" (or the
former with SetAdvertisingCommands("legacy")); no free instance →
NotPermitted "Maximum advertisements reached". ActiveInstances counts held
advertisements, SupportedInstances the free ones (both signalled). Timeout →
Release() and removal; owner leaving → removal. A registered advertisement
is heard by the stand-in's other adapters (an advertiser: the adapter's
public address when "peripheral", a non-resolvable private address when
"broadcast"; name, UUIDs, manufacturer and service data, appearance,
tx-power carried). Remote centrals (Mock.RemoteConnect …) read, write and
subscribe through bluetoothd's ATT server: permissions checked first,
then the application called with bluetoothd's options; their ATT errors are
org.freedesktop.DBus.Mock.Error.Att.<Name> (ReadNotPermitted 0x02,
WriteNotPermitted 0x03, InsufficientAuthentication 0x05,
RequestNotSupported 0x06, InvalidOffset 0x07, InsufficientAuthorization 0x08,
InvalidAttributeValueLength 0x0d, Unlikely 0x0e, InsufficientEncryption
0x0f, CccImproperlyConfigured 0xfd, ProcedureAlreadyInProgress 0xfe,
Application80…Application9F, Timeout: no answer within the central's ATT
timeout), message "0xNN <application's error name>: <message>".

Control API: methods on the org.freedesktop.DBus.Mock interface of the root
object "/" (dbusmock's convention for template convenience methods); see
the functions below decorated with MOCK_IFACE.

Unlike dbusmock's bluez5 template (whose /org/bluez set-up this reuses), the
BlueZ objects here are Python subclasses of DBusMockObject with real methods,
so that methods see the calling client (sender_keyword) and so that the
root object does not grow Adapter1/Device1 methods. dbusmock's Reset() is not
supported (module state is not rebuilt).

The stand-in's parts are the modules of standin/ beside this file, one per
BlueZ interface or job (standin/__init__.py lists them); this file is the
template dbusmock loads: the bus name, the Mock methods it attaches to "/",
and load().
'''

import os
import sys

import dbusmock.templates.bluez5 as bluez5

# dbusmock loads this file by its path, outside any package: its parts are
# found beside it
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# common first: every other part reads it as it loads
from standin import common  # noqa: E402,F401
from standin import advertisement_monitor_manager1, agent_manager1, clients, control_radio, state  # noqa: E402
from standin.control_radio import (  # noqa: E402,F401 (the Mock methods dbusmock attaches to "/")
    AddAdapter, RemoveAdapter, SetAdapterPowered, DropAdapterInterface, AddAdvertiser, UpdateAdvertiser,
    RemoveAdvertiser, GetLastDiscoveryFilter, GetDiscoveryFilterCallCount, GetDiscoverySessions,
    GetDiscoveryLog, SetFilterEnforcement, StallScan, EmitAdvertisementBurst, StandInVersion, GetMonitors,
)
from standin.control_gatt import (  # noqa: E402,F401 (the Mock methods dbusmock attaches to "/")
    AddGattService, AddGattCharacteristic, AddGattDescriptor, EmitNotification, EmitNotifications,
    DropSocketNotifications, SetGattValue, GetGattWrites, DropConnection, InjectError,
    InjectErrorTimes, GetCalls, DelayReply, HangMethod, SetProperties, SetPairing, GetAgentLog, GetPairLog,
    SetGattCache, GetValueSignalCount, StartNotifyAs, StopNotifyAs, ReadValueAs, GetNotifyClients,
    GetAgents,
)
from standin.control_server import (  # noqa: E402,F401 (the Mock methods dbusmock attaches to "/")
    RemoteConnect, RemoteDisconnect, RemoteRead, RemoteWrite, RemoteSubscribe, RemoteUnsubscribe,
    RemoteNotifications, RegisteredApplications, RegisteredAdvertisements, AdvertisementInfo,
    LocalDatabase, ServerCalls, SetAttTimeout, SetAdvertisingCommands, SetMaxAdvertisements,
    SetTemporaryTimeout,
)

BUS_NAME = 'org.bluez'
MAIN_OBJ = '/'
SYSTEM_BUS = True
IS_OBJECT_MANAGER = True


def load(mock, parameters):
    '''Template entry point. parameters (optional, -p JSON):
    {"adapters": [{"name": "hci0", "address": "...", "alias": "...", "powered": true}],
     "experimental": false}   (true: bluetoothd -E, AdvertisementMonitorManager1 on each adapter)'''
    state.ROOT = mock
    advertisement_monitor_manager1.EXPERIMENTAL[0] = bool((parameters or {}).get('experimental', False))
    # /org/bluez with AgentManager1 and ProfileManager1 from dbusmock's bluez5
    bluez5.load(mock, parameters)
    # ... but with agents kept per client (Pair asks the caller's agent)
    state._remove_object('/org/bluez')
    state._add_object(agent_manager1.AgentManagerObject())
    # dbusmock broadcasts org.freedesktop.DBus.Mock.MethodCalled from org.bluez
    # for every Mock call and GetManagedObjects; bluetoothd sends no such
    # thing, so keep it quiet unless asked for.
    if not (parameters or {}).get('method_called_signals', False):
        mock.MethodCalled = lambda *_args: None
    clients._watch_clients()
    for a in (parameters or {}).get('adapters', []):
        control_radio.AddAdapter(mock, a['name'], a['address'], a.get('alias', a['name']),
                                 a.get('powered', True))
