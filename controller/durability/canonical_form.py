"""The canonical form a backend reproduces: RFC 8785, the JSON Canonicalization Scheme (JCS).

What a backend must compute the same way as the table, in whatever language it is written —
``held``'s SHA-256 of an event (docs/backend.md, "Where the backend stands") and the body
comparison of ``journal verify --against`` — is taken over the event's RFC 8785 form: keys
sorted by UTF-16 code units, no spaces, UTF-8, and numbers written as ECMAScript writes them
(``15.0`` is ``15``, ``1e-05`` is ``0.00001``). JavaScript's ``JSON.stringify`` with sorted
keys, Go's, Java's and C#'s JCS libraries give the same bytes for the same parsed event.

The journal's own record hashes stay over ``journal.canonical_json`` (Python's ``json.dumps``
with sorted keys): they are the table's internal chain, and records already written must keep
verifying as they were written. Tables before this form was adopted documented ``held`` over
that older text; ``legacy_event_digest`` is its digest, still accepted (held.py says why).
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from controller.durability.journal import canonical_json

#: the name the documents and the fork message give this form
CANONICAL_FORM = "RFC 8785 (JCS)"


class CanonicalFormError(ValueError):
    """A value RFC 8785 cannot write: an integer beyond 2^53-1, NaN or infinity, a lone
    surrogate; the message says which."""


def jcs_bytes(value: Any) -> bytes:
    """``value``'s RFC 8785 form (UTF-8 bytes); CanonicalFormError when it has none."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalFormError(f"no RFC 8785 form: {exc}") from None


def event_digest(event: dict[str, Any]) -> str:
    """SHA-256 (lowercase hex) of an event's RFC 8785 form: a backend's ``held`` digest."""
    return hashlib.sha256(jcs_bytes(event)).hexdigest()


def legacy_event_digest(event: dict[str, Any]) -> str:
    """SHA-256 of the older documented form (Python's ``json.dumps`` with sorted keys, no
    spaces, UTF-8): what a backend written from the earlier docs computes."""
    return hashlib.sha256(canonical_json(event).encode("utf-8")).hexdigest()


def same_json(a: Any, b: Any) -> bool:
    """Whether two parsed JSON values are the same JSON value: ``15`` and ``15.0`` are (an
    event journaled by an older table holds ``15.0``; a JavaScript backend hands back ``15``),
    ``1`` and ``true`` are not. Values with no RFC 8785 form are compared as the journal
    writes them."""
    if canonical_json(a) == canonical_json(b):  # the common case, ten times cheaper
        return True
    try:
        return jcs_bytes(a) == jcs_bytes(b)
    except CanonicalFormError:
        return False
