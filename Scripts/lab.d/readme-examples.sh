#!/bin/bash
# The guest half of Scripts/refresh-readme: runs every example the README (and
# docs/pairing.md) shows against the lab's peripherals and writes each marked
# block's text to $LAB_OUT/examples/NAME.txt -- `$ bluectl ...` command lines, each
# followed by what it printed (stdout and stderr, as a terminal would show
# them). The host puts these into the blocks between `<!-- lab:NAME -->` and
# `<!-- /lab -->`. $LAB_OUT/status.txt lists every command's exit status;
# a status other than the one an example expects makes this script exit 1.
#
# The serve and advertise examples need the lab's fourth controller for
# bluectl's own peripheral role (SERVER=hci3, SERVER_ADDR); without it their
# files are not written and the host leaves those blocks as they are.
set -u
DEV=$PERIPH_ADDR                                  # BlueZ's example GATT server on hci0
DEV2=${PERIPH2_ADDR:-C0:AA:01:02:00:02}           # the lab's own peripheral on hci2 (static random)
TEST_CHR=12345678-1234-5678-1234-56789abcdef1      # the example's test characteristic (read, write)
LAB_CTRL=b1ec7100-0000-4000-8000-000000000002      # the lab peripheral's control characteristic (read)
A=(--adapter "$CENTRAL")
STEP_TIMEOUT=${STEP_TIMEOUT:-60}
cur= bad=0
mkdir -p "$LAB_OUT/examples"
: > "$LAB_OUT/status.txt"

