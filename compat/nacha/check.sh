#!/usr/bin/env bash
# Checks NACHA files with an independent parser: carta-ach 0.4.5 from PyPI, in a venv at
# $CARGO_TARGET_DIR/nacha-venv (or target/nacha-venv), made once and reused like the SDK suites'
# (compat/lib.sh ensure_venv: reinstalled only when requirements.txt changes).
# Usage: compat/nacha/check.sh FILE...   Prints check.py's JSON. Fails loudly, never skips.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac

log() { printf "[nacha-check %s] %s\n" "$(date +%T)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is required and not installed"
# shellcheck source=compat/lib.sh
source "$here/../lib.sh"

venv="$target_dir/nacha-venv"
ensure_venv "$venv" "$here/requirements.txt" >&2
"$venv/bin/python" "$here/check.py" "$@"
