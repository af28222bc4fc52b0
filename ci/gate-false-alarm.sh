#!/usr/bin/env bash
# Measures the false-alarm rate of the shipped CI setup itself: `ci/gate.toml` (three
# replicates, seeds 7–9) run TRIALS + 1 times by the same code, and each later run checked
# against the first with `chaos check --baseline`, as a pull request that changed nothing is
# checked against main. Every gate metric of every phase counts: a "regressed" there is a false
# alarm. Loopback only; about 80 s a run, so TRIALS=8 takes 12 minutes on 2 cores.
#
#   ci/gate-false-alarm.sh              # 8 trials
#   TRIALS=4 ci/gate-false-alarm.sh
#
# Prints each trial's verdict counts, then the totals over every metric and trial.
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${TRIALS:-8}
cargo build --release --quiet --bin chaos
chaos="$PWD/target/release/chaos"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for k in $(seq 0 "$trials"); do
  # Exit 1 (a gate bound broken) is a verdict on the system, not a failure of this script.
  "$chaos" run ci/gate.toml --progress off --out "$work/run-$k" > /dev/null 2> "$work/run-$k.err" || {
    rc=$?; [ "$rc" = 1 ] || { echo "run $k failed (exit $rc):" >&2; tail -20 "$work/run-$k.err" >&2; exit 3; }; }
done
declare -A total
for k in $(seq 1 "$trials"); do
  "$chaos" check "$work/run-$k" --baseline "$work/run-0" > "$work/check-$k.out" 2>&1 || true
  # The verdict column of every "vs baseline" row of the checks table.
  counts=$(grep -E '^\| [a-zA-Z, ]+ +\| [^|]* vs baseline' "$work/check-$k.out" \
    | awk -F'|' '{v=$2; gsub(/^ +| +$/,"",v); print tolower(v)}' | sort | uniq -c | awk '{c=$1; $1=""; sub(/^ /,""); printf "%s %s; ", $0, c}')
  echo "trial $k: $counts"
  while read -r n v; do
    [ -n "$v" ] && total["$v"]=$(( ${total["$v"]:-0} + n ))
  done < <(grep -E '^\| [a-zA-Z, ]+ +\| [^|]* vs baseline' "$work/check-$k.out" \
    | awk -F'|' '{v=$2; gsub(/^ +| +$/,"",v); print tolower(v)}' | sort | uniq -c)
done
line="over $trials trials:"
for v in "${!total[@]}"; do line="$line $v ${total[$v]};"; done
echo "$line"
