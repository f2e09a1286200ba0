"""One logging chain for the daemon: structlog for our lines, stdlib logs routed through it.

JSON objects on stdout when stdout is not a terminal (journald collects them), a readable
console renderer on a terminal. ``table``, ``shoe`` and ``round`` are bound with contextvars
on the owner thread (``bind_table_context``), so every line it writes carries them; other
threads do not inherit contextvars and bind what they know themselves.

pyserial, pyusb, transitions and paho log through the standard library; their records go
through structlog's ``ProcessorFormatter`` so they come out in the same format.

Under systemd (``JOURNAL_STREAM`` names the stream we write to) each line starts with the
sd-daemon priority prefix (``<4>`` warning, ``<3>`` error, ``<6>`` info, see sd-daemon(3)), so
journald stores the line's severity and ``journalctl -p warning`` finds it. Elsewhere (a
terminal, a file, a pipe) the lines are unchanged. ``table`` is in every line once
``setup_logging`` is given the table id, on every thread.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

import structlog

from controller.service.config.settings import DEBUG_NOT_SEALED

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}
# Chatty libraries: their DEBUG goes out only when we ask for debug ourselves.
LIBRARY_LOGGERS = ("serial", "usb", "transitions", "paho", "urllib3")
#: the name of the root logger's handler that setup_logging installs
HANDLER_NAME = "pokdeng-table"


#: stdlib level -> syslog priority, as sd-daemon(3) prefixes and journald stores them
PRIORITIES = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4),
              (logging.INFO, 6))
DEBUG_PRIORITY = 7


def priority(levelno: int) -> int:
    """The syslog priority of a stdlib level (custom levels fall to the next lower one)."""
    for level, prio in PRIORITIES:
        if levelno >= level:
            return prio
    return DEBUG_PRIORITY


def writes_to_journal(stream: TextIO, environ: Any = None) -> bool:
    """True when ``$JOURNAL_STREAM`` (``device:inode``, set by systemd) names ``stream``'s file:
    a child's or a redirected stream inherits the variable but is not the journal."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    try:
        stat = os.fstat(stream.fileno())
        return (int(device), int(inode)) == (stat.st_dev, stat.st_ino)
    except (ValueError, OSError, AttributeError):  # unset, malformed, or no file behind it
        return False


class JournalPriorityFormatter(structlog.stdlib.ProcessorFormatter):
    """Each line (a traceback's too) starts with its record's ``<N>`` priority prefix."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{priority(record.levelno)}>"
        return "\n".join(prefix + line for line in super().format(record).split("\n"))


def _renderer(fmt: str, stream: TextIO) -> Any:
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    if fmt == "console":
        return structlog.dev.ConsoleRenderer(colors=stream.isatty())
    return structlog.processors.JSONRenderer(ensure_ascii=False)


def _table_adder(table: str | None) -> Any:
    """A processor giving each line the table id unless the line names one itself."""
    def add_table(logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        if table is not None and event_dict.get("table") is None:
            event_dict["table"] = table
        return event_dict
    return add_table


def setup_logging(level: str = "info", fmt: str = "auto", stream: TextIO | None = None,
                  table: str | None = None) -> None:
    """Configure structlog and the stdlib root logger; safe to call again (replaces handlers)."""
    stream = stream or sys.stdout
    numeric = LEVELS.get(level, logging.INFO)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        _table_adder(table),
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        # The level first: a filtered call (DEBUG on the hot path) costs a level check, not
        # the context merge, the timestamp and the rest of the chain.
        processors=[structlog.stdlib.filter_by_level] + shared + [
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter_class = (JournalPriorityFormatter if writes_to_journal(stream)
                       else structlog.stdlib.ProcessorFormatter)
    formatter = formatter_class(
        foreign_pre_chain=shared + [structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _renderer(fmt, stream),
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.set_name(HANDLER_NAME)
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
