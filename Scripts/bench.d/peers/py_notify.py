"""python3-dbus notification consumer: one hex line per value (flushed), exits after COUNT.
usage: py_notify.py start|acquire CHARACTERISTIC-PATH COUNT
start:   add a PropertiesChanged receiver, StartNotify, GLib main loop
acquire: AcquireNotify, read the returned socket (one value per datagram)"""
import os
import signal
import sys

import dbus

CHR = "org.bluez.GattCharacteristic1"
mode, path, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
out = sys.stdout

if mode == "start":
    import dbus.mainloop.glib
    from gi.repository import GLib
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    chrc = dbus.Interface(bus.get_object("org.bluez", path), CHR)
    loop = GLib.MainLoop()
    got = 0

    def changed(iface, props, invalidated):
        global got
        if iface == CHR and "Value" in props:
            out.write(bytes(props["Value"]).hex() + "\n")
            out.flush()
            got += 1
            if got >= want:
                loop.quit()
    bus.add_signal_receiver(changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", "org.bluez", path)
    chrc.StartNotify()
    try:
        loop.run()
    except KeyboardInterrupt:
        pass
    chrc.StopNotify()
else:
    bus = dbus.SystemBus()
    chrc = dbus.Interface(bus.get_object("org.bluez", path), CHR)
    fd, mtu = chrc.AcquireNotify({})
    fd = fd.take()
    os.set_blocking(fd, True)  # bluetoothd hands out a non-blocking socket
    got = 0
    try:
        while got < want:
            v = os.read(fd, int(mtu))
            if not v:
                break
            out.write(v.hex() + "\n")
            out.flush()
            got += 1
    except KeyboardInterrupt:
        pass
    os.close(fd)
