"""Seeds a running Payrail for compat/fuzz-mt.sh and compat/fuzz.sh: a few of each resource the
fuzzed routes name, so that generated requests reach past the 404 of an unknown id. Prints the ids as JSON
(resource kind -> list of ids) on stdout; compat/fuzz_mt_hooks.py reads that file.

Usage: python fuzz_mt_seed.py BASE_URL API_KEY CA_CERT > ids.json
Standard library only.
"""

import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request

base, key, ca = sys.argv[1], sys.argv[2], sys.argv[3]
context = ssl.create_default_context(cafile=ca)
auth = "Basic " + base64.b64encode(f"x-api-key:{key}".encode()).decode()


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", auth)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as reply:
            text = reply.read().decode()
            return reply.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def create(path, body):
    status, reply = call("POST", path, body)
    if status not in (201, 202):
        sys.exit(f"seeding: POST {path} {json.dumps(body)} answered {status}: {reply}")
    return reply


def listed(path):
    status, reply = call("GET", path)
    if status != 200:
        sys.exit(f"seeding: GET {path} answered {status}: {reply}")
    return [item["id"] for item in reply]


ids = {}


def keep(kind, value):
    ids.setdefault(kind, []).append(value)
    return value


# The bank side: internal accounts, orders the sandbox settles (transactions, line items) or
# returns (returns), simulated incoming payments, expected payments.
accounts = [keep("internal_account", create("/api/internal_accounts", {"name": f"Fuzz {i}", "currency": "USD"})["id"]) for i in range(2)]
counterparty = create("/api/counterparties", {"name": "Vendor", "accounts": [{
    "account_details": [{"account_number": "123456789"}],
    "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]}]})
keep("counterparty", counterparty["id"])
receiving = keep("external_account", counterparty["accounts"][0]["id"])
orders = [keep("payment_order", create("/api/payment_orders", {"type": "ach", "amount": amount, "direction": "credit",
    "originating_account_id": accounts[0], "receiving_account_id": receiving})["id"]) for amount in (1000, 4040)]
for i, account in enumerate(accounts):
    create("/api/simulations/incoming_payment_details/create_async",
           {"type": "ach", "direction": "credit", "amount": 1000 + i, "internal_account_id": account})
for i in range(3):
    keep("expected_payment", create("/api/expected_payments", {"amount_lower_bound": 900, "amount_upper_bound": 1100 + i,
        "direction": "credit", "internal_account_id": accounts[0], "currency": "USD", "type": "ach"})["id"])

# The books.
ledgers = [keep("ledger", create("/api/ledgers", {"name": f"Books {i}"})["id"]) for i in range(3)]
ledger_accounts = []
for i, normal in enumerate(["credit", "debit", "credit", "debit", "credit"]):
    body = {"name": f"Account {i}", "ledger_id": ledgers[0], "normal_balance": normal, "currency": "USD"}
    ledger_accounts.append(keep("ledger_account", create("/api/ledger_accounts", body)["id"]))
a, b = ledger_accounts[0], ledger_accounts[1]


def entries(amount, credit=a, debit=b):
    return [{"ledger_account_id": credit, "direction": "credit", "amount": amount},
            {"ledger_account_id": debit, "direction": "debit", "amount": amount}]


for i, status in enumerate(["posted", "posted", "pending", "pending", "pending"]):
    body = {"ledger_entries": entries(100 + i), "status": status, "effective_at": f"2026-03-{10 + i}T12:00:00Z"}
    keep("ledger_transaction", create("/api/ledger_transactions", body)["id"])
categories = []
for i in range(4):
    body = {"name": f"Category {i}", "ledger_id": ledgers[0], "normal_balance": "credit", "currency": "USD"}
    categories.append(keep("ledger_account_category", create("/api/ledger_account_categories", body)["id"]))
call("PUT", f"/api/ledger_account_categories/{categories[0]}/ledger_accounts/{a}")
call("PUT", f"/api/ledger_account_categories/{categories[0]}/ledger_account_categories/{categories[1]}")
for i, field in enumerate(["posted_balance_amount", "available_balance_amount", "pending_balance_amount"]):
    condition = {"field": field, "operator": "greater_than", "value": 100 * i}
    keep("ledger_account_balance_monitor", create("/api/ledger_account_balance_monitors",
         {"ledger_account_id": a, "alert_condition": condition})["id"])
for i in range(2):
    keep("ledger_account_settlement", create("/api/ledger_account_settlements",
         {"settled_ledger_account_id": a, "contra_ledger_account_id": b, "status": "pending"})["id"])
for i in range(2):
    keep("ledger_account_statement", create("/api/ledger_account_statements", {"ledger_account_id": a,
         "effective_at_lower_bound": "2026-03-01T00:00:00Z", "effective_at_upper_bound": f"2026-03-{20 + i}T00:00:00Z"})["id"])
ids["ledger_entry"] = listed("/api/ledger_entries?per_page=20")

# Wait (a few seconds at most) for the sandbox bank: settled and returned orders, simulations.
deadline = time.time() + 20
while time.time() < deadline:
    statuses = [call("GET", f"/api/payment_orders/{o}")[1]["status"] for o in orders]
    if all(s in ("completed", "returned") for s in statuses) and listed("/api/incoming_payment_details"):
        break
    time.sleep(0.2)
ids["transaction"] = listed("/api/transactions?per_page=20")
ids["transaction_line_item"] = listed("/api/transaction_line_items?per_page=20")
ids["return"] = listed("/api/returns?per_page=20")
ids["incoming_payment_detail"] = listed("/api/incoming_payment_details?per_page=20")
ids["balance_report"] = [r for account in accounts for r in listed(f"/api/internal_accounts/{account}/balance_reports")]
json.dump(ids, sys.stdout, indent=1)
print(file=sys.stderr)
print("seeded: " + ", ".join(f"{len(v)} {k}" for k, v in sorted(ids.items())), file=sys.stderr)
