#!/usr/bin/env bash
# The PostgreSQL bounds: what PostgreSQL alone reaches on this machine for the least work of a
# ledger posting, a create and a cut-off (schema.sql), beside its own single-row commit ceiling
# measured in the same run. See README.md.
#   benches/pg_bounds/run.sh postgres://payrail@127.0.0.1:56041/postgres [SECONDS]
# Needs psql and pgbench (Debian: postgresql-client). Writes only to the schema `bounds`, which
# it drops and creates again.
set -euo pipefail
url=${1:?usage: run.sh DATABASE_URL [SECONDS]}
seconds=${2:-15}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PGOPTIONS="-c search_path=bounds -c client_min_messages=warning"

psql -q -v ON_ERROR_STOP=1 "$url" -f "$here/schema.sql" >/dev/null 2>&1 || psql -v ON_ERROR_STOP=1 "$url" -f "$here/schema.sql"

busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
# run NAME CLIENTS UNITS_PER_TRANSACTION SQL: prints units/s, the ratio to the ceiling, the mean
# latency of a unit's transaction and the machine's busy share of its cores.
ceiling=""
run() {
    local name=$1 clients=$2 units=$3 sql=$4
    printf '%s\n' '\set n random(1, 1000000000)' "$sql" > "$work/$name.sql"
    read -r b0 t0 < <(busy)
    out=$(pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" -f "$work/$name.sql" "$url" 2>&1) || { echo "$out" >&2; exit 1; }
    read -r b1 t1 < <(busy)
    tps=$(echo "$out" | awk '/^tps/ { print $3 }')
    lat=$(echo "$out" | awk '/^latency average/ { print $4 }')
    failed=$(echo "$out" | awk '/failed transactions/ { print $5 }')
    rate=$(awk -v t="$tps" -v u="$units" 'BEGIN { printf "%.0f", t * u }')
    [ -z "$ceiling" ] && ceiling=$rate
    printf '%-28s %4s clients  %8s/s  %6s of the ceiling  %8s ms a transaction  cores %3.0f%% busy  failed %s\n' \
        "$name" "$clients" "$rate" "$(awk -v r="$rate" -v c="$ceiling" 'BEGIN { printf "%.3f", r / c }')" "$lat" \
        "$(awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f", 100 * b / t }')" "${failed:-0}"
}

run ceiling_32 32 1 "INSERT INTO ceiling (v) VALUES (1);"
run ceiling_64 64 1 "INSERT INTO ceiling (v) VALUES (1);"
run ledger_hot_alone 64 1 "SELECT post_one(0, 5001 + :n % 5000, :client_id || '.' || :n);"
run ledger_spread_alone 64 1 "SELECT post_one(1 + :n % 5000, 5001 + (:n / 7) % 5000, :client_id || '.' || :n);"
run ledger_hot_grouped_12 8 12 "SELECT post_group(12, true, :client_id || '.' || :n);"
run ledger_spread_grouped_12 8 12 "SELECT post_group(12, false, :client_id || '.' || :n);"
run counterparty_alone 64 1 "SELECT create_one('counterparty', :client_id || '.' || :n);"
run payment_order_alone 64 1 "SELECT create_one('payment_order', :client_id || '.' || :n);"
run counterparty_grouped_8 8 8 "SELECT create_group('counterparty', 8, :client_id || '.' || :n);"
run payment_order_grouped_8 8 8 "SELECT create_group('payment_order', 8, :client_id || '.' || :n);"

# The cut-off: 100,000 approved orders, claimed 500 a commit and then marked sent 500 a commit,
# one commit at a time, each order's document rewritten (heap-only) and an event written per step.
psql -q -v ON_ERROR_STOP=1 "$url" >/dev/null <<'SQL'
TRUNCATE orders;
INSERT INTO orders (id, org_id, status, counterparty_id, doc)
  SELECT 'cut' || g, 'org', 'approved', 'cp' || (g % 1000), (SELECT d FROM docs WHERE k = 'payment_order') FROM generate_series(1, 100000) g;
VACUUM ANALYZE orders;
CHECKPOINT;
SQL
lo=$(psql -t -A "$url" -c "SELECT min(seq) FROM orders")
step() {
    local from=$1 to=$2 start
    start=$(date +%s.%N)
    for i in $(seq 0 199); do echo "SELECT cutoff_chunk($((lo + i * 500)), '$from', '$to', 'file');"; done |
        psql -q -t -v ON_ERROR_STOP=1 "$url" >/dev/null
    awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'
}
read -r b0 t0 < <(busy)
claim=$(step approved processing)
sent=$(step processing sent)
read -r b1 t1 < <(busy)
left=$(psql -t -A "$url" -c "SELECT count(*) FROM orders WHERE status <> 'sent'")
printf 'cutoff_100000 (one commit at a time): claim %s s, sent %s s, cores %.0f%% busy, orders not sent: %s\n' "$claim" "$sent" \
    "$(awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" 'BEGIN { print 100 * b / t }')" "$left"
PGOPTIONS="-c client_min_messages=warning" psql -q "$url" -c "DROP SCHEMA bounds CASCADE" >/dev/null
