# Shared helpers of the ci/bench-*.sh scripts (sourced, not run). Loopback only; the caller
# sets WORK (a scratch directory), SECONDS_PER_RUN, CLIENT_CPU, and a PIDS array for cleanup.

need() { command -v "$1" >/dev/null 2>&1; }

# Installs wrk, nginx and taskset from Debian when missing.
install_peers() {
  if ! need wrk || ! need nginx || ! need taskset; then
    echo "installing wrk, nginx, util-linux from Debian" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx-light util-linux >/dev/null
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Runs a command that prints `listening on URL` first, on CPU $1; sets STARTED_PID and
# STARTED_URL (the first origin printed). Output goes to $WORK/$2.out and $WORK/$2.err.
start_listening() {
  local cpu=$1 tag=$2
  shift 2
  taskset -c "$cpu" "$@" > "$WORK/$tag.out" 2> "$WORK/$tag.err" &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  for _ in $(seq 200); do grep -q '^listening on ' "$WORK/$tag.out" 2>/dev/null && break; sleep 0.05; done
  STARTED_URL=$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$WORK/$tag.out" | head -1)
  if [ -z "$STARTED_URL" ]; then echo "$tag did not start:" >&2; cat "$WORK/$tag.err" >&2; exit 3; fi
}
stop_pid() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Sum of user+system CPU ticks of a set of PIDs.
cpu_ticks() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# CPU µs per request from tick counts before/after and a request count.
us_per_request() { awk -v t=$(($2 - $1)) -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", t*1e6/hz/n}'; }

# wrk run against $1 with $2 connections; prints "rps p50 p99 p999 refused requests"
# (latencies in µs). Optional $3: the wrk Lua script (default ci/wrk-post.lua).
run_wrk() {
  local url=$1 conns=$2 script=${3:-ci/wrk-post.lua}
  local out
  out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"${SECONDS_PER_RUN}s" --timeout 10s -s "$script" "$url/v1/chat/completions")
  local req dur lat err
  req=$(echo "$out" | sed -n 's/^REQ requests=\([0-9]*\).*/\1/p')
  dur=$(echo "$out" | sed -n 's/.*duration_us=\([0-9]*\).*/\1/p')
  lat=$(echo "$out" | sed -n 's/^LAT p50=\([0-9]*\) p99=\([0-9]*\) p999=\([0-9]*\).*/\1 \2 \3/p')
  err=$(echo "$out" | sed -n 's/^ERR connect=\([0-9]*\).*/\1/p')
  echo "$(awk -v r="$req" -v d="$dur" 'BEGIN{printf "%.0f", r*1e6/d}') $lat $err $req"
}

median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
ms() { awk -v x="$1" 'BEGIN{printf "%.1f", x/1e3}'; }
