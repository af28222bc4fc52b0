#!/usr/bin/env bash
# Regenerates reports/examples/: the report of a real run of a shipped scenario, so readers see
# what `chaos run` produces before running anything. Never edit those files by hand.
#
#   reports/examples/slow-upstream/  scenarios/slow-upstream.toml at --time-scale 0.25 (~100 s):
#                                    the comparison, and naive/ and hardened/ run folders
#
# The whole folders are kept (about 1 MB each), so `chaos report reports/examples/slow-upstream`
# reproduces them. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin chaos
out=reports/examples/slow-upstream
rm -rf "$out"
target/release/chaos run scenarios/slow-upstream.toml --time-scale 0.25 --out "$out" --progress lines
echo "regenerated $out"
