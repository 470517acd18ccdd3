# Sourced by guest.sh (the lab) and host.sh (the stand-in): the pieces both
# runs start. Needs BLUECTL, W (a scratch directory) and OUT (the logs).

# What was started, stopped last-first on exit.
pids=()
stop_all() { for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done; wait; }

# A BTHome sensor on ADAPTER: `bluectl advertise --bthome`, a new temperature every 3 s on its stdin
# (the stand-in and btvirt report an advertisement when it changes).
start_bthome() {
  mkfifo "$W/adv.in"
  "$BLUECTL" advertise --adapter "$1" --bthome temperature=21.5 --bthome humidity=40 --json \
    < "$W/adv.in" > "$OUT/advertise.out" 2> "$OUT/advertise.err" & pids+=($!)
  ( i=0; while sleep 3; do
      i=$((i + 1)); printf '{"temperature": %s}\n' "$(awk -v i=$i 'BEGIN { printf "%.1f", 21.5 + (i % 20) / 10 }')"
    done ) > "$W/adv.in" & pids+=($!)
}

# The proxy on ADAPTER, port PORT, named NAME, encrypted with a new key ($W/api.key); waits until it listens.
start_proxy() {
  (umask 077; head -c 32 /dev/urandom | base64 > "$W/api.key")
  BLUECTL_LOG_LEVEL=${PROXY_LOG_LEVEL:-info} "$BLUECTL" proxy --adapter "$1" --port "$2" --name "$3" --no-mdns \
    --key-file "$W/api.key" > "$OUT/proxy.out" 2> "$OUT/proxy.err" & pids+=($!)
  for _ in $(seq 60); do grep -q 'listening on port' "$OUT/proxy.err" && return 0; sleep 1; done
  cat "$OUT/proxy.err"; echo "the proxy did not listen"; return 1
}

# Home Assistant's configuration directory, $W/config, its HTTP server on PORT.
ha_config() {
  mkdir -p "$W/config"
  sed "s/server_port: 8123/server_port: $1/" "$(dirname "${BASH_SOURCE[0]}")/configuration.yaml" > "$W/config/configuration.yaml"
}
