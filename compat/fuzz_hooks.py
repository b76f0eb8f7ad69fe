"""Schemathesis hooks for compat/fuzz.sh.

1. Webhook endpoints made during fuzzing must never point off this machine: Payrail resolves the
host of a new endpoint's URL and later POSTs events to it. Before each call, any `url` in a
`POST /api/webhook_endpoints` body that Payrail could read as an http(s) URL is rewritten to
the loopback discard port (127.0.0.1:9), keeping its path and query, so the server's URL checks
still see varied input while nothing can leave 127.0.0.1. Other strings (no scheme, other
schemes) are refused by the server before any lookup, so they are left as generated.
2. Valid Idempotency-Keys are scoped to their operation (see `_scope_idempotency_key`).
"""

import hashlib
import re
from urllib.parse import urlsplit

import schemathesis

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_C0_AND_SPACE = "".join(chr(c) for c in range(0x21))


def _loopback(value: str) -> str:
    # What the WHATWG URL parser does first: drop tabs and newlines, trim C0 controls and spaces.
    cleaned = re.sub(r"[\t\n\r]", "", value).strip(_C0_AND_SPACE)
    match = _SCHEME.match(cleaned)
    if not match or match.group(1).lower() not in ("http", "https"):
        return value
    try:
        parts = urlsplit(cleaned.replace("\\", "/"))
        path, query = parts.path, parts.query
    except ValueError:
        path, query = "", ""
    path = "/" + path.lstrip("/")
    return f"{match.group(1).lower()}://127.0.0.1:9{path}" + (f"?{query}" if query else "")


def _keep_webhooks_local(case) -> None:
    if case.method.upper() != "POST" or case.operation.path != "/api/webhook_endpoints":
        return
    if isinstance(case.body, dict) and isinstance(case.body.get("url"), str):
        case.body["url"] = _loopback(case.body["url"])


def _scope_idempotency_key(case) -> None:
    """Gives each operation its own space of valid Idempotency-Keys.

    The fuzzer draws keys from a small space ("0", "a", ...), so the same key soon turns up on
    two endpoints, and SPEC I4 replays the first endpoint's stored reply on the second: a
    correct answer that the second endpoint's schema cannot describe. Prefixing valid keys
    with the operation keeps replays (within one operation) and leaves malformed keys as
    generated, so the 400 path is still fuzzed.
    """
    headers = case.headers or {}
    name = next((h for h in headers if h.lower() == "idempotency-key"), None)
    if name is None or not isinstance(headers[name], str) or not _visible_ascii(headers[name]):
        return
    key = headers[name]
    prefix = hashlib.sha256(f"{case.method.upper()} {case.operation.path}".encode()).hexdigest()[:12] + "-"
    scoped = prefix + key
    if len(scoped) > 255:
        scoped = prefix + hashlib.sha256(key.encode()).hexdigest()
    headers[name] = scoped


def _visible_ascii(key: str) -> bool:
    return 1 <= len(key) <= 255 and all(0x21 <= ord(c) <= 0x7E for c in key)


@schemathesis.hook
def before_call(context, case, kwargs):
    _keep_webhooks_local(case)
    _scope_idempotency_key(case)
