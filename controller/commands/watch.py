"""``pokdeng-table watch``: the dealer's view — live, what to do next.

"burn 6 more", "deal to P3", "betting closes in 4 s", "PAUSED: … — call supervisor". On a
terminal the screen is redrawn in place; otherwise one line is printed per change (for a log or
a second screen). Built from the sealed status only, so it never shows a card before betting
closed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from controller.service.control import (
    EX_UNAVAILABLE,
    ControlClient,
    add_socket_arguments,
    client_command,
    socket_path,
)

CLEAR = "\x1b[H\x1b[2J"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "watch", help="dealer view: live, what to do next",
        description="Follow the table live and show the dealer what to do next.")
    add_socket_arguments(parser)
    parser.add_argument("--once", action="store_true", help="print the current view and exit")
    parser.set_defaults(func=watch)


def betting_seconds_left(status: dict[str, Any]) -> float | None:
    """Table seconds until betting closes, when betting is open and the clock is known."""
    from controller.table.views import seconds_left_now

    now = status.get("now")
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        return None
    return seconds_left_now(status, float(now))


def next_step(status: dict[str, Any]) -> str:
    """The one thing the dealer should do now, in plain words."""
    if status.get("storage_fault"):
        held = status.get("held_inputs") or 0
        return (f"STOP — the table cannot record: {status['storage_fault']}"
                + (f" ({held} inputs held)" if held else "") + " — call supervisor")
    if status.get("state") in ("stopped", "starting"):
        return f"table {status.get('state')}"
    if status.get("paused"):
        fault = status.get("fault") or {}
        reason = fault.get("reason") if isinstance(fault, dict) else None
        return f"PAUSED: {reason} — call supervisor" if reason else "PAUSED — call supervisor"
    if status.get("betting_open") and status.get("next_target") is None:
        return "all cards dealt — wait for betting to close"
    prompt = status.get("prompt")
    if prompt:
        return str(prompt)
    target = status.get("next_target")
    if target == "burn":
        return "burn a card"
    if target:
        return f"deal to {target}"
    return str(status.get("state", "?"))


def dealer_view(status: dict[str, Any]) -> list[str]:
    """The lines of the dealer screen."""
    head = f"table {status.get('table', '?')}"
    if status.get("shoe") is not None:
        head += f" · shoe {status['shoe']}"
    if status.get("round") is not None:
        head += f" · round {status['round']}"
    if status.get("last_round"):
        head += " · LAST ROUND"
    lines = [head, f">> {next_step(status)}"]
    left = betting_seconds_left(status)
    if left is not None:
        lines.append(f"betting closes in {left:.0f} s")
    elif status.get("round") is not None and status.get("betting_open") is False \
            and status.get("state") not in ("ready", "between_rounds"):
        lines.append("betting closed")
    if status.get("cards_left") is not None:
        lines.append(f"{status['cards_left']} cards left in the shoe")
    lost = [name for name, up in (status.get("devices") or {}).items() if up is False]
    if lost:
        lines.append("NOT CONNECTED: " + ", ".join(lost))
    if status.get("clock_sync") == "not_synchronised":
        lines.append("CLOCK NOT SYNCHRONISED — tell the supervisor")
    unreachable = status.get("backends_unreachable") or {}
    if unreachable:  # the table deals on; the backend catches up once it answers
        lines.append("BACKEND UNREACHABLE: " + ", ".join(sorted(unreachable)))
    return lines


def follow(snapshots: Any, out: TextIO, tty: bool) -> None:
    """Render each snapshot: redraw on a terminal, one line per change otherwise."""
    last = None
    for status in snapshots:
        lines = dealer_view(status)
        if tty:
            out.write(CLEAR + "\n".join(lines) + "\n")
        else:
            text = " | ".join(lines)
            if text == last:
                continue
            last = text
            out.write(text + "\n")
        out.flush()


@client_command("watch")
def watch(args: argparse.Namespace) -> int:
    client = ControlClient(socket_path(args))
    if args.once:
        print("\n".join(dealer_view(client.status())))
        return 0
    follow(client.watch(), sys.stdout, sys.stdout.isatty())
    print("pokdeng-table watch: the daemon went away", file=sys.stderr)
    return EX_UNAVAILABLE
