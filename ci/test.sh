#!/usr/bin/env bash
# The test command (README "Run the tests"): installs what the live-page tests need when it is
# missing — headless Chromium and promtool, from Debian's `chromium` and `prometheus` packages
# (tests/it/live.rs drives the page in a real browser and lints /metrics with promtool) — then
# runs the whole suite. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need[*]} from Debian for tests/it/live.rs" >&2
    apt-get update -qq >/dev/null
    # The prometheus package's service is not started (no init here; policy-rc.d refuses).
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "tests/it/live.rs needs ${need[*]} (Debian packages: apt-get install ${need[*]}); run this script as root to install them" >&2
    exit 2
  fi
fi
cargo test --locked "$@"
