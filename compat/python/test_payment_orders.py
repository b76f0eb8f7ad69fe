"""Payment orders through the official SDK: create by receiving_account_id and by inline
receiving_account, retrieve, list with filters and auto-paging, cancel, the sandbox bank's
paths (completed, 1313 failed, 4040 returned) and their events (SPEC E2, E3, E4; issue 4)."""

from datetime import datetime, timedelta, timezone

import pytest
from modern_treasury import UnprocessableEntityError
from modern_treasury.types import Event, PaymentOrder

from conftest import account_input, checked, strict_list, tag, wait_for

FINAL = {"completed", "failed", "returned", "cancelled", "denied", "reversed", "stopped"}


def later() -> datetime:
    """A process_after far enough ahead that the sandbox bank leaves the order alone."""
    return datetime.now(timezone.utc) + timedelta(hours=1)


def settle(client, order_id: str, until: set, timeout: float = 10.0) -> PaymentOrder:
    return wait_for(
        lambda: client.payment_orders.retrieve(order_id),
        lambda po: po.status in until,
        timeout=timeout,
        what=f"payment order {order_id} to reach {sorted(until)}",
    )


def test_create_by_receiving_account_id_and_retrieve(client, internal_account, counterparty):
    receiving = counterparty.accounts[0]
    t = tag()
    created = checked(
        client.payment_orders.create(
            type="ach",
            amount=12345,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account_id=receiving.id,
            description=f"Invoice {t}",
            metadata={"tag": t},
            process_after=later(),
        )
    )
    assert isinstance(created, PaymentOrder)
    assert created.object == "payment_order"
    assert created.type == "ach"
    assert created.amount == 12345
    assert created.direction == "credit"
    assert created.currency == "USD"  # the originating account's
    assert created.originating_account_id == internal_account.id
    assert created.receiving_account_id == receiving.id
    assert created.receiving_account_type == "external_account"
    assert created.counterparty_id == counterparty.id  # derived from the receiving account
    assert created.metadata == {"tag": t}
    assert created.description == f"Invoice {t}"
    assert created.live_mode is False
    assert created.status in {"approved", "pending", "needs_approval"}

    fetched = checked(client.payment_orders.retrieve(created.id))
    assert fetched.id == created.id
    assert fetched.amount == 12345
    assert fetched.receiving_account_id == receiving.id


def test_create_with_inline_receiving_account(client, internal_account):
    t = tag()
    created = checked(
        client.payment_orders.create(
            type="ach",
            amount=5000,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account=account_input(party_name=f"Inline {t}", account_number="444455556666"),
            metadata={"tag": t},
            process_after=later(),
        )
    )
    assert created.receiving_account_type == "external_account"
    assert created.receiving_account_id
    account = checked(client.external_accounts.retrieve(created.receiving_account_id))
    assert account.party_name == f"Inline {t}"
    assert account.account_details[0].account_number_safe == "6666"


def test_list_with_metadata_filter_and_auto_paging(client, internal_account, counterparty):
    t = tag()
    made = [
        client.payment_orders.create(
            type="ach",
            amount=100 + i,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account_id=counterparty.accounts[0].id,
            metadata={"batch": t, "parity": "even" if i % 2 == 0 else "odd"},
            process_after=later(),
        ).id
        for i in range(5)
    ]
    seen = [po.id for po in client.payment_orders.list(per_page=2, metadata={"batch": t})]
    assert seen == list(reversed(made))
    pages = list(client.payment_orders.list(per_page=2, metadata={"batch": t}).iter_pages())
    assert [len(p.items) for p in pages] == [2, 2, 1]

    even = {po.id for po in client.payment_orders.list(metadata={"batch": t, "parity": "even"})}
    assert even == {made[0], made[2], made[4]}

    # Other filters of the SDK's list params combine with metadata.
    assert {po.id for po in client.payment_orders.list(metadata={"batch": t}, type="ach", direction="credit")} == set(made)
    assert [po.id for po in client.payment_orders.list(metadata={"batch": t}, direction="debit")] == []
    assert {po.id for po in client.payment_orders.list(metadata={"batch": t}, counterparty_id=counterparty.id)} == set(made)

    items = strict_list(client.payment_orders, PaymentOrder, per_page=100, metadata={"batch": t})
    assert [po.id for po in items] == list(reversed(made))


