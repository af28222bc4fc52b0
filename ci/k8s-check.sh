#!/usr/bin/env bash
# The Kubernetes manifests, checked without a cluster (run by .ci/run):
# 1. `chaos k8s render` of every shipped scenario that can run in shards validates against the
#    Kubernetes API schemas of the oldest and newest versions kubernetes-validate knows that we
#    support (1.30 and 1.37), strictly (unknown fields fail); a misspelt field must fail too.
# 2. The rendered pods run as a cluster would run them, as local processes (ci/k8s/emulate.py):
#    the mock Deployment, the Indexed Job's workers, the merge Job; the merged run is checked.
# kubernetes-validate comes from PyPI into a virtualenv this script makes (once).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${CHAOS_K8S_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/chaos-k8s-venv}"
if ! "$venv/bin/kubernetes-validate" --version >/dev/null 2>&1; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # Debian's python3 lacks venv until python3-venv is installed.
    command -v apt-get >/dev/null && { apt-get update -qq >/dev/null && apt-get install -y -qq python3-venv >/dev/null; }
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q kubernetes-validate
fi
cargo build --locked -q
chaos=target/debug/chaos
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rendered=0
for s in scenarios/*.toml ci/k8s/sharded.toml; do
  variant=$(grep -m1 -A1 '^\[\[variant\]\]' "$s" | sed -n 's/^name *= *"\(.*\)"/\1/p' || true)
  args=(k8s render "$s" --workers 3 --image chaos:test --start-at 2026-12-01T15:00:00Z)
  [ -n "$variant" ] && args+=(--variant "$variant")
  out="$work/$(basename "$s" .toml).yaml"
  if ! "$chaos" "${args[@]}" >"$out" 2>"$work/err"; then
    # Only the scenarios that lay out stages from what they measured may be refused.
    grep -q "lay out stages from what the run measured" "$work/err" || { cat "$work/err"; exit 1; }
    echo "k8s: $s cannot run in shards (refused, as expected)"
    continue
  fi
  rendered=$((rendered + 1))
done
# One validator run per version for every rendering (each run loads the API schemas once).
for v in 1.30.0 1.37.0; do
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$v" "$work"/*.yaml
done
[ "$rendered" -ge 8 ] || { echo "only $rendered scenarios rendered"; exit 1; }
# The validator is not vacuous: a misspelt field fails.
sed 's/completionMode:/completionMod:/' "$work/slow-upstream.yaml" >"$work/bad.yaml"
if "$venv/bin/kubernetes-validate" --strict --quiet -k 1.37.0 "$work/bad.yaml" >/dev/null 2>&1; then
  echo "kubernetes-validate accepted a misspelt field"; exit 1
fi
echo "k8s: $rendered scenarios render and validate against Kubernetes 1.30 and 1.37"

# A scenario cannot smuggle a document of its own into the stream: a comment joined to a Pod by
# U+2028 (a line break to libyaml, hence PyYAML) renders to the same documents as the clean file,
# and the ConfigMap holds the scenario's text exactly.
# (Written beside the scenario, whose profile paths are relative to its folder.)
inject=ci/k8s/.inject-check.toml
trap 'rm -rf "$work" "$inject"' EXIT
python3 - ci/k8s/sharded.toml "$inject" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
pod = "\u2028---\u2028apiVersion: v1\u2028kind: Pod\u2028metadata: {name: injected-pod}\u2028"
open(sys.argv[2], "w", encoding="utf-8").write(text + "# note" + pod + "\n")
PY
"$chaos" k8s render ci/k8s/sharded.toml --workers 3 --start-at 2026-12-01T15:00:00Z >"$work/clean.yaml"
"$chaos" k8s render "$inject" --workers 3 --start-at 2026-12-01T15:00:00Z >"$work/injected.yaml"
"$venv/bin/python" - "$work/clean.yaml" "$work/injected.yaml" "$inject" <<'PY'
import sys, yaml
clean = [d for d in yaml.safe_load_all(open(sys.argv[1], encoding="utf-8")) if d]
got = [d for d in yaml.safe_load_all(open(sys.argv[2], encoding="utf-8")) if d]
kinds = lambda docs: [d["kind"] for d in docs]
assert kinds(got) == kinds(clean), (kinds(got), kinds(clean))
assert not any(d["metadata"].get("name") == "injected-pod" for d in got)
want = open(sys.argv[3], encoding="utf-8").read()
texts = [v for d in got if d["kind"] == "ConfigMap" for v in d.get("data", {}).values()]
assert want in texts, "the ConfigMap does not hold the scenario's text exactly"
print("k8s: a scenario with U+2028 line breaks renders no document of its own")
PY

"$chaos" k8s render ci/k8s/sharded.toml --workers 3 --start-in 8s >"$work/emulate.yaml"
"$venv/bin/python" ci/k8s/emulate.py "$PWD/$chaos" "$work/emulate.yaml" "$work/emulate"
