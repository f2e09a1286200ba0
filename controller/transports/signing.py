"""The HMAC signature every signed transport attaches to what it sends (docs/durability.md).

The signed string is ``<timestamp>.<body>``: the decimal Unix time in whole seconds, a dot,
then the exact body bytes (an HTTP request body, or one MQTT message payload). The signature is
``sha256=`` and the lowercase hex HMAC-SHA256 of that string with the table's secret. The
timestamp is taken at each attempt, so a backend can refuse a replay outside its window; it
carries nothing but the time, and the body is the already-sealed event data.
"""

from __future__ import annotations

import hashlib
import hmac
import time

#: HTTP header names; MQTT 5 user properties use the same names in lower case
TIMESTAMP_HEADER = "X-Pokdeng-Timestamp"
SIGNATURE_HEADER = "X-Pokdeng-Signature"


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` over ``timestamp + "." + body``."""
    signed = timestamp.encode("ascii") + b"." + body
    return "sha256=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def signed_now(secret: bytes, body: bytes) -> dict[str, str]:
    """The timestamp and signature of ``body`` for an attempt made now, by header name."""
    timestamp = str(int(time.time()))
    return {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature(secret, timestamp, body)}
