"""``pokdeng-table demo --config FILE --faults LIST``: the demo table as a sandbox for a game
backend's engineers (docs/backend.md, "A sandbox").

The demo (demo_table.py) runs the real daemon on the simulated shoe and panel with a scripted
dealer; with ``--config`` its events also go to the integrator's own HTTP webhook and/or MQTT
broker, under the table id they choose, and with ``--faults`` the dealer makes, one round in
``--fault-every``, the things a real table does to a backend:

    misread   the shoe misreads a card; the supervisor types it in (enter_card) and the
              round carries on
    pause     the supervisor pauses the table for a few table seconds, then resumes
    cancel    the supervisor cancels the round mid-deal (round_cancelled: bets refunded)
    restart   the daemon stops mid-round and starts again from its journal (systemd's restart)
    outage    the same, with the table off for ``--outage-seconds`` (MQTT: its status goes
              offline; a resend asked meanwhile is served when it is back)

The sandbox file holds only what is the integrator's: ``table.id`` and ``transports`` (the
daemon's own ``transports:`` section, config/example.yaml). Everything else (shoe, panel,
journal, control socket, the events file) is the demo's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAULTS = ("misread", "pause", "cancel", "restart", "outage")
#: the cards of a round already drawn (the burn and three) when its fault happens
FAULT_AT_CARD = 4
#: table seconds the sandbox's supervisor takes to act (enter the card, resume)
SUPERVISOR_SECONDS = 3.0
#: the transports a sandbox points at the integrator's backend (the file is the demo's own)
SANDBOX_TRANSPORTS = ("http", "mqtt")


class SandboxError(Exception):
    """The sandbox file or the fault list is wrong; the message names what and where."""


@dataclass(frozen=True)
class Sandbox:
    """What a sandbox file gives the demo's config."""

    table: str | None = None
    transports: dict[str, Any] = field(default_factory=dict)


def read_sandbox(path: str | Path) -> Sandbox:
    """The table id and transports of a sandbox file; their options are checked with the
    demo's whole config (``demo_config``), by key path."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SandboxError(f"{path}: cannot read it: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SandboxError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SandboxError(f"{path}: expected a mapping with `transports` (and `table.id`)")
    unknown = sorted(set(data) - {"table", "transports"})
    if unknown:
        raise SandboxError(
            f"{path}: {', '.join(unknown)}: a sandbox file holds only `table.id` and "
            "`transports`; the shoe, panel, journal and the rest are the demo's own")
    table = data.get("table") or {}
    if not isinstance(table, dict) or set(table) - {"id"}:
        raise SandboxError(f"{path}: table: only `id` may be set (the demo's table keeps its "
                           "own rules and timings)")
    transports = data.get("transports")
    if not isinstance(transports, dict) or not transports:
        raise SandboxError(f"{path}: transports: give `http` and/or `mqtt` (as in "
                           "config/example.yaml)")
    others = sorted(set(transports) - set(SANDBOX_TRANSPORTS))
    if others:
        raise SandboxError(f"{path}: transports.{others[0]}: a sandbox sends to `http` and "
                           "`mqtt` (the demo writes its own events file: --events FILE)")
    table_id = table.get("id")
    return Sandbox(None if table_id is None else str(table_id), dict(transports))


def parse_faults(text: str | None) -> tuple[str, ...]:
    """``misread,pause`` → ("misread", "pause"); every name checked."""
    if not text:
        return ()
    faults = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in faults:
        if name not in FAULTS:
            raise SandboxError(f"--faults: unknown fault {name!r}; known: {', '.join(FAULTS)}")
    return faults


@dataclass(frozen=True)
class FaultPlan:
    """Which round gets which fault: the ``every``-th round started gets the first fault,
    the 2×``every``-th the second, and so on round the list."""

    faults: tuple[str, ...] = ()
    every: int = 3
    outage_seconds: float = 10.0

    def for_round(self, started: int) -> str | None:
        """The fault of the ``started``-th round this demo started (1-based), or None."""
        if not self.faults or started % self.every:
            return None
        return self.faults[(started // self.every - 1) % len(self.faults)]
