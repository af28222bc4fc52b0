#!/usr/bin/env bash
# Measures, on real runs, how often the knee's interval holds the known capacity of a mock
# with c slots and a fixed 100 ms answer (c / 0.1 s req/s): for one sweep (the steps on either
# side of its knee, `sweep.knee.between`) and for three replicated sweeps (those combined over the seeds, as
# replicates.json reports `sweep.knee.load`). The same open sweep as tests/it/run.rs (rates
# 0.25–1.5 × the capacity, 2 s steps, 0.4 s warm-up), the excess refused at once (queue 0,
# where a stall turns the step below the capacity into 429s) or queued.
# Loopback only; about 17 s per sweep, so SWEEPS=30 for one case is 9 minutes on 2 cores.
#
#   ci/knee-coverage.sh                      # c = 4, queue 0, 30 sweeps
#   C=2 QUEUE=1000 SWEEPS=45 ci/knee-coverage.sh
#
# Prints each sweep's knee and interval, then: single sweeps holding the capacity k of n, and
# replicated sweeps (seeds 3j+1..3j+3) holding it k of n/3.
set -euo pipefail
cd "$(dirname "$0")/.."
c=${C:-4}; queue=${QUEUE:-0}; sweeps=${SWEEPS:-30}
cargo build --release --quiet --bin chaos
chaos="$PWD/target/release/chaos"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cap=$((10 * c))
rates=$(python3 -c "print(', '.join(str(round(f * $cap, 3)) for f in [0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5]))")
cat > "$work/sweep.toml" <<EOF
name = "knee-coverage"
seed = 1
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "100ms" }, output_tokens = { dist = "fixed", value = 1 } }
capacity = { slots = $c, queue = $queue }
[load]
[load.sweep]
rates = [$rates]
step = "2000ms"
warmup = "400ms"
EOF
"$chaos" run "$work/sweep.toml" --repeat "$sweeps" --progress off --out "$work/runs" > "$work/run.out" 2> "$work/run.err" || true
[ -f "$work/runs/replicates.json" ] || { echo "the replicated sweep failed:" >&2; tail -20 "$work/run.err" >&2; exit 3; }
python3 - "$work/runs" "$cap" "$sweeps" <<'EOF'
import json, sys, math
runs, cap, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
T = {1: 12.706, 2: 4.303}
ranges = []
for seed in range(1, n + 1):
    s = json.load(open(f"{runs}/seed-{seed}/summary.json"))
    k = (s.get("sweep") or {}).get("knee")
    r = tuple(k["between"]) if k and k.get("between") is not None else None
    print(f"seed {seed}: knee {k and k['load']} ({k and k['method']}), interval {r}")
    ranges.append(r)
single = sum(1 for r in ranges if r and r[0] <= cap <= r[1])
def bracket(rs):
    if any(r is None for r in rs):
        return None
    def t(xs):
        m = sum(xs) / len(xs); sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
        return m, T[len(xs) - 1] * sd / math.sqrt(len(xs))
    (ml, hl), (mh, hh) = t([r[0] for r in rs]), t([r[1] for r in rs])
    return (ml - hl, mh + hh)
triples = [ranges[i:i + 3] for i in range(0, n - n % 3, 3)]
rep = [bracket(t) for t in triples]
held = sum(1 for b in rep if b and b[0] <= cap <= b[1])
print(f"capacity {cap:g} req/s: one sweep's interval held it in {single} of {n}; "
      f"three replicated sweeps' in {held} of {len(rep)}")
EOF
