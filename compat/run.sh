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

server_pid=""
work_dir=""
cleanup() {
  local status=$?
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [[ -n "$work_dir" ]]; then
    if [[ $status -ne 0 && -f "$work_dir/server.log" ]]; then
      log "server log (last 40 lines):"
      tail -n 40 "$work_dir/server.log" >&2 || true
    fi
    rm -rf "$work_dir"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start_server() {
  log "building payrail"
  (cd "$root" && cargo build --quiet --bin payrail) || die "cargo build"
  local bin="$target_dir/debug/payrail"
  [[ -x "$bin" ]] || die "no binary at $bin"
  work_dir="$(mktemp -d "${TMPDIR:-/tmp}/payrail-compat.XXXXXX")"
  local data="$work_dir/data"
  mkdir -p "$data"
  local key
  key="$("$bin" --data-dir "$data" keys create --name compat | tail -n 1)" || die "payrail keys create"
  [[ -n "$key" ]] || die "payrail keys create printed no key"
  local attempt port
  for attempt in 1 2 3; do
    port="$(free_port)"
    "$bin" --data-dir "$data" serve --listen "127.0.0.1:$port" --admin-listen off \
      --sandbox-step-ms 50 >"$work_dir/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 200); do
      if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
      if [[ -f "$data/tls-cert.pem" ]] && python3 - "$port" "$data/tls-cert.pem" <<'EOF' 2>/dev/null
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1) as raw:
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
        pass
EOF
      then
        export PAYRAIL_BASE_URL="https://127.0.0.1:$port"
        export PAYRAIL_API_KEY="$key"
        export PAYRAIL_CA_CERT="$data/tls-cert.pem"
        log "payrail serving at $PAYRAIL_BASE_URL (pid $server_pid)"
        return 0
      fi
      sleep 0.05
    done
    log "server did not come up on port $port (attempt $attempt)"
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  done
  cat "$work_dir/server.log" >&2 || true
  die "could not start payrail"
}

if [[ -n "${PAYRAIL_BASE_URL:-}" || -n "${PAYRAIL_API_KEY:-}" || -n "${PAYRAIL_CA_CERT:-}" ]]; then
  [[ -n "${PAYRAIL_BASE_URL:-}" && -n "${PAYRAIL_API_KEY:-}" && -n "${PAYRAIL_CA_CERT:-}" ]] \
    || die "set all of PAYRAIL_BASE_URL, PAYRAIL_API_KEY and PAYRAIL_CA_CERT, or none"
  [[ -f "$PAYRAIL_CA_CERT" ]] || die "PAYRAIL_CA_CERT: no file at $PAYRAIL_CA_CERT"
  log "testing the server at $PAYRAIL_BASE_URL"
else
  start_server
fi

# --- Python SDK -------------------------------------------------------------------------------
venv="$target_dir/compat-venv"
requirements="$here/python/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
  log "creating venv at $venv"
  python3 -m venv "$venv" || die "python3 -m venv (install python3-venv)"
fi
if [[ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]]; then
  log "installing $requirements"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" \
    || die "pip install -r $requirements"
  echo "$want" >"$stamp"
fi

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
