"""``run --config CONFIG`` with its screen process started through WRAPPER (a command the
screen process's own command line is appended to): the real daemon in a process of its own,
as ``run`` starts it, with a screen process that misbehaves as the wrapper makes it.

    python tests/support/wrapped_daemon.py CONFIG WRAPPER...
"""

import sys

from controller.service.config.startup_checks import load_checked_config
from controller.service.daemon import Daemon
from controller.service.telemetry.logging_setup import setup_logging

config = load_checked_config(sys.argv[1])
setup_logging(config.logging.level, config.logging.format, table=config.table.table_id)
sys.exit(Daemon(config, screen_wrapper=sys.argv[2:]).run())
