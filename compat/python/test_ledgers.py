"""Ledgers through the official SDK (issue 19, SPEC G1 to G5): ledgers, ledger accounts (with
balances as of an effective time, a date, a window and a lock_version, as the SDK encodes
`balances[...]`), ledger transactions (pending and posted, entries carrying `lock_version` and
`available_balance_amount`, post, archive, reversal, versions, the list filters the SDK sends),
ledger entries (`show_balances`, metadata), and the errors the SDK raises (422 unbalanced or a
condition broken, 409 stale lock_version), each leaving the books unchanged.

Dates and times are passed as Python `date`/`datetime` objects where the SDK takes them, so the
SDK's own encoding is what the server reads (for a dict filter it is `str(datetime)`, with a
space between date and time)."""

from datetime import date, datetime, timedelta, timezone

import pytest
from modern_treasury import ConflictError, NotFoundError, UnprocessableEntityError
from modern_treasury.types import Ledger, LedgerAccount, LedgerEntry, LedgerTransaction
from modern_treasury.types.ledger_transactions import LedgerTransactionVersion

from conftest import checked, strict_list, tag

NOW = datetime.now(timezone.utc).replace(microsecond=0)
TEN_DAYS_AGO = NOW - timedelta(days=10)
FIVE_DAYS_AGO = NOW - timedelta(days=5)


def make_ledger(client, t: str) -> Ledger:
    return checked(client.ledgers.create(name=f"Books {t}", metadata={"tag": t}))


def make_account(client, ledger_id: str, name: str, normal: str, currency: str = "USD", **extra) -> LedgerAccount:
    return checked(client.ledger_accounts.create(name=name, ledger_id=ledger_id, normal_balance=normal, currency=currency, **extra))


def entry(account_id: str, direction: str, amount: int, **extra) -> dict:
    return {"ledger_account_id": account_id, "direction": direction, "amount": amount, **extra}


def amounts(account: LedgerAccount) -> tuple:
    b = account.balances
    return (b.pending_balance.amount, b.posted_balance.amount, b.available_balance.amount)


@pytest.fixture
def books(client):
    """A fresh ledger with a debit-normal cash account and a credit-normal wallet."""
    t = tag()
    ledger = make_ledger(client, t)
    cash = make_account(client, ledger.id, f"Cash {t}", "debit")
    wallet = make_account(client, ledger.id, f"Wallet {t}", "credit", metadata={"tag": t})
    return ledger, cash, wallet, t


# --- ledgers -------------------------------------------------------------------------------------

def test_g1_ledger_create_retrieve_list_update_delete(client):
    t = tag()
    created = make_ledger(client, t)
    assert isinstance(created, Ledger)
    assert created.object == "ledger"
    assert created.name == f"Books {t}"
    assert created.metadata == {"tag": t}
    assert created.discarded_at is None
    assert checked(client.ledgers.retrieve(created.id)).id == created.id

    others = [make_ledger(client, t) for _ in range(2)]
    ids = [created.id] + [o.id for o in others]
    listed = strict_list(client.ledgers, Ledger, metadata={"tag": t})
    assert [x.id for x in listed] == list(reversed(ids)), "newest first"
    assert sorted(x.id for x in strict_list(client.ledgers, Ledger, id=ids[:2])) == sorted(ids[:2])
    paged = [x.id for x in client.ledgers.list(per_page=1, metadata={"tag": t})]
    assert paged == list(reversed(ids)), "auto-paging across pages, every ledger once"

    updated = checked(client.ledgers.update(created.id, name=f"Renamed {t}", description="the books", metadata={"stage": "two"}))
    assert (updated.name, updated.description) == (f"Renamed {t}", "the books")
    assert updated.metadata == {"tag": t, "stage": "two"}

    deleted = checked(client.ledgers.delete(others[0].id))
    assert deleted.id == others[0].id
    assert deleted.discarded_at is not None
    with pytest.raises(NotFoundError):
        client.ledgers.retrieve(others[0].id)


# --- ledger accounts -----------------------------------------------------------------------------

