"""The ``pokdeng-table`` command: one subcommand per module, registered below.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``func`` (called with the parsed args, returns the exit status). Modules are imported when the
parser is built, so keep their top-level imports light.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from controller import __version__

# Modules that contribute subcommands, in the order --help lists them.
COMMAND_MODULES = (
    "controller.commands.rtp",
    "controller.commands.replay",
    "controller.commands.journal",
    "controller.commands.roadmap",
    "controller.commands.run",
    "controller.commands.config_check",
    "controller.commands.status",
    "controller.commands.supervisor",
    "controller.commands.watch",
    "controller.commands.demo",
    "controller.commands.simulate_shoe",
    "controller.commands.read_shoe",
    "controller.commands.read_panel",
    "controller.commands.bench",
    "controller.commands.version",
    "controller.commands.completion",
    "controller.commands.manpage",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pokdeng-table",
        description="Dealer-table controller for a live Pok Deng table.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
