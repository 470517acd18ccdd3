#!/bin/bash
# The guest half of a capture of the live scan view (`Scripts/lab run
# Scripts/lab.d/live-capture.sh`): `bluectl scan` on a pseudo-terminal (tmux,
# 110 x 12) against the real bluetoothd and the lab's advertising peripheral;
# the screen after 6 s and the exit status at --timeout go to stdout and to
# $LAB_OUT/live-scan.txt.
out=$LAB_OUT/live-scan.txt status=$LAB_OUT/live-scan.status
rm -f "$status"
tmux -L capture new-session -d -s live -x 110 -y 12 \
  "'$BLUECTL' scan --adapter '$CENTRAL' --timeout 8; echo \$? > '$status'"
sleep 6
tmux -L capture capture-pane -p -t live > "$out"
for _ in $(seq 1 60); do [ -s "$status" ] && break; sleep 0.5; done
tmux -L capture kill-server 2> /dev/null
echo "exit status at --timeout: $(cat "$status" 2> /dev/null || echo none)" >> "$out"
cat "$out"
grep -q "^bluectl scan on $CENTRAL: " "$out" && grep -q "^$PERIPH_ADDR " "$out" && [ "$(cat "$status" 2> /dev/null)" = 0 ]
