#!/usr/bin/env bash
# Instructions per request through the mock's handler, in-process (no sockets), counted with
# callgrind: exact and repeatable whatever else the machine is doing, so changes to the request
# path can be compared by it. Installs valgrind from Debian if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20000}
if ! command -v valgrind >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
cargo build --release --quiet --example bench_handler
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/bench_handler "$1" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
count_faults() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/bench_handler "$1" ci/faults-10.toml 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
base=$(count 0)
total=$(count "$N")
echo "handler: $(( (total - base) / N )) instructions per non-streaming chat completion (N=$N)"
base=$(count_faults 0)
total=$(count_faults "$N")
echo "handler with ci/faults-10.toml: $(( (total - base) / N )) instructions per completion"
