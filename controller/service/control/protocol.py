"""The control socket's requests: JSON lines, small, shallow, checked before anything acts.

Anyone who can open the socket can send bytes, so a request is bounded before it is believed:
at most ``MAX_REQUEST`` bytes, nested at most ``MAX_DEPTH`` deep, no number longer than
``MAX_NUMBER_CHARS`` characters (a 60,000-digit integer or a deep ``[[[[`` nest gets a plain
error answer, never a traceback). Error texts never quote what the caller sent: it may hold a
card.
"""

from __future__ import annotations

import json
from typing import Any

MAX_REQUEST = 4096
MAX_DEPTH = 4
MAX_NUMBER_CHARS = 32
COMMANDS = ("status", "supervisor", "watch")


class RequestError(ValueError):
    """A request that is not served; the message says why in plain words."""


def normalise_action(action: str) -> str:
    """CLI spelling (``cancel-round``) to the input's (``cancel_round``)."""
    return action.strip().lower().replace("-", "_")


def _nesting_depth(text: bytes) -> int:
    """How deep arrays and objects nest in ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in text:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


def _bounded(kind: type) -> Any:
    def parse(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            raise RequestError(f"a number longer than {MAX_NUMBER_CHARS} characters")
        return kind(text)
    return parse


def parse_request(line: bytes) -> dict[str, Any]:
    """One request line as a JSON object with a ``cmd``; RequestError says what is wrong."""
    if len(line) > MAX_REQUEST:
        raise RequestError(f"request longer than {MAX_REQUEST} bytes")
    if _nesting_depth(line) > MAX_DEPTH:
        raise RequestError(f"request nested deeper than {MAX_DEPTH} levels")
    try:
        request = json.loads(line, parse_int=_bounded(int), parse_float=_bounded(float))
    except RequestError:
        raise
    except json.JSONDecodeError as exc:
        raise RequestError(f"not a JSON line: {exc.msg} at column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # bad UTF-8, out-of-range numbers
        raise RequestError(f"not a JSON line: {type(exc).__name__}") from None
    if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
        raise RequestError('a request is a JSON object with a "cmd" string')
    if request["cmd"] not in COMMANDS:
        raise RequestError(f"unknown command; one of: {', '.join(COMMANDS)}")
    return request


def _supervisor_actions() -> tuple[str, ...]:
    # the table's inputs (a dozen dataclasses) on the server's side only: the supervisor
    # command imports this module for normalise_action
    from controller.table.inputs import SUPERVISOR_ACTIONS

    return SUPERVISOR_ACTIONS


def requested_action(request: dict[str, Any]) -> str | None:
    """The supervisor action a request names, when it is a known one."""
    action = request.get("action")
    if isinstance(action, str) and normalise_action(action) in _supervisor_actions():
        return normalise_action(action)
    return None


def supervisor_request(request: dict[str, Any]) -> tuple[str, str | None]:
    """(action, card) of a supervisor request; RequestError when it is not a valid one."""
    action = requested_action(request)
    if action is None:
        raise RequestError(f"unknown supervisor action; one of: "
                           f"{', '.join(_supervisor_actions())}")
    card = request.get("card")
    if action == "enter_card" and not isinstance(card, str):
        raise RequestError("enter_card needs the card, e.g. 9D")
    if action != "enter_card" and card is not None:
        raise RequestError(f'"card" only goes with enter_card, not {action}')
    return action, card
