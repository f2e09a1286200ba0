"""Bounds on numbers that come from outside the table (a backend's answer, an event a person
hands in, a retained MQTT message): seq, shoe and round numbers.

2^53 - 1 is the largest integer every JSON reader holds exactly (a JavaScript backend's
``Number.MAX_SAFE_INTEGER``); past it two seqs can read as one, and SQLite's and Python's own
limits are further away still. A number above it is refused where it enters, with a message
that names it, instead of failing later at every start.

In JSON ``621`` and ``621.0`` are one number (RFC 8785 writes both as ``621``): a backend whose
JSON writer puts a decimal point on a whole number is understood, not refused. It lives at the
bottom of the house so the transports, which read the backends' answers, may use it too.
"""

from __future__ import annotations

from typing import Any

#: the largest seq, shoe or round number accepted from outside
MAX_EXTERNAL_NUMBER = 2**53 - 1


def external_count(value: Any, what: str, *, minimum: int = 0) -> int:
    """``value`` as a whole number in [minimum, MAX_EXTERNAL_NUMBER]; ValueError naming
    ``what`` otherwise (a bool is not a number here; 621.0 is 621)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_EXTERNAL_NUMBER:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be a whole number, got {value!r:.40}")
    if value < minimum or value > MAX_EXTERNAL_NUMBER:
        raise ValueError(f"{what} must be between {minimum} and {MAX_EXTERNAL_NUMBER}, "
                         f"got {value}")
    return value
