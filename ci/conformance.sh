#!/usr/bin/env bash
# The conformance suite (run by .ci/run): official SDKs nobody here wrote, pinned, each against
# `chaos mock` on loopback. ci/conformance/sdk_python.py drives openai and anthropic from PyPI
# (pinned with every dependency in ci/conformance/requirements.lock), ci/conformance/sdk_node.mjs
# drives openai and @anthropic-ai/sdk from npm (pinned with integrity hashes in
# ci/conformance/package-lock.json). They check that the mock's streams parse in each SDK —
# chat, Responses, Messages, tool calls, usage, embeddings — and that each SDK's retries count
# as its source says under the mock's retry signals (429 and 529 storms, x-should-retry: false,
# Retry-After past 120 s, the spend-limit 429). A failure names the SDK, its version and the
# request. Installs what it needs itself: a virtualenv in the cache, node_modules beside the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
here=ci/conformance

need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "conformance: installing ${need[*]} from Debian" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "conformance: needs ${need[*]} (Debian packages); run as root to install them" >&2
    exit 2
  fi
fi

# One virtualenv per lock file: a changed lock gets a fresh one.
lock_sum=$(sha256sum "$here/requirements.lock" | cut -c1-12)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/chaos-conformance-$lock_sum"
if [ ! -f "$venv/.installed" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$here/requirements.lock"
  touch "$venv/.installed"
fi
if [ ! -f "$here/node_modules/.package-lock.json" ] || ! cmp -s "$here/package-lock.json" "$here/node_modules/.lock-copy"; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$here/package-lock.json" "$here/node_modules/.lock-copy"
fi

cargo build --locked -q --bin chaos
work=$(mktemp -d)
mock_pid=
cleanup() { [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
target/debug/chaos mock --profile "$here/profile.toml" --no-admin >"$work/mock.out" 2>"$work/mock.err" &
mock_pid=$!
for _ in $(seq 200); do grep -q '^listening on ' "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
MOCK_URL=$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$work/mock.out" | head -1)
[ -n "$MOCK_URL" ] || { echo "conformance: the mock did not start:" >&2; cat "$work/mock.err" >&2; exit 3; }
export MOCK_URL

rc=0
"$venv/bin/python" "$here/sdk_python.py" || rc=1
node "$here/sdk_node.mjs" || rc=1
exit $rc
