"""One logging chain for the daemon: structlog for our lines, stdlib logs routed through it.

JSON objects on stdout when stdout is not a terminal (journald collects them), a readable
console renderer on a terminal. ``table``, ``shoe`` and ``round`` are bound with contextvars
on the owner thread (``bind_table_context``), so every line it writes carries them; other
threads do not inherit contextvars and bind what they know themselves.

pyserial, pyusb, transitions and paho log through the standard library; their records go
through structlog's ``ProcessorFormatter`` so they come out in the same format.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from controller.service.config import DEBUG_NOT_SEALED

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}
# Chatty libraries: their DEBUG goes out only when we ask for debug ourselves.
LIBRARY_LOGGERS = ("serial", "usb", "transitions", "paho", "urllib3")


def _renderer(fmt: str, stream: TextIO) -> Any:
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    if fmt == "console":
        return structlog.dev.ConsoleRenderer(colors=stream.isatty())
    return structlog.processors.JSONRenderer(ensure_ascii=False)


def setup_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """Configure structlog and the stdlib root logger; safe to call again (replaces handlers)."""
    stream = stream or sys.stdout
    numeric = LEVELS.get(level, logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=shared + [
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared + [structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _renderer(fmt, stream),
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)
    if numeric <= logging.DEBUG:
        structlog.get_logger("pokdeng.logging").warning(DEBUG_NOT_SEALED)


def bind_table_context(table: str | None, shoe: int | None, round_: int | None) -> None:
    """Bind table/shoe/round to every later log line of the calling thread's context."""
    structlog.contextvars.bind_contextvars(table=table, shoe=shoe, round=round_)
