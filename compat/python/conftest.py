"""Fixtures and helpers for the Payrail acceptance suite driven by the official Python SDK.

The server under test is named by the environment (compat/run.sh sets these):
  PAYRAIL_BASE_URL   e.g. https://127.0.0.1:8443
  PAYRAIL_API_KEY    a sandbox API key
  PAYRAIL_CA_CERT    the PEM file of the server's (self-signed) certificate

Every client here has strict response validation on. The SDK skips validation for list pages
(it builds them without checking), so list replies are also checked item by item through
`strict_list`, with the SDK's own strict validator. `assert_complete` checks the contract's "every
field present" rule (SPEC: always emit every field, `null` when empty), which pydantic alone does
not, since the SDK declares nullable fields with a default of None.
"""

from __future__ import annotations

import base64
import os
import socket
import ssl
import time
import uuid
from typing import Any, Callable, Iterable, List, Type, TypeVar
from urllib.parse import urlparse

import pydantic
import pytest
from modern_treasury import DefaultHttpxClient, ModernTreasury
from modern_treasury._models import validate_type  # the validator strict mode itself uses

T = TypeVar("T")

# A valid ABA routing number (checksum ok) and account numbers for test accounts.
ROUTING_NUMBER = "021000021"
OTHER_ROUTING_NUMBER = "011000015"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run compat/run.sh, or set PAYRAIL_BASE_URL, PAYRAIL_API_KEY, PAYRAIL_CA_CERT", 2)
    return value


BASE_URL = _env("PAYRAIL_BASE_URL").rstrip("/")
API_KEY = _env("PAYRAIL_API_KEY")
CA_CERT = _env("PAYRAIL_CA_CERT")


def ssl_context() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=CA_CERT)


def make_client(api_key: str = API_KEY, organization_id: str = "x-api-key", max_retries: int = 0) -> ModernTreasury:
    return ModernTreasury(
        api_key=api_key,
        organization_id=organization_id,
        base_url=BASE_URL,
        _strict_response_validation=True,
        max_retries=max_retries,
        timeout=20.0,
        http_client=DefaultHttpxClient(verify=ssl_context()),
    )


@pytest.fixture(scope="session")
def client() -> Iterable[ModernTreasury]:
    c = make_client()
    yield c
    c.close()


def tag() -> str:
    """A value unique to one test, for names, metadata filters and idempotency keys."""
    return uuid.uuid4().hex[:16]


def assert_complete(value: Any, path: str = "$") -> None:
    """Every field the SDK type declares was present in the reply (even if null), recursively."""
    if isinstance(value, pydantic.BaseModel):
        declared = type(value).model_fields
        missing = sorted(name for name in declared if name not in value.model_fields_set)
        assert not missing, f"{type(value).__name__} at {path}: fields missing from the reply: {missing}"
        for name in declared:
            assert_complete(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            assert_complete(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            assert_complete(item, f"{path}.{key}")


def checked(model: T) -> T:
    assert_complete(model)
    return model


def strict_list(resource: Any, model: Type[T], **params: Any) -> List[T]:
    """One page of `resource.list(**params)`, every item validated strictly against `model` (as
    strict mode does for single objects) and checked complete."""
    response = resource.with_raw_response.list(**params)
    assert response.status_code == 200, response.status_code
    body = response.http_response.json()
    assert isinstance(body, list), f"a list reply must be a bare JSON array, got {type(body).__name__}"
    assert "x-per-page" in response.headers, "X-Per-Page header missing"
    items = [validate_type(type_=model, value=item) for item in body]
    for item in items:
        assert_complete(item)
    return items


def wait_for(fetch: Callable[[], T], done: Callable[[T], bool], timeout: float = 10.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    value = fetch()
    while not done(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {value!r}")
        time.sleep(0.05)
        value = fetch()
    return value


def account_input(party_name: str = "Jane Doe", account_number: str = "123456789", **extra: Any) -> dict:
    """An external account as given inline (counterparty accounts, receiving_account)."""
    body = {
        "account_type": "checking",
        "party_name": party_name,
        "party_type": "individual",
        "account_details": [{"account_number": account_number, "account_number_type": "other"}],
        "routing_details": [{"routing_number": ROUTING_NUMBER, "routing_number_type": "aba"}],
    }
    body.update(extra)
    return body


@pytest.fixture(scope="session")
def internal_account(client: ModernTreasury):
    """An originating account for payment orders."""
    return client.internal_accounts.create(
        currency="USD", name=f"Operating {tag()}", party_name="Payrail Compat Inc."
    )


@pytest.fixture(scope="session")
def counterparty(client: ModernTreasury):
    """A counterparty with one external account, to pay."""
    return client.counterparties.create(name=f"Payee {tag()}", accounts=[account_input()])


class SlowUpload:
    """A POST on a raw TLS socket that sends its headers and half its body, then waits: the
    server has claimed its Idempotency-Key and holds it while the body is still arriving.

    The request asks `Expect: 100-continue` and waits for the server's `100 Continue` (sent when
    the server starts reading the body, so after its headers were accepted and the key claimed)
    before sending half the body: the claim is in place when the constructor returns, with no
    timing guess. A server that never sends 100 gets the half body after 2 s all the same."""

    def __init__(self, path: str, body: bytes, idempotency_key: str):
        url = urlparse(BASE_URL)
        host, port = url.hostname, url.port or 443
        raw = socket.create_connection((host, port), timeout=15)
        self.sock = ssl_context().wrap_socket(raw, server_hostname=host)
        self.body = body
        self.half = len(body) // 2
        

        auth = base64.b64encode(f"x-api-key:{API_KEY}".encode()).decode()
        head = (
            f"POST {path} HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            f"Authorization: Basic {auth}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Idempotency-Key: {idempotency_key}\r\n"
            "Expect: 100-continue\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        self.sock.sendall(head)
        self.early = b""
        self.sock.settimeout(2)
        try:
            while b"\r\n\r\n" not in self.early:
                chunk = self.sock.recv(4096)
                if not chunk:
                    break
                self.early += chunk
        except socket.timeout:
            pass
        self.sock.settimeout(15)
        if self.early and not self.early.startswith(b"HTTP/1.1 100"):
            raise AssertionError(f"the server answered before the body was sent: {self.early[:300]!r}")
        self.sock.sendall(body[: self.half])

    def finish(self) -> tuple[int, bytes]:
        """Sends the rest of the body and reads the reply: (status, body)."""
        self.sock.sendall(self.body[self.half :])
        data = b""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            data += chunk
        self.sock.close()
        data = self.early + data
        while data.startswith(b"HTTP/1.1 100"):
            data = data.partition(b"\r\n\r\n")[2]
        head, _, rest = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if b"transfer-encoding: chunked" in head.lower():
            rest = _dechunk(rest)
        return status, rest

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return out
