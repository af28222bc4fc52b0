#!/usr/bin/env bash
# Benchmark of the live page (`chaos run --serve`, see docs/performance.md): does serving the
# page, its event stream and /metrics to a room slow the run's measurements? The same open-load
# run (Poisson RATE req/s at the run's own mock, fixed 100 ms answers, a latency fault in the
# middle) three ways, ROUNDS rounds each, interleaved:
#
#   off     without --serve
#   served  with --serve and no page open
#   pages   with --serve, PAGES pages (20) on the event stream (curl -N), one page that drops its
#           connection every 2 s and reconnects (a flaky browser), and a scraper on /metrics
#           every second
#
# For each: the schedule lag p99 (sent − intended: how late the generator sent), the latency
# p99 it measured, the send rate achieved, and the harness's CPU per request while the load
# runs (from 3 s in to 1 s before its end; the process holds the mock and the generator).
# Medians of the rounds. Loopback only; every run is bounded (RUN_SECONDS). Knobs: RATE (1000), RUN_SECONDS (30),
# ROUNDS (3), PAGES (20).
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
SECONDS_RUN=${RUN_SECONDS:-30}
ROUNDS=${ROUNDS:-3}
PAGES=${PAGES:-20}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
command -v curl >/dev/null || { echo "needs curl" >&2; exit 2; }
source ci/bench-lib.sh  # free_port, median

cargo build --release --quiet --bin chaos
CHAOS=target/release/chaos

third=$((SECONDS_RUN / 3))
cat > "$WORK/live.toml" <<EOF
name = "bench-live"
seed = 5
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "100ms" }, output_tokens = { dist = "fixed", value = 1 } }
[[fault]]
name = "slow"
kind = "latency"
multiplier = 2.0
start = "${third}s"
duration = "${third}s"
[load]
timeout = "10s"
[[load.phase]]
name = "steady"
rate = $RATE.0
arrival = "poisson"
duration = "${SECONDS_RUN}s"
EOF

# One run; $1 = mode (off, served, pages). Prints "lag_p99 latency_p99 send_rps cpu_us_per_request".
one() {
  local mode=$1 dir="$WORK/run-$1-$RANDOM" port url args=() clients=()
  if [ "$mode" != off ]; then
    port=$(free_port)
    url="http://127.0.0.1:$port"
    args=(--serve "127.0.0.1:$port" --serve-linger 0s)
  fi
  "$CHAOS" run "$WORK/live.toml" --out "$dir" --progress off "${args[@]}" > /dev/null 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  local start=$EPOCHREALTIME
  if [ "$mode" = pages ]; then
    for _ in $(seq 100); do curl -fs "$url/api/state" >/dev/null 2>&1 && break; sleep 0.05; done
    for _ in $(seq "$PAGES"); do
      curl -sN --max-time $((SECONDS_RUN + 30)) "$url/events" > /dev/null 2>&1 &
      clients+=($!)
    done
    ( while kill -0 "$pid" 2>/dev/null; do curl -sN --max-time 2 "$url/events" > /dev/null 2>&1 || true; done ) &
    clients+=($!)
    ( while kill -0 "$pid" 2>/dev/null; do curl -s --max-time 2 "$url/metrics" > /dev/null 2>&1 || true; sleep 1; done ) &
    clients+=($!)
  fi
  # CPU ticks (user + system) of the run between 3 s in and 1 s before the load ends.
  sleep "$(awk -v s="$start" -v n="$EPOCHREALTIME" 'BEGIN{d=3-(n-s); print (d>0?d:0)}')"
  local t0 t1
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep $((SECONDS_RUN - 4))
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n=$((RATE * (SECONDS_RUN - 4))) \
    'BEGIN{printf "%.1f", t*1e6/hz/n}' > "$WORK/cpu"
  wait "$pid"
  for c in "${clients[@]:-}"; do [ -n "$c" ] && kill "$c" 2>/dev/null || true; done
  wait 2>/dev/null || true
  python3 - "$dir" "$(cat "$WORK/cpu")" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
st = s["stages"][0]
n = s["totals"]["requests"]
print(st["schedule"]["lag_p99_ms"], st["latency_ms"]["p99"], st["schedule"]["achieved_send_rps"], n, sys.argv[2])
PY
  rm -rf "$dir"
}

echo "== live page: $RATE req/s Poisson for ${SECONDS_RUN}s, $ROUNDS rounds per mode, $PAGES pages"
declare -A LAG LAT RPS CPU
for r in $(seq "$ROUNDS"); do
  for mode in off served pages; do
    read -r lag lat rps n cpu < <(one "$mode")
    LAG[$mode]+="$lag "
    LAT[$mode]+="$lat "
    RPS[$mode]+="$rps "
    CPU[$mode]+="$cpu "
    echo "   round $r $mode: lag p99 $lag ms, latency p99 $lat ms, sent $rps req/s ($n requests), $cpu µs CPU/request"
  done
done
col() { echo "$1" | tr ' ' '\n' | grep -v '^$' | median; }
for mode in off served pages; do
  printf '   median %-6s lag p99 %6.2f ms, latency p99 %7.1f ms, sent %7.1f req/s, %5.1f µs CPU/request\n' "$mode" \
    "$(col "${LAG[$mode]}")" "$(col "${LAT[$mode]}")" "$(col "${RPS[$mode]}")" "$(col "${CPU[$mode]}")"
done
