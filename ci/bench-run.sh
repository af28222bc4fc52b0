#!/usr/bin/env bash
# Benchmarks of the `chaos run` pipeline (see docs/performance.md): goose users, our own
# µs timing, the sample channel, the HDR recorders and the window log, measured against wrk on
# the same machine. Loopback only; every run is bounded in time; the mock is pinned to CPU 0
# and the load generator (wrk or `chaos run`) to CPU 1.
#
#   1. closed-load throughput: 64 connections / 64 users against a zero-latency `chaos mock`
#      (a separate process, the run's SUT by URL): req/s of `chaos run` vs wrk, as a ratio, and
#      generator CPU µs per request.
#   2. measurement agreement: fixed 100 ms answers at 256 connections / users: p50 and p99 as
#      `chaos run` reports them (first second left out as a warm-up) vs as wrk reports them.
#   3. open load: OPEN_RATE req/s of Poisson arrivals at the fixed 100 ms mock: achieved send
#      rate as % of requested, schedule lag p99, dropped arrivals.
#   4. memory: RSS of `chaos run` sampled during a MEM_SECONDS run at MEM_RATE req/s (open
#      load) — it must level off, not grow with the run's length.
#   5. analysis: `chaos report` on that run's folder (MEM_SECONDS × MEM_RATE requests and
#      attempts): wall time and peak RSS of reading, analysing and charting it.
#   6. open streams per worker: STREAMS (space-separated, default "1000 2000 4000") closed
#      users each holding a ~7.5 s stream (100 ms to the first token, then a token every 50 ms,
#      150 tokens) from the mock: the inter-token gaps as `chaos run` measures them (p50, p99
#      against the mock's 50 ms), the streams completed, and the generator's CPU share while
#      they stream — how many concurrent streams one worker times accurately.
#
# Prints the median of ROUNDS rounds for 1 and 2. Knobs: ROUNDS (3), SECONDS_PER_RUN (10),
# OPEN_RATE (2000), MEM_RATE (500), MEM_SECONDS (120), STREAMS, SECTIONS (default "1 2 3 4 5";
# 5 needs 4; 6 runs when asked).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
OPEN_RATE=${OPEN_RATE:-2000}
MEM_RATE=${MEM_RATE:-500}
MEM_SECONDS=${MEM_SECONDS:-120}
SECTIONS=${SECTIONS:-1 2 3 4 5}
section() { [[ " $SECTIONS " == *" $1 "* ]]; }
SERVER_CPU=0
CLIENT_CPU=1
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

source ci/bench-lib.sh
install_peers
ulimit -n 20000 2>/dev/null || true

cargo build --release --quiet --bin chaos
CHAOS=target/release/chaos

start_mock() {
  start_listening $SERVER_CPU mock "$CHAOS" mock --profile "$1" --attempt-ring 100000
  MOCK_PID=$STARTED_PID
  MOCK_URL=$STARTED_URL
}

# Writes a scenario that sends its load to $MOCK_URL; $1 = file, $2 = the [[load.phase]] level
# line(s) (e.g. "users = 64").
write_scenario() {
  cat > "$1" <<TOML
name = "bench"
[[upstream]]
name = "unused"
profile = "$PWD/mock-upstreams/instant.toml"
[sut]
url = "$MOCK_URL"
[load]
timeout = "10s"
max_users = ${MAX_USERS:-4096}
[[load.phase]]
name = "run"
duration = "${3:-${SECONDS_PER_RUN}s}"
$2
TOML
}

# Runs `chaos run` on CPU 1; prints the run folder. Its CPU seconds (user + system, the whole
# process: goose, timing, recorders, the unused in-process upstream) go to $WORK/cpu.
chaos_run() {
  local out="$WORK/run-$RANDOM$RANDOM"
  local TIMEFORMAT='%U %S'
  { time taskset -c $CLIENT_CPU "$CHAOS" run "$1" --out "$out" --progress off > "$WORK/run.out" 2> "$WORK/run.err"; } 2> "$WORK/time" || {
    echo "chaos run failed:" >&2; cat "$WORK/run.out" "$WORK/run.err" >&2; exit 3; }
  awk '{print $1 + $2}' "$WORK/time" > "$WORK/cpu"
  echo "$out"
}
field() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/summary.json')); print(eval(sys.argv[2]))" "$1" "$2"; }

