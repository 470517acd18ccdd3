#!/bin/bash
# PID 1 of the lab VM after switch_root (started by Scripts/lab.d/init).
#
# Root is the host's / (9p, read-only) with fresh tmpfs on /run /tmp /root
# /var/{tmp,log,cache,lib/bluetooth}; the repository is at /tmp/lab/repo
# (read-only) and the output folder the host reads at /tmp/lab/out.
# The host writes the job description to /tmp/lab/out/.job.env.
#
# Brings up the peripheral side on hci0 -- dbus-daemon, btmon, btvirt,
# bluetoothd, agent, BlueZ's example-gatt-server, the project's own
# peripheral (periph.py), BlueZ's example-advertisement -- and a second
# peripheral on hci2 (a static random address; periph.py's service from its
# own ATT server, and an advertisement), and hci3 for bluectl's own
# peripheral role (powered, LE-only, public address, nothing registered on it),
# then runs the job's script against the central adapter hci1, writes its exit
# status to out/rc and powers the VM off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
LAB=/tmp/lab
REPO=$LAB/repo
OUT=$LAB/out
G=$REPO/Scripts/lab.d/guest
EX=/usr/share/doc/bluez-test-scripts/examples
PY=/usr/bin/python3

# the second peripheral's static random address (two top bits set)
PERIPH2_STATIC=C0:AA:01:02:00:02
# job defaults, then the host's job file
LAB_SCRIPT=; LAB_ARGS=(); LAB_TIMEOUT=600; LAB_VERBOSE=0; LAB_QUIET=0; LAB_DEBUG=1
LAB_GATT_CHANNELS=1; LAB_MTU=; LAB_BLUETOOTHD_OPTS=; LAB_BTVIRT_OPTS=-l4
LAB_PERIPH_BREDR=off; LAB_ADV_FULL=0; LAB_ADV_PULSE=1.5; LAB_INTERACTIVE=0; BLUECTL=
LAB_BTVIRT=   # the lab's btvirt build (Scripts/lab.d/build-btvirt.sh); empty: the packaged one
# shellcheck disable=SC1091
. $OUT/.job.env
# How many controllers btvirt makes (its -lN; at least the three the lab's
# peers need: hci0, hci1, hci2). With four or more, hci3 is the server
# adapter: bluectl's own peripheral role (bluectl serve/advertise) runs there.
NCTL=$(sed -n 's/.*-l\([0-9][0-9]*\).*/\1/p' <<<"$LAB_BTVIRT_OPTS"); NCTL=${NCTL:-1}
CTLS=(); for ((i = 0; i < NCTL; i++)); do CTLS+=(hci$i); done
SERVER=; [ "$NCTL" -ge 4 ] && SERVER=hci3

up() { cut -d' ' -f1 /proc/uptime; }
say() { local m; m="[lab $(up)s] $*"; echo "$m" >> $OUT/lab.log; [ "$LAB_QUIET" = 1 ] || echo "$m"; }
detail() { # command output: to lab.log, and to the console only when verbose
  if [ "$LAB_VERBOSE" = 1 ]; then tee -a $OUT/lab.log; else cat >> $OUT/lab.log; fi
}
timing() { echo "$1=$2" >> $OUT/timings; }
PIDS=()
bg() { local log=$1; shift; "$@" > "$log" 2>&1 & PIDS+=($!); }

