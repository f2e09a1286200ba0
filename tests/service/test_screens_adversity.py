"""The screen process attacked from outside, on a real daemon (``run --config``) dealing on a
simulated shoe and panel: stopped, killed, flooded, impersonated. The table must deal on,
every card reaching the backend in order, and the screens must come back by themselves
showing the round the table is at (docs/display.md, "How it works")."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.service.screens.link import STUCK_S
from support.display_helpers import SseReader
from support.screen_siege import DealingTable, short_root
from support.waiting import wait_until

#: long enough for a stuck screen process to be noticed, killed and started again on a busy
#: two-core machine: never a speed figure, only how long a test waits before it fails
COMES_BACK_S = STUCK_S + 60


@pytest.fixture
def table() -> Iterator[DealingTable]:
    root = short_root()
    made = DealingTable(root)
    try:
        made.ready()
        yield made
    finally:
        screen = made.screen_pid()
        if screen is not None:
            os.kill(screen, signal.SIGCONT)  # a stopped one must not outlive the test
        made.close()
        shutil.rmtree(root, ignore_errors=True)


def shows_round(port: int, played: int) -> bool:
    """A page that connects now is shown the table at ``played`` rounds."""
    reader = SseReader(port)
    try:
        reader.wait_status(lambda v: v.get("rounds_played") == played)
        return True
    finally:
        reader.close()


@pytest.mark.slow
def test_a_screen_process_stopped_on_a_quiet_table_is_replaced(table: DealingTable) -> None:
    """SIGSTOP between rounds, nothing more dealt: its pipe has room for an hour of
    keep-alives, yet what it has not read says it is stuck; a new one serves the pages."""
    table.deal_round()
    stopped = table.screen_pid()
    assert stopped is not None and shows_round(table.port, 1)
    os.kill(stopped, signal.SIGSTOP)

    wait_until(lambda: table.screen_pid() not in (None, stopped), COMES_BACK_S,
               "a new screen process", interval=0.2)
    assert not Path(f"/proc/{stopped}").exists() or \
        Path(f"/proc/{stopped}/stat").read_text().split(")")[1].split()[0] == "Z"
    assert shows_round(table.port, 1)
    table.deal_round()
    assert shows_round(table.port, 2)
    assert table.delivered_rounds() == table.dealt_rounds()
