"""Internal accounts, counterparties (with inline accounts) and external accounts through the
official SDK: create, retrieve, list with auto-paging and filters, update, delete (SPEC E, E1, L1, L2)."""

import pytest
from modern_treasury import NotFoundError
from modern_treasury.types import Counterparty, ExternalAccount, InternalAccount

from conftest import ROUTING_NUMBER, account_input, checked, strict_list, tag


# --- internal accounts ---------------------------------------------------------------------------

def test_internal_account_create_retrieve_list_update(client):
    t = tag()
    created = checked(
        client.internal_accounts.create(
            currency="USD",
            name=f"Treasury {t}",
            party_name="Payrail Compat Inc.",
            metadata={"suite": "python", "tag": t},
        )
    )
    assert isinstance(created, InternalAccount)
    assert created.object == "internal_account"
    assert created.currency == "USD"
    assert created.name == f"Treasury {t}"
    assert created.live_mode is False
    assert created.metadata == {"suite": "python", "tag": t}

    fetched = checked(client.internal_accounts.retrieve(created.id))
    assert fetched.id == created.id
    assert fetched.name == created.name

    listed = strict_list(client.internal_accounts, InternalAccount, metadata={"tag": t})
    assert [a.id for a in listed] == [created.id]
    all_ids = [a.id for a in client.internal_accounts.list(per_page=2)]
    assert created.id in all_ids
    assert len(all_ids) == len(set(all_ids)), "auto-paging returned an account twice"

    updated = checked(client.internal_accounts.update(created.id, name=f"Renamed {t}", metadata={"stage": "two"}))
    assert updated.id == created.id
    assert updated.name == f"Renamed {t}"
    assert updated.metadata.get("stage") == "two"
    assert checked(client.internal_accounts.retrieve(created.id)).name == f"Renamed {t}"


# --- counterparties ------------------------------------------------------------------------------

def test_counterparty_create_with_inline_accounts_and_retrieve(client):
    t = tag()
    created = checked(
        client.counterparties.create(
            name=f"Acme {t}",
            email=f"billing-{t}@example.com",
            metadata={"tag": t},
            accounts=[
                account_input(party_name="Acme Corp", party_type="business", account_number="000123456789"),
                account_input(party_name="Acme Savings", account_type="savings", account_number="987654321"),
            ],
        )
    )
    assert isinstance(created, Counterparty)
    assert created.object == "counterparty"
    assert created.name == f"Acme {t}"
    assert created.email == f"billing-{t}@example.com"
    assert created.metadata == {"tag": t}
    assert created.live_mode is False
    assert isinstance(created.verification_status, str)
    assert len(created.accounts) == 2
    by_party = {a.party_name: a for a in created.accounts}
    business = by_party["Acme Corp"]
    assert business.object == "external_account"
    assert business.party_type == "business"
    assert business.account_type == "checking"
    assert business.account_details[0].account_number_safe == "6789"
    assert business.routing_details[0].routing_number == ROUTING_NUMBER
    assert business.routing_details[0].routing_number_type == "aba"
    assert by_party["Acme Savings"].account_type == "savings"

    fetched = checked(client.counterparties.retrieve(created.id))
    assert fetched.id == created.id
    assert sorted(a.id for a in fetched.accounts) == sorted(a.id for a in created.accounts)

    # The inline accounts are external accounts of the counterparty in their own right.
    for account in created.accounts:
        external = checked(client.external_accounts.retrieve(account.id))
        assert external.counterparty_id == created.id


def test_counterparty_list_auto_paging(client):
    t = tag()
    created = [
        client.counterparties.create(name=f"Paged {t} {i}", metadata={"batch": t}).id for i in range(5)
    ]
    newest_first = list(reversed(created))

    first = client.counterparties.list(per_page=2, metadata={"batch": t})
    assert len(first.items) == 2
    assert first.per_page == 2
    assert first.has_next_page()

    # The SDK's auto-paging follows X-After-Cursor through every page and stops on the last.
    seen = [c.id for c in client.counterparties.list(per_page=2, metadata={"batch": t})]
    assert seen == newest_first
    pages = list(client.counterparties.list(per_page=2, metadata={"batch": t}).iter_pages())
    assert [len(p.items) for p in pages] == [2, 2, 1]
    assert not pages[-1].has_next_page()

    # Each item of a list reply passes strict validation too (the SDK does not check pages).
    items = strict_list(client.counterparties, Counterparty, per_page=100, metadata={"batch": t})
    assert [c.id for c in items] == newest_first


def test_counterparty_list_filters(client):
    t = tag()
    a = client.counterparties.create(name=f"Filter Alpha {t}", email=f"alpha-{t}@example.com", metadata={"f": t, "kind": "a", "region": "eu"})
    b = client.counterparties.create(name=f"Filter Beta {t}", metadata={"f": t, "kind": "b", "region": "eu"})
    c = client.counterparties.create(name=f"Filter Gamma {t}", metadata={"f": t, "kind": "a", "region": "us west"}, external_id=f"ext-{t}")

    def ids(**params):
        return {x.id for x in client.counterparties.list(per_page=100, **params)}

    assert ids(metadata={"f": t}) == {a.id, b.id, c.id}
    assert ids(metadata={"f": t, "kind": "a"}) == {a.id, c.id}
    assert ids(metadata={"f": t, "kind": "a", "region": "eu"}) == {a.id}
    # A space is sent as `+` by the SDK's form encoding (SPEC L2).
    assert ids(metadata={"f": t, "region": "us west"}) == {c.id}
    assert ids(metadata={"f": t, "kind": "none"}) == set()
    assert ids(name=f"beta {t}") == {b.id}
    assert ids(email=f"alpha-{t}@example.com") == {a.id}
    assert ids(external_id=f"ext-{t}") == {c.id}


