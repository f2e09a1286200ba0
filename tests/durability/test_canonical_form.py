"""The canonical form a backend reproduces (RFC 8785), and docs/backend.md's worked example of
it, checked against the table's own code: the example's bytes and digest are what the table
computes, for the event as an older table sent it (``15.0``) and as this one sends it."""

from __future__ import annotations

import hashlib

import pytest

from controller.durability.canonical_form import (
    CanonicalFormError,
    event_digest,
    jcs_bytes,
    legacy_event_digest,
    same_json,
)
from controller.durability.journal import canonical_json
from controller.table.events import whole_numbers_as_integers
from support.canonical_journals import worked_example


def test_the_documented_example_is_what_the_table_computes() -> None:
    event, canonical, digest = worked_example()
    assert isinstance(event["data"]["betting_seconds"], float)  # as an older table sent it
    assert jcs_bytes(event).decode("utf-8") == canonical
    assert hashlib.sha256(canonical.encode("utf-8")).hexdigest() == digest
    assert event_digest(event) == digest
    # the same event as this version sends it (15, not 15.0) has the same digest
    assert event_digest(whole_numbers_as_integers(event)) == digest
    # the older documented form differs for it (and is still accepted: test_held.py)
    assert legacy_event_digest(event) != digest


def test_numbers_are_written_as_ecmascript_writes_them() -> None:
    assert jcs_bytes({"b": 15.0, "a": 7.1, "c": 1.6e-05, "d": -0.0, "e": 1e21}) == \
        b'{"a":7.1,"b":15,"c":0.000016,"d":0,"e":1e+21}'
    # keys sorted by UTF-16 code units, as JavaScript sorts them: U+1F600 is the surrogate
    # pair D83D DE00, before U+FB01 (Python's code-point order puts it after)
    keys = {"\ufb01": 2, "\U0001F600": 1}
    assert jcs_bytes(keys) == '{"\U0001F600":1,"\ufb01":2}'.encode()
    assert canonical_json(keys) == '{"\ufb01":2,"\U0001F600":1}'


@pytest.mark.parametrize("bad", [2**53, float("nan"), {"x": "\ud800"}])
def test_a_value_with_no_canonical_form_is_named(bad: object) -> None:
    with pytest.raises(CanonicalFormError, match="no RFC 8785 form"):
        jcs_bytes(bad)


def test_same_json_is_the_same_value_not_the_same_text() -> None:
    assert same_json({"s": 15.0}, {"s": 15})
    assert not same_json({"s": 15.1}, {"s": 15})
    assert not same_json([1], [True])  # JSON's true is not 1
    assert same_json({"big": 2**60}, {"big": 2**60})  # past RFC 8785: compared as text