def test_cancel(client, internal_account, counterparty):
    created = client.payment_orders.create(
        type="ach",
        amount=777,
        direction="credit",
        originating_account_id=internal_account.id,
        receiving_account_id=counterparty.accounts[0].id,
        process_after=later(),
    )
    assert created.status == "approved"
    cancelled = checked(client.payment_orders.update(created.id, status="cancelled"))
    assert cancelled.id == created.id
    assert cancelled.status == "cancelled"
    assert client.payment_orders.retrieve(created.id).status == "cancelled"
    # A final status cannot be left (SPEC E3): 422, and the order is unchanged.
    with pytest.raises(UnprocessableEntityError) as err:
        client.payment_orders.update(created.id, status="approved")
    assert err.value.response.headers.get("x-should-retry") == "false"
    assert client.payment_orders.retrieve(created.id).status == "cancelled"

    events = list(client.events.list(entity_id=created.id))
    assert "cancelled" in {e.event_name for e in events}


def test_sandbox_bank_to_completion_with_events(client, internal_account, counterparty):
    created = client.payment_orders.create(
        type="ach",
        amount=2500,
        direction="credit",
        originating_account_id=internal_account.id,
        receiving_account_id=counterparty.accounts[0].id,
    )
    done = checked(settle(client, created.id, FINAL))
    assert done.status == "completed"

    # Cancelling once processing has started is refused (SPEC E3).
    with pytest.raises(UnprocessableEntityError):
        client.payment_orders.update(created.id, status="cancelled")

    events = strict_list(client.events, Event, entity_id=created.id, per_page=100)
    names = [e.event_name for e in events]
    for expected in ("created", "completed"):
        assert expected in names, f"no {expected!r} event in {names}"
    assert names[0] == "completed", f"events are newest first: {names}"
    for event in events:
        assert event.resource == "payment_order"
        assert event.entity_id == created.id
        assert event.data["id"] == created.id
        assert event.live_mode is False
    statuses = [e.data["status"] for e in reversed(events)]
    assert statuses[-1] == "completed"
    # The order went through the bank's steps in order.
    order = ["approved", "processing", "sent", "completed"]
    positions = [order.index(s) for s in statuses if s in order]
    assert positions == sorted(positions), statuses
    assert {"processing", "sent"} <= set(statuses), statuses

    # Auto-paging over events, and retrieve by id.
    paged = [e.id for e in client.events.list(entity_id=created.id, per_page=2)]
    assert paged == [e.id for e in events]
    one = checked(client.events.retrieve(events[0].id))
    assert one.id == events[0].id
    assert one.data == events[0].data

    completed_events = list(client.events.list(entity_id=created.id, event_name="completed", resource="payment_order"))
    assert [e.id for e in completed_events] == [events[0].id]


def test_sandbox_magic_amount_1313_fails(client, internal_account, counterparty):
    created = client.payment_orders.create(
        type="ach",
        amount=1313,
        direction="credit",
        originating_account_id=internal_account.id,
        receiving_account_id=counterparty.accounts[0].id,
    )
    done = checked(settle(client, created.id, FINAL))
    assert done.status == "failed"
    assert done.vendor_failure_reason
    names = [e.event_name for e in client.events.list(entity_id=created.id)]
    assert "failed" in names, names
    assert "completed" not in names, names


def test_sandbox_magic_amount_4040_is_returned(client, internal_account, counterparty):
    created = client.payment_orders.create(
        type="ach",
        amount=4040,
        direction="credit",
        originating_account_id=internal_account.id,
        receiving_account_id=counterparty.accounts[0].id,
    )
    done = checked(settle(client, created.id, {"returned", "failed", "cancelled", "reversed"}))
    assert done.status == "returned"
    assert done.current_return is not None
    assert done.current_return.code == "R01"
    names = [e.event_name for e in client.events.list(entity_id=created.id)]
    assert "completed" in names and "returned" in names, names