finish() {
  local rc=$1
  set +e
  dmesg > $OUT/dmesg.log 2>&1
  lsmod > $OUT/lsmod.txt 2>&1
  { echo "== btmgmt info"; btmgmt info; } > $OUT/controllers.txt 2>&1
  grep -iE 'error|fail|warn' $OUT/bluetoothd.log 2>/dev/null | grep -vE 'Opcode 0x2037 failed|Failed to init (vcp|mcp|bap)|Sap driver|device_bonding_failed' \
    | head -30 > $OUT/bluetoothd-problems.txt
  touch /run/lab/stopping
  for p in "${PIDS[@]}" $(cat /run/lab/periph.pids /run/lab/lasting.pids 2>/dev/null); do kill "$p" 2>/dev/null; done
  pkill -f /usr/libexec/bluetooth/bluetoothd 2>/dev/null
  if [ -n "${LABMON_PID:-}" ]; then
    kill "$LABMON_PID" 2>/dev/null; wait "$LABMON_PID" 2>/dev/null
    cp /run/lab/btmon.snoop $OUT/btmon.snoop 2>/dev/null
  fi
  sleep 0.3
  timing end "$(up)"
  echo "$rc" > $OUT/rc
  sync
  [ "$LAB_QUIET" = 1 ] || echo "[lab $(up)s] guest done, rc=$rc"
  exec /bin/busybox poweroff -f
}
bringup_failed() {
  LAB_QUIET=0 say "BRING-UP FAILED: $1"
  local f
  for f in "${@:2}"; do [ -f "$f" ] && { echo "---- tail $f"; tail -25 "$f"; }; done
  echo "LAB-BRINGUP-FAILED"
  finish 125
}
wait_until() { # SECONDS DESCRIPTION COMMAND... (polls every 0.2 s until a wall-clock deadline:
  # under TCG on a busy host one poll can take seconds, so never count iterations)
  local end d=$2; end=$(awk -v n="$EPOCHREALTIME" -v t="$1" 'BEGIN { printf "%.3f", n + t }'); shift 2
  while :; do
    if "$@" >/dev/null 2>&1; then echo "[lab $(up)s] ready: $d" >> $OUT/lab.log; return 0; fi
    awk -v n="$EPOCHREALTIME" -v e="$end" 'BEGIN { exit !(n < e) }' || break
    sleep 0.2
  done
  LAB_QUIET=0 say "TIMEOUT waiting for: $d"; return 1
}
adapter_prop() { # hciN Property -> value (last word of dbus-send's literal reply: an address, true/false)
  dbus-send --system --print-reply=literal --dest=org.bluez /org/bluez/$1 \
    org.freedesktop.DBus.Properties.Get string:org.bluez.Adapter1 string:$2 2>/dev/null | awk '{ print $NF }'
}
adapter_set() { # hciN Property TYPE:VALUE
  dbus-send --system --print-reply --dest=org.bluez /org/bluez/$1 \
    org.freedesktop.DBus.Properties.Set string:org.bluez.Adapter1 string:$2 variant:$3
}
addr_of() { adapter_prop "$1" Address | grep -E '^([0-9A-F]{2}:){5}[0-9A-F]{2}$'; }

