"""``pokdeng-table replay SCRIPT [--config FILE]``: run a table script through a fresh table
machine and print the events as JSON Lines.

``-`` reads standard input. A malformed line (whatever it holds: not JSON, not UTF-8, wrong
types, numbers too long, nesting too deep) stops the replay with a message naming the line and
the fault on standard error and exit status 2; the events of the lines before it are printed
first (nothing accepted is lost). Undecodable bytes are read as lone surrogates so that the
line holding them is the one named.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, BinaryIO, TextIO

from controller.table.reveal_modes import REVEAL_MODES

if TYPE_CHECKING:
    from controller.table.machine import MachineSettings


class ConfigError(ValueError):
    """A config file replay cannot use; names the file and the key."""


def settings_from_config(path: str) -> MachineSettings:
    """MachineSettings from the daemon's config file, checked by the daemon's strict loader."""
    from controller.service.config.errors import ConfigError as BadConfig
    from controller.service.config.settings import load_config

    try:
        return load_config(path).machine_settings()
    except BadConfig as exc:
        raise ConfigError(exc.report()) from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="run a table script through the table machine, print the events",
        description="Run a table script (JSON Lines, '-' for standard input) through a fresh "
        "table machine and print the events, one JSON object a line. Exit 2 on a malformed "
        "line, naming it. Reveal mode choices: " + ", ".join(REVEAL_MODES) + ".",
    )
    parser.add_argument("script", help="table script file, or - for standard input")
    parser.add_argument("--config", metavar="FILE",
                        help="the daemon's YAML config (checked in full); "
                             "its table: section is used")
    parser.set_defaults(func=run)


def replay(lines: TextIO, settings: MachineSettings, out: BinaryIO, source: str) -> None:
    """Feed the script's inputs to a fresh machine, writing each event as it comes.

    ``out`` takes bytes (UTF-8 JSON lines). Raises ScriptError on a malformed line, after the
    events of the lines before it were written.
    """
    from controller.table.events import to_json_line
    from controller.table.inputs import read_script
    from controller.table.machine import TableMachine

    machine = TableMachine(settings)
    for inp in read_script(lines, source):
        for event in machine.handle(inp):
            out.write(to_json_line(event).encode("utf-8") + b"\n")


def run(args: argparse.Namespace) -> int:
    from controller.table.inputs import ScriptError
    from controller.table.machine import MachineSettings

    try:
        settings = settings_from_config(args.config) if args.config else MachineSettings()
    except ConfigError as exc:
        print(f"pokdeng-table replay: {exc}", file=sys.stderr)
        return 2
    out = sys.stdout.buffer
    try:
        if args.script == "-":
            stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape",
                         closefd=False)
            replay(stdin, settings, out, "<stdin>")
        else:
            with open(args.script, encoding="utf-8", errors="surrogateescape") as handle:
                replay(handle, settings, out, args.script)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        out.flush()
        print(f"pokdeng-table replay: {args.script}: cannot read: {exc.strerror}", file=sys.stderr)
        return 2
    except ScriptError as exc:
        out.flush()
        print(f"pokdeng-table replay: {exc}", file=sys.stderr)
        return 2
    out.flush()
    return 0