def test_dates_line_items_update_and_date_filters(client, internal_account, counterparty):
    """Dates go out as the SDK serializes them (date, aware datetime with `+00:00`) and come back
    as the SDK's types; editable fields update while the order has not started processing."""
    t = tag()
    today = datetime.now(timezone.utc).date()
    before = datetime.now(timezone.utc) - timedelta(minutes=5)
    created = checked(
        client.payment_orders.create(
            type="ach",
            amount=3000,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account_id=counterparty.accounts[0].id,
            effective_date=today + timedelta(days=1),
            priority="normal",
            statement_descriptor="PAYRAIL",
            line_items=[{"amount": 1000, "description": "a"}, {"amount": 2000, "description": "b"}],
            metadata={"tag": t},
            process_after=later(),
        )
    )
    assert created.effective_date == today + timedelta(days=1)
    assert created.priority == "normal"

    updated = checked(
        client.payment_orders.update(created.id, description="changed", metadata={"tag": t, "edited": "yes"})
    )
    assert updated.description == "changed"
    assert updated.metadata == {"tag": t, "edited": "yes"}
    assert updated.status == created.status

    def ids(**params):
        return [po.id for po in client.payment_orders.list(metadata={"tag": t}, **params)]

    assert ids(created_at_start=today - timedelta(days=1), created_at_end=today + timedelta(days=1)) == [created.id]
    assert ids(created_at_start=today + timedelta(days=2)) == []
    assert ids(effective_date_start=today, effective_date_end=today + timedelta(days=1)) == [created.id]
    assert ids(effective_date_start=today + timedelta(days=2)) == []

    names = [e.event_name for e in client.events.list(entity_id=created.id, event_time_start=before)]
    assert "created" in names and len(names) >= 2, names
    assert [e.id for e in client.events.list(entity_id=created.id, event_time_end=before)] == []


def test_book_transfer_to_an_internal_account(client, internal_account):
    other = client.internal_accounts.create(currency="USD", name=f"Reserve {tag()}", party_name="Payrail Compat Inc.")
    created = checked(
        client.payment_orders.create(
            type="book",
            amount=10_000,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account_id=other.id,
            process_after=later(),
        )
    )
    assert created.receiving_account_id == other.id
    assert created.receiving_account_type == "internal_account"
    assert created.counterparty_id is None


@pytest.mark.parametrize("amount", [0, -1, 2**53])
def test_amount_out_of_range_is_unprocessable(client, internal_account, amount):
    with pytest.raises(UnprocessableEntityError) as err:
        client.payment_orders.create(
            type="ach",
            amount=amount,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account=account_input(),
        )
    assert err.value.body["errors"]["parameter"] == "amount"


def test_async_client_creates_and_pages(internal_account, counterparty):
    """The SDK's async client (AsyncPage, async auto-paging) works the same way."""
    import asyncio

    from modern_treasury import AsyncModernTreasury, DefaultAsyncHttpxClient

    from conftest import API_KEY, BASE_URL, ssl_context

    async def scenario():
        t = tag()
        async with AsyncModernTreasury(
            api_key=API_KEY,
            organization_id="x-api-key",
            base_url=BASE_URL,
            _strict_response_validation=True,
            max_retries=0,
            http_client=DefaultAsyncHttpxClient(verify=ssl_context()),
        ) as aclient:
            made = []
            for i in range(3):
                po = await aclient.payment_orders.create(
                    type="ach",
                    amount=200 + i,
                    direction="credit",
                    originating_account_id=internal_account.id,
                    receiving_account_id=counterparty.accounts[0].id,
                    metadata={"async": t},
                    process_after=later(),
                )
                made.append(checked(po).id)
            seen = [po.id async for po in aclient.payment_orders.list(per_page=2, metadata={"async": t})]
            assert seen == list(reversed(made))
            assert (await aclient.payment_orders.retrieve(made[0])).id == made[0]

    asyncio.run(scenario())
