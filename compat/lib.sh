# Shared by compat/run.sh and compat/fuzz.sh (sourced, not run): starting a throwaway Payrail
# server when no PAYRAIL_BASE_URL is given, and stopping it on exit. Expects `root`,
# `target_dir`, `log` and `die` from the sourcing script.
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

# start_server NAME [SERVE FLAGS...]: builds payrail and starts one on free loopback ports in a
# temporary data directory (sandbox bank at 50 ms a step, an admin listener for /openapi.json),
# with a key made by the CLI; exports PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT and
# PAYRAIL_OPENAPI. The EXIT trap installed here stops it.
start_server() {
  local name="$1"
  shift
  log "building payrail"
  (cd "$root" && cargo build --quiet --bin payrail) || die "cargo build"
  local bin="$target_dir/debug/payrail"
  [[ -x "$bin" ]] || die "no binary at $bin"
  work_dir="$(mktemp -d "${TMPDIR:-/tmp}/payrail-$name.XXXXXX")"
  local data="$work_dir/data"
  mkdir -p "$data"
  local key
  key="$("$bin" --data-dir "$data" keys create --name "$name" | tail -n 1)" || die "payrail keys create"
  [[ -n "$key" ]] || die "payrail keys create printed no key"
  local attempt port admin_port
  for attempt in 1 2 3; do
    port="$(free_port)"
    admin_port="$(free_port)"
    "$bin" --data-dir "$data" serve --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin_port" \
      --sandbox-step-ms 50 "$@" >"$work_dir/server.log" 2>&1 &
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
        export PAYRAIL_OPENAPI="http://127.0.0.1:$admin_port/openapi.json"
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

# ensure_venv DIR REQUIREMENTS: a venv at DIR (created once) with REQUIREMENTS installed; it is
# reinstalled only when the requirements file changes (its hash is kept beside the venv).
ensure_venv() {
  local venv="$1" requirements="$2"
  local stamp="$venv/.requirements.sha256" want
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
}

# Uses the server PAYRAIL_BASE_URL, PAYRAIL_API_KEY and PAYRAIL_CA_CERT name (all three, or none),
# or starts one: `server_from_env_or_start NAME [serve flags...]`.
server_from_env_or_start() {
  if [[ -n "${PAYRAIL_BASE_URL:-}" || -n "${PAYRAIL_API_KEY:-}" || -n "${PAYRAIL_CA_CERT:-}" ]]; then
    [[ -n "${PAYRAIL_BASE_URL:-}" && -n "${PAYRAIL_API_KEY:-}" && -n "${PAYRAIL_CA_CERT:-}" ]] \
      || die "set all of PAYRAIL_BASE_URL, PAYRAIL_API_KEY and PAYRAIL_CA_CERT, or none"
    [[ -f "$PAYRAIL_CA_CERT" ]] || die "PAYRAIL_CA_CERT: no file at $PAYRAIL_CA_CERT"
    log "testing the server at $PAYRAIL_BASE_URL"
  else
    start_server "$@"
  fi
}

# Prints a schemathesis run's figures from its JSON report:
# `schemathesis_summary VENV REPORT_DIR EXIT_STATUS`.
schemathesis_summary() {
  "$1/bin/python" - "$2" "$3" <<'PY'
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
PY
}
