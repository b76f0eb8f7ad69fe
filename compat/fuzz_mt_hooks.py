"""Schemathesis hooks for compat/fuzz-mt.sh (fuzzing with Modern Treasury's OpenAPI document)
and compat/fuzz.sh (with Payrail's own).

1. Everything compat/fuzz_hooks.py does (webhook URLs kept local, Idempotency-Keys scoped).
2. Real ids: generated ids almost never name anything, so most requests would stop at a 404 or
   at a 422 for an unknown id. The file named by FUZZ_MT_IDS (written by fuzz_mt_seed.py:
   resource kind -> ids) supplies seeded ids: before each call, each path parameter and each
   id-valued field of the query or JSON body whose name says what it names is, three times in
   four, replaced by one of those ids (the rest keep their generated value, so unknown and
   malformed ids are still fuzzed). The choice is seeded by the case itself, so a reproduction
   printed by schemathesis is the request that was sent.
3. Malformed Idempotency-Keys are dropped three times in four (see
   `_mostly_valid_idempotency_key`), and half the ledger transactions get balanced entries (see
   `_balanced_entries`), so that more requests reach past validation.
"""

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fuzz_hooks  # noqa: E402,F401  (registers its own before_call)
import schemathesis  # noqa: E402

_IDS = {}
if os.environ.get("FUZZ_MT_IDS"):
    with open(os.environ["FUZZ_MT_IDS"]) as file:
        _IDS = {kind: ids for kind, ids in json.load(file).items() if ids}

# The kind of resource each path's `{id}` names, by the path's first segment after /api/.
_PATH_KINDS = {
    "ledgers": "ledger",
    "ledger_accounts": "ledger_account",
    "ledger_account_categories": "ledger_account_category",
    "ledger_account_settlements": "ledger_account_settlement",
    "ledger_account_statements": "ledger_account_statement",
    "ledger_account_balance_monitors": "ledger_account_balance_monitor",
    "ledger_transactions": "ledger_transaction",
    "ledger_entries": "ledger_entry",
    "transactions": "transaction",
    "transaction_line_items": "transaction_line_item",
    "returns": "return",
    "expected_payments": "expected_payment",
    "incoming_payment_details": "incoming_payment_detail",
}

# What a named parameter or field names, wherever it appears.
_FIELD_KINDS = {
    "ledger_id": "ledger",
    "ledger_account_id": "ledger_account",
    "ledger_account_ids": "ledger_account",
    "settled_ledger_account_id": "ledger_account",
    "contra_ledger_account_id": "ledger_account",
    "ledger_account_category_id": "ledger_account_category",
    "ledger_account_category_ids": "ledger_account_category",
    "parent_ledger_account_category_id": "ledger_account_category",
    "sub_category_id": "ledger_account_category",
    "ledger_account_settlement_id": "ledger_account_settlement",
    "ledger_account_statement_id": "ledger_account_statement",
    "ledger_transaction_id": "ledger_transaction",
    "ledger_transaction_ids": "ledger_transaction",
    "ledger_entry_id": "ledger_entry",
    "ledger_entry_ids": "ledger_entry",
    "ledger_entries": "ledger_entry",
    "internal_account_id": "internal_account",
    "originating_account_id": "internal_account",
    "counterparty_id": "counterparty",
    "external_account_id": "external_account",
    "receiving_account_id": "external_account",
    "transaction_id": "transaction",
    "expected_payment_id": "expected_payment",
    "incoming_payment_detail_id": "incoming_payment_detail",
    "payment_order_id": "payment_order",
    "returnable_id": "payment_order",
}


def _kind_of_path_parameter(path: str, name: str):
    if name in _FIELD_KINDS:
        return _FIELD_KINDS[name]
    segments = path.strip("/").split("/")
    if path.startswith("/api/internal_accounts/"):
        return "balance_report"  # {id} under /balance_reports
    if name == "id" and len(segments) > 1:
        return _PATH_KINDS.get(segments[1])
    return None


