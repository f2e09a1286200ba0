"""``run --config CONFIG`` with the feed to the screen process recorded in RECORD
(``screen_tap.py``): the real daemon in a process of its own, as ``run`` starts it.

    python tests/support/tapped_daemon.py CONFIG RECORD
"""

import sys
from pathlib import Path

from controller.service.config.startup_checks import load_checked_config
from controller.service.daemon import Daemon
from controller.service.telemetry.logging_setup import setup_logging

config = load_checked_config(sys.argv[1])
setup_logging(config.logging.level, config.logging.format, table=config.table.table_id)
tap = [sys.executable, str(Path(__file__).with_name("screen_tap.py")), sys.argv[2]]
sys.exit(Daemon(config, screen_wrapper=tap).run())
