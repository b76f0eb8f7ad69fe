"""Ping, the key in use, and authentication conventions (SPEC E, A1)."""

from modern_treasury.types import PingResponse

from conftest import API_KEY, checked, make_client


def test_ping(client):
    pong = checked(client.ping())
    assert isinstance(pong, PingResponse)
    assert pong.ping == "pong"


def test_api_keys_current_through_the_raw_get(client):
    # The SDK has no api_keys resource; its generic `get` reaches the endpoint unchanged.
    current = client.get("/api/api_keys/current", cast_to=object)
    assert isinstance(current, dict)
    expected = {
        "id", "object", "name", "live_mode", "organization_id", "created_at", "updated_at",
        "expires_at", "decommissioned", "decommissioned_at",
    }
    assert expected <= set(current), f"missing: {expected - set(current)}"
    assert current["object"] == "api_key"
    assert current["live_mode"] is False
    assert current["decommissioned"] is False
    assert isinstance(current["organization_id"], str) and current["organization_id"]
    # The key itself is never echoed back (SPEC A4).
    assert API_KEY not in str(current)


def test_organization_id_is_accepted_as_user_name(client):
    # Modern Treasury's own convention: user name = organization id (SPEC A1).
    org = client.get("/api/api_keys/current", cast_to=object)["organization_id"]
    with make_client(organization_id=org) as by_org:
        assert by_org.ping().ping == "pong"
