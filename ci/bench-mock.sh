#!/usr/bin/env bash
# Benchmarks of the mock upstream (see docs/performance.md). Loopback only; every load is
# bounded in time; the server is pinned to CPU 0 and the load generator to CPU 1.
#
#   1. zero-latency throughput: wrk, 64 connections, POST /v1/chat/completions against
#      `chaos mock` (instant.toml) and against nginx returning a fixed 300-byte JSON,
#      alternating, ROUNDS rounds each: req/s, ratio, server CPU µs per request.
#   2. delay accuracy: fixed 100 ms TTFT at 256, 1024 and 4096 connections:
#      p50/p99/p99.9 and achieved req/s as % of connections / 0.1 s, refused connections.
#   3. open streams: 5,000 and 19,900 concurrent slow streams (one token a second, 20 s):
#      server RSS per stream and whether every token arrived on time.
#   4. fault timeline cost: zero-latency throughput with ci/faults-10.toml active vs none, and
#      with ci/faults-10-eval.toml (the same without the faults that add response headers),
#      alternating, as ratios.
#
# Prints the median of ROUNDS rounds for every figure. Knobs: ROUNDS (3), SECONDS_PER_RUN (10),
# SECTIONS (default "1 2 3 4": which of the measurements above to run).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
SECTIONS=${SECTIONS:-1 2 3 4}
section() { [[ " $SECTIONS " == *" $1 "* ]]; }
SERVER_CPU=0
CLIENT_CPU=1
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

source ci/bench-lib.sh
install_peers
ulimit -n 20000 2>/dev/null || true

cargo build --release --quiet --bin chaos --example bench_open_streams
CHAOS=target/release/chaos
STREAMS_CLIENT=target/release/examples/bench_open_streams

# Starts `chaos mock` pinned to the server CPU; sets MOCK_PID and MOCK_URL.
start_mock() {
  start_listening $SERVER_CPU mock "$CHAOS" mock --profile "$1" --attempt-ring "${2:-100000}"
  MOCK_PID=$STARTED_PID
  MOCK_URL=$STARTED_URL
}
stop_mock() { stop_pid "$MOCK_PID"; }

if section 1; then
echo "== 1. zero-latency throughput (64 connections, ${SECONDS_PER_RUN}s x ${ROUNDS} rounds, alternating)"
NGINX_PORT=$(free_port)
BODY='{"id":"chatcmpl-0","object":"chat.completion","created":0,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"fixed answer of about three hundred bytes in total ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":10,"total_tokens":19}}'
cat > "$WORK/nginx.conf" <<NGINX
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err warn;
events { worker_connections 20000; }
http {
  access_log off;
  keepalive_requests 100000000;
  client_body_temp_path $WORK/body; proxy_temp_path $WORK/proxy; fastcgi_temp_path $WORK/fcgi;
  uwsgi_temp_path $WORK/uwsgi; scgi_temp_path $WORK/scgi;
  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096;
    location / { default_type application/json; return 200 '$BODY'; }
  }
}
NGINX
echo "   nginx body: ${#BODY} bytes"
taskset -c $SERVER_CPU nginx -c "$WORK/nginx.conf" -g 'daemon on;'
sleep 0.5
NGINX_PIDS=$(pgrep -f "nginx.*$WORK/nginx.conf"; pgrep -P "$(cat "$WORK/nginx.pid")")
start_mock mock-upstreams/instant.toml
curl -s -o /dev/null "$MOCK_URL/v1/models"
: > "$WORK/tp.mock"; : > "$WORK/tp.nginx"
for r in $(seq "$ROUNDS"); do
  for target in mock nginx; do
    if [ $target = mock ]; then url=$MOCK_URL; pids=$MOCK_PID; else url="http://127.0.0.1:$NGINX_PORT"; pids=$NGINX_PIDS; fi
    before=$(cpu_ticks $pids)
    read -r rps _ _ _ _ req < <(run_wrk "$url" 64)
    after=$(cpu_ticks $pids)
    us=$(us_per_request "$before" "$after" "$req")
    echo "   round $r $target: $rps req/s, $us µs CPU/request"
    echo "$rps $us" >> "$WORK/tp.$target"
  done
done
stop_mock
kill "$(cat "$WORK/nginx.pid")"; rm -f "$WORK/nginx.pid"
m_rps=$(cut -d' ' -f1 "$WORK/tp.mock" | median); n_rps=$(cut -d' ' -f1 "$WORK/tp.nginx" | median)
m_us=$(cut -d' ' -f2 "$WORK/tp.mock" | median); n_us=$(cut -d' ' -f2 "$WORK/tp.nginx" | median)
echo "   median: mock $m_rps req/s ($m_us µs/req), nginx $n_rps req/s ($n_us µs/req), ratio $(ratio "$m_rps" "$n_rps")"
fi