def _real(rng: random.Random, kind, value):
    ids = _IDS.get(kind) if kind else None
    if not ids or rng.random() >= 0.75:
        return value
    if isinstance(value, list):
        return [rng.choice(ids) if isinstance(v, str) else v for v in value]
    if isinstance(value, str):
        return rng.choice(ids)
    return value


def _walk(rng: random.Random, value, depth=0):
    if depth > 4:
        return value
    if isinstance(value, dict):
        for name in list(value):
            # ledger_entries is a list of entry ids in settlements' PATCH, of objects elsewhere.
            if name in _FIELD_KINDS and not (isinstance(value[name], list) and value[name] and isinstance(value[name][0], dict)):
                value[name] = _real(rng, _FIELD_KINDS[name], value[name])
            else:
                value[name] = _walk(rng, value[name], depth + 1)
    elif isinstance(value, list):
        return [_walk(rng, v, depth + 1) for v in value]
    return value


def _use_real_ids(case) -> None:
    if not _IDS:
        return
    seed = repr((case.method, case.operation.path, case.path_parameters, case.query, case.body))
    rng = random.Random(seed)
    path = case.operation.path
    for name in list(case.path_parameters or {}):
        case.path_parameters[name] = _real(rng, _kind_of_path_parameter(path, name), case.path_parameters[name])
    if isinstance(case.query, dict):
        for name in list(case.query):
            base = name.split("[")[0]
            if base in _FIELD_KINDS or (base == "id" and path.count("/") == 2):
                kind = _FIELD_KINDS.get(base) or _PATH_KINDS.get(path.strip("/").split("/")[1])
                case.query[name] = _real(rng, kind, case.query[name])
    if isinstance(case.body, (dict, list)):
        case.body = _walk(rng, case.body)


def _mostly_valid_idempotency_key(case) -> None:
    """Most generated Idempotency-Keys are not 1 to 255 visible ASCII characters, so most POSTs
    would stop at that 400 (SPEC I1): three times in four, a malformed key is dropped."""
    headers = case.headers or {}
    name = next((h for h in headers if h.lower() == "idempotency-key"), None)
    if name is None or (isinstance(headers[name], str) and fuzz_hooks._visible_ascii(headers[name])):
        return
    if random.Random(repr(headers[name])).random() < 0.75:
        del headers[name]


def _balanced_entries(case) -> None:
    """Generated ledger entries almost never balance (SPEC G2), so most ledger transactions
    would stop at that 422: half the time, each entry with an integer amount gets a mirror (the
    opposite direction, the same amount, on a seeded account), keeping the generated amounts,
    however large, so the balance arithmetic is fuzzed too. Likewise expected payments'
    `line_items`, which Payrail refuses, are dropped three times in four."""
    body = case.body
    if not isinstance(body, dict) or case.method.upper() not in ("POST", "PATCH"):
        return
    rng = random.Random(repr(("shape", case.operation.path, body)))
    if case.operation.path == "/api/expected_payments" and "line_items" in body and rng.random() < 0.75:
        del body["line_items"]
    entries = body.get("ledger_entries")
    if not case.operation.path.startswith("/api/ledger_transactions") or not isinstance(entries, list):
        return
    if rng.random() >= 0.5:
        return
    mirrors = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("amount"), int) and not isinstance(entry.get("amount"), bool):
            mirror = dict(entry)
            mirror["direction"] = "debit" if entry.get("direction") == "credit" else "credit"
            if _IDS.get("ledger_account"):
                mirror["ledger_account_id"] = rng.choice(_IDS["ledger_account"])
            mirrors.append(mirror)
    entries.extend(mirrors)


@schemathesis.hook
def before_call(context, case, kwargs):
    _mostly_valid_idempotency_key(case)
    _use_real_ids(case)
    _balanced_entries(case)
