#!/usr/bin/env bash
# Schema-driven fuzzing: schemathesis (PyPI) against a running Payrail, generating requests from
# Payrail's own OpenAPI document (the admin listener's /openapi.json, or `payrail openapi`).
#
# Every operation, a few hundred generated requests each (FUZZ_EXAMPLES, default 150, plus the
# coverage and stateful phases), authenticated. Checks: no 5xx (not_a_server_error), responses
# and their headers conform to the document (response_schema_conformance,
# response_headers_conformance), every status and content type is documented
# (status_code_conformance, content_type_conformance), and no request hangs (each has 10 s).
# Prints the number of generated requests and of failures; exits non-zero on any failure or
# error. compat/fuzz_hooks.py keeps webhook URLs on 127.0.0.1 and scopes Idempotency-Keys.
#
# With PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT and PAYRAIL_OPENAPI (a URL or a file)
# set, it tests that server. Without them it builds Payrail, starts one on free loopback ports
# in a temporary data directory (webhook worker idle, so fuzzed endpoints get no deliveries),
# creates a key with the CLI, and stops it on exit.
#
# Python: a venv at target/fuzz-venv (created once, reused), `pip install -r
# fuzz-requirements.txt`. Reports go to target/fuzz-report (JSON and JUnit).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
examples="${FUZZ_EXAMPLES:-150}"

log() { printf "[fuzz %s] %s\n" "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is required and not installed"

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

# As compat/run.sh starts its server, plus an admin listener for /openapi.json.
start_server() {
  log "building payrail"
  (cd "$root" && cargo build --quiet --bin payrail) || die "cargo build"
  local bin="$target_dir/debug/payrail"
  [[ -x "$bin" ]] || die "no binary at $bin"
  work_dir="$(mktemp -d "${TMPDIR:-/tmp}/payrail-fuzz.XXXXXX")"
  local data="$work_dir/data"
  mkdir -p "$data"
  local key
  key="$("$bin" --data-dir "$data" keys create --name fuzz | tail -n 1)" || die "payrail keys create"
  [[ -n "$key" ]] || die "payrail keys create printed no key"
  local attempt port admin_port
  for attempt in 1 2 3; do
    port="$(free_port)"
    admin_port="$(free_port)"
    "$bin" --data-dir "$data" serve --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin_port" \
      --sandbox-step-ms 50 --webhook-poll-ms 3600000 >"$work_dir/server.log" 2>&1 &
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
        export PAYRAIL_OPENAPI="http://127.0.0.1:$admin_port/openapi.json"
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

if [[ -n "${PAYRAIL_BASE_URL:-}" || -n "${PAYRAIL_API_KEY:-}" || -n "${PAYRAIL_CA_CERT:-}" || -n "${PAYRAIL_OPENAPI:-}" ]]; then
  [[ -n "${PAYRAIL_BASE_URL:-}" && -n "${PAYRAIL_API_KEY:-}" && -n "${PAYRAIL_CA_CERT:-}" && -n "${PAYRAIL_OPENAPI:-}" ]] \
    || die "set all of PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT and PAYRAIL_OPENAPI, or none"
  [[ -f "$PAYRAIL_CA_CERT" ]] || die "PAYRAIL_CA_CERT: no file at $PAYRAIL_CA_CERT"
  log "testing the server at $PAYRAIL_BASE_URL"
else
  start_server
fi

# --- schemathesis ------------------------------------------------------------------------------
venv="$target_dir/fuzz-venv"
requirements="$here/fuzz-requirements.txt"
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

report_dir="$target_dir/fuzz-report"
rm -rf "$report_dir"
mkdir -p "$report_dir"
# schemathesis keeps a cache in its working directory: run it in the report directory.
PAYRAIL_CA_CERT="$(realpath "$PAYRAIL_CA_CERT")"
case "$PAYRAIL_OPENAPI" in http://* | https://*) ;; *) PAYRAIL_OPENAPI="$(realpath "$PAYRAIL_OPENAPI")" ;; esac
log "fuzzing every operation of $PAYRAIL_OPENAPI ($examples examples each, plus coverage and stateful phases)"
st_status=0
(cd "$report_dir" && SCHEMATHESIS_HOOKS="$here/fuzz_hooks.py" "$venv/bin/st" run "$PAYRAIL_OPENAPI" \
  --url "$PAYRAIL_BASE_URL" \
  --auth "x-api-key:$PAYRAIL_API_KEY" \
  --tls-verify "$PAYRAIL_CA_CERT" \
  --checks not_a_server_error,response_schema_conformance,response_headers_conformance,status_code_conformance,content_type_conformance \
  --phases examples,coverage,fuzzing,stateful \
  --max-examples "$examples" \
  --request-timeout 10 \
  --workers 2 \
  --generation-database none \
  --report json,junit \
  --report-dir "$report_dir" \
  --no-color) \
  || st_status=$?

# The figures, from the JSON report.
"$venv/bin/python" - "$report_dir" "$st_status" <<'EOF'
import glob, json, sys
reports = sorted(glob.glob(f"{sys.argv[1]}/json-*.json"))
if not reports:
    print(f"schemathesis: no report (exit {sys.argv[2]})")
    sys.exit(0)
report = json.load(open(reports[-1]))
cases = report.get("test_cases", {})
failures = cases.get("unique_failures", len(report.get("failures", [])))
errors = len(report.get("errors", []))
ops = report.get("operations", {})
print(f"schemathesis: {ops.get('tested', '?')} operations, {cases.get('generated', '?')} requests generated, "
      f"{failures} failures, {errors} errors, {report.get('running_time', 0):.0f} s")
EOF
[[ $st_status -eq 0 ]] || die "schemathesis found failures or errors (exit $st_status); see above and $report_dir"
log "no failures"
