"""``pokdeng-table config check FILE``: validate a configuration without starting anything.

It checks what ``run`` checks before it starts (controller/service/config/startup_checks.py):
the file, and the secrets and groups it names on this system, read as the user who runs the
check.
"""

from __future__ import annotations

import argparse
import sys

from controller.service.config.errors import EX_CONFIG, ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config", help="check a configuration file",
        description="Work with the daemon's YAML configuration (docs/install.md has an example; "
                    "config/example.yaml explains every key).")
    actions = parser.add_subparsers(dest="config_action", metavar="ACTION")
    check = actions.add_parser(
        "check", help="validate FILE and the secrets and groups it names: exit 0 when good, 78 "
                      "listing every error when not",
        description="Read FILE as `run` would: every key, the secrets it names (credentials, key "
                    "files) and the groups of the control socket. Exit 0 when the daemon would "
                    "start with it; 78 listing every error by key path.")
    check.add_argument("file", metavar="FILE", help="the daemon's YAML configuration file")
    check.set_defaults(func=check_config)
    parser.set_defaults(func=lambda args: _help(parser))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def check_config(args: argparse.Namespace) -> int:
    from controller.service.config.settings import DEBUG_NOT_SEALED
    from controller.service.config.startup_checks import load_checked_config

    try:
        config = load_checked_config(args.file)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return EX_CONFIG
    transports = [name for name, section in (("http", config.http), ("mqtt", config.mqtt),
                                             ("file", config.file_sink)) if section is not None]
    panel = config.panel.driver if config.panel else "none"
    print(f"{args.file}: OK — table {config.table.table_id}, shoe driver {config.shoe.driver}, "
          f"panel driver {panel}, journal {config.journal_path}, control socket "
          f"{config.control.socket}, transports: {', '.join(transports) or 'none'}, "
          f"display {'off' if config.display is None else config.display.listen}")
    if config.logging.level == "debug":
        print(f"{args.file}: WARNING: {DEBUG_NOT_SEALED}", file=sys.stderr)
    return 0