if section 1; then
echo "== 1. closed-load throughput, zero-latency mock (64 connections/users, ${SECONDS_PER_RUN}s x ${ROUNDS} rounds, alternating)"
start_mock mock-upstreams/instant.toml
write_scenario "$WORK/tp.toml" "users = 64"
: > "$WORK/tp.wrk"; : > "$WORK/tp.chaos"
for r in $(seq "$ROUNDS"); do
  read -r w_rps _ _ _ _ _ < <(run_wrk "$MOCK_URL" 64)
  echo "   round $r wrk:   $w_rps req/s"
  echo "$w_rps" >> "$WORK/tp.wrk"
  dir=$(chaos_run "$WORK/tp.toml")
  c_rps=$(field "$dir" "round(s['stages'][0]['offered_rps'])")
  c_us=$(awk -v c="$(cat "$WORK/cpu")" -v n="$(field "$dir" "s['totals']['requests']")" 'BEGIN{printf "%.1f", c*1e6/n}')
  echo "   round $r chaos: $c_rps req/s, generator $c_us µs CPU/request"
  echo "$c_rps $c_us" >> "$WORK/tp.chaos"
done
stop_pid "$MOCK_PID"
w=$(median < "$WORK/tp.wrk"); c=$(cut -d' ' -f1 "$WORK/tp.chaos" | median); cu=$(cut -d' ' -f2 "$WORK/tp.chaos" | median)
echo "   median: chaos run $c req/s ($cu µs CPU/request), wrk $w req/s, ratio $(ratio "$c" "$w")"
fi

cat > "$WORK/delay.toml" <<'TOML'
name = "delay"
[latency]
ttft = { dist = "fixed", value = "100ms" }
output_tokens = { dist = "fixed", value = 1 }
TOML

if section 2; then
echo "== 2. measurement agreement, fixed 100 ms (256 connections/users, ${SECONDS_PER_RUN}s x ${ROUNDS} rounds)"
start_mock "$WORK/delay.toml"
# The first second opens 256 connections at once (wrk opens its connections before it starts
# its clock), so the phase leaves it out as a warm-up.
write_scenario "$WORK/d.toml" "users = 256
warmup = \"1s\""
: > "$WORK/d.wrk"; : > "$WORK/d.chaos"
for r in $(seq "$ROUNDS"); do
  read -r w_rps w50 w99 _ _ _ < <(run_wrk "$MOCK_URL" 256)
  dir=$(chaos_run "$WORK/d.toml")
  c50=$(field "$dir" "s['stages'][0]['latency_ms']['p50']"); c99=$(field "$dir" "s['stages'][0]['latency_ms']['p99']")
  c_rps=$(field "$dir" "round(s['stages'][0]['offered_rps'])")
  echo "   round $r: wrk p50 $(ms "$w50") / p99 $(ms "$w99") ms ($w_rps req/s); chaos p50 $c50 / p99 $c99 ms ($c_rps req/s)"
  echo "$(ms "$w50") $(ms "$w99")" >> "$WORK/d.wrk"; echo "$c50 $c99" >> "$WORK/d.chaos"
done
stop_pid "$MOCK_PID"
echo "   median: wrk p50 $(cut -d' ' -f1 "$WORK/d.wrk" | median) / p99 $(cut -d' ' -f2 "$WORK/d.wrk" | median) ms; chaos p50 $(cut -d' ' -f1 "$WORK/d.chaos" | median) / p99 $(cut -d' ' -f2 "$WORK/d.chaos" | median) ms"
fi