show() { # an argument as a reader would type it
  if [[ $1 =~ ^[A-Za-z0-9_./:,=+@%-]+$ ]]; then printf '%s' "$1"
  elif [[ $1 != *[\'\\]* ]]; then printf "'%s'" "$1"
  else printf '%q' "$1"; fi
}
cmdline() { local s='$ bluectl' a; for a in "$@"; do s+=" $(show "$a")"; done; printf '%s' "$s"; }
block() { cur=$LAB_OUT/examples/$1.txt; : > "$cur"; echo "== $1"; }  # a new block; the next examples go there
into() { cur=$LAB_OUT/examples/$1.txt; }                                # back to a block begun earlier
# ex [-e STATUS] ARGS...: one example of the current block (expected exit status: 0)
ex() {
  local want=0 rc; [ "$1" = -e ] && { want=$2; shift 2; }
  cmdline "$@" >> "$cur"; echo >> "$cur"
  timeout -k 5 "$STEP_TIMEOUT" "$BLUECTL" "$@" < /dev/null >> "$cur" 2>&1; rc=$?
  echo "$(basename "$cur" .txt) $rc $(cmdline "$@")" >> "$LAB_OUT/status.txt"
  [ "$rc" = "$want" ] || { echo "   FAILED (exit $rc, expected $want): $(cmdline "$@")"; bad=1; }
}
quiet() { timeout -k 5 "$STEP_TIMEOUT" "$BLUECTL" "$@" < /dev/null > /dev/null 2>&1; }

# a one-minute tour: find, read, stream (read and subscribe connect and
# disconnect by themselves)
block tour
ex scan "${A[@]}" --timeout 10 --count 2
ex read "${A[@]}" "$DEV" battery_level
ex subscribe "${A[@]}" "$DEV" heart_rate_measurement --count 2

block adapters
ex adapters
ex adapter "$CENTRAL" --alias "Gateway 3" --pairable on
block adapter-more
ex adapter "$CENTRAL" --discoverable on --json
into adapters
ex adapter "$CENTRAL" --discoverable off --power off
quiet adapter "$CENTRAL" --power on --alias "BlueZ 5.66"

block scan
ex scan "${A[@]}" --timeout 6
ex scan "${A[@]}" --json --service heart_rate --count 1

# the live view: scan on a terminal (tmux, 110 x 8), the screen after 5 s
block scan-live
if command -v tmux > /dev/null; then
  st=/tmp/live.status; rm -f "$st"
  tmux -L readme new-session -d -s live -x 110 -y 8 "'$BLUECTL' scan --adapter '$CENTRAL' --timeout 7; echo \$? > $st"
  sleep 5
  { cmdline scan "${A[@]}" --timeout 7; echo "   (on a terminal)"; } >> "$cur"
  tmux -L readme capture-pane -p -t live | sed -e 's/[[:space:]]*$//' -e '/^$/d' >> "$cur"
  for _ in $(seq 1 40); do [ -s "$st" ] && break; sleep 0.5; done
  tmux -L readme kill-server 2> /dev/null
  echo "scan-live $(cat "$st" 2> /dev/null || echo none) (tmux) scan --timeout 7" >> "$LAB_OUT/status.txt"
else
  rm -f "$cur"
fi

# talking to a device (README: device; docs/devices.md: device-more)
block device
block device-more
into device
ex connect "${A[@]}" "$DEV"
ex discover "${A[@]}" "$DEV" --service heart_rate
ex read "${A[@]}" "$DEV" battery_level --json
into device-more
ex write "${A[@]}" "$DEV" "$TEST_CHR" 0x48656c6c6f --with-response
ex write "${A[@]}" "$DEV" "$TEST_CHR" --utf8 "Hi there"
ex read "${A[@]}" "$DEV" "$TEST_CHR" --format utf8
into device
ex subscribe "${A[@]}" "$DEV" heart_rate_measurement --count 2
into device-more
ex subscribe "${A[@]}" "$DEV" heart_rate_measurement --count 1 --json
ex info "${A[@]}" "$DEV"
into device
ex disconnect "${A[@]}" "$DEV"

# known devices and their lifecycle (README: lifecycle; docs/devices.md: lifecycle-more)
block lifecycle
block lifecycle-more
into lifecycle
ex devices "${A[@]}"
ex pair "${A[@]}" "$DEV"
into lifecycle-more
ex pair "${A[@]}" "$DEV" --json
into lifecycle
ex trust "${A[@]}" "$DEV"
into lifecycle-more
ex trust "${A[@]}" "$DEV"
ex devices "${A[@]}" --trusted
ex block "${A[@]}" "$DEV"
ex unblock "${A[@]}" "$DEV"
into lifecycle
ex unpair "${A[@]}" "$DEV"
into lifecycle-more
ex remove "${A[@]}" "$DEV" --json

# pairing with the default agent (docs/pairing.md); the device was just unpaired
block pairing
ex connect "${A[@]}" "$DEV" --pair
quiet disconnect "${A[@]}" "$DEV"
quiet unpair "${A[@]}" "$DEV"

# many devices: two that answer, one BlueZ does not have (a D-Bus path: not
# found at once, exit 68). (An address that is nowhere is scanned for until
# --timeout, which then ends the whole command with 124.)
block many
ex -e 68 read "${A[@]}" "$DEV,$DEV2,/org/bluez/$CENTRAL/dev_00_AA_01_00_00_09" "$LAB_CTRL"
block many-json
ex read "${A[@]}" "$DEV,$DEV2" "$LAB_CTRL" --json

# bluectl's own peripheral role, on the lab's SERVER adapter
if [ -n "${SERVER:-}" ] && [ -n "${SERVER_ADDR:-}" ]; then
  spec=$REPO/Tests/Lab/heart-rate.json
  if [ ! -f "$spec" ]; then
    spec=/tmp/heart-rate.json
    printf '%s\n' '{"services":[{"uuid":"180d","primary":true,"characteristics":[' \
      '  {"uuid":"2a37","flags":["notify"],"value":"0600"},' \
      '  {"uuid":"2a38","flags":["read"],"value":"01"},' \
      '  {"uuid":"2a39","flags":["write"],"value":"00"}]}]}' > "$spec"
  fi
  fifo=/tmp/serve.fifo events=/tmp/serve.out
  rm -f "$fifo"; mkfifo "$fifo"
  "$BLUECTL" serve "$spec" --adapter "$SERVER" --advertise --name bluectl-hr < "$fifo" > "$events" 2>&1 &
  serve_pid=$!
  exec 3> "$fifo"                                   # serve's stdin stays open while we feed it
  for _ in $(seq 1 40); do grep -q . "$events" && break; sleep 0.5; done
  block serve-central
  ex read "${A[@]}" "$SERVER_ADDR" 2a38
  ex write "${A[@]}" "$SERVER_ADDR" 2a39 01
  cmdline subscribe "${A[@]}" "$SERVER_ADDR" 2a37 --count 3 >> "$cur"; echo >> "$cur"
  timeout -k 5 "$STEP_TIMEOUT" "$BLUECTL" subscribe "${A[@]}" "$SERVER_ADDR" 2a37 --count 3 < /dev/null > /tmp/sub.out 2>&1 &
  sub_pid=$!
  for _ in $(seq 1 60); do grep -q subscribed "$events" && break; sleep 0.5; done
  for v in 0648 064a 064c; do
    echo "{\"characteristic\":\"2a37\",\"value\":\"$v\"}" >&3; sleep 1
  done
  wait "$sub_pid"; rc=$?
  cat /tmp/sub.out >> "$cur"
  echo "serve-central $rc subscribe 2a37 --count 3" >> "$LAB_OUT/status.txt"
  [ "$rc" = 0 ] || { echo "   FAILED: subscribe to bluectl serve (exit $rc)"; bad=1; }
  sleep 1
  kill -INT "$serve_pid"; wait "$serve_pid"; rc=$?
  exec 3>&-
  block serve
  cmdline serve "$(basename "$spec")" --adapter "$SERVER" --advertise --name bluectl-hr >> "$cur"; echo >> "$cur"
  cat "$events" >> "$cur"
  echo "^C" >> "$cur"
  echo "serve $rc serve (SIGINT)" >> "$LAB_OUT/status.txt"
  [ "$rc" = 130 ] || { echo "   FAILED: serve ended with $rc, not 130"; bad=1; }

  # btvirt reports an advertisement when its set is enabled (the report when a
  # scan starts is dropped): the scan runs first, then advertise starts
  block advertise
  { cmdline scan "${A[@]}" --timeout 20 --count 1 --name bluectl-demo; echo " &"; } >> "$cur"
  timeout -k 5 40 "$BLUECTL" scan "${A[@]}" --timeout 20 --count 1 --name bluectl-demo < /dev/null > /tmp/advscan.out 2>&1 &
  scan_pid=$!
  for _ in $(seq 1 20); do "$BLUECTL" adapters 2> /dev/null | grep -q "^$CENTRAL .*discovering" && break; sleep 0.5; done
  ex advertise --adapter "$SERVER" --name bluectl-demo --manufacturer 0xffff=0102 --duration 8
  wait "$scan_pid"; rc=$?
  cat /tmp/advscan.out >> "$cur"
  echo "advertise $rc (background) scan --name bluectl-demo" >> "$LAB_OUT/status.txt"
  [ "$rc" = 0 ] && grep -q "bluectl-demo" /tmp/advscan.out \
    || { echo "   FAILED: the scan did not report bluectl-demo (exit $rc)"; bad=1; }

  # a BTHome sensor (advertise --bthome) and a scan that decodes it, started first (btvirt
  # reports an advertisement when its set is enabled): once in text, once in JSON, one after
  # the other (two discoveries starting at once kept the second waiting past its timeout);
  # hci1 forgets what the examples above advertised from the same address
  block sensors
  for form in text json; do
    quiet remove "${A[@]}" "$SERVER_ADDR"
    args=(scan "${A[@]}" --sensors --count 1 --timeout 20); [ $form = json ] && args+=(--json)
    { cmdline "${args[@]}"; echo " &"; } >> "$cur"
    timeout -k 5 40 "$BLUECTL" "${args[@]}" < /dev/null > /tmp/sensorscan.$form 2>&1 &
    scan_pid=$!
    for _ in $(seq 1 20); do "$BLUECTL" adapters 2> /dev/null | grep -q "^$CENTRAL .*discovering" && break; sleep 0.5; done
    ex advertise --adapter "$SERVER" --name bluectl-sensor --bthome temperature=21.5 --bthome humidity=48 --bthome battery=97 --duration 8
    wait "$scan_pid"; rc=$?
    cat /tmp/sensorscan.$form >> "$cur"
    echo "sensors $rc (background) scan --sensors ($form)" >> "$LAB_OUT/status.txt"
    [ "$rc" = 0 ] && grep -qE '21.5 °C|"temperature_c":21.5' /tmp/sensorscan.$form \
      || { echo "   FAILED: the $form scan did not decode the BTHome sensor (exit $rc)"; bad=1; }
  done
else
  echo "== serve, advertise, sensors: skipped (this lab has no SERVER adapter)"
fi

echo
cat "$LAB_OUT/status.txt"
exit $bad
