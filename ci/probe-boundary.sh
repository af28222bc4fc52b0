#!/usr/bin/env bash
# The metastability probe over replicates on real runs, at a boundary that can be computed:
# 4 slots × 100 ms (μ = 40 req/s, the knee), a client timeout of 400 ms and one immediate
# retry on timeout (tests/it/capacity.rs's model). After a trigger (latency ×5) fills the
# queue, each request sends 2 attempts while the queue holds ≥ 400 ms of work, so the queue
# drains only if 2λ < μ: λ* = μ/2 = 0.5 × the knee. Far below it (0.3) every seed recovers, far
# above it (0.7) every seed stays stuck, and at 0.5 and 0.6 the outcome is a probability.
# `chaos run --repeat N` reports each cell as stuck in k of n seeds with Wilson's interval.
# Loopback only; about 75 s per replicate on 2 cores (REPEAT=8: 10 minutes).
#
#   ci/probe-boundary.sh            # 8 seeds
#   REPEAT=12 ci/probe-boundary.sh
#
# Prints the replicates' probe table (k of n per cell, with its interval).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${REPEAT:-8}
cargo build --release --quiet --bin chaos
chaos="$PWD/target/release/chaos"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/probe.toml" <<'EOF'
name = "probe-boundary"
seed = 1
[[upstream]]
name = "primary"
latency = { ttft = { dist = "fixed", value = "100ms" }, output_tokens = { dist = "fixed", value = 1 } }
capacity = { slots = 4, queue = 1000 }
[[fault]]
name = "slow-x5"
kind = "latency"
multiplier = 5.0
duration = "3s"
[load]
timeout = "400ms"
max_users = 200
retry = { max_retries = 1, on_timeout = true }
[load.probe]
knee_rps = 40
loads = [0.3, 0.5, 0.6, 0.7]
triggers = ["slow-x5"]
baseline = "4s"
observe = "10s"
within = "4s"
settle = "3s"
escape_hold = "5s"
EOF
"$chaos" run "$work/probe.toml" --repeat "$n" --progress off --out "$work/runs" > "$work/run.out" 2> "$work/run.err" || true
[ -f "$work/runs/replicates.json" ] || { echo "the replicated probe failed:" >&2; tail -20 "$work/run.err" >&2; exit 3; }
python3 - "$work/runs/replicates.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for g in r["groups"]:
    for c in g.get("probe", []):
        i = c.get("share")
        ci = f"[{i['lo']:.2f}, {i['hi']:.2f}]" if i else "—"
        print(f"{c['trigger']} at {c['fraction']} × knee: stuck in {c['stuck']} of {c['of']} seeds, share {ci}")
EOF