if section 3; then
echo "== 3. open load, Poisson $OPEN_RATE req/s at the fixed 100 ms mock (${SECONDS_PER_RUN}s)"
start_mock "$WORK/delay.toml"
write_scenario "$WORK/o.toml" "rate = $OPEN_RATE.0
arrival = \"poisson\""
dir=$(chaos_run "$WORK/o.toml")
field "$dir" "'   requested %.0f req/s, sent %.0f req/s (%.1f %%), lag p99 %.2f ms, dropped %d, max in flight %d, %s; latency p50 %.1f p99 %.1f ms' % (s['stages'][0]['schedule']['requested_rps'], s['stages'][0]['schedule']['achieved_send_rps'], 100*s['stages'][0]['schedule']['achieved_send_rps']/s['stages'][0]['schedule']['requested_rps'], s['stages'][0]['schedule']['lag_p99_ms'], s['stages'][0]['schedule']['dropped'], s['stages'][0]['schedule']['max_in_flight'], s['stages'][0]['sustainability'], s['stages'][0]['latency_ms']['p50'], s['stages'][0]['latency_ms']['p99'])"
stop_pid "$MOCK_PID"
fi

if section 4; then
echo "== 4. memory over a ${MEM_SECONDS}s run at $MEM_RATE req/s (open load, fixed 100 ms mock)"
start_mock "$WORK/delay.toml"
write_scenario "$WORK/m.toml" "rate = $MEM_RATE.0" "${MEM_SECONDS}s"
taskset -c $CLIENT_CPU "$CHAOS" run "$WORK/m.toml" --out "$WORK/mem" --progress off > "$WORK/m.out" 2> "$WORK/m.err" &
RUN_PID=$!
PIDS+=("$RUN_PID")
samples=""
step=$((MEM_SECONDS / 6))
for i in 1 2 3 4 5 6; do
  sleep "$step"
  kill -0 "$RUN_PID" 2>/dev/null || break
  samples="$samples $((i * step))s=$(($(rss_kib "$RUN_PID") / 1024))MiB"
done
wait "$RUN_PID"
echo "   RSS:$samples; requests $(field "$WORK/mem" "s['totals']['requests']")"
stop_pid "$MOCK_PID"
fi

if section 5 && [ -f "$WORK/mem/summary.json" ]; then
echo "== 5. chaos report on the ${MEM_SECONDS}s run folder"
python3 - "$CHAOS" "$WORK/mem" <<'PY'
import resource, subprocess, sys, time
start = time.monotonic()
subprocess.run([sys.argv[1], "report", sys.argv[2]], check=True, stdout=subprocess.DEVNULL)
took = time.monotonic() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
lines = sum(1 for _ in open(sys.argv[2] + "/attempts.ndjson"))
print(f"   {lines} attempts, {sum(1 for _ in open(sys.argv[2] + '/samples.ndjson'))} samples: {took:.2f} s, peak RSS {rss:.0f} MiB")
PY
fi

if section 6; then
echo "== 6. concurrent open streams per worker (7.5 s streams, a token every 50 ms)"
cat > "$WORK/streams.toml" <<'TOML'
name = "streams"
[latency]
ttft = { dist = "fixed", value = "100ms" }
inter_token = { dist = "fixed", value = "50ms" }
output_tokens = { dist = "fixed", value = 150 }
[capacity]
slots = 100000
queue = 100000
TOML
start_mock "$WORK/streams.toml"
for n in ${STREAMS:-1000 2000 4000}; do
  MAX_USERS=$n write_scenario "$WORK/st.toml" "users = $n
warmup = \"8s\"" "30s"
  sed -i 's/^\[load\]$/[load]\nstream = true/; s/^timeout = .*/timeout = "30s"/' "$WORK/st.toml"
  dir=$(chaos_run "$WORK/st.toml")
  field "$dir" "'   %d streams: %d requests after warm-up, ITL p50 %.1f / p99 %.1f / max %.1f ms (mock: 50.0), TTFT p99 %.1f ms, errors %.1f %%' % ($n, s['stages'][0]['requests'], s['stages'][0]['itl_ms']['p50'], s['stages'][0]['itl_ms']['p99'], s['stages'][0]['itl_ms']['max'], s['stages'][0]['ttft_ms']['p99'], 100*s['stages'][0]['error_rate'])"
  echo "   generator CPU $(cat "$WORK/cpu") s over the whole process (30 s of load, then the analysis)"
done
stop_pid "$MOCK_PID"
fi
