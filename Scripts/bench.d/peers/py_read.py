"""python3-dbus, the minimal one-shot read: ReadValue on a known characteristic path, print hex."""
import sys

import dbus

chrc = dbus.Interface(dbus.SystemBus().get_object("org.bluez", sys.argv[1]), "org.bluez.GattCharacteristic1")
print(bytes(chrc.ReadValue({})).hex(), flush=True)
