"""Event envelopes (docs/contracts.md "Events") and their JSON Schemas.

Every event the table sends is::

    {"v": 1, "id": "<table>:<seq>", "table": str, "seq": int, "time": ISO-8601 UTC,
     "type": str, "shoe": int|null, "round": int|null, "data": {...}}

``time`` is the input's table-clock reading (Unix seconds) written as ISO-8601 UTC with
milliseconds, so the same inputs always give byte-identical events: crash recovery replays
the journal through a fresh machine and must reproduce the same ids and bodies.

The schemas live in ``controller/table/schemas/`` (one file per event type plus
``envelope.json``); :func:`validate_event` checks an event against its type's schema.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

ENVELOPE_VERSION = 1

# The event types of the original design, then the ones this table adds (documented in
# docs/faults.md and the schemas): `card_burned` for the shoe's burn cards before round 1,
# `input_rejected` for a button or supervisor action that makes no sense in the state,
# `fault_detail` for what the shoe sent with a fault, once it no longer names a card of a round
# whose betting is open; `clock_status` for the system clock's synchronisation and steps
# (docs/clock.md); `backend_unreachable`/`backend_restored` for a transport that has
# failed to deliver for a while, and delivers again (docs/backend.md).
EVENT_TYPES = (
    "shoe_started",
    "burn_card_shown",
    "card_burned",
    "burn_completed",
    "round_opened",
    "card_dealt",
    "cut_card_drawn",
    "betting_closed",
    "hand_revealed",
    "round_result",
    "paused",
    "resumed",
    "round_cancelled",
    "shoe_ended",
    "device_status",
    "input_rejected",
    "fault_detail",
    "clock_status",
    "backend_unreachable",
    "backend_restored",
    "software_changed",
    "drain_started",
    "drain_ended",
)



@lru_cache(maxsize=64)  # an input's events, and a round's deadline, share one time
def iso_time(at: float) -> str:
    """Table-clock seconds (Unix time) as ISO-8601 UTC with milliseconds, e.g. ``…00.500Z``."""
    return (
        datetime.fromtimestamp(at, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def seconds_of(text: object) -> float | None:
    """The table-clock seconds of an ``iso_time`` text (None when it is not one)."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def event_id(table_id: str, seq: int) -> str:
    return f"{table_id}:{seq}"


_EXACT_FLOAT_INTEGER = 2**53
_MAY_HOLD_FLOATS = frozenset({float, dict, list, tuple})


def whole_numbers_as_integers(value: Any) -> Any:
    """``value`` with every float that is a whole number written as an integer (``15.0`` ->
    ``15``), real fractions (a hand's 7.1) kept: one form per number, the one every JSON
    library writes, so a backend in any language re-encodes an event to the bytes the table
    hashes (RFC 8785; docs/backend.md). A config's ``betting_seconds: 15.0``, a clock's
    ``max_error_s`` of 16.0 and a countdown left at 12.0 s are the table's whole numbers."""
    kind = type(value)
    if kind is float:
        # past 2^53 a float is no exact integer (and JSON readers hold no larger integer)
        return int(value) if value.is_integer() and abs(value) <= _EXACT_FLOAT_INTEGER \
            else value
    if kind is dict:
        for item in value.values():
            if type(item) in _MAY_HOLD_FLOATS:
                return {key: whole_numbers_as_integers(item) for key, item in value.items()}
        return value  # most events hold no number that is not an int: no copy (card path)
    if kind is list or kind is tuple:
        for item in value:
            if type(item) in _MAY_HOLD_FLOATS:
                return [whole_numbers_as_integers(item) for item in value]
        return value
    return value


def make_event(
    table_id: str,
    seq: int,
    at: float,
    type_: str,
    shoe: int | None,
    round_: int | None,
    data: dict[str, Any],
) -> dict[str, Any]:
    return {
        "v": ENVELOPE_VERSION,
        "id": event_id(table_id, seq),
        "table": table_id,
        "seq": seq,
        "time": iso_time(at),
        "type": type_,
        "shoe": shoe,
        "round": round_,
        "data": whole_numbers_as_integers(data),
    }


# One encoder for every line: json.dumps builds a new one per call when given options.
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def to_json_line(event: dict[str, Any]) -> str:
    """One event as a compact JSON line (stable key order, UTF-8 kept)."""
    return _LINE_ENCODER.encode(event)


# --- schemas -------------------------------------------------------------------------------


class EventSchemaError(ValueError):
    """An event that does not match its JSON Schema; says which event and what is wrong."""


def load_schema(name: str) -> dict[str, Any]:
    """A schema file from ``controller/table/schemas/`` by name without ``.json``."""
    # here, not at the top: importlib.resources (zipfile, tempfile…) only when validating
    from importlib import resources

    path = resources.files("controller.table").joinpath("schemas", f"{name}.json")
    text = path.read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@lru_cache(maxsize=1)
def _validators() -> dict[str, Any]:
    # jsonschema is imported here so the daemon does not pay for it unless it validates.
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    names = ("envelope", "common") + EVENT_TYPES
    schemas = {name: load_schema(name) for name in names}
    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in schemas.values()
    )
    validators = {}
    for name, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        validators[name] = Draft202012Validator(schema, registry=registry)
    return validators


def validate_event(event: Any) -> None:
    """Raise EventSchemaError unless ``event`` matches the envelope and its type's schema."""
    validators = _validators()
    problems = [error.message for error in validators["envelope"].iter_errors(event)]
    if not problems:
        problems = [
            f"{'/'.join(str(p) for p in error.absolute_path) or '(event)'}: {error.message}"
            for error in validators[event["type"]].iter_errors(event)
        ]
    if problems:
        label = event.get("id") if isinstance(event, dict) else None
        raise EventSchemaError(f"event {label!r} does not match its schema: " + "; ".join(problems))
