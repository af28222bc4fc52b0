#!/usr/bin/env bash
# Takes the README's picture of the live page (docs/live-page.png): the README's game day
# (slow-upstream, naive variant, time scale 0.25) served on loopback, two observations from
# `chaos note`, a facilitator's 429 storm from the page's API, then headless Chromium's
# screenshot of the page in the storm, half way through. Bounded: the run lasts about 50 s.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 2; }
cargo build --release --quiet --bin chaos
CHAOS=target/release/chaos
WORK=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT/"
"$CHAOS" run scenarios/slow-upstream.toml --variant naive --time-scale 0.25 --out "$WORK/run" \
  --progress off --serve "127.0.0.1:$PORT" --facilitator-token shot --serve-linger 0s > "$WORK/out" 2> "$WORK/err" &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 200); do curl -fs "${URL}api/state" | grep -q '"started":true' && break; sleep 0.1; done
sleep 14   # into the slowdown (at this time scale it runs from 7.5 s to 30 s)
"$CHAOS" note "$URL" "gateway p99 alert fired; dashboards show the provider at 6x latency" --author sam
sleep 4
curl -fs -X POST -H 'content-type: application/json' -H 'x-chaos-admin: shot' -H 'x-chaos-author: facilitator' "${URL}api/faults" \
  -d '{"kind":"status","code":429,"duration":"8s","match":{"upstream":"primary"}}' > /dev/null
sleep 4
"$CHAOS" note "$URL" "retries tripled the provider's load during the storm" --author ana
sleep 3   # the storm and the slowdown both on
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1180 \
  --timeout=4000 --screenshot="$PWD/docs/live-page.png" "${URL}?admin=shot" 2>/dev/null
echo "wrote docs/live-page.png"
wait $PID || true
