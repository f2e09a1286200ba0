"""``pokdeng-table status``: what the table is doing, from the daemon's control socket."""

from __future__ import annotations

import argparse
import json
from typing import Any

from controller.service.control.client import (
    ControlClient,
    add_socket_arguments,
    client_command,
    socket_path,
)
from controller.service.trust.journal_check_text import check_text


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status", help="show the table's state (from the running daemon)",
        description="Table, shoe, round, state, cards left, devices, backend backlog, the "
                    "last fault and the last supervisor actions with who took them. Card values "
                    "of a round are never shown before betting closed.")
    add_socket_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.set_defaults(func=show_status)


@client_command("status")
def show_status(args: argparse.Namespace) -> int:
    status = ControlClient(socket_path(args)).status()
    if args.json:
        print(json.dumps(status, ensure_ascii=False, indent=2, sort_keys=True))
    else:
        print("\n".join(status_text(status)))
    return 0


def _fault_text(fault: Any) -> str:
    if isinstance(fault, dict):
        return f"{fault.get('code', '?')}: {fault.get('reason', '')}".strip()
    return "none" if not fault else str(fault)


def status_text(status: dict[str, Any]) -> list[str]:
    from controller.commands.watch import betting_seconds_left

    def value(key: str) -> str:
        item = status.get(key)
        return "-" if item is None else str(item)

    lines = [f"table {value('table')}   shoe {value('shoe')}   round {value('round')}   "
             f"state {value('state')}{'   PAUSED' if status.get('paused') else ''}"]
    lines.append(f"cards: {value('cards_left')} left, {value('cards_drawn')} drawn"
                 + ("   (cut card out: last round)" if status.get("last_round") else ""))
    if status.get("prompt"):
        lines.append(f"dealer: {status['prompt']}")
    left = betting_seconds_left(status)
    if left is not None:
        lines.append(f"betting closes in {left:.0f} s")
    devices = status.get("devices") or {}
    if devices:
        lines.append("devices: " + ", ".join(
            f"{name} {'connected' if up else 'NOT CONNECTED'}"
            for name, up in sorted(devices.items())))
    for name, problem in sorted((status.get("device_problems") or {}).items()):
        lines.append(f"{name}: {problem}")
    clock = clock_text(status)
    if clock:
        lines.append(clock)
    backend = status.get("backend")
    if isinstance(backend, dict) and backend:
        parts = []
        for name, info in sorted(backend.items()):
            if isinstance(info, dict):
                part = f"{name} {info.get('state', '?')}, backlog {info.get('backlog', '?')}"
                if info.get("oldest_age_s"):
                    part += f" (oldest {float(info['oldest_age_s']):.0f} s)"
                if info.get("last_error"):
                    part += f", error: {info['last_error']}"
                elif info.get("last_error_at"):
                    part += f", last error at {_clock_text(info['last_error_at'])}"
                if info.get("resending"):
                    part += (f", resending seq {info['resending'][0]}-{info['resending'][1]} "
                             "as the backend asked")
                parts.append(part)
            else:
                parts.append(f"{name} {info}")
        lines.append("backend: " + "; ".join(parts))
    elif "backend" in status:
        lines.append("backend: no transports configured")
    if status.get("chain"):
        lines.append(f"chain: {status['chain']}")
    for name, reason in sorted((status.get("backends_unreachable") or {}).items()):
        lines.append(f"BACKEND UNREACHABLE: {name}: {reason} (the table deals on; events wait "
                     "in the journal)")
    archive = status.get("journal_archive")
    if isinstance(archive, dict) and (archive.get("last_error") or archive.get("last_result")):
        lines.append("journal archive: " + (f"FAILED: {archive['last_error']}"
                                            if archive.get("last_error")
                                            else str(archive["last_result"])))
    check = check_text(status.get("journal_check"))
    if check:
        lines.append(f"journal check: {check}")
    if status.get("storage_fault"):
        lines.append(f"STORAGE FAULT: {status['storage_fault']}; "
                     f"{status.get('held_inputs', 0)} inputs held until the journal works"
                     + (f", {status['dropped_inputs']} dropped" if status.get("dropped_inputs")
                        else ""))
    lines.append(f"fault: {_fault_text(status.get('fault'))}")
    if status.get("last_fault"):
        lines.append(f"last fault: {_fault_text(status.get('last_fault'))}")
    actions = status.get("last_actions") or []
    if actions:
        lines.append("last supervisor actions:")
        lines += [f"  {_action_text(action)}" for action in actions]
    return lines


def clock_text(status: dict[str, Any]) -> str | None:
    """``clock: synchronised | NOT synchronised | unknown``, with the last wall-clock step seen."""
    sync = status.get("clock_sync")
    if sync is None:
        return None  # a daemon from before clock reports
    words = {"synchronised": "synchronised",
             "not_synchronised": "NOT synchronised (check chrony or systemd-timesyncd)"}
    text = "clock: " + words.get(str(sync), "unknown")
    step = status.get("last_clock_step")
    if isinstance(step, dict) and isinstance(step.get("seconds"), (int, float)):
        text += f"; last step {float(step['seconds']):+.3f} s at {step.get('time', '?')}"
    return text


def _clock_text(seconds: Any) -> str:
    """A wall-clock time (Unix seconds) as UTC, e.g. ``2026-12-01 00:10:27Z``."""
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(float(seconds), UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return str(seconds)


def _action_text(action: dict[str, Any]) -> str:
    by = action.get("by")
    who = f"{by.get('user')} (uid {by.get('uid')})" if isinstance(by, dict) else "unknown"
    if action.get("outcome") == "refused":
        outcome = f"refused: {action.get('code')}"
    else:
        outcome = "done: " + (", ".join(action.get("events") or []) or "no events")
    return f"{action.get('time')} {action.get('action')} by {who}: {outcome}"