mount -t debugfs none /sys/kernel/debug 2>/dev/null
# what udev would normally create
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do [ -e /dev/${i#*:} ] || ln -s /proc/self/fd/${i%:*} /dev/${i#*:}; done
timing main "$(up)"
say "guest up (kernel $(uname -r)); bringing up the peripheral on hci0"

# ---- kernel side
# Load up front what setting up a controller autoloads: SMP's crypto (ECDH
# and its random number generator: drbg, jitterentropy, sha512, sha3, ctr)
# and bluetoothd's AF_ALG. Each autoload runs modprobe from 9p inside the
# kernel's set-up, slow under TCG: the set-up's HCI Reset then times out.
# (in the background, while dbus-daemon starts)
modprobe -a -q bluetooth hci_vhci ecc ecdh_generic cmac ecb ctr drbg jitterentropy_rng \
  sha512_generic sha512_ssse3 sha3_generic ansi_cprng af_alg algif_hash algif_skcipher bnep >> $OUT/lab.log 2>&1 &
MODPROBE_PID=$!
mkdir -p /run/dbus /run/lab /var/lib/bluetooth
dbus-daemon --system --fork --print-pid > /run/lab/dbus.pid 2>> $OUT/lab.log \
  || bringup_failed "dbus-daemon did not start"
wait $MODPROBE_PID
echo "[lab $(up)s] modules loaded" >> $OUT/lab.log
# HCI trace as a btsnoop file (Scripts/lab decodes it on the host). Not
# `btmon -w`: btmon 5.66 decodes while recording and crashes on some ATT
# traffic, truncating the trace. Recorded on tmpfs, copied out at the end.
$PY -I -u $G/labmon.py /run/lab/btmon.snoop > $OUT/labmon.log 2>&1 &
LABMON_PID=$!
wait_until 60 "system bus" test -S /run/dbus/system_bus_socket || bringup_failed "no system bus socket"
wait_until 30 "HCI monitor recording" grep -q recording $OUT/labmon.log || say "no HCI trace (see labmon.log)"
# The controllers (hci0 peripheral, hci1 central, hci2 second peripheral,
# hci3 the server adapter for bluectl's peripheral role) must finish their kernel set-up (HCI Reset etc.) and be
# listed by the management interface. On a starved host a set-up can time out
# ("hci0: Opcode 0x0c03 failed: -110") and that index never appears: then
# start btvirt again (its controllers vanish when it exits).
mgmt_all() { local l c; l=$(btmgmt info 2>/dev/null < /dev/console); for c in "${CTLS[@]}"; do [[ $l == *"$c:"* ]] || return 1; done; }
ctl_settled() { # all set up, or a set-up failure reported by the kernel since this attempt began
  mgmt_all && return 0
  dmesg | tail -n +$((DMESG0 + 1)) | grep -qE 'hci[0-9]+: Opcode 0x0c03 failed' && { CTL_FAILED=1; return 0; }
  return 1
}
BTVIRT=${LAB_BTVIRT:-btvirt}
echo "btvirt: $BTVIRT ($($BTVIRT -v 2>&1))" >> $OUT/lab.log
$BTVIRT -h > /dev/null 2>&1; btmgmt --help > /dev/null 2>&1   # page the binaries in first
[ "$NCTL" -ge 3 ] || bringup_failed "btvirt $LAB_BTVIRT_OPTS: the lab needs at least three controllers (-l3; default -l4)"
for attempt in 1 2 3 4 5; do
  DMESG0=$(dmesg | wc -l); CTL_FAILED=0
  # real-time priority: the kernel gives each HCI command of the set-up 2 s,
  # and a busy guest (or host) must not keep the emulator from answering
  # shellcheck disable=SC2086
  chrt -f 10 $BTVIRT $LAB_BTVIRT_OPTS >> $OUT/btvirt.log 2>&1 &
  BTVIRT_PID=$!
  sleep 1   # don't compete with the set-up from the start
  if wait_until 45 "${CTLS[*]} set up (mgmt index list)" ctl_settled && [ $CTL_FAILED = 0 ]; then break; fi
  say "controller set-up failed (attempt $attempt): $(dmesg | tail -n +$((DMESG0 + 1)) | grep -iE 'hci[0-9]+:' | head -2 | tr '\n' ' ')- restarting btvirt"
  kill $BTVIRT_PID; wait $BTVIRT_PID 2>/dev/null
  wait_until 60 "controllers removed" test ! -e /sys/class/bluetooth/hci0 || true
  [ $attempt = 5 ] && bringup_failed "btvirt controllers did not come up" $OUT/btvirt.log
done
PIDS+=($BTVIRT_PID)
timing controllers "$(up)"

# ---- bluetoothd with the lab's own configuration file
{
  echo "# generated by Scripts/lab.d/guest/main.sh"
  echo "[General]"
  echo "[GATT]"
  [ -n "$LAB_GATT_CHANNELS" ] && echo "Channels = $LAB_GATT_CHANNELS"
  [ -n "$LAB_MTU" ] && echo "ExchangeMTU = $LAB_MTU"
} > /run/lab/main.conf
cp /run/lab/main.conf $OUT/bluetoothd-main.conf
BTD_OPTS=(-n -f /run/lab/main.conf)
[ "$LAB_DEBUG" = 1 ] && BTD_OPTS+=(-d)
# shellcheck disable=SC2206
BTD_OPTS+=($LAB_BLUETOOTHD_OPTS)
echo "bluetoothd ${BTD_OPTS[*]}" >> $OUT/lab.log
all_up() { local c; for c in "${CTLS[@]}"; do [ -n "$(addr_of "$c")" ] || return 1; done; }
powered() { [ "$(adapter_prop "$1" Powered)" = true ]; }
discoverable() { [ "$(adapter_prop "${1:-hci0}" Discoverable)" = true ]; }
# The kernel's LE identity of a controller: "ADDR TYPE" (public|random), from
# debugfs. For hci2 this is the static random address, while bluetoothd's
# Adapter1.Address still says the public one (see periph.py).
identity() {
  local a t
  read -r a t < <(sed -n 's/^\([0-9a-f:]\{17\}\) (type \([01]\)).*/\1 \2/p' /sys/kernel/debug/bluetooth/$1/identity 2>/dev/null)
  [ -n "$a" ] || return 1
  echo "${a^^} $([ "$t" = 1 ] && echo random || echo public)"
}
static_identity() { [ "$(identity hci2)" = "$PERIPH2_STATIC random" ]; }
# the server adapter: its public address is its LE identity, BR/EDR off
# (btmgmt's stdin the console, as in mgmt_all: in the supervisor, a background
# job, stdin is /dev/null and btmgmt prints nothing)
server_ready() {
  local s; s=$(btmgmt --index 3 info 2>/dev/null < /dev/console | grep 'current settings:')
  [ "$(identity "$SERVER")" = "$(addr_of "$SERVER") public" ] && [[ $s == *" le"* && $s != *br/edr* ]]
}
# (pids in a file: the supervisor, a subshell, takes down what the boot started)
pbg() { local log=$1; shift; "$@" >> "$log" 2>&1 & echo $! >> /run/lab/periph.pids; }
# The project's peripherals (periph.py on hci0 and hci2) outlive bluetoothd:
# they register again with a new one by themselves, and their streams go on,
# like a real device's when the central's bluetoothd dies. Started once.
lasting() { local log=$1; shift; "$@" >> "$log" 2>&1 & echo $! >> /run/lab/lasting.pids; }
PERIPH_LOGS="$OUT/agent.log $OUT/gatt-server.log $OUT/periph.log $OUT/advertisement.log $OUT/periph2.log"
# every bluetoothd start marks the logs: a peripheral is up when its lines are after the last mark
mark_logs() { echo "== peripheral up at $(up)s (bluetoothd start $1)" | tee -a $PERIPH_LOGS > /dev/null; }

# The peripheral side, on a running bluetoothd: started at boot, and again by
# the supervisor after bluetoothd died (its registrations died with it).
# The python side starts in parallel (each start is seconds of CPU under TCG):
# the pairing agent (auto-accept; see agent.py), BlueZ's example GATT server;
# at boot (FIRST=1) also the project's own peripherals, which outlive bluetoothd:
# periph.py on hci0, and on hci2 with its own ATT server and advertisement
# (which waits for /run/lab/periph2-go: hci2 LE-only with its static address).
# The advertisements wait until their adapter is LE-only and discoverable (its flags).
# FAIL is called with a reason when a step does not come up.
peripheral_up() { # FAIL [FIRST]
  local fail=$1
  rm -f /run/lab/periph2-go
  pbg $OUT/agent.log $PY -I -u $G/agent.py KeyboardDisplay
  pbg $OUT/gatt-server.log env ADV_FULL=$LAB_ADV_FULL $PY -I -u $G/run-example.py /org/bluez/hci0 $EX/example-gatt-server
  if [ "${2:-0}" = 1 ]; then
    lasting $OUT/periph.log $PY -I -u $G/periph.py /org/bluez/hci0
    lasting $OUT/periph2.log env ADV_PULSE=$LAB_ADV_PULSE $PY -I -u $G/periph.py --att $PERIPH2_STATIC --advertise Periph2 \
      --go /run/lab/periph2-go /org/bluez/hci2
  fi
  # The peripheral is LE-only, or Device1.Connect() on the central tries
  # BR/EDR (org.bluez.Error.NotAvailable br-connection-profile-unavailable).
  # BR/EDR can be switched off only while powered off; bluetoothd switches it
  # on again when it starts (ControllerMode = dual).
  if [ "$LAB_PERIPH_BREDR" = off ]; then
    { btmgmt --index 0 power off; btmgmt --index 0 bredr off; btmgmt --index 0 power on; } 2>&1 | detail
  fi
  # hci2: LE-only with a static random address, which the kernel then uses as
  # its LE identity (set while powered off; BR/EDR on would make the public
  # address the identity again, and bluetoothd switches BR/EDR on when it
  # starts with the controller powered off)
  { btmgmt --index 2 power off; btmgmt --index 2 bredr off; btmgmt --index 2 static-addr $PERIPH2_STATIC
    btmgmt --index 2 power on; } 2>&1 | detail
  # hci3, the server adapter (bluectl serve/advertise): LE-only like hci0, for
  # the same reason (a central's Device1.Connect would try BR/EDR), its public
  # address, powered; not discoverable (an advertisement says that itself) and
  # nothing registered on it: the adapter is bluectl's alone
  if [ -n "$SERVER" ]; then
    { btmgmt --index 3 power off; btmgmt --index 3 bredr off; btmgmt --index 3 le on; btmgmt --index 3 power on; } < /dev/console 2>&1 | detail
  fi
  wait_until 60 "hci0 powered" powered hci0 || { $fail "hci0 not powered"; return 1; }
  wait_until 60 "hci1 powered" powered hci1 || { $fail "hci1 not powered"; return 1; }
  wait_until 60 "hci2 powered" powered hci2 || { $fail "hci2 not powered"; return 1; }
  if [ -n "$SERVER" ]; then
    wait_until 60 "$SERVER powered" powered "$SERVER" || { $fail "$SERVER not powered"; return 1; }
    wait_until 10 "$SERVER LE-only, public identity" server_ready || { $fail "$SERVER: identity $(identity "$SERVER"), BR/EDR not off"; return 1; }
    btmgmt --index 3 info < /dev/console 2>&1 | sed 's/^/[btmgmt hci3] /' | detail
  fi
  wait_until 10 "hci2 identity $PERIPH2_STATIC (random)" static_identity \
    || { $fail "hci2's identity is $(identity hci2), not $PERIPH2_STATIC random"; return 1; }
  btmgmt --index 0 info 2>&1 | sed 's/^/[btmgmt hci0] /' | detail
  btmgmt --index 2 info 2>&1 | sed 's/^/[btmgmt hci2] /' | detail
  # discoverable => "LE General Discoverable" flag in the advertisement
  local hci
  for hci in hci0 hci2; do
    adapter_set $hci DiscoverableTimeout uint32:0 2>&1 | detail
    adapter_set $hci Discoverable boolean:true 2>&1 | detail
  done
  wait_until 60 "hci0 discoverable" discoverable hci0 || true
  pbg $OUT/advertisement.log env ADV_FULL=$LAB_ADV_FULL ADV_PULSE=$LAB_ADV_PULSE $PY -I -u $G/run-example.py /org/bluez/hci0 $EX/example-advertisement
  wait_until 60 "hci2 discoverable" discoverable hci2 || true
  touch /run/lab/periph2-go
  since() { awk -v m="== peripheral up at" '$0 ~ m { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$1" | grep -q "$2"; }
  wait_until 90 "agent registered" since $OUT/agent.log "agent registered" \
    || { $fail "agent did not register" $OUT/agent.log; return 1; }
  wait_until 90 "example GATT application registered" since $OUT/gatt-server.log "GATT application registered" \
    || { $fail "example-gatt-server did not register" $OUT/gatt-server.log; return 1; }
  wait_until 90 "project peripheral registered" since $OUT/periph.log "periph: application registered" \
    || { $fail "periph.py did not register" $OUT/periph.log; return 1; }
  wait_until 90 "advertisement registered" since $OUT/advertisement.log "Advertisement registered" \
    || { $fail "example-advertisement did not register" $OUT/advertisement.log; return 1; }
  if [ "${2:-0}" = 1 ]; then
    wait_until 90 "hci2: ATT server listening" since $OUT/periph2.log "periph: ATT server listening" \
      || { $fail "periph.py on hci2 did not listen" $OUT/periph2.log; return 1; }
  fi
  wait_until 90 "hci2: advertisement registered" since $OUT/periph2.log "periph: advertisement registered" \
    || { $fail "periph.py on hci2 did not advertise" $OUT/periph2.log; return 1; }
}
peripheral_down() {
  local p
  for p in $(cat /run/lab/periph.pids 2>/dev/null); do kill "$p" 2>/dev/null; done
  : > /run/lab/periph.pids
}

# bluetoothd under a supervisor that restarts it when it dies, as systemd
# would (bluetoothd 5.66 segfaults in this lab on quick reconnects and
# AcquireNotify bursts): each death is one line in supervisor.log (guest
# uptime, how it ended), then the peripheral side is brought up again. Checks
# read supervisor.log to report the crashes they lived through.
supervise_bluetoothd() {
  local n=0 rc how btd
  while :; do
    echo "== bluetoothd start $n at $(up)s" >> $OUT/bluetoothd.log
    mark_logs $n
    /usr/libexec/bluetooth/bluetoothd "${BTD_OPTS[@]}" >> $OUT/bluetoothd.log 2>&1 &
    btd=$!
    if [ $n -gt 0 ] && wait_until 60 "bluetoothd exports ${CTLS[*]} (restart $n)" all_up \
         && peripheral_up supervisor_failed; then
      echo "$(up) peripheral ready again (restart $n): hci0 and hci2${SERVER:+ (server adapter $SERVER set up)}" >> $OUT/supervisor.log
    fi
    wait $btd
    rc=$?
    [ -e /run/lab/stopping ] && return 0
    if [ $rc -gt 128 ]; then how="killed by signal $((rc - 128))"; else how="exited with status $rc"; fi
    n=$((n + 1))
    echo "$(up) bluetoothd $how; restarting (restart $n)" >> $OUT/supervisor.log
    say "bluetoothd $how; the supervisor restarts it"
    rm -f /run/lab/periph2-go   # periph.py on hci2 advertises again once hci2 is set up again
    peripheral_down
    sleep 0.5
  done
}
supervisor_failed() { echo "$(up) after a restart: $1" >> $OUT/supervisor.log; }
: > $OUT/supervisor.log
supervise_bluetoothd &
SUPERVISOR_PID=$!
wait_until 60 "bluetoothd exports ${CTLS[*]}" all_up \
  || bringup_failed "bluetoothd did not export the adapters ${CTLS[*]}" $OUT/bluetoothd.log
PERIPH_ADDR=$(addr_of hci0); CENTRAL_ADDR=$(addr_of hci1)
timing bluetoothd "$(up)"
say "bluetoothd up: peripheral hci0=$PERIPH_ADDR, central hci1=$CENTRAL_ADDR"
peripheral_up bringup_failed 1
read -r PERIPH2_ADDR PERIPH2_ADDR_TYPE < <(identity hci2)
SERVER_ADDR=; [ -n "$SERVER" ] && SERVER_ADDR=$(addr_of "$SERVER")
timing ready "$(up)"
say "PERIPHERAL READY (second peripheral hci2=$PERIPH2_ADDR, $PERIPH2_ADDR_TYPE${SERVER:+; server adapter $SERVER=$SERVER_ADDR})"

# ---- the job
export BLUECTL CENTRAL=hci1 CENTRAL_ADDR PERIPHERAL=hci0 PERIPH_ADDR LAB_OUT=$OUT REPO
export PERIPHERAL2=hci2 PERIPH2_ADDR PERIPH2_ADDR_TYPE SERVER SERVER_ADDR
export LAB_GATT_CHANNELS LAB_MTU
cd "$REPO" || finish 125
if [ "$LAB_INTERACTIVE" = 1 ]; then
  say "interactive shell (exit to power off); env: BLUECTL CENTRAL CENTRAL_ADDR PERIPH_ADDR PERIPH2_ADDR SERVER SERVER_ADDR LAB_OUT REPO"
  setsid -c /bin/bash -i < /dev/console > /dev/console 2>&1
  finish $?
fi
if [ ! -f "$LAB_SCRIPT" ]; then say "script not found in the guest: $LAB_SCRIPT"; finish 127; fi
left=$(awk -v t="$LAB_TIMEOUT" -v u="$(up)" 'BEGIN { l = int(t - u - 15); print (l < 10 ? 10 : l) }')
say "running ${LAB_SCRIPT#$REPO/} ${LAB_ARGS[*]} (time left ${left}s)"
T0=$(up)
if [ -x "$LAB_SCRIPT" ]; then CMD=("$LAB_SCRIPT"); else CMD=(/bin/bash "$LAB_SCRIPT"); fi
timeout -k 5 "$left" "${CMD[@]}" "${LAB_ARGS[@]}" < /dev/null 2>&1 | tee $OUT/check.log
RC=${PIPESTATUS[0]}
timing check "$(awk -v a="$T0" -v b="$(up)" 'BEGIN { printf "%.1f", b - a }')"
if [ "$RC" = 124 ] && [ "$(awk -v a="$T0" -v b="$(up)" -v l="$left" 'BEGIN { print (b - a >= l - 1) }')" = 1 ]; then
  say "CHECK TIMED OUT after ${left}s (killed)"
  echo "LAB-CHECK-TIMEOUT"
fi
say "script exited rc=$RC"
finish "$RC"
