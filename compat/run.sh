#!/usr/bin/env bash
# Runs the official Modern Treasury SDKs (PyPI and npm `modern-treasury`) against Payrail.
#
# With PAYRAIL_BASE_URL, PAYRAIL_API_KEY and PAYRAIL_CA_CERT set, it tests that server.
# Without them it builds Payrail, starts one on a free loopback port in a temporary data
# directory (sandbox bank at 50 ms a step), creates a key with the CLI, and stops it on exit.
#
# Python: a venv at target/compat-venv (created once, reused), `pip install -r requirements.txt`,
# then pytest. Node: `npm ci` in compat/node, then `node --test`.
# Exits non-zero if either suite fails or cannot be installed: nothing is skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac

log() { printf "[compat %s] %s\n" "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

for tool in python3 node npm; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required and not installed"
done

# shellcheck source=compat/lib.sh
source "$here/lib.sh"

server_from_env_or_start compat

# --- Python SDK -------------------------------------------------------------------------------
venv="$target_dir/compat-venv"
requirements="$here/python/requirements.txt"
ensure_venv "$venv" "$requirements"

python_status=0
log "running the Python SDK suite"
(cd "$here/python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider) || python_status=$?

# --- Node SDK ---------------------------------------------------------------------------------
node_status=0
log "installing the Node SDK (npm ci)"
(cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in compat/node"
log "running the Node SDK suite"
(cd "$here/node" && NODE_EXTRA_CA_CERTS="$PAYRAIL_CA_CERT" node --test tests/*.test.mjs) || node_status=$?

if [[ $python_status -ne 0 || $node_status -ne 0 ]]; then
  die "python suite exit $python_status, node suite exit $node_status"
fi
log "both SDK suites passed"
