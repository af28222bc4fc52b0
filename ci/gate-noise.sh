#!/usr/bin/env bash
# Measures how often `chaos check --baseline` raises a false alarm on two samples of one
# system, and how often it catches a real 30 % regression, with one run a side (batch means
# within each run) and with three replicates a side. Loopback only; about 16 minutes on
# 2 cores.
#
# One `chaos run --repeat 40` of ci/examples/noise.toml (seeds 1–40, variants `same` and
# `slower` per seed), then 20 trials of each kind, judged on the p95 of the steady phase
# (the scenario's gate metric) with the default 10 % tolerance:
#   false alarm, N = 1:   same seed k        against same seed k+20
#   detection,   N = 1:   slower seed k      against same seed k+20   (unpaired)
#   false alarm, N = 3, 5: same seeds 21+j..  against same seeds 1+j.. (N each, unpaired)
#   detection,   N = 3, 5: slower seeds 1+j.. against same seeds 1+j.. (paired)
# The sets of N overlap from trial to trial (j = 0..19, seeds wrap within 1–20 and 21–40), so
# those trials are not independent of each other; each is a valid comparison.
#
#   ci/gate-noise.sh              # prints the six rates and keeps nothing
#   KEEP=1 ci/gate-noise.sh       # keeps the runs in a printed folder
#   RUNS=DIR ci/gate-noise.sh     # judges the runs kept in DIR again, without running
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin chaos
chaos="$PWD/target/release/chaos"
work="$(mktemp -d)"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
if [ -n "${RUNS:-}" ]; then
  ln -s "$(cd "$RUNS" && pwd)" "$work/runs"
else
  "$chaos" run ci/examples/noise.toml --repeat 40 --progress off --out "$work/runs" > "$work/run.out" 2> "$work/run.err" || {
    echo "the replicated run failed:" >&2; tail -20 "$work/run.err" >&2; exit 3; }
fi

# A replicates folder holding the given seeds of one variant, as `chaos run --repeat` writes
# one: replicates.json naming them, each seed's run linked in.
subset() {
  local dir=$1 variant=$2; shift 2
  mkdir -p "$dir"
  local reps=""
  for s in "$@"; do
    ln -s "$work/runs/seed-$s/$variant" "$dir/seed-$s"
    reps="$reps{\"seed\":$s,\"dir\":\"seed-$s\",\"status\":\"completed\"},"
  done
  printf '{"scenario":"noise","time_scale":1.0,"replicates":[%s],"groups":[]}\n' "${reps%,}" > "$dir/replicates.json"
}

# The verdict on the steady phase's p95: regressed, improved, same or inconclusive.
verdict() {
  "$chaos" check "$1" --baseline "$2" > "$work/check.out" 2>&1 || true
  grep -E '^\| [a-zA-Z]+ +\| latency.p95_ms \[steady\] vs baseline' "$work/check.out" | awk -F'|' '{gsub(/ /,"",$2); print tolower($2)}'
}

declare -A counts
tally() { counts["$1 $2"]=$(( ${counts["$1 $2"]:-0} + 1 )); }
for j in $(seq 0 19); do
  a=$((1 + j)); b=$((21 + j))
  tally "false-alarm-N1" "$(verdict "$work/runs/seed-$b/same" "$work/runs/seed-$a/same")"
  tally "detection-N1" "$(verdict "$work/runs/seed-$a/slower" "$work/runs/seed-$b/same")"
  for n in 3 5; do
    t1=(); t2=()
    for k in $(seq 0 $((n - 1))); do t1+=($(( 1 + (j + k) % 20 ))); t2+=($(( 21 + (j + k) % 20 ))); done
    subset "$work/t$n/base-$j" same "${t1[@]}"
    subset "$work/t$n/other-$j" same "${t2[@]}"
    subset "$work/t$n/slow-$j" slower "${t1[@]}"
    tally "false-alarm-N$n" "$(verdict "$work/t$n/other-$j" "$work/t$n/base-$j")"
    tally "detection-N$n" "$(verdict "$work/t$n/slow-$j" "$work/t$n/base-$j")"
  done
done
for trial in false-alarm-N1 detection-N1 false-alarm-N3 detection-N3 false-alarm-N5 detection-N5; do
  line="$trial (20 trials):"
  for v in regressed inconclusive same improved; do line="$line $v ${counts["$trial $v"]:-0}"; done
  echo "$line"
done
[ -z "${KEEP:-}" ] || echo "runs kept in $work"
