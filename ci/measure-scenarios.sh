#!/usr/bin/env bash
# Runs every shipped incident scenario with both variants and prints the figures that
# scenarios/README.md quotes, one line per variant: errors, p95 of valid answers in the worst
# phase, retry amplification (overall and worst second), most in flight at the SUT and the
# provider, recovery, and the findings. Loopback only; each run is bounded by its scenario.
#
#   ci/measure-scenarios.sh                 # every scenario at --time-scale 0.25 (~12 min)
#   ci/measure-scenarios.sh 1 slow-upstream # one scenario at full scale
#   ci/measure-scenarios.sh 0.5 capacity-sweep metastability-probe  # the capacity tools
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:-0.25}"
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(slow-upstream retry-storm 429-storm hung-upstream ttl-stampede provider-outage empty-200 gradual-degradation agent-tools)
fi
cargo build --release --quiet --bin chaos
out="$(mktemp -d)"
for n in "${names[@]}"; do
  target/release/chaos run "scenarios/$n.toml" --time-scale "$scale" --out "$out/$n" --progress off >"$out/$n.log" 2>&1 || true
  python3 - "$out/$n" "$n" "$scale" <<'PY'
import json, sys, pathlib
root, name, scale = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]

def capacity(s, label):
    for c in s.get("conditions", []):
        k = (c["sweep"].get("knee") or {}).get("load"); l = (c["sweep"].get("safe_limit") or {}).get("load")
        print(f"{label}: condition {c['condition']}: knee {k}, safe limit {l}, in flight at the recommended limit {c.get('in_flight_at_recommended')}")
    r = s.get("recommended")
    if r:
        print(f"{label}: recommended {r['load']} {r['unit']} (set by {r['condition']}), pool {r.get('pool')} ({r.get('pool_condition')})")
    v = s.get("verify")
    if v:
        print(f"{label}: verify at {v['load']} {v['unit']} with {v['trigger']}: recovery {v['recovery_s']} s, verified {v['verified']}")
    p = s.get("probe")
    if p:
        grid = "; ".join(f"{c['trigger']} @{c['fraction']}: {c['verdict']}"
                         + (f" {c['recovery_s']} s" if c.get("recovery_s") is not None else "")
                         + (f" (out at {c['escape_fraction']})" if c.get("escape_fraction") is not None else "")
                         + (f" A {c['after_amplification']:.2f}" if c.get("after_amplification") is not None else "")
                         for c in p["cells"])
        print(f"{label}: probe knee {p['knee_rps']} req/s, {p['stuck']} stuck, {p['slow']} slow, "
              f"largest recovering {p.get('max_recovering_fraction')}: {grid}")

if (root / "summary.json").exists() and not (root / "naive").exists():
    capacity(json.loads((root / "summary.json").read_text()), f"{name} @{scale}")
for v in ("naive", "hardened"):
    if not (root / v).exists() and (root / "summary.json").exists():
        continue
    p = root / v / "summary.json"
    if not p.exists():
        print(f"{name} {v}: no summary"); continue
    s = json.loads(p.read_text())
    t = s["totals"]; req = max(t["requests"], 1)
    failed = sum(n for k, n in t["outcomes"].items() if k not in ("ok", "fallback"))
    p95 = max((st["latency_valid_ms"] or {}).get("p95", 0) for st in s["stages"])
    r = s.get("retry") or {}; a = r.get("amplification") or {}
    rec = [x["seconds"] for x in s.get("recovery", [])]
    rec = "—" if not rec else ("never" if None in rec else f"{max(rec):.0f} s")
    fo = ", ".join(f"{x['fault']} " + ("never" if x["seconds"] is None else f"{x['seconds']:.0f} s")
                   for x in s.get("failover", []))
    fo = f", failover: {fo}" if fo else ""
    f = s.get("in_flight") or {}
    fan = (s.get("stampede") or {}).get("max_fanin")
    fan = "" if fan is None else f" fan-in {fan}"
    print(f"{name} @{scale} {v}: errors {100*failed/req:.1f} %, worst-phase p95 {p95/1000:.1f} s, "
          f"A {a.get('overall', 0):.2f} (worst second {a.get('max_window') or 0:.2f}), "
          f"in flight SUT {f.get('sut_max', 0)} / provider {f.get('max', 0)} (queued {f.get('queued_max', 0)}), "
          f"recovery {rec}{fo}{fan}; findings: {', '.join(dict.fromkeys(x['id'] for x in s.get('findings', []))) or 'none'}")
    capacity(s, f"{name} @{scale} {v}")
PY
done
echo "run folders: $out"