if section 2; then
echo "== 2. delay accuracy (fixed 100 ms TTFT, ${SECONDS_PER_RUN}s x ${ROUNDS} rounds)"
cat > "$WORK/delay.toml" <<'TOML'
name = "delay"
[latency]
ttft = { dist = "fixed", value = "100ms" }
output_tokens = { dist = "fixed", value = 1 }
TOML
start_mock "$WORK/delay.toml"
for conns in 256 1024 4096; do
  : > "$WORK/d.$conns"
  for r in $(seq "$ROUNDS"); do
    read -r rps p50 p99 p999 refused _ < <(run_wrk "$MOCK_URL" "$conns")
    pct=$(awk -v r="$rps" -v c="$conns" 'BEGIN{printf "%.1f", 100*r/(c/0.1)}')
    echo "   round $r, $conns conns: p50 $(ms "$p50") ms, p99 $(ms "$p99") ms, p99.9 $(ms "$p999") ms, $rps req/s = $pct % of ideal, refused $refused"
    echo "$p50 $p99 $p999 $pct $refused" >> "$WORK/d.$conns"
  done
  col() { cut -d' ' -f"$1" "$WORK/d.$conns" | median; }
  echo "   median $conns conns: p50 $(ms "$(col 1)") / p99 $(ms "$(col 2)") / p99.9 $(ms "$(col 3)") ms, $(col 4) % of ideal, refused $(col 5)"
done
stop_mock
fi

if section 3; then
echo "== 3. open streams (one token per second for 20 s)"
cat > "$WORK/drip.toml" <<'TOML'
name = "drip"
[latency]
ttft = { dist = "fixed", value = "1s" }
inter_token = { dist = "fixed", value = "1s" }
output_tokens = { dist = "fixed", value = 20 }
TOML
for n in 5000 19900; do
  : > "$WORK/s.$n"
  for r in $(seq "$ROUNDS"); do
    # A small ring keeps the attempt log's memory out of the per-stream figure.
    start_mock "$WORK/drip.toml" 1000
    sleep 0.3
    idle=$(rss_kib "$MOCK_PID")
    taskset -c $CLIENT_CPU "$STREAMS_CLIENT" "${MOCK_URL#http://}" "$n" 1000 1000 20 > "$WORK/streams.json" &
    client=$!
    sleep 12
    held=$(rss_kib "$MOCK_PID")
    wait $client
    stop_mock
    per=$(awk -v a="$idle" -v b="$held" -v n="$n" 'BEGIN{printf "%.1f", (b-a)/n}')
    echo "   round $r, $n streams: RSS $idle -> $held KiB = $per KiB/stream; $(cat "$WORK/streams.json")"
    echo "$per" >> "$WORK/s.$n"
  done
  echo "   median $n streams: $(median < "$WORK/s.$n") KiB/stream"
done
fi

if section 4; then
echo "== 4. fault timeline cost (64 connections, ${SECONDS_PER_RUN}s x ${ROUNDS} rounds, alternating)"
: > "$WORK/f.none"; : > "$WORK/f.ten"; : > "$WORK/f.eval"
for r in $(seq "$ROUNDS"); do
  for variant in none ten eval; do
    case $variant in
      none) extra=() ;;
      ten) extra=(--faults ci/faults-10.toml) ;;
      eval) extra=(--faults ci/faults-10-eval.toml) ;;
    esac
    start_listening $SERVER_CPU mock "$CHAOS" mock --profile mock-upstreams/instant.toml "${extra[@]}"
    MOCK_PID=$STARTED_PID; MOCK_URL=$STARTED_URL
    read -r rps _ < <(run_wrk "$MOCK_URL" 64)
    stop_mock
    echo "   round $r, $variant: $rps req/s"
    echo "$rps" >> "$WORK/f.$variant"
  done
done
f_none=$(median < "$WORK/f.none"); f_ten=$(median < "$WORK/f.ten"); f_eval=$(median < "$WORK/f.eval")
echo "   median: no faults $f_none req/s; 10 faults $f_ten req/s, ratio $(ratio "$f_ten" "$f_none"); evaluation only $f_eval req/s, ratio $(ratio "$f_eval" "$f_none")"
fi
