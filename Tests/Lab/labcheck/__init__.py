"""The lab tier's check framework (python3, python3-dbus; run in the lab guest
by Debian's /usr/bin/python3). Tests/Lab/README.md, "The checks", says how to
write and add a check.

Modules, one job each:
  lab       the lab as the guest script sees it: env, adapters, UUIDs, paths
  runner    registration, selection, the report, the one retry, the tally
  check     one check's context: running bluectl (logged), expectations
  jsonlines JSON-lines output: parse, one(), u16(), is_hex(), fields()
  procs     processes in the background (bluectl subscribe, serve, ...)
  bluez     what bluetoothd says (python3-dbus), independently of bluectl
  faults    fault injection and the stack's state: adapter power, SIGSEGV to
            bluetoothd, the agent's refusal, bonds and bluetoothd's storage
  streams   the lab peripheral's numbered stream: start, stop, state,
            connect N devices, a subscriber's output checked number by number
  serving   bluectl serve/advertise: scans, registrations, fed values
"""
