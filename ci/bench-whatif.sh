#!/usr/bin/env bash
# Benchmark of `chaos whatif` (see docs/whatif.md): the time and peak memory of replaying a
# 10-minute run at 100 req/s (ci/whatif-bench.toml, ~60 000 requests) under the policy that ran
# plus the 10 shipped textbook policies, on one core (taskset -c 0). The run itself is made
# first (10 minutes, loopback only, bounded by the scenario) unless RUN_DIR names one.
#
# Prints: requests and attempts replayed, wall seconds and peak RSS of `chaos whatif`, seconds
# per policy, and whether two replays gave byte-identical whatif.json (determinism).
# Knobs: RUN_DIR (reuse a run folder), TIME_SCALE (1; 0.1 makes a 1-minute run for a smoke test).
set -euo pipefail
cd "$(dirname "$0")/.."

TIME_SCALE=${TIME_SCALE:-1}
BIN=target/release/chaos
[ -x "$BIN" ] || cargo build --release --locked -q
command -v taskset >/dev/null || { apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null; }

if [ -z "${RUN_DIR:-}" ]; then
  RUN_DIR=$(mktemp -d)/whatif-bench
  echo "making the run (ci/whatif-bench.toml, time scale $TIME_SCALE) in $RUN_DIR" >&2
  "$BIN" run ci/whatif-bench.toml --time-scale "$TIME_SCALE" --out "$RUN_DIR" --progress off >/dev/null 2>&1 || true
fi
[ -f "$RUN_DIR/summary.json" ] || { echo "no run in $RUN_DIR" >&2; exit 3; }

requests=$(wc -l < "$RUN_DIR/samples.ndjson")
attempts=$(wc -l < "$RUN_DIR/attempts.ndjson")
measure() {
  /usr/bin/time -f "%e %M" -o "$RUN_DIR/whatif.time" taskset -c 0 "$BIN" whatif "$RUN_DIR" --shipped > "$RUN_DIR/whatif.out" 2>&1
  read -r wall rss < "$RUN_DIR/whatif.time"
}
measure
cp "$RUN_DIR/whatif.json" "$RUN_DIR/whatif.first.json"
measure
same=$(cmp -s "$RUN_DIR/whatif.json" "$RUN_DIR/whatif.first.json" && echo yes || echo NO)
policies=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['policies']))" "$RUN_DIR/whatif.json")
sim_s=$(sed -n 's/.*policies simulated in \([0-9.]*\) s .*/\1/p' "$RUN_DIR/whatif.out")
echo "run: $requests requests, $attempts upstream attempts ($RUN_DIR)"
echo "chaos whatif, one core: ${wall} s wall (read + analyse + ${policies} simulations + report), peak RSS $((rss / 1024)) MiB"
echo "simulation alone: ${sim_s} s for ${policies} policies ($(awk -v s="$sim_s" -v n="$policies" 'BEGIN{printf "%.2f", s/n}') s each)"
echo "deterministic (two replays, identical whatif.json): $same"
head -8 "$RUN_DIR/whatif.out"
