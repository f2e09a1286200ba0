"""Every command imports what it runs on and nothing else: the gain of a quick command line,
held without timing anything (docs/benchmarks.md has the times).

Each command runs in its own interpreter, as ``python -m controller`` runs it, and names at
exit every module the process holds (``sys.modules``: ``-X importtime`` would miss the
modules loaded with ``importlib.import_module``, the command modules among them); the
assertions are on those names. ``status``, ``watch`` and ``supervisor`` talk to a stand-in
daemon on a real Unix socket (what they import does not depend on who answers).
"""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from controller import __version__
from controller.commands.cli import COMMANDS, build_parser
from controller.table.machine import MachineSettings
from support.daemon_helpers import daemon_config
from testkit.journals import build_journal

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

#: what no quick command may pull in: the daemon's machinery and the devices' libraries
HEAVY = ("transitions", "structlog", "yaml", "paho", "prometheus_client", "asyncio",
         "jsonschema", "http.server", "sqlite3", "serial", "usb", "importlib.metadata")

#: the modules of ours a client of the control socket needs
#: the service wing's rooms are packages with a docstring and no imports of their own
ROOMS = {"controller.service.config", "controller.service.control", "controller.service.trust"}
CONTROL_CLIENT = {"controller", "controller.commands", "controller.commands.cli",
                  "controller.service", "controller.service.control.client",
                  "controller.service.control.socket_file",
                  "controller.service.config.errors", "controller.service.config",
                  "controller.service.control"}
# root's client checks whose socket it is (the owner of its directory), with as_owner's rule
ROOTS_SOCKET_CHECK = ({"controller.durability", "controller.durability.as_owner"}
                      if os.geteuid() == 0 else set())

STATUS = {  # a status as the daemon publishes it (sealed: no card of an open round)
    "table": "T1", "shoe": 3, "round": 7, "state": "betting", "paused": False,
    "cards_left": 301, "cards_drawn": 102, "betting_open": True, "next_target": "P1",
    "now": 1000.0, "devices": {"shoe": True, "panel": True},
    "clock_sync": "synchronised", "last_clock_step": {"seconds": 0.25, "time": "x"},
    "backend": {"file": {"state": "up", "backlog": 0, "last_error_at": 1764547827.0}},
    "journal_check": {"state": "ok", "at": "2026-12-01T00:10:27Z", "records": 906},
    "fault": None, "last_actions": [],
}


#: ``python -m controller ARGS`` that writes the names in sys.modules to a file at exit
PROBE = """
import atexit, runpy, sys
names_file = sys.argv[1]

@atexit.register
def name_the_modules():
    with open(names_file, "w") as out:
        out.write("\\n".join(sorted(sys.modules)))

sys.argv = ["pokdeng-table", *sys.argv[2:]]
runpy.run_module("controller", run_name="__main__", alter_sys=True)
"""


