'''The BlueZ stand-in's parts (Fixtures/bluez_standin.py is the template
dbusmock loads; it imports these). One module per BlueZ interface or job:

  common                   interface names, errors, UUIDs, signals, the log
  wire                     the fast signal path (Mock.EmitAdvertisementBurst)
  state                    what is not on the bus: adapters, advertisers, faults
  bluez_object             BluezObject, the base of the bus objects
  adapter1                 Adapter1 and discovery
  device1                  Device1
  gatt_client              GattService1, GattCharacteristic1, GattDescriptor1
  agent_manager1           AgentManager1 and the agents' questions
  clients                  what goes when a bus client leaves
  peripheral               the server side's common ground (ATT permissions, errors)
  gatt_manager1            GattManager1: applications, the local database
  att_server               the ATT server as simulated remote centrals meet it
  le_advertising_manager1  LEAdvertisingManager1
  advertisement_monitor_manager1  AdvertisementMonitorManager1 (bluetoothd -E): passive scanning
  control_radio            the test-control RPC (Mock): adapters, advertisers, discovery
  control_gatt             the test-control RPC: GATT, faults, pairing, agents
  control_server           the test-control RPC: remote centrals, the server side

A part imports the parts it reads as it loads (common, bluez_object,
peripheral) at its top, and the others, used only when called, at its end.
'''
