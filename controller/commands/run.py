"""``pokdeng-table run --config FILE``: the table daemon (see controller/daemon.py)."""

from __future__ import annotations

import argparse
import sys

from controller.config import EX_CONFIG, ConfigError, load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the table daemon",
        description="Run the table daemon: drivers, table machine, journal, outbox, control "
                    "socket. Exits 78 on a bad configuration (systemd does not restart it).")
    parser.add_argument("--config", required=True, metavar="FILE", help="YAML configuration")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        help="override logging.level")
    parser.add_argument("--log-format", choices=("auto", "json", "console"),
                        help="override logging.format")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.daemon import Daemon
    from controller.logging_setup import setup_logging

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return EX_CONFIG
    setup_logging(args.log_level or config.logging.level, args.log_format or config.logging.format)
    return Daemon(config).run()