def test_g1_ledger_account_create_retrieve_list_update_delete(client, books):
    ledger, cash, wallet, t = books
    assert isinstance(wallet, LedgerAccount)
    assert wallet.object == "ledger_account"
    assert (wallet.ledger_id, wallet.normal_balance, wallet.lock_version) == (ledger.id, "credit", 0)
    for balance in (wallet.balances.pending_balance, wallet.balances.posted_balance, wallet.balances.available_balance):
        assert (balance.amount, balance.credits, balance.debits, balance.currency, balance.currency_exponent) == (0, 0, 0, "USD", 2)

    points = make_account(client, ledger.id, f"Points {t}", "credit", currency="POINTS", currency_exponent=0, external_id=f"pts-{t}")
    assert points.balances.posted_balance.currency == "POINTS"
    assert points.balances.posted_balance.currency_exponent == 0
    assert points.external_id == f"pts-{t}"

    fetched = checked(client.ledger_accounts.retrieve(wallet.id))
    assert fetched.id == wallet.id and fetched.name == wallet.name

    in_ledger = strict_list(client.ledger_accounts, LedgerAccount, ledger_id=ledger.id)
    assert [a.id for a in in_ledger] == [points.id, wallet.id, cash.id]
    assert [a.id for a in strict_list(client.ledger_accounts, LedgerAccount, ledger_id=ledger.id, normal_balance="debit")] == [cash.id]
    assert [a.id for a in strict_list(client.ledger_accounts, LedgerAccount, ledger_id=ledger.id, currency="POINTS")] == [points.id]
    assert [a.id for a in strict_list(client.ledger_accounts, LedgerAccount, metadata={"tag": t})] == [wallet.id]
    assert [a.id for a in strict_list(client.ledger_accounts, LedgerAccount, external_id=f"pts-{t}")] == [points.id]
    by_id = strict_list(client.ledger_accounts, LedgerAccount, id=[cash.id, wallet.id])
    assert sorted(a.id for a in by_id) == sorted([cash.id, wallet.id])
    by_name = strict_list(client.ledger_accounts, LedgerAccount, name=[f"Cash {t}", f"Points {t}"], ledger_id=ledger.id)
    assert sorted(a.id for a in by_name) == sorted([cash.id, points.id])
    paged = [a.id for a in client.ledger_accounts.list(ledger_id=ledger.id, per_page=2)]
    assert paged == [points.id, wallet.id, cash.id], "auto-paging across pages"

    updated = checked(client.ledger_accounts.update(wallet.id, name=f"Wallet two {t}", description="customer", metadata={"kind": "wallet"}))
    assert (updated.name, updated.description) == (f"Wallet two {t}", "customer")
    assert updated.metadata == {"tag": t, "kind": "wallet"}

    deleted = checked(client.ledger_accounts.delete(points.id))
    assert deleted.id == points.id and deleted.discarded_at is not None
    with pytest.raises(NotFoundError):
        client.ledger_accounts.retrieve(points.id)


def test_g3_g5_balances_as_of_an_instant_a_date_a_window_and_a_version(client, books):
    """The SDK encodes `balances={...}` as `balances[effective_at]=...` etc., from datetime and
    date objects; a backdated entry counts from its effective time on."""
    ledger, cash, wallet, t = books
    old = checked(
        client.ledger_transactions.create(
            status="posted", effective_at=TEN_DAYS_AGO, ledger_entries=[entry(cash.id, "debit", 1000), entry(wallet.id, "credit", 1000)]
        )
    )
    assert old.effective_at == TEN_DAYS_AGO
    assert old.effective_date == TEN_DAYS_AGO.date()
    checked(client.ledger_transactions.create(status="posted", ledger_entries=[entry(cash.id, "debit", 250), entry(wallet.id, "credit", 250)]))
    checked(
        client.ledger_transactions.create(status="pending", ledger_entries=[entry(wallet.id, "debit", 100), entry(cash.id, "credit", 100)])
    )

    now = checked(client.ledger_accounts.retrieve(wallet.id))
    assert amounts(now) == (1150, 1250, 1150), "G3: pending counts pending too; available less pending outflows"
    assert now.lock_version == 3
    # cash is debit-normal: the pending credit of 100 is its outflow.
    assert amounts(checked(client.ledger_accounts.retrieve(cash.id))) == (1150, 1250, 1150)

    as_of = checked(client.ledger_accounts.retrieve(wallet.id, balances={"effective_at": FIVE_DAYS_AGO}))
    assert amounts(as_of) == (1000, 1000, 1000)
    assert as_of.balances.effective_at_upper_bound is not None
    by_date = checked(client.ledger_accounts.retrieve(wallet.id, balances={"as_of_date": FIVE_DAYS_AGO.date()}))
    assert amounts(by_date) == (1000, 1000, 1000)
    before = checked(client.ledger_accounts.retrieve(wallet.id, balances={"as_of_date": (TEN_DAYS_AGO - timedelta(days=1)).date()}))
    assert amounts(before) == (0, 0, 0)
    window = checked(
        client.ledger_accounts.retrieve(
            wallet.id, balances={"effective_at_lower_bound": FIVE_DAYS_AGO, "effective_at_upper_bound": NOW + timedelta(days=1)}
        )
    )
    assert amounts(window) == (150, 250, 150), "only what changed inside the window"
    assert window.balances.effective_at_lower_bound == FIVE_DAYS_AGO
    at_version = checked(client.ledger_accounts.retrieve(wallet.id, balances={"as_of_lock_version": 1}))
    assert amounts(at_version) == (1000, 1000, 1000)

    listed = strict_list(client.ledger_accounts, LedgerAccount, ledger_id=ledger.id, balances={"as_of_date": FIVE_DAYS_AGO.date()})
    assert {a.id: amounts(a) for a in listed} == {wallet.id: (1000, 1000, 1000), cash.id: (1000, 1000, 1000)}
    listed = strict_list(client.ledger_accounts, LedgerAccount, ledger_id=ledger.id, balances={"effective_at": FIVE_DAYS_AGO})
    assert {a.id: amounts(a) for a in listed} == {wallet.id: (1000, 1000, 1000), cash.id: (1000, 1000, 1000)}


# --- ledger transactions -------------------------------------------------------------------------

def test_g2_g4_pending_then_posted_with_lock_version_and_balance_condition(client, books):
    ledger, cash, wallet, t = books
    funded = checked(
        client.ledger_transactions.create(
            description="top up",
            status="posted",
            metadata={"tag": t},
            external_id=f"top-{t}",
            ledger_entries=[entry(cash.id, "debit", 500), entry(wallet.id, "credit", 500, lock_version=0, metadata={"side": "wallet"})],
        )
    )
    assert isinstance(funded, LedgerTransaction)
    assert (funded.object, funded.status, funded.ledger_id, funded.external_id) == ("ledger_transaction", "posted", ledger.id, f"top-{t}")
    assert funded.posted_at is not None
    assert len(funded.ledger_entries) == 2
    by_account = {e.ledger_account_id: e for e in funded.ledger_entries}
    assert by_account[wallet.id].ledger_account_lock_version == 0
    assert by_account[wallet.id].metadata == {"side": "wallet"}
    assert (by_account[cash.id].direction, by_account[cash.id].amount, by_account[cash.id].amount_string) == ("debit", 500, "500")

    spend = checked(
        client.ledger_transactions.create(
            status="pending",
            ledger_entries=[
                entry(wallet.id, "debit", 200, lock_version=1, available_balance_amount={"gte": 0}),
                entry(cash.id, "credit", 200),
            ],
        )
    )
    assert spend.status == "pending" and spend.posted_at is None
    assert amounts(checked(client.ledger_accounts.retrieve(wallet.id))) == (300, 500, 300)

    posted = checked(client.ledger_transactions.update(spend.id, status="posted"))
    assert posted.status == "posted" and posted.posted_at is not None
    assert all(e.status == "posted" for e in posted.ledger_entries)
    assert amounts(checked(client.ledger_accounts.retrieve(wallet.id))) == (300, 300, 300)
    fetched = checked(client.ledger_transactions.retrieve(spend.id))
    assert fetched.status == "posted" and fetched.id == spend.id

    held = checked(
        client.ledger_transactions.create(status="pending", ledger_entries=[entry(wallet.id, "debit", 50), entry(cash.id, "credit", 50)])
    )
    archived = checked(client.ledger_transactions.update(held.id, status="archived"))
    assert archived.status == "archived"
    assert all(e.status == "archived" for e in archived.ledger_entries)
    assert amounts(checked(client.ledger_accounts.retrieve(wallet.id))) == (300, 300, 300), "G2: archived entries count nowhere"

    described = checked(client.ledger_transactions.update(funded.id, description="top up, checked", metadata={"seen": "yes"}))
    assert described.description == "top up, checked"
    assert described.metadata == {"tag": t, "seen": "yes"}
    with pytest.raises(UnprocessableEntityError):
        client.ledger_transactions.update(funded.id, status="archived")


def test_g2_reversal_and_versions(client, books):
    ledger, cash, wallet, t = books
    original = checked(
        client.ledger_transactions.create(status="posted", ledger_entries=[entry(cash.id, "debit", 700), entry(wallet.id, "credit", 700)])
    )
    reversal = checked(client.ledger_transactions.create_reversal(original.id, description="undo", metadata={"why": "test"}))
    assert isinstance(reversal, LedgerTransaction)
    assert reversal.status == "posted"
    assert reversal.reverses_ledger_transaction_id == original.id
    assert reversal.description == "undo" and reversal.metadata == {"why": "test"}
    assert {(e.ledger_account_id, e.direction, e.amount) for e in reversal.ledger_entries} == {(cash.id, "credit", 700), (wallet.id, "debit", 700)}
    assert checked(client.ledger_transactions.retrieve(original.id)).reversed_by_ledger_transaction_id == reversal.id
    assert amounts(checked(client.ledger_accounts.retrieve(wallet.id))) == (0, 0, 0)
    listed = strict_list(client.ledger_transactions, LedgerTransaction, reverses_ledger_transaction_id=original.id)
    assert [x.id for x in listed] == [reversal.id]
    with pytest.raises(UnprocessableEntityError):
        client.ledger_transactions.create_reversal(original.id)

    pending = checked(
        client.ledger_transactions.create(status="pending", ledger_entries=[entry(cash.id, "debit", 5), entry(wallet.id, "credit", 5)])
    )
    checked(client.ledger_transactions.update(pending.id, metadata={"step": "one"}))
    checked(client.ledger_transactions.update(pending.id, status="posted"))
    versions = strict_list(client.ledger_transactions.versions, LedgerTransactionVersion, ledger_transaction_id=pending.id)
    assert [v.version for v in versions] == [3, 2, 1], "newest first"
    assert [v.status for v in versions] == ["posted", "pending", "pending"]
    assert all(v.ledger_transaction_id == pending.id and v.object == "ledger_transaction_version" for v in versions)
    assert versions[1].metadata == {"step": "one"}
    assert len(versions[0].ledger_entries) == 2
    later = strict_list(client.ledger_transactions.versions, LedgerTransactionVersion, ledger_transaction_id=pending.id, version={"gte": 2})
    assert [v.version for v in later] == [3, 2]
    exactly = strict_list(client.ledger_transactions.versions, LedgerTransactionVersion, ledger_transaction_id=pending.id, version={"eq": 1})
    assert [v.version for v in exactly] == [1]
    before = strict_list(client.ledger_transactions.versions, LedgerTransactionVersion, ledger_transaction_id=pending.id, version={"lt": 3})
    assert [v.version for v in before] == [2, 1]
    paged = [v.version for v in client.ledger_transactions.versions.list(ledger_transaction_id=pending.id, per_page=2)]
    assert paged == [3, 2, 1], "auto-paging across pages"


def test_g5_transaction_list_filters_as_the_sdk_sends_them(client, books):
    ledger, cash, wallet, t = books
    other_ledger = make_ledger(client, t)
    elsewhere = make_account(client, other_ledger.id, f"Elsewhere {t}", "debit")
    elsewhere_too = make_account(client, other_ledger.id, f"Elsewhere two {t}", "credit")
    checked(client.ledger_transactions.create(status="posted", ledger_entries=[entry(elsewhere.id, "debit", 1), entry(elsewhere_too.id, "credit", 1)]))

    def make(at, status, **extra):
        return checked(
            client.ledger_transactions.create(
                status=status, effective_at=at, ledger_entries=[entry(cash.id, "debit", 10), entry(wallet.id, "credit", 10)], **extra
            )
        )

    old = make(TEN_DAYS_AGO, "posted", metadata={"batch": t, "kind": "old"})
    middle = make(FIVE_DAYS_AGO, "pending", metadata={"batch": t})
    recent = make(NOW, "posted", metadata={"batch": t})
    archived = make(NOW, "pending")
    checked(client.ledger_transactions.update(archived.id, status="archived"))
    everything = [archived.id, recent.id, middle.id, old.id]

    def ids(**params):
        return [x.id for x in strict_list(client.ledger_transactions, LedgerTransaction, **params)]

    assert ids(ledger_id=ledger.id) == everything
    assert ids(ledger_account_id=wallet.id) == everything
    assert ids(ledger_account_id=elsewhere.id, ledger_id=ledger.id) == []
    assert ids(ledger_id=ledger.id, status="posted") == [recent.id, old.id]
    assert ids(ledger_id=ledger.id, status=["pending", "archived"]) == [archived.id, middle.id]
    assert ids(ledger_id=ledger.id, metadata={"batch": t}) == [recent.id, middle.id, old.id]
    assert ids(ledger_id=ledger.id, metadata={"batch": t, "kind": "old"}) == [old.id]
    assert sorted(ids(id=[old.id, recent.id])) == sorted([old.id, recent.id])
    # datetime objects inside a dict filter: the SDK sends str(datetime), "YYYY-MM-DD HH:MM:SS+00:00".
    assert ids(ledger_id=ledger.id, effective_at={"lt": FIVE_DAYS_AGO}) == [old.id]
    assert ids(ledger_id=ledger.id, effective_at={"gte": FIVE_DAYS_AGO}) == [archived.id, recent.id, middle.id]
    assert ids(ledger_id=ledger.id, effective_at={"gt": FIVE_DAYS_AGO, "lte": NOW}) == [archived.id, recent.id]
    assert ids(ledger_id=ledger.id, effective_at={"eq": TEN_DAYS_AGO.isoformat()}) == [old.id]
    assert ids(ledger_id=ledger.id, effective_date={"lte": FIVE_DAYS_AGO.date()}) == [middle.id, old.id]
    assert ids(ledger_id=ledger.id, effective_date={"eq": TEN_DAYS_AGO.date().isoformat()}) == [old.id]

    paged = [x.id for x in client.ledger_transactions.list(ledger_id=ledger.id, per_page=3)]
    assert paged == everything, "auto-paging across pages"
    assert [x.id for x in client.ledger_transactions.list(ledger_id=ledger.id, order_by={"created_at": "desc"})] == everything
    with pytest.raises(UnprocessableEntityError) as refused:
        client.ledger_transactions.list(ledger_id=ledger.id, order_by={"effective_at": "asc"})
    assert "order_by" in str(refused.value.body)


# --- ledger entries ------------------------------------------------------------------------------

