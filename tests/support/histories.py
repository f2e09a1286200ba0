"""Table histories for the fork and continuation tests: real demo tables (the daemon on a
simulated shoe, its file sink standing for what a backend received), their state directories
copied, a config that points the real daemon at a backend, and a webhook backend holding what
the table sent it."""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from support.daemon_helpers import NotifyListener, start_daemon
from testkit.backends import WebhookBackend, documented_verifier

EX_DATAERR = 65
TABLE = "DEMO-1"
SECRET = b"history-fork-test-secret"


def pokdeng(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=timeout)


def play(state: Path, rounds: int, seed: int = 7) -> None:
    result = pokdeng("demo", "--rounds", str(rounds), "--speed", "200", "--quiet", "--seed",
                     str(seed), "--state-dir", str(state))
    assert result.returncode == 0, result.stderr[-2000:]


def received(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state / "events.jsonl").read_text().splitlines()]


def make_histories(root: Path) -> dict[str, Path]:
    """``early``: a copy of the table taken after one round; ``table``: the same table two
    rounds later (what the backend holds); ``other``: another table's shoe, same table id."""
    play(root / "table", 1)
    shutil.copytree(root / "table", root / "early",
                    ignore=shutil.ignore_patterns("*.sock", "shoe.pty"))
    play(root / "table", 2)
    play(root / "other", 3, seed=11)
    return {name: root / name for name in ("early", "table", "other")}


def state_copy(histories: dict[str, Path], name: str, tmp_path: Path) -> Path:
    state = tmp_path / name
    shutil.copytree(histories[name], state, ignore=shutil.ignore_patterns("*.sock", "shoe.pty"))
    return state


def config_for(state: Path, transport: dict[str, Any], confirm_s: float = 10.0) -> Path:
    secret = state / "backend.secret"
    secret.write_bytes(SECRET + b"\n")
    transports = {name: {**options, **({"secret_file": str(secret)} if name == "http" else {})}
                  for name, options in transport.items()}
    config = state / "table.yaml"
    config.write_text(yaml.safe_dump({
        "table": {"id": TABLE, "betting_seconds": 15, "reveal": "auto", "decks": 8},
        "state_dir": str(state),
        "shoe": {"driver": "beetek", "url": str(state / "no-shoe")},
        "control": {"socket": str(state / "c.sock"),
                    "supervisor_group": grp.getgrgid(os.getgid()).gr_name},
        "transports": transports,
        "journal": {"key_file": str(state / "journal.key"), "backend_confirm_s": confirm_s},
        "logging": {"level": "info", "format": "json"}}))
    return config


def holding(events: list[dict[str, Any]], port: int = 0, path: str | None = None
            ) -> WebhookBackend:
    """A webhook backend that has stored ``events`` (what the table sent it)."""
    backend = WebhookBackend(SECRET, port=port)
    backend.path = path or backend.path
    backend.stored = list(events)
    backend.seen = {e["id"]: documented_verifier().canonical(e) for e in events}
    return backend


def http(backend: WebhookBackend) -> dict[str, Any]:
    return {"http": {"url": backend.url, "allow_insecure": True, "backoff_initial_s": 0.05,
                     "backoff_max_s": 0.3}}


def run(config: Path) -> subprocess.CompletedProcess:
    return pokdeng("run", "--config", str(config), timeout=90)


def start(config: Path, tmp_path: Path, name: str = "daemon"
          ) -> tuple[subprocess.Popen, NotifyListener, Path]:
    """``run --config`` started, with its notify listener and its log's path."""
    notify = NotifyListener(tmp_path / f"{name}.notify")
    log = tmp_path / f"{name}.log"
    return start_daemon(config, notify.path, log), notify, log


def status(state: Path) -> dict[str, Any]:
    """The running table's status, asked as an operator does (``status --json``)."""
    result = pokdeng("status", "--socket", str(state / "c.sock"), "--json", timeout=30)
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def pause(state: Path) -> None:
    """A supervisor's pause: journaled after the copy's last event, so under ids a backend
    that had the newer history holds with other bodies."""
    result = pokdeng("supervisor", "pause", "--socket", str(state / "c.sock"), timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def journal_last_seq(state: Path) -> int:
    """The journal's last seq, read by another process while the daemon runs."""
    probe = ("import sys; from controller.durability.journal import last_seq_of, open_read_only"
             "\nconn = open_read_only(sys.argv[1]); print(last_seq_of(conn))")
    result = subprocess.run([sys.executable, "-c", probe, str(state / "journal.sqlite")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


def conflicts(held: list[dict[str, Any]], came: list[dict[str, Any]]) -> list[str]:
    """The ids that reached a backend holding ``held`` with a second body."""
    seen = {e["id"]: documented_verifier().canonical(e) for e in held}
    return documented_verifier().new_events(came, seen)[1]