def imports_of(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -m controller ARGS``; its result and every module it imported."""
    with tempfile.NamedTemporaryFile("r", suffix=".modules") as names:
        done = subprocess.run([sys.executable, "-c", PROBE, names.name, *args],
                              capture_output=True, text=True, timeout=timeout)
        modules = set(names.read().split())
    assert modules, f"the probe named no modules: {done.stderr}"
    return done, modules


def heavy(modules: set[str], *allowed: str) -> set[str]:
    """The heavy modules among ``modules`` (packages and their submodules), but ``allowed``."""
    return {name for name in modules for top in HEAVY
            if top not in allowed and (name == top or name.startswith(top + "."))}


def ours(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] in ("controller", "drivers")}


class _Answer(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        request = json.loads(self.rfile.readline())
        self.server.requests.append(request)  # type: ignore[attr-defined]
        answer = ({"ok": True, "events": ["paused"]} if request["cmd"] == "supervisor"
                  else {"ok": True, "status": STATUS})
        self.wfile.write(json.dumps(answer).encode() + b"\n")


@contextmanager
def stand_in_daemon(path: Path) -> Iterator[list[dict[str, Any]]]:
    """A control socket at ``path`` answering status and supervisor requests."""
    server = socketserver.ThreadingUnixStreamServer(str(path), _Answer)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.requests  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def test_version_imports_no_subcommand() -> None:
    done, modules = imports_of("--version")
    assert done.returncode == 0 and done.stdout == f"pokdeng-table {__version__}\n"
    assert ours(modules) == {"controller", "controller.commands", "controller.commands.cli"}
    assert heavy(modules) == set()


def test_the_whole_parser_is_built_from_light_modules() -> None:
    # what `--help`, a mistyped command, completion and man build: every command's arguments
    probe = ("import sys\nfrom controller.commands.cli import build_parser\nbuild_parser()\n"
             "print('\\n'.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    modules = set(done.stdout.split())
    helpers = {"controller.service.private_files", "controller.table",
               "controller.table.reveal_modes", "controller.service.trust.journal_check_text",
               # watch's --lang lists the catalogue files (their names only, no Babel), which
               # are read only as regular files (os and stat alone)
               "controller.display", "controller.display.catalogues",
               "controller.regular_file", *ROOMS}
    assert ours(modules) - set(COMMANDS.values()) - CONTROL_CLIENT - helpers == set()
    assert heavy(modules) == set()


def test_each_command_is_registered_by_the_module_named_for_it() -> None:
    def commands(parser: Any) -> list[str]:
        action = next(a for a in parser._actions if a.dest == "command")
        return list(action.choices)

    assert commands(build_parser()) == list(COMMANDS)
    for name in COMMANDS:
        assert commands(build_parser([name])) == [name]


def test_status_json_imports_the_socket_client_only(short_dir: Path) -> None:
    with stand_in_daemon(short_dir / "control.sock") as requests:
        done, modules = imports_of("status", "--json", "--socket", str(short_dir / "control.sock"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == STATUS and requests == [{"cmd": "status"}]
    assert ours(modules) == CONTROL_CLIENT | ROOTS_SOCKET_CHECK | {
        "controller.commands.status", "controller.service.trust",
        "controller.service.trust.journal_check_text"}
    assert heavy(modules) == set()


def test_status_watch_and_supervisor_stay_light(short_dir: Path) -> None:
    socket = str(short_dir / "control.sock")
    with stand_in_daemon(short_dir / "control.sock") as requests:
        status, status_modules = imports_of("status", "--socket", socket)
        watch, watch_modules = imports_of("watch", "--once", "--socket", socket)
        supervisor, supervisor_modules = imports_of("supervisor", "pause", "--socket", socket)
    assert status.returncode == 0 and "journal check: ok at 2026-12-01T00:10:27Z" in status.stdout
    assert "last error at 2025-12-01 00:10:27Z" in status.stdout
    assert watch.returncode == 0 and ">> deal a card to Player 1" in watch.stdout  # words.step
    assert supervisor.returncode == 0 and supervisor.stdout == "done: pause -> paused\n"
    assert requests[-1] == {"cmd": "supervisor", "action": "pause"}
    for modules in (status_modules, watch_modules, supervisor_modules):
        assert heavy(modules) == set()
    assert not any(name.startswith("controller.table") for name in supervisor_modules)


def test_a_missing_daemon_is_reported_as_before(short_dir: Path) -> None:
    done, modules = imports_of("status", "--json", "--socket", str(short_dir / "none.sock"))
    assert done.returncode == 69 and "is the daemon running?" in done.stderr
    assert heavy(modules) == set()


def test_replay_imports_the_machine_and_none_of_the_daemon() -> None:
    done, modules = imports_of("replay", str(SCRIPTS / "shoe_seed1.jsonl"))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    assert events[0] == "shoe_started" and "round_result" in events
    assert "transitions" in modules  # the table machine is what replay runs
    assert heavy(modules, "transitions") == set()


def test_rtp_imports_the_rules_only() -> None:
    done, modules = imports_of("rtp", "--json", "--decks", "1")
    assert done.returncode == 0 and json.loads(done.stdout)["decks"] == 1
    assert not any(name.startswith(("controller.table", "controller.service"))
                   for name in modules)
    assert heavy(modules) == set()


@pytest.mark.slow
def test_journal_verify_reads_the_journal_without_the_daemon(tmp_path: Path) -> None:
    journal = tmp_path / "journal.sqlite"
    build_journal(journal, 1, MachineSettings())
    done, modules = imports_of("journal", "verify", str(journal))
    assert done.returncode == 0, done.stderr
    assert "sqlite3" in modules
    assert heavy(modules, "sqlite3", "transitions") == set()


def test_config_check_reads_the_config_without_starting_anything(short_dir: Path) -> None:
    config = daemon_config(short_dir, short_dir / "shoe", "/dev/null")
    done, modules = imports_of("config", "check", str(config))
    assert done.returncode == 0 and ": OK" in done.stdout, done.stderr
    # yaml reads the file; the shoe's and the panel's driver classes (found through their
    # entry points; pyserial) check their options. Neither paho nor pyusb: not configured.
    assert heavy(modules, "yaml", "serial", "importlib.metadata") == set()
    assert "controller.table.machine" not in modules
