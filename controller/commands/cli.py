"""The ``pokdeng-table`` command: one subcommand per module, registered below.

Each command module exposes ``register(subparsers)``, which adds its parser and sets ``func``
(called with the parsed args, returns the exit status). A run imports the module of the
subcommand it calls and no other; ``--help``, a mistyped command, ``completion`` and ``man``
build the whole parser. So a command module's top level imports only what its arguments need
(argparse, the standard library's light modules): what the command runs on is imported inside
the function that runs it. tests/commands/test_cli_imports.py holds both to it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable

from controller import __version__

# Each subcommand and the module that defines it, in the order --help lists them.
COMMANDS = {
    "rtp": "controller.commands.rtp",
    "replay": "controller.commands.replay",
    "journal": "controller.commands.journal",
    "roadmap": "controller.commands.roadmap",
    "run": "controller.commands.run",
    "config": "controller.commands.config_check",
    "status": "controller.commands.status",
    "supervisor": "controller.commands.supervisor",
    "watch": "controller.commands.watch",
    "demo": "controller.commands.demo",
    "simulate-shoe": "controller.commands.simulate_shoe",
    "read-shoe": "controller.commands.read_shoe",
    "read-panel": "controller.commands.read_panel",
    "bench": "controller.commands.bench",
    "version": "controller.commands.version",
    "completion": "controller.commands.completion",
    "man": "controller.commands.manpage",
}


def build_parser(commands: Iterable[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser with the named subcommands (by default all of them)."""
    parser = argparse.ArgumentParser(
        prog="pokdeng-table",
        description="Dealer-table controller for a live Pok Deng table.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(COMMANDS[name]).register(subparsers)
    return parser


def commands_needed(argv: list[str]) -> Iterable[str]:
    """The subcommands a parser needs for this command line: the one it starts with; none for
    a lone --version (scripts and fleet checks ask it often); else all, for the help or the
    error that lists them."""
    if argv and argv[0] in COMMANDS:
        return (argv[0],)
    if argv == ["--version"]:
        return ()
    return COMMANDS


def command_parser(parser: argparse.ArgumentParser,
                   args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command the arguments chose: ``journal verify``'s for
    ``journal verify x --bad``, so an error shows the usage of the command that was typed."""
    while True:
        chosen = None
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None) or "")
        if chosen is None:
            return parser
        parser = chosen


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    parser = build_parser(commands_needed(arguments))
    args, unknown = parser.parse_known_args(arguments)
    if getattr(args, "forwards_options", False):
        # `bench` hands on everything after its name, in order, as it was typed
        args.options = arguments[arguments.index(args.command) + 1:]
    elif unknown:  # argparse would blame the top-level usage; the command's own is the help
        command_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `pokdeng-table replay x | head` must not print a traceback.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