def test_g5_entries_retrieve_with_balances_list_and_update_metadata(client, books):
    ledger, cash, wallet, t = books
    first = checked(
        client.ledger_transactions.create(
            status="posted", effective_at=TEN_DAYS_AGO, ledger_entries=[entry(cash.id, "debit", 300), entry(wallet.id, "credit", 300)]
        )
    )
    second = checked(
        client.ledger_transactions.create(status="pending", ledger_entries=[entry(wallet.id, "debit", 120), entry(cash.id, "credit", 120)])
    )
    first_wallet = next(e for e in first.ledger_entries if e.ledger_account_id == wallet.id)
    second_wallet = next(e for e in second.ledger_entries if e.ledger_account_id == wallet.id)

    plain = checked(client.ledger_entries.retrieve(first_wallet.id))
    assert isinstance(plain, LedgerEntry)
    assert plain.resulting_ledger_account_balances is None
    assert (plain.object, plain.ledger_transaction_id, plain.status) == ("ledger_entry", first.id, "posted")
    shown = checked(client.ledger_entries.retrieve(first_wallet.id, show_balances=True))
    resulting = shown.resulting_ledger_account_balances
    assert (resulting.pending_balance.amount, resulting.posted_balance.amount, resulting.available_balance.amount) == (300, 300, 300)
    after = checked(client.ledger_entries.retrieve(second_wallet.id, show_balances=True)).resulting_ledger_account_balances
    assert (after.pending_balance.amount, after.posted_balance.amount, after.available_balance.amount) == (180, 300, 180)

    def ids(**params):
        return [e.id for e in strict_list(client.ledger_entries, LedgerEntry, **params)]

    assert ids(ledger_account_id=wallet.id) == [second_wallet.id, first_wallet.id]
    assert set(ids(ledger_transaction_id=first.id)) == {e.id for e in first.ledger_entries}
    assert ids(ledger_account_id=wallet.id, status="pending") == [second_wallet.id]
    assert ids(ledger_account_id=wallet.id, direction="credit") == [first_wallet.id]
    assert ids(ledger_account_id=wallet.id, effective_at={"lt": FIVE_DAYS_AGO}) == [first_wallet.id]
    assert ids(ledger_account_id=wallet.id, effective_date={"gte": FIVE_DAYS_AGO.date()}) == [second_wallet.id]
    assert sorted(ids(id=[first_wallet.id, second_wallet.id])) == sorted([first_wallet.id, second_wallet.id])
    with_balances = strict_list(client.ledger_entries, LedgerEntry, ledger_account_id=wallet.id, show_balances=True)
    assert [e.resulting_ledger_account_balances.posted_balance.amount for e in with_balances] == [300, 300]
    paged = [e.id for e in client.ledger_entries.list(ledger_account_id=wallet.id, per_page=1)]
    assert paged == [second_wallet.id, first_wallet.id], "auto-paging across pages"

    updated = checked(client.ledger_entries.update(first_wallet.id, metadata={"note": "hello"}))
    assert updated.metadata == {"note": "hello"}
    assert ids(ledger_account_id=wallet.id, metadata={"note": "hello"}) == [first_wallet.id]
    inside = checked(client.ledger_transactions.retrieve(first.id))
    assert next(e for e in inside.ledger_entries if e.id == first_wallet.id).metadata == {"note": "hello"}


# --- errors --------------------------------------------------------------------------------------

def test_g2_g4_errors_raise_the_sdk_exceptions_and_change_nothing(client, books):
    ledger, cash, wallet, t = books
    checked(client.ledger_transactions.create(status="posted", ledger_entries=[entry(cash.id, "debit", 100), entry(wallet.id, "credit", 100)]))
    before = checked(client.ledger_accounts.retrieve(wallet.id))
    assert before.lock_version == 1

    with pytest.raises(UnprocessableEntityError) as unbalanced:
        client.ledger_transactions.create(ledger_entries=[entry(cash.id, "debit", 100), entry(wallet.id, "credit", 99)])
    assert unbalanced.value.status_code == 422
    assert "ledger_entries" in str(unbalanced.value.body)

    with pytest.raises(ConflictError) as stale:
        client.ledger_transactions.create(
            status="posted", ledger_entries=[entry(wallet.id, "debit", 10, lock_version=0), entry(cash.id, "credit", 10)]
        )
    assert stale.value.status_code == 409

    with pytest.raises(UnprocessableEntityError) as overdrawn:
        client.ledger_transactions.create(
            status="posted",
            ledger_entries=[entry(wallet.id, "debit", 101, available_balance_amount={"gte": 0}), entry(cash.id, "credit", 101)],
        )
    assert "available_balance_amount" in str(overdrawn.value.body)

    with pytest.raises(UnprocessableEntityError):
        client.ledger_transactions.create(ledger_entries=[entry(cash.id, "debit", 0), entry(wallet.id, "credit", 0)])
    with pytest.raises(NotFoundError):
        client.ledger_transactions.retrieve("00000000-0000-0000-0000-000000000000")

    after = checked(client.ledger_accounts.retrieve(wallet.id))
    assert (amounts(after), after.lock_version) == (amounts(before), 1), "refused transactions change nothing"
    assert len(strict_list(client.ledger_transactions, LedgerTransaction, ledger_id=ledger.id)) == 1
