"""The command line behaves the same everywhere: every command and option says what it is for,
an error shows the usage of the command that was typed, and the commands that talk to a table
take the same --socket / --config / --state-dir."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.commands.cli import build_parser

TABLE_COMMANDS = ("status", "watch", "supervisor")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", *args], capture_output=True,
                          text=True, timeout=60)


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(where, what is missing) for every command and option without its text."""
    where = " ".join(path)
    if not parser.description:
        yield where, "description"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    yield f"{where} {name}", "help line in the command list"
                yield from walk(sub, (*path, name))
        elif not action.help:
            yield where, f"help of {'/'.join(action.option_strings) or action.dest}"


def test_every_command_and_option_has_help() -> None:
    missing = list(walk(build_parser(), ("pokdeng-table",)))
    assert not missing, "\n".join(f"{where}: no {what}" for where, what in missing)


@pytest.mark.parametrize(("command", "usage"), [
    (("status",), "status"), (("journal", "verify", "x.sqlite"), "journal verify"),
    (("config", "check", "x.yaml"), "config check"), (("supervisor", "pause"), "supervisor")])
def test_an_unknown_option_shows_the_usage_of_the_command_typed(command: tuple[str, ...],
                                                                usage: str) -> None:
    result = cli(*command, "--no-such-option")
    assert result.returncode == 2
    assert result.stderr.startswith(f"usage: pokdeng-table {usage} "), result.stderr
    assert "unrecognized arguments: --no-such-option" in result.stderr


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_table_commands_take_the_same_ways_to_the_table(command: str) -> None:
    help_text = cli(command, "--help").stdout
    for option in ("--socket PATH", "--config FILE", "--state-dir DIR"):
        assert option in help_text, f"{command} --help has no {option}"


@pytest.fixture
def state_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pdcli-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_state_dir_names_the_socket_in_it(state_dir: Path) -> None:
    for command in (("status",), ("watch", "--once"), ("supervisor", "pause")):
        result = cli(*command, "--state-dir", str(state_dir))
        assert result.returncode == 69, result.stderr
        assert f"no control socket at {state_dir / 'control.sock'}" in result.stderr


def test_only_one_way_to_the_table_at_a_time(state_dir: Path) -> None:
    result = cli("status", "--state-dir", str(state_dir), "--socket", "/tmp/x.sock")
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr
