#!/usr/bin/env bash
# Regenerates reports/examples/: the report of a real run of a shipped scenario, so readers see
# what `chaos run` produces before running anything. Never edit those files by hand.
#
#   reports/examples/slow-upstream/  scenarios/slow-upstream.toml at --time-scale 0.25 (~100 s):
#                                    the comparison, and naive/ and hardened/ run folders, with
#                                    `chaos whatif --shipped` on both
#
# The whole folders are kept (about 1 MB each), so `chaos report reports/examples/slow-upstream`
# reproduces them. Loopback only.
#
#   ci/example-report.sh capacity        also reports/examples/capacity-sweep/ and
#                                        reports/examples/metastability-probe/, full scale
#                                        (~8 and ~37 min): the report files only — their raw
#                                        logs (20 MB and more) are left out.
#   RAW=DIR ci/example-report.sh capacity              keeps the whole run folders in DIR
#   RAW=DIR REPORT_ONLY=1 ci/example-report.sh capacity  re-analyses the runs kept in DIR
#                                        (`chaos report`) instead of running them again: for
#                                        a change to analysis or reports only
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin chaos
if [ "${1:-}" = "capacity" ]; then
  keep() { # the report files of run folder $1, copied to $2
    mkdir -p "$2"
    for f in report.md report.html summary.json scenario.toml resolved.json junit.xml probe.ndjson comparison.json; do
      if [ -f "$1/$f" ]; then cp "$1/$f" "$2/"; fi
    done
    cp -r "$1/charts" "$2/"
  }
  tmp="${RAW:-}"
  if [ -z "$tmp" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
  fi
  mkdir -p "$tmp"
  for n in capacity-sweep metastability-probe; do
    if [ -n "${REPORT_ONLY:-}" ]; then
      target/release/chaos report "$tmp/$n" >/dev/null || [ $? -eq 1 ]
    else
      rm -rf "${tmp:?}/$n"
      target/release/chaos run "scenarios/$n.toml" --out "$tmp/$n" --progress lines || true
    fi
    rm -rf "reports/examples/$n"
    keep "$tmp/$n" "reports/examples/$n"
    for v in naive hardened; do
      if [ -d "$tmp/$n/$v" ]; then keep "$tmp/$n/$v" "reports/examples/$n/$v"; fi
    done
  done
  echo "regenerated reports/examples/capacity-sweep and reports/examples/metastability-probe"
  exit 0
fi
out=reports/examples/slow-upstream
rm -rf "$out"
# Exit 1 is the verdict (the objective is missed in the fault, by both variants), not a failure.
target/release/chaos run scenarios/slow-upstream.toml --time-scale 0.25 --out "$out" --progress lines || [ $? -eq 1 ]
# The what-if of both variants (the ten shipped policies), into their reports and the comparison.
target/release/chaos whatif "$out" --shipped
echo "regenerated $out"