def test_counterparty_update_and_delete(client):
    t = tag()
    created = client.counterparties.create(name=f"Before {t}", metadata={"tag": t})
    updated = checked(
        client.counterparties.update(
            created.id, name=f"After {t}", email=f"after-{t}@example.com", metadata={"tag": t, "more": "yes"}
        )
    )
    assert updated.id == created.id
    assert updated.name == f"After {t}"
    assert updated.email == f"after-{t}@example.com"
    assert updated.metadata == {"tag": t, "more": "yes"}
    assert checked(client.counterparties.retrieve(created.id)).name == f"After {t}"

    assert client.counterparties.delete(created.id) is None
    with pytest.raises(NotFoundError):
        client.counterparties.retrieve(created.id)
    assert [c.id for c in client.counterparties.list(metadata={"tag": t})] == []


# --- external accounts ---------------------------------------------------------------------------

def test_external_account_create_retrieve_list_update_delete(client):
    t = tag()
    owner = client.counterparties.create(name=f"Owner {t}")
    created = checked(
        client.external_accounts.create(
            counterparty_id=owner.id,
            name=f"Payroll {t}",
            party_name="Owner Person",
            party_type="individual",
            account_type="checking",
            metadata={"tag": t},
            account_details=[{"account_number": "5550001234", "account_number_type": "other"}],
            routing_details=[{"routing_number": ROUTING_NUMBER, "routing_number_type": "aba"}],
        )
    )
    assert isinstance(created, ExternalAccount)
    assert created.object == "external_account"
    assert created.counterparty_id == owner.id
    assert created.party_name == "Owner Person"
    assert created.metadata == {"tag": t}
    assert created.account_details[0].account_number_safe == "1234"
    assert isinstance(created.verification_status, str)

    fetched = checked(client.external_accounts.retrieve(created.id))
    assert fetched.id == created.id

    by_owner = strict_list(client.external_accounts, ExternalAccount, counterparty_id=owner.id)
    assert [a.id for a in by_owner] == [created.id]
    assert [a.id for a in client.external_accounts.list(metadata={"tag": t})] == [created.id]
    # The counterparty now embeds the account.
    assert [a.id for a in client.counterparties.retrieve(owner.id).accounts] == [created.id]

    updated = checked(client.external_accounts.update(created.id, party_name="Owner Renamed", name=f"Renamed {t}", metadata={"tag": t, "x": "1"}))
    assert updated.party_name == "Owner Renamed"
    assert updated.name == f"Renamed {t}"
    assert updated.metadata == {"tag": t, "x": "1"}

    assert client.external_accounts.delete(created.id) is None
    with pytest.raises(NotFoundError):
        client.external_accounts.retrieve(created.id)
    assert [a.id for a in client.external_accounts.list(counterparty_id=owner.id)] == []


def test_external_account_auto_paging(client):
    t = tag()
    owner = client.counterparties.create(name=f"Many {t}")
    made = [
        client.external_accounts.create(
            counterparty_id=owner.id,
            party_name=f"Holder {i}",
            account_details=[{"account_number": f"77700{i}"}],
            routing_details=[{"routing_number": ROUTING_NUMBER, "routing_number_type": "aba"}],
        ).id
        for i in range(3)
    ]
    seen = [a.id for a in client.external_accounts.list(counterparty_id=owner.id, per_page=2)]
    assert seen == list(reversed(made))


def test_counterparty_created_at_bounds(client):
    """The SDK sends aware datetimes as `2024-01-02T03:04:05.123456+00:00` (the `+` as %2B)."""
    from datetime import datetime, timedelta, timezone

    t = tag()
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    made = client.counterparties.create(name=f"Bounded {t}", metadata={"tag": t})
    after = datetime.now(timezone.utc) + timedelta(seconds=5)

    def ids(**params):
        return [c.id for c in client.counterparties.list(metadata={"tag": t}, **params)]

    assert ids(created_at_lower_bound=before, created_at_upper_bound=after) == [made.id]
    assert ids(created_at_lower_bound=after) == []
    assert ids(created_at_upper_bound=before) == []


def test_counterparty_changes_write_events(client):
    """SPEC E4: each change writes an event whose data is the resource as returned."""
    t = tag()
    created = client.counterparties.with_raw_response.create(name=f"Evented {t}").http_response.json()
    updated = client.counterparties.with_raw_response.update(created["id"], name=f"Evented again {t}").http_response.json()
    client.counterparties.delete(created["id"])
    events = list(client.events.list(entity_id=created["id"], resource="counterparty"))
    assert [e.event_name for e in events] == ["deleted", "updated", "created"]
    by_name = {e.event_name: e for e in events}
    assert by_name["created"].data == created
    assert by_name["updated"].data == updated


def test_deleting_a_counterparty_deletes_its_accounts_with_events(client):
    t = tag()
    created = client.counterparties.create(name=f"Cascade {t}", accounts=[account_input()])
    account_id = created.accounts[0].id
    client.counterparties.delete(created.id)
    with pytest.raises(NotFoundError):
        client.external_accounts.retrieve(account_id)
    assert [a.id for a in client.external_accounts.list(counterparty_id=created.id)] == []
    names = [e.event_name for e in client.events.list(entity_id=account_id, resource="external_account")]
    assert names == ["deleted", "created"], names
