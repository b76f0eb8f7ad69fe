"""The SDK's mapped exceptions (401, 404, 409, 422) and idempotent replay through
`idempotency_key=` (SPEC A2, L3, L4, I4, I6)."""

import json
import uuid

import pytest
from modern_treasury import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

from conftest import ROUTING_NUMBER, SlowUpload, checked, make_client, tag


def error_of(exc) -> dict:
    body = exc.body
    assert isinstance(body, dict) and isinstance(body.get("errors"), dict), f"error body: {body!r}"
    errors = body["errors"]
    assert {"code", "message", "parameter"} <= set(errors), errors
    return errors


# --- 401 -----------------------------------------------------------------------------------------

def test_bad_key_raises_authentication_error():
    with make_client(api_key="pr_sandbox_" + "x" * 43) as bad:
        with pytest.raises(AuthenticationError) as err:
            bad.ping()
    assert err.value.status_code == 401
    assert err.value.response.headers.get("www-authenticate", "").lower().startswith("basic")
    assert error_of(err.value)["code"] == "invalid_key"


def test_wrong_user_name_raises_authentication_error():
    with make_client(organization_id="someone-else") as bad:
        with pytest.raises(AuthenticationError):
            bad.counterparties.list()


# --- 404 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("resource", ["counterparties", "external_accounts", "internal_accounts", "payment_orders", "events"])
def test_unknown_id_raises_not_found(client, resource):
    with pytest.raises(NotFoundError) as err:
        getattr(client, resource).retrieve(str(uuid.uuid4()))
    assert err.value.status_code == 404
    error_of(err.value)


def test_delete_unknown_counterparty_raises_not_found(client):
    with pytest.raises(NotFoundError):
        client.counterparties.delete(str(uuid.uuid4()))


# --- 422 -----------------------------------------------------------------------------------------

def test_bad_routing_number_raises_unprocessable_entity(client):
    owner = client.counterparties.create(name=f"Bad routing {tag()}")
    with pytest.raises(UnprocessableEntityError) as err:
        client.external_accounts.create(
            counterparty_id=owner.id,
            party_name="Nobody",
            account_details=[{"account_number": "123456789"}],
            # Fails the ABA checksum.
            routing_details=[{"routing_number": "021000022", "routing_number_type": "aba"}],
        )
    assert err.value.status_code == 422
    errors = error_of(err.value)
    assert errors["code"] in {"parameter_invalid", "parameter_missing"}
    assert "routing_number" in (errors["parameter"] or ""), errors
    assert err.value.response.headers.get("x-should-retry") == "false"
    # Nothing was created.
    assert client.counterparties.retrieve(owner.id).accounts == []


def test_unknown_originating_account_raises_unprocessable_entity(client, counterparty):
    with pytest.raises(UnprocessableEntityError) as err:
        client.payment_orders.create(
            type="ach",
            amount=100,
            direction="credit",
            originating_account_id=str(uuid.uuid4()),
            receiving_account_id=counterparty.accounts[0].id,
        )
    assert "originating_account_id" in (error_of(err.value)["parameter"] or "")


def test_missing_internal_account_name_raises_unprocessable_entity(client):
    with pytest.raises(UnprocessableEntityError) as err:
        client.internal_accounts.create(currency="USD", name="", party_name="x")
    assert "name" in (error_of(err.value)["parameter"] or "")


# --- idempotency ---------------------------------------------------------------------------------

def test_idempotency_key_replays_the_first_result(client):
    key = f"compat-{uuid.uuid4()}"
    name = f"Once {tag()}"
    first = client.counterparties.with_raw_response.create(name=name, metadata={"once": name}, idempotency_key=key)
    assert first.status_code == 201
    second = client.counterparties.with_raw_response.create(name=name, metadata={"once": name}, idempotency_key=key)
    assert second.status_code == 201
    assert second.headers.get("idempotent-replayed") == "true"
    assert second.http_response.content == first.http_response.content
    assert checked(second.parse()).id == checked(first.parse()).id
    # Exactly one counterparty exists.
    assert len(list(client.counterparties.list(metadata={"once": name}))) == 1


def test_idempotency_key_replays_payment_orders(client, internal_account, counterparty):
    key = f"compat-po-{uuid.uuid4()}"
    t = tag()
    params = dict(
        type="ach",
        amount=4242,
        direction="credit",
        originating_account_id=internal_account.id,
        receiving_account_id=counterparty.accounts[0].id,
        metadata={"tag": t},
        idempotency_key=key,
    )
    a = client.payment_orders.create(**params)
    b = client.payment_orders.create(**params)
    assert a.id == b.id
    assert [po.id for po in client.payment_orders.list(metadata={"tag": t})] == [a.id]


def test_request_in_flight_raises_conflict(client):
    key = f"compat-inflight-{uuid.uuid4()}"
    name = f"In flight {tag()}"
    body = json.dumps({"name": name, "metadata": {"inflight": name}}).encode()
    upload = SlowUpload("/api/counterparties", body, key)
    try:
        # The first request holds the key while its body is still arriving: the SDK gets 409.
        with pytest.raises(ConflictError) as err:
            client.with_options(max_retries=0).counterparties.create(name=name, idempotency_key=key)
        assert err.value.status_code == 409
        errors = error_of(err.value)
        assert errors["code"] == "conflict"
        assert errors["parameter"] == "Idempotency-Key"
        assert err.value.response.headers.get("retry-after"), "409 for a key in flight carries Retry-After"

        status, reply = upload.finish()
    finally:
        upload.close()
    assert status == 201, reply
    original = json.loads(reply)
    # Once the original finished, the same key replays it.
    replay = client.counterparties.create(name="ignored", idempotency_key=key)
    assert replay.id == original["id"]
    assert replay.name == name
    assert len(list(client.counterparties.list(metadata={"inflight": name}))) == 1


def test_sdk_retry_after_conflict_gets_the_replay(client):
    """With the SDK's default retries, a 409 for a key in flight is retried with the same key,
    and the retry gets the original's result once it is done."""
    key = f"compat-retry-{uuid.uuid4()}"
    name = f"Retried {tag()}"
    body = json.dumps({"name": name}).encode()
    upload = SlowUpload("/api/counterparties", body, key)
    import threading

    result = {}

    def finish_soon():
        import time

        time.sleep(0.3)
        result["original"] = upload.finish()

    finisher = threading.Thread(target=finish_soon)
    finisher.start()
    try:
        with make_client(max_retries=3) as retrying:
            replay = retrying.counterparties.create(name=name, idempotency_key=key)
    finally:
        finisher.join(timeout=20)
        upload.close()
    status, reply = result["original"]
    assert status == 201
    assert replay.id == json.loads(reply)["id"]


@pytest.mark.parametrize("bad_key", ["k" * 256, "has space"])
def test_malformed_idempotency_key_raises_bad_request(client, bad_key):
    # SPEC I1: 1 to 255 visible ASCII characters; otherwise 400 naming the header.
    with pytest.raises(BadRequestError) as err:
        client.counterparties.create(name=f"Bad key {tag()}", idempotency_key=bad_key)
    assert err.value.status_code == 400
    assert error_of(err.value)["parameter"] == "Idempotency-Key"
