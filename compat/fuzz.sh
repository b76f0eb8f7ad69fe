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
# error. The server is first seeded with a few of each resource (compat/fuzz_mt_seed.py, shared
# with fuzz-mt.sh), whose ids compat/fuzz_mt_hooks.py swaps into most generated path, query and
# body ids so requests get past the 404 of an unknown id (the ledger routes above all); it also
# does what compat/fuzz_hooks.py does (webhook URLs kept on 127.0.0.1, Idempotency-Keys scoped).
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

# shellcheck source=compat/lib.sh
source "$here/lib.sh"

if [[ -n "${PAYRAIL_BASE_URL:-}" || -n "${PAYRAIL_API_KEY:-}" || -n "${PAYRAIL_CA_CERT:-}" || -n "${PAYRAIL_OPENAPI:-}" ]]; then
  [[ -n "${PAYRAIL_BASE_URL:-}" && -n "${PAYRAIL_API_KEY:-}" && -n "${PAYRAIL_CA_CERT:-}" && -n "${PAYRAIL_OPENAPI:-}" ]] \
    || die "set all of PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT and PAYRAIL_OPENAPI, or none"
  [[ -f "$PAYRAIL_CA_CERT" ]] || die "PAYRAIL_CA_CERT: no file at $PAYRAIL_CA_CERT"
  log "testing the server at $PAYRAIL_BASE_URL"
else
  start_server fuzz --webhook-poll-ms 3600000
fi

# --- schemathesis ------------------------------------------------------------------------------
venv="$target_dir/fuzz-venv"
requirements="$here/fuzz-requirements.txt"
ensure_venv "$venv" "$requirements"

report_dir="$target_dir/fuzz-report"
rm -rf "$report_dir"
mkdir -p "$report_dir"
# schemathesis keeps a cache in its working directory: run it in the report directory.
PAYRAIL_CA_CERT="$(realpath "$PAYRAIL_CA_CERT")"
log "seeding resources"
"$venv/bin/python" "$here/fuzz_mt_seed.py" "$PAYRAIL_BASE_URL" "$PAYRAIL_API_KEY" "$PAYRAIL_CA_CERT" \
  >"$report_dir/ids.json" || die "seeding failed"
case "$PAYRAIL_OPENAPI" in http://* | https://*) ;; *) PAYRAIL_OPENAPI="$(realpath "$PAYRAIL_OPENAPI")" ;; esac
log "fuzzing every operation of $PAYRAIL_OPENAPI ($examples examples each, plus coverage and stateful phases)"
st_status=0
(cd "$report_dir" && SCHEMATHESIS_HOOKS="$here/fuzz_mt_hooks.py" FUZZ_MT_IDS="$report_dir/ids.json" "$venv/bin/st" run "$PAYRAIL_OPENAPI" \
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
schemathesis_summary "$venv" "$report_dir" "$st_status"
[[ $st_status -eq 0 ]] || die "schemathesis found failures or errors (exit $st_status); see above and $report_dir"
log "no failures"
