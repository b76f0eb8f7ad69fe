#!/usr/bin/env bash
# Robustness fuzzing driven by Modern Treasury's own OpenAPI document (not Payrail's), for the
# newer routes only: ledgers and their accounts, categories, settlements, statements, balance
# monitors, transactions, versions and entries; bank transactions and their line items; returns;
# expected payments; incoming payment details and their simulation; balance reports.
#
# MT's schema differs from Payrail's in places, so conformance is not checked: only
# not_a_server_error (no 5xx) and hangs (each request has 10 s); the server log is searched for
# panics and internal errors, and kept at target/fuzz-mt-report/server.log. Not part of CI.
#
# The server is first seeded with a few of each resource (compat/fuzz_mt_seed.py), whose ids
# compat/fuzz_mt_hooks.py swaps into most generated requests so they get past a 404.
# FUZZ_EXAMPLES (default 50) examples per operation; phases examples, coverage and fuzzing;
# 2 workers. MT_OPENAPI overrides the document (default
# /work/shared/reference/modern-treasury-openapi.json). With PAYRAIL_BASE_URL, PAYRAIL_API_KEY
# and PAYRAIL_CA_CERT set it tests that server; otherwise it builds a debug Payrail and starts
# one (see start_server in compat/lib.sh). Reports go to target/fuzz-mt-report.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
examples="${FUZZ_EXAMPLES:-50}"
mt_openapi="$(realpath "${MT_OPENAPI:-/work/shared/reference/modern-treasury-openapi.json}")"

log() { printf "[fuzz-mt %s] %s\n" "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is required and not installed"
[[ -f "$mt_openapi" ]] || die "no OpenAPI document at $mt_openapi"

# shellcheck source=compat/lib.sh
source "$here/lib.sh"

report_dir="$target_dir/fuzz-mt-report"
rm -rf "$report_dir"
mkdir -p "$report_dir"

server_from_env_or_start fuzz-mt --webhook-poll-ms 3600000

venv="$target_dir/fuzz-venv"
ensure_venv "$venv" "$here/fuzz-requirements.txt"

# A few of each resource, so generated requests get past the 404 of an unknown id
# (compat/fuzz_mt_hooks.py swaps these ids into most generated path, query and body ids).
log "seeding resources"
"$venv/bin/python" "$here/fuzz_mt_seed.py" "$PAYRAIL_BASE_URL" "$PAYRAIL_API_KEY" "$PAYRAIL_CA_CERT" \
  >"$report_dir/ids.json" || die "seeding failed"

# The routes Payrail serves from MT's document (its paths start with /api/, as Payrail's do, so
# --url is the server's bare origin).
routes='^/api/(ledgers|ledger_accounts|ledger_account_categories|ledger_account_settlements|ledger_account_statements|ledger_account_balance_monitors|ledger_transactions|ledger_entries|transactions|transaction_line_items|returns|expected_payments|incoming_payment_details)(/.*)?$|^/api/ledger_transaction_versions$|^/api/simulations/incoming_payment_details/create_async$|^/api/internal_accounts/[^/]+/balance_reports(/.*)?$'

PAYRAIL_CA_CERT="$(realpath "$PAYRAIL_CA_CERT")"
log "fuzzing MT's document ($mt_openapi), routes Payrail serves, $examples examples each"
st_status=0
(cd "$report_dir" && SCHEMATHESIS_HOOKS="$here/fuzz_mt_hooks.py" FUZZ_MT_IDS="$report_dir/ids.json" "$venv/bin/st" run "$mt_openapi" \
  --url "$PAYRAIL_BASE_URL" \
  --include-path-regex "$routes" \
  --auth "x-api-key:$PAYRAIL_API_KEY" \
  --tls-verify "$PAYRAIL_CA_CERT" \
  --checks not_a_server_error \
  --phases examples,coverage,fuzzing \
  --max-examples "$examples" \
  --request-timeout 10 \
  --workers 2 \
  --generation-database none \
  --report json,junit \
  --report-dir "$report_dir" \
  --no-color) \
  || st_status=$?

# Panics in the server log (start_server's own server only; lib.sh removes its work directory
# on exit, so the log is copied beside the reports).
if [[ -n "$work_dir" && -f "$work_dir/server.log" ]]; then
  cp "$work_dir/server.log" "$report_dir/server.log"
  # A panic, or an internal error (what a 500 logs, also from background work).
  panics="$(grep -c -i -E 'panic|internal error' "$report_dir/server.log" || true)"
  log "server log: $report_dir/server.log ($panics lines mention a panic or an internal error)"
  if [[ "$panics" != "0" ]]; then
    grep -i -E -m 20 'panic|internal error' "$report_dir/server.log" >&2 || true
    [[ $st_status -ne 0 ]] || st_status=1
  fi
fi

schemathesis_summary "$venv" "$report_dir" "$st_status"
[[ $st_status -eq 0 ]] || die "server errors, hangs or panics found (exit $st_status); see above and $report_dir"
log "no server errors, hangs or panics"
